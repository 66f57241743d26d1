package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/virtop-dev/virtop/internal/tools/diff"
	"github.com/virtop-dev/virtop/internal/vocab"
)

var summaryLine = regexp.MustCompile(`^[0-9]+ added, [0-9]+ removed, [1-9][0-9]* changed\n`)

// runDiffCLI runs virtop with args and returns its exit code and output.
func runDiffCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Main(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// diffVersion is the version the diff tests dump and compare with.
const diffVersion = "v1.5.3"

// dumpTo writes `virtop dump --version v1.5.3 args...` to a file in dir.
func dumpTo(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	code, out, errOut := runDiffCLI(t, append([]string{"dump", "--version", diffVersion}, args...)...)
	if code != 0 {
		t.Fatalf("dump %v: exit %d: %s", args, code, errOut)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDiffExitCodes(t *testing.T) {
	dir := t.TempDir()
	plain := dumpTo(t, dir, "plain.yaml")
	plainJSON := dumpTo(t, dir, "plain.json", "-o", "json")
	mirror := dumpTo(t, dir, "mirror.yaml", "--registry", "mirror.example.com/kubevirt")
	configMap := dumpTo(t, dir, "configmap.yaml", "--as-configmap")
	missing := filepath.Join(dir, "missing.yaml")

	for _, tc := range []struct {
		name       string
		args       []string
		code       int
		stdout     string // exact when set
		stderrHas  string
		stdoutHave string
	}{
		{name: "same version", args: []string{"version:v1.5.3", "version:v1.5.3"}, code: 0, stdout: "0 added, 0 removed, 0 changed\n"},
		{name: "dump and its version", args: []string{plain, "version:v1.5.3"}, code: 0, stdout: "0 added, 0 removed, 0 changed\n"},
		{name: "JSON List and YAML dump", args: []string{plainJSON, plain}, code: 0},
		{name: "strategy ConfigMap and its version", args: []string{configMap, "version:v1.5.3"}, code: 0},
		{name: "different files", args: []string{plain, mirror}, code: 1,
			stdoutHave: `spec.template.spec.containers[name=virt-api].image: "quay.io/kubevirt/virt-api:v1.5.3" -> "mirror.example.com/kubevirt/virt-api:v1.5.3"`},
		{name: "flags apply to version operands", args: []string{"--registry", "mirror.example.com/kubevirt", mirror, "version:v1.5.3"}, code: 0},
		{name: "flags apply to both version operands", args: []string{"--registry", "mirror.example.com/kubevirt", "version:v1.5.3", "version:v1.5.3"}, code: 0},
		{name: "registry of a file differs from a version", args: []string{mirror, "version:v1.5.3"}, code: 1},
		{name: "different versions", args: []string{"version:v1.5.0", "version:v1.5.3"}, code: 1,
			stdoutHave: `spec.template.spec.containers[name=virt-api].image: "quay.io/kubevirt/virt-api:v1.5.0" -> "quay.io/kubevirt/virt-api:v1.5.3"`},
		{name: "rendering flags without version operands", args: []string{"--registry", "r.example.com", plain, plain}, code: 0, stderrHas: "note: the rendering flags (--registry) apply only to version: operands"},
		{name: "missing file", args: []string{missing, plain}, code: 2, stderrHas: "missing.yaml"},
		{name: "version without tag", args: []string{"version:", plain}, code: 2, stderrHas: "names no version"},
		{name: "version not in catalog", args: []string{plain, "version:v9.9.9"}, code: 2, stderrHas: "not in this virtop's catalog"},
		{name: "one operand", args: []string{plain}, code: 2},
		{name: "three operands", args: []string{plain, plain, plain}, code: 2},
		{name: "--version refused", args: []string{"--version", "v1.5.0", "version:v1.5.3", plain}, code: 2, stderrHas: "operand"},
		{name: "bad output", args: []string{"-o", "yaml", plain, plain}, code: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runDiffCLI(t, append([]string{"diff"}, tc.args...)...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%.2000s\nstderr:\n%s", code, tc.code, out, errOut)
			}
			if tc.stdout != "" && out != tc.stdout {
				t.Errorf("stdout %q, want %q", out, tc.stdout)
			}
			if tc.stdoutHave != "" && !strings.Contains(out, tc.stdoutHave) {
				t.Errorf("stdout lacks %q:\n%.3000s", tc.stdoutHave, out)
			}
			if tc.stderrHas != "" && !strings.Contains(errOut, tc.stderrHas) {
				t.Errorf("stderr %q lacks %q", errOut, tc.stderrHas)
			}
			if tc.code != 2 && tc.stderrHas == "" && errOut != "" {
				t.Errorf("stderr not empty: %s", errOut)
			}
			if tc.code == 1 && !summaryLine.MatchString(out) {
				t.Errorf("summary line: %.200s", out)
			}
		})
	}
}

// diffReport is the part of `virtop diff -o json` the tests read.
type diffReport struct {
	Equal   bool           `json:"equal"`
	Summary map[string]int `json:"summary"`
	Added   []struct {
		Kind, Name string
	} `json:"added"`
	Removed []struct {
		Kind, Name string
	} `json:"removed"`
	Changed []struct {
		Kind   string `json:"kind"`
		Name   string `json:"name"`
		Fields []struct {
			Path   string `json:"path"`
			Change string `json:"change"`
		} `json:"fields"`
		Rules *struct {
			Added   []struct{ Type, Name string } `json:"added"`
			Removed []struct{ Type, Name string } `json:"removed"`
			Changed []struct {
				Type, Name string
				Fields     []string `json:"fields"`
			} `json:"changed"`
		} `json:"rules"`
	} `json:"changed"`
}

func diffJSON(t *testing.T, wantCode int, args ...string) diffReport {
	t.Helper()
	code, out, errOut := runDiffCLI(t, append([]string{"diff", "-o", "json"}, args...)...)
	if code != wantCode {
		t.Fatalf("exit %d, want %d: %s", code, wantCode, errOut)
	}
	var rep diffReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v:\n%.2000s", err, out)
	}
	return rep
}

func TestDiffJSON(t *testing.T) {
	dir := t.TempDir()
	plain := dumpTo(t, dir, "plain.yaml")
	rep := diffJSON(t, 0, plain, "version:v1.5.3")
	if !rep.Equal || rep.Added == nil || rep.Removed == nil || rep.Changed == nil {
		t.Errorf("equal report: %+v", rep)
	}

	mirror := dumpTo(t, dir, "mirror.yaml", "--registry", "mirror.example.com/kubevirt")
	rep = diffJSON(t, 1, "--ignore-metadata", plain, mirror)
	if rep.Equal || rep.Summary["added"] != 0 || rep.Summary["removed"] != 0 || rep.Summary["changed"] != len(rep.Changed) {
		t.Errorf("summary %v", rep.Summary)
	}
	// With labels and annotations ignored, only the objects naming images
	// change: the three Deployments and the DaemonSet.
	var changed []string
	for _, c := range rep.Changed {
		changed = append(changed, c.Kind+"/"+c.Name)
		for _, f := range c.Fields {
			if strings.Contains(f.Path, "metadata") {
				t.Errorf("%s: --ignore-metadata kept %s", c.Name, f.Path)
			}
		}
	}
	want := []string{"DaemonSet/virt-handler", "Deployment/virt-api", "Deployment/virt-controller"}
	if !reflect.DeepEqual(changed, want) {
		t.Errorf("changed %v, want %v", changed, want)
	}
}

// TestDiffVersionRules checks what `virtop diff version:v1.5.0
// version:v1.5.3` says about the alerts: upstream v1.5.3 dropped the four
// *RESTErrorsHigh alerts and changed VMCannotBeEvicted's expression.
func TestDiffVersionRules(t *testing.T) {
	rep := diffJSON(t, 1, "version:v1.5.0", "version:v1.5.3")
	var found bool
	for _, c := range rep.Changed {
		if c.Kind != "PrometheusRule" {
			continue
		}
		found = true
		if c.Name != "prometheus-kubevirt-rules" || c.Rules == nil {
			t.Fatalf("PrometheusRule %s has no rules section", c.Name)
		}
		var removed []string
		for _, r := range c.Rules.Removed {
			if r.Type != "alert" {
				t.Errorf("removed %s %s", r.Type, r.Name)
			}
			removed = append(removed, r.Name)
		}
		sort.Strings(removed)
		if want := []string{"VirtApiRESTErrorsHigh", "VirtControllerRESTErrorsHigh", "VirtHandlerRESTErrorsHigh", "VirtOperatorRESTErrorsHigh"}; !reflect.DeepEqual(removed, want) {
			t.Errorf("removed alerts %v, want %v", removed, want)
		}
		if len(c.Rules.Added) != 0 {
			t.Errorf("added rules %v, want none", c.Rules.Added)
		}
		if len(c.Rules.Changed) != 1 || c.Rules.Changed[0].Type != "alert" || c.Rules.Changed[0].Name != "VMCannotBeEvicted" {
			t.Fatalf("changed rules %+v, want alert VMCannotBeEvicted", c.Rules.Changed)
		}
		if f := c.Rules.Changed[0].Fields; len(f) == 0 || f[0] != "expr" {
			t.Errorf("VMCannotBeEvicted changed in %v, want expr first", f)
		}
	}
	if !found {
		t.Fatal("the PrometheusRule did not change between v1.5.0 and v1.5.3")
	}
}

// TestDiffUpstreamStrategies runs `virtop diff <upstream's strategy>
// version:<release>` on the reference strategies of
// ../shared/upstream-strategies (both files of every release): it exits 1,
// and every difference it reports is a row of docs/upstream-differences.md.
// Rules are the monitoring work's (their own tests compare them), so the
// PrometheusRule's fields are left to their row.
func TestDiffUpstreamStrategies(t *testing.T) {
	dir := os.Getenv("VIRTOP_UPSTREAM_STRATEGIES")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "shared", "upstream-strategies")
	}
	abs, _ := filepath.Abs(dir)
	files, _ := filepath.Glob(filepath.Join(abs, "v*", "strategy*.yaml.gz"))
	if len(files) == 0 {
		t.Skipf("no upstream reference strategies: %s is missing (set VIRTOP_UPSTREAM_STRATEGIES to the directory)", abs)
	}
	rows, err := diff.ReadDocumented(filepath.Join("..", "..", "docs", "upstream-differences.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		version := filepath.Base(filepath.Dir(f))
		t.Run(version+"/"+filepath.Base(f), func(t *testing.T) {
			code, out, errOut := runDiffCLI(t, "diff", f, "version:"+version, "-o", "json")
			if code != 1 {
				t.Fatalf("exit %d, want 1: %s", code, errOut)
			}
			var res diff.Result
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				t.Fatal(err)
			}
			for _, item := range res.Items() {
				if !slices.ContainsFunc(rows, func(r *diff.Documented) bool { return r.Matches(item) }) {
					t.Errorf("undocumented: %s", item)
				}
			}
			for _, o := range append(res.Added, res.Removed...) {
				// virtop's Grafana dashboard ConfigMap and the metrics reader's
				// ClusterRole and binding are monitoring objects upstream does
				// not ship.
				if o.Group != "monitoring.coreos.com" && o.Name != "kubevirt-monitoring" && o.Name != vocab.DashboardConfigMapName && o.Name != vocab.MetricsReaderName {
					t.Errorf("%s: only monitoring objects may be added or removed", o)
				}
			}
		})
	}
}
