package operator

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func daemonSet(gen, observed, desired, updated, ready, available int64) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "DaemonSet",
		"metadata": map[string]any{"name": "virt-handler", "namespace": "kubevirt", "generation": gen},
		"status": map[string]any{"observedGeneration": observed, "desiredNumberScheduled": desired,
			"updatedNumberScheduled": updated, "numberReady": ready, "numberAvailable": available},
	}}
	return u
}

// TestRolloutProgressOnly: only a status step of an unfinished rollout is
// delayed; its completion, a new generation, a workload that stops being
// ready and other kinds wake the reconciler at once.
func TestRolloutProgressOnly(t *testing.T) {
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x"}}}
	for _, tc := range []struct {
		name     string
		old, cur *unstructured.Unstructured
		want     bool
	}{
		{"a step of the rollout", daemonSet(2, 2, 1000, 1000, 10, 10), daemonSet(2, 2, 1000, 1000, 11, 11), true},
		{"the rollout completes", daemonSet(2, 2, 1000, 1000, 999, 999), daemonSet(2, 2, 1000, 1000, 1000, 1000), false},
		{"a ready workload loses a pod", daemonSet(2, 2, 1000, 1000, 1000, 1000), daemonSet(2, 2, 1000, 1000, 999, 999), false},
		{"a new generation", daemonSet(2, 2, 1000, 1000, 10, 10), daemonSet(3, 2, 1000, 1000, 10, 10), false},
		{"not a workload", cm, cm.DeepCopy(), false},
	} {
		if got := rolloutProgressOnly(tc.old, tc.cur); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
