package cli

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	corev1 "k8s.io/api/core/v1"

	"github.com/virtop-dev/virtop/internal/monitoring/dashboard"
	"github.com/virtop-dev/virtop/internal/monitoring/metrics"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// TestDashboardCommand: virtop dashboard prints JSON the SDK reads and that
// passes the checks against the version's catalogue; --as-configmap prints the
// ConfigMap the strategy holds, labelled for Grafana's sidecar.
func TestDashboardCommand(t *testing.T) {
	code, out, stderr := runCLI("dashboard", "--version", "v1.5.0", "--namespace", "kv")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	cat, err := metrics.For("v1.5.0")
	if err != nil {
		t.Fatal(err)
	}
	problems, err := dashboard.Check([]byte(out), cat)
	if err != nil || len(problems) != 0 {
		t.Fatalf("check: %v %v", err, problems)
	}
	if !strings.Contains(out, `namespace=\"kv\"`) {
		t.Error("queries not rendered for namespace kv")
	}
	code, out, stderr = runCLI("dashboard", "--as-configmap")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var cm corev1.ConfigMap
	if err := yaml.Unmarshal([]byte(out), &cm); err != nil {
		t.Fatal(err)
	}
	if cm.Labels[vocab.DashboardSidecarLabel] != vocab.DashboardSidecarLabelValue || cm.Data[dashboard.FileName] == "" {
		t.Errorf("ConfigMap %s labels %v keys %d", cm.Name, cm.Labels, len(cm.Data))
	}
	if code, _, _ := runCLI("dashboard", "-o", "xml"); code != 2 {
		t.Errorf("bad format: exit %d, want 2", code)
	}
	if code, _, _ := runCLI("dashboard", "--version", "v0.0.1"); code != 2 {
		t.Errorf("unknown version: exit %d, want 2", code)
	}
}
