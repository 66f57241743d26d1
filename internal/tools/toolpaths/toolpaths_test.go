package toolpaths

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// repoRoot is the checkout root, three levels above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// readEnv parses KEY=VALUE lines, ignoring blanks and # comments.
func readEnv(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	vals := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: malformed line %q", path, line)
		}
		vals[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return vals
}

// TestVersionsMatchBuildScript keeps hack/tools/versions.env (read by the
// build script and the Makefile) equal to the constants here.
func TestVersionsMatchBuildScript(t *testing.T) {
	env := readEnv(t, filepath.Join(repoRoot(t), "hack", "tools", "versions.env"))
	want := map[string]string{
		"KUBERNETES_VERSION":          KubernetesVersion,
		"ETCD_VERSION":                EtcdVersion,
		"KWOK_VERSION":                KwokVersion,
		"CONTROLLER_TOOLS_VERSION":    ControllerToolsVersion,
		"PROMETHEUS_OPERATOR_VERSION": PrometheusOperatorVersion,
		"KUBE_STATE_METRICS_VERSION":  KubeStateMetricsVersion,
		"HELM_VERSION":                HelmVersion,
		"KUSTOMIZE_VERSION":           KustomizeVersion,
	}
	for k, v := range want {
		got, ok := env[k]
		switch {
		case !ok:
			t.Errorf("versions.env lacks %s (toolpaths has %s)", k, v)
		case got != v:
			t.Errorf("versions.env %s=%s, toolpaths has %s", k, got, v)
		}
	}
	for k := range env {
		if _, ok := want[k]; !ok {
			t.Errorf("versions.env has %s, which toolpaths does not know", k)
		}
	}
}

// TestToolsModulesMatch checks that the tools modules under hack/tools
// require the versions pinned here (they cannot read versions.env).
func TestToolsModulesMatch(t *testing.T) {
	cases := []struct{ gomod, module, version string }{
		{"kube/go.mod", "k8s.io/kubernetes", KubernetesVersion},
		{"etcd/go.mod", "go.etcd.io/etcd/server/v3", EtcdVersion},
		{"prometheus-operator/go.mod", "github.com/prometheus-operator/prometheus-operator", PrometheusOperatorVersion},
	}
	for _, c := range cases {
		data, err := os.ReadFile(filepath.Join(repoRoot(t), "hack", "tools", c.gomod))
		if err != nil {
			t.Fatal(err)
		}
		found := ""
		for _, line := range strings.Split(string(data), "\n") {
			f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
			if len(f) >= 2 && f[0] == c.module {
				found = f[1]
				break
			}
		}
		if found != c.version {
			t.Errorf("hack/tools/%s requires %s %q, toolpaths pins %s", c.gomod, c.module, found, c.version)
		}
	}
}

func TestLayout(t *testing.T) {
	t.Setenv("VIRTOP_TOOLS_DIR", "/x/tools")
	if got, want := KubeAPIServer.Path(), "/x/tools/kubernetes-"+KubernetesVersion+"/kube-apiserver"; got != want {
		t.Errorf("KubeAPIServer.Path() = %s, want %s", got, want)
	}
	t.Setenv("VIRTOP_TOOLS_DIR", "")
	t.Setenv("XDG_CACHE_HOME", "/c")
	if got, want := Etcd.Path(), "/c/virtop/tools/etcd-"+EtcdVersion+"/etcd"; got != want {
		t.Errorf("Etcd.Path() = %s, want %s", got, want)
	}
	if got, want := PrometheusOperator.Path(), "/c/virtop/tools/prometheus-operator-"+PrometheusOperatorVersion+"/operator"; got != want {
		t.Errorf("PrometheusOperator.Path() = %s, want %s", got, want)
	}
	if _, err := Etcd.Require(); err == nil || !strings.Contains(err.Error(), "make tools") {
		t.Errorf("Require of a missing binary: got %v, want an error naming `make tools`", err)
	}
}
