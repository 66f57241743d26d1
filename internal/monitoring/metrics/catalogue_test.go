package metrics

import (
	"reflect"
	"testing"
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
	if got := Versions(); !reflect.DeepEqual(got, []string{"v1.5.0", "v1.5.3"}) {
		t.Errorf("versions %v", got)
	}
}

// Counts of KubeVirt metric families per version (v1.5.3: 94 names in
// pkg/monitoring/metrics, v1.5.0: 93).
func TestCounts(t *testing.T) {
	for v, want := range map[string]int{"v1.5.3": 94, "v1.5.0": 93} {
		cat, _ := For(v)
		if got := len(cat.KubeVirt().Metrics); got != want {
			t.Errorf("%s: %d KubeVirt metrics, want %d", v, got, want)
		}
	}
}
