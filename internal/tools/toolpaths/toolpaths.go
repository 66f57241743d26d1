// Package toolpaths names the pinned versions of the binaries virtop's tests
// and local cluster run, and where the tools build caches them; it also
// recognises a virtop checkout (IsVirtopModule), which both need to find.
//
// Layout: ${XDG_CACHE_HOME:-$HOME/.cache}/virtop/tools/<tool>-<version>/<binary>.
// The build script hack/tools/build.sh writes the same layout; keep both in
// step.
package toolpaths

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ModulePath is virtop's Go module path.
const ModulePath = "github.com/virtop-dev/virtop"

// IsVirtopModule reports whether the go.mod file at gomod declares
// ModulePath; false if it cannot be read.
func IsVirtopModule(gomod string) bool {
	f, err := os.Open(gomod)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) == 2 && fields[0] == "module" {
			return strings.Trim(fields[1], `"`) == ModulePath
		}
	}
	return false
}

// Pinned versions. hack/tools/versions.env holds the same values for the
// build script.
const (
	KubernetesVersion      = "v1.37.2"
	EtcdVersion            = "v3.7.3" // go.etcd.io/etcd/server/v3, hack/tools/etcd/go.mod
	KwokVersion            = "v0.8.0"
	ControllerToolsVersion = "v0.23.0"
	// PrometheusOperatorVersion is github.com/prometheus-operator/prometheus-operator
	// (hack/tools/prometheus-operator/go.mod): its cmd/operator runs in the
	// end-to-end test that reads the Prometheus configuration it generates.
	// v0.85.0 is the newest release of the main module the module proxy
	// serves here; virtop's own go.mod uses pkg/apis/monitoring v0.95.2.
	PrometheusOperatorVersion = "v0.85.0"
	// KubeStateMetricsVersion is k8s.io/kube-state-metrics/v2: the local
	// cluster's Prometheus with a real node scrapes it (the control-plane
	// alerts read its Deployment series).
	KubeStateMetricsVersion = "v2.20.0"
	// Packaging tools, built by `make tools-packaging` only.
	HelmVersion      = "v4.3.2"
	KustomizeVersion = "v5.8.2" // v5.8.3 needs Go 1.27
)

// CacheDir is the root of the tools cache. VIRTOP_TOOLS_DIR overrides it.
func CacheDir() string {
	if d := os.Getenv("VIRTOP_TOOLS_DIR"); d != "" {
		return d
	}
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "virtop", "tools")
}

// Dir returns the directory holding the binaries of one tool at one version.
func Dir(tool, version string) string {
	return filepath.Join(CacheDir(), tool+"-"+version)
}

// Binary is one cached tool binary.
type Binary struct {
	Tool, Version, Name string
}

// Path is where the binary lives in the cache.
func (b Binary) Path() string { return filepath.Join(Dir(b.Tool, b.Version), b.Name) }

// Require returns the path if the binary exists, or an error telling the
// user to run `make tools`.
func (b Binary) Require() (string, error) {
	p := b.Path()
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s %s not found at %s: run `make tools` first", b.Name, b.Version, p)
	}
	return p, nil
}

var (
	KubeAPIServer         = Binary{"kubernetes", KubernetesVersion, "kube-apiserver"}
	KubeControllerManager = Binary{"kubernetes", KubernetesVersion, "kube-controller-manager"}
	KubeScheduler         = Binary{"kubernetes", KubernetesVersion, "kube-scheduler"}
	Kubectl               = Binary{"kubernetes", KubernetesVersion, "kubectl"}
	Kubelet               = Binary{"kubernetes", KubernetesVersion, "kubelet"}
	KubeProxy             = Binary{"kubernetes", KubernetesVersion, "kube-proxy"}
	Etcd                  = Binary{"etcd", EtcdVersion, "etcd"}
	Kwok                  = Binary{"kwok", KwokVersion, "kwok"}
	Kwokctl               = Binary{"kwok", KwokVersion, "kwokctl"}
	ControllerGen         = Binary{"controller-tools", ControllerToolsVersion, "controller-gen"}
	PrometheusOperator    = Binary{"prometheus-operator", PrometheusOperatorVersion, "operator"}
	KubeStateMetrics      = Binary{"kube-state-metrics", KubeStateMetricsVersion, "kube-state-metrics"}
	Helm                  = Binary{"helm", HelmVersion, "helm"}
	Kustomize             = Binary{"kustomize", KustomizeVersion, "kustomize"}
)
