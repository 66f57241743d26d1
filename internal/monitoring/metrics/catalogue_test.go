package metrics

import (
	"reflect"
	"slices"
	"testing"

	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// Facts from kubevirt.io/kubevirt pkg/monitoring/metrics/** (v1.5.0, v1.5.3).
func TestCatalogueFacts(t *testing.T) {
	cases := []struct {
		version, name string
		exists        bool
		labels        []string // exporter labels that must be present
	}{
		{"v1.5.3", "kubevirt_virt_controller_ready_status", true, nil},
		{"v1.5.3", "kubevirt_virt_operator_leading_status", true, nil},
		{"v1.5.3", "kubevirt_rest_client_requests_total", true, []string{"code", "method", "host", "resource", "verb"}},
		{"v1.5.3", "kubevirt_vmi_info", true, []string{"node", "namespace", "name", "phase", "evictable", "outdated", "vmi_pod"}},
		{"v1.5.3", "kubevirt_vmi_non_evictable", true, []string{"node", "namespace", "name"}},
		{"v1.5.3", "kubevirt_vmi_migration_succeeded", true, []string{"vmi", "vmim", "namespace"}},
		{"v1.5.3", "kubevirt_vmi_status_addresses", true, []string{"vnic_name", "interface_name"}},
		{"v1.5.0", "kubevirt_vmi_status_addresses", true, []string{"network_name"}},
		{"v1.5.3", "kubevirt_vmi_migrations_in_unset_phase", true, nil},
		{"v1.5.0", "kubevirt_vmi_migrations_in_unset_phase", false, nil},
		{"v1.5.3", "kubevirt_workqueue_queue_duration_seconds_bucket", true, []string{"name", "le"}},
		{"v1.5.3", "kubevirt_info", true, []string{"goversion", "kubeversion"}},
		// Only on main/release-1.8 (PR #17015), not in v1.5.x.
		{"v1.5.3", "kubevirt_virt_api_ready_status", false, nil},
		{"v1.5.3", "kubevirt_virt_handler_ready_status", false, nil},
		// A recording rule, not an exported metric.
		{"v1.5.3", "kubevirt_vmi_phase_count", false, nil},
		{"v1.5.3", "kube_node_labels", true, []string{"node", "label_kubevirt_io_schedulable"}},
		{"v1.5.3", "kube_deployment_status_replicas_ready", true, []string{"namespace", "deployment"}},
		{"v1.5.3", "container_memory_working_set_bytes", true, []string{"container", "pod", "namespace", "node"}},
		{"v1.5.3", "apiserver_requested_deprecated_apis", true, []string{"group", "version", "resource", "subresource"}},
		{"v1.5.3", "up", true, []string{"job", "namespace", "pod", "service", "endpoint", "container", "instance"}},
	}
	for _, c := range cases {
		cat, err := For(c.version)
		if err != nil {
			t.Fatal(err)
		}
		s, ok := cat.Lookup(c.name)
		if ok != c.exists {
			t.Errorf("%s %s: exists %v, want %v", c.version, c.name, ok, c.exists)
			continue
		}
		for _, l := range c.labels {
			if !s.Labels[l] {
				t.Errorf("%s %s: no label %s", c.version, c.name, l)
			}
		}
	}
}

func TestKubeVirtTargetLabels(t *testing.T) {
	cat, _ := For("v1.5.3")
	kv := cat.KubeVirt()
	if kv.Job != "kubevirt-prometheus-metrics" || !kv.JobFixed {
		t.Errorf("KubeVirt job %q fixed %v", kv.Job, kv.JobFixed)
	}
	want := []string{"container", "endpoint", "instance", "job", "namespace", "pod", "service"}
	if !reflect.DeepEqual(kv.TargetLabels, want) {
		t.Errorf("target labels %v, want %v", kv.TargetLabels, want)
	}
	s, _ := cat.Lookup("kubevirt_virt_controller_ready_status")
	if len(s.Sources) != 1 || s.Sources[0].Job != KubeVirtJob {
		t.Errorf("kubevirt_virt_controller_ready_status sources %v", s.Sources)
	}
	if _, err := For("v9.9.9"); err == nil {
		t.Error("unknown version accepted")
	}
	if got, want := Versions(), release.Versions(); !reflect.DeepEqual(got, want) {
		t.Errorf("versions %v, want every release's: %v", got, want)
	}
}

// TestCounts: every release's metrics file says how many metric families
// the release's docs/observability/metrics.md lists (entries of kind
// Metric; v1.5.x docs mix in the recording rules, which are left out), the
// load checks the data resolves to as many, and a virtop install exposes
// them with upstream's three virt-operator-only gauges and virtop's own
// seven.
func TestCounts(t *testing.T) {
	for _, v := range release.Versions() {
		ms, ok, err := kubevirtMetrics(v)
		if err != nil || !ok {
			t.Fatalf("%s: %v %v", v, ok, err)
		}
		if len(loaded[v]) == 0 {
			t.Errorf("%s: no metrics in the data", v)
		}
		if got, want := len(ms), len(loaded[v])+len(operatorMetrics)-4; got != want {
			t.Errorf("%s: %d metrics with virtop as virt-operator, want %d", v, got, want)
		}
	}
}

// TestDeltaFacts: what each release changed, read back through the
// catalogue.
func TestDeltaFacts(t *testing.T) {
	cases := []struct {
		version, name string
		exists        bool
		labels        []string
		component     string
	}{
		{"v1.5.3", "kubevirt_vmi_guest_load_1m", false, nil, ""},
		{"v1.6.6", "kubevirt_vmi_guest_load_1m", true, []string{"name", "namespace", "node"}, vocab.VirtHandler},
		{"v1.6.6", "kubevirt_node_deprecated_machine_types", true, []string{"machine_type", "node"}, vocab.VirtHandler},
		{"v1.6.6", "kubevirt_vmi_vnic_info", true, []string{"model"}, vocab.VirtController},
		{"v1.6.6", "kubevirt_vmi_migration_disk_transfer_rate_bytes", true, nil, vocab.VirtHandler},
		{"v1.7.4", "kubevirt_vmi_migration_disk_transfer_rate_bytes", false, nil, ""},
		{"v1.7.4", "kubevirt_vmi_migration_memory_transfer_rate_bytes", true, nil, vocab.VirtHandler},
		{"v1.7.4", "kubevirt_vm_labels", true, []string{"name", "namespace"}, vocab.VirtController},
		{"v1.7.4", "kubevirt_virt_api_ready_status", false, nil, ""},
		{"v1.8.4", "kubevirt_virt_api_ready_status", true, nil, vocab.VirtAPI},
		{"v1.8.4", "kubevirt_virt_handler_ready_status", true, nil, vocab.VirtHandler},
		{"v1.8.4", "kubevirt_vmi_migration_data_bytes_total", true, nil, vocab.VirtHandler},
		{"v1.8.4", "kubevirt_vmi_migration_data_total_bytes", false, nil, ""},
		{"v1.8.4", "kubevirt_vmi_contains_ephemeral_hotplug_volume", true, []string{"volume_name"}, vocab.VirtController},
		{"v1.9.0", "kubevirt_vmi_contains_ephemeral_hotplug_volume", false, nil, ""},
		{"v1.9.0", "kubevirt_vmi_guest_os_panic_total", true, []string{"namespace", "name", "type", "bugcheck_code"}, vocab.VirtHandler},
		{"v1.9.0", "kubevirt_vmi_sync_total", true, []string{"namespace", "name"}, vocab.VirtController},
		{"v1.9.0", "kubevirt_vmi_gpu_info", true, []string{"uuid", "resource"}, vocab.VirtHandler},
		// virtop as virt-operator: the REST counter yes, KubeVirt's
		// workqueue metrics no.
		{"v1.9.0", "kubevirt_rest_client_requests_total", true, []string{"code"}, vocab.VirtOperator},
		{"v1.9.0", VirtopCertificateExpiry, true, []string{"secret"}, vocab.VirtOperator},
		{"v1.5.0", VirtopKubeVirtCondition, true, []string{"condition", "reason"}, vocab.VirtOperator},
	}
	for _, c := range cases {
		cat, err := For(c.version)
		if err != nil {
			t.Fatal(err)
		}
		s, ok := cat.Lookup(c.name)
		if ok != c.exists {
			t.Errorf("%s %s: exists %v, want %v", c.version, c.name, ok, c.exists)
			continue
		}
		for _, l := range c.labels {
			if !s.Labels[l] {
				t.Errorf("%s %s: no label %s", c.version, c.name, l)
			}
		}
		if c.component != "" && !slices.Contains(s.Metric.Components, c.component) {
			t.Errorf("%s %s: components %v lack %s", c.version, c.name, s.Metric.Components, c.component)
		}
	}
	cat, _ := For("v1.9.0")
	s, _ := cat.Lookup("kubevirt_workqueue_depth")
	if slices.Contains(s.Metric.Components, vocab.VirtOperator) {
		t.Errorf("kubevirt_workqueue_depth claimed for virtop's operator: %v", s.Metric.Components)
	}
}

// TestDeltaErrors: a delta that names what its base lacks, or adds what
// it has, is refused.
func TestDeltaErrors(t *testing.T) {
	base := []Metric{{Name: "a", Type: Gauge, Components: []string{vocab.VirtAPI}}}
	bad := map[string]releaseFile{
		"change missing": {Release: "x", Base: "b", Change: []Metric{{Name: "z"}}},
		"remove missing": {Release: "x", Base: "b", Remove: []string{"z"}},
		"add present":    {Release: "x", Base: "b", Add: []Metric{{Name: "a"}}},
	}
	for name, f := range bad {
		if _, err := applyDelta(base, f); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	out, err := applyDelta(base, releaseFile{Release: "x", Base: "b", Remove: []string{"a"}, Add: []Metric{{Name: "a", Type: Counter}}})
	if err != nil || len(out) != 1 || out[0].Type != Counter {
		t.Errorf("remove then add again: %v %v", out, err)
	}
	for name, ms := range map[string][]Metric{
		"no component":  {{Name: "a", Type: Gauge}},
		"bad type":      {{Name: "a", Type: "summary", Components: []string{vocab.VirtAPI}}},
		"twice":         {{Name: "a", Type: Gauge, Components: []string{vocab.VirtAPI}}, {Name: "a", Type: Gauge, Components: []string{vocab.VirtAPI}}},
		"bad label":     {{Name: "a", Type: Gauge, Components: []string{vocab.VirtAPI}, Labels: []string{"a-b"}}},
		"bad component": {{Name: "a", Type: Gauge, Components: []string{"virt-launcher"}}},
	} {
		if err := checkMetrics("x", ms); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
