package controller

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
)

// The conditions the reconciler computes read right in kstatus, which Flux
// and Argo CD use: in progress until rolled out (also on a first install,
// before any observedGeneration), failed when the user must act, current
// when Available.
func TestConditionsReadRightInKStatus(t *testing.T) {
	cases := []struct {
		name     string
		f        facts
		observed *int64
		want     status.Status
	}{
		{"first install", facts{}, nil, status.InProgressStatus},
		{"waiting for the strategy Job", facts{strategyPending: "waiting"}, nil, status.InProgressStatus},
		{"created, not ready", facts{created: true, waitingOn: "Deployment virt-api"}, nil, status.InProgressStatus},
		{"update in progress", facts{created: true, updating: true}, ptr.To[int64](1), status.InProgressStatus},
		{"ready", facts{created: true, ready: true}, ptr.To[int64](2), status.CurrentStatus},
		{"invalid configuration", facts{invalid: errors.New("spec.imageTag: bad")}, ptr.To[int64](2), status.FailedStatus},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			kv := &kvv1.KubeVirt{TypeMeta: metav1.TypeMeta{APIVersion: "kubevirt.io/v1", Kind: "KubeVirt"}}
			kv.Name, kv.Namespace, kv.Generation = "kubevirt", "kubevirt", 2
			kv.Status.Conditions = mergeConditions(nil, conditions(tc.f), metav1.Now())
			kv.Status.ObservedGeneration = tc.observed
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(kv)
			if err != nil {
				t.Fatal(err)
			}
			res, err := status.Compute(&unstructured.Unstructured{Object: m})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != tc.want {
				t.Errorf("kstatus %s (%s), want %s", res.Status, res.Message, tc.want)
			}
		})
	}
}

// Conditions keep their timestamps when nothing changed, so a pass that
// observes the same state writes an identical status.
func TestMergeConditionsStable(t *testing.T) {
	f := facts{created: true, ready: true}
	t0 := metav1.NewTime(metav1.Now().Add(-3600e9))
	first := mergeConditions(nil, conditions(f), t0)
	second := mergeConditions(first, conditions(f), metav1.Now())
	if len(first) != len(second) {
		t.Fatalf("%d conditions, then %d", len(first), len(second))
	}
	for i := range first {
		if first[i] != second[i] {
			t.Errorf("condition %s changed on an unchanged pass: %+v -> %+v", first[i].Type, first[i], second[i])
		}
	}
	// A status change moves lastTransitionTime; a message change only the
	// probe time.
	f2 := facts{created: true, applyErr: errors.New("boom")}
	third := mergeConditions(second, conditions(f2), metav1.Now())
	for _, c := range third {
		if c.Type == kvv1.KubeVirtConditionDegraded && (c.Status != corev1.ConditionTrue || c.LastTransitionTime.Equal(&t0)) {
			t.Errorf("Degraded after an error: %+v", c)
		}
	}
}
