package kvstatus

import (
	"errors"
	"fmt"
	"testing"

	"github.com/virtop-dev/virtop/internal/monitoring/placement"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
)

// The conditions the reconciler computes read right in kstatus, which Flux
// and Argo CD use: in progress until rolled out (also on a first install,
// before any observedGeneration), failed when the user must act, current
// when Available.
func TestConditionsReadRightInKStatus(t *testing.T) {
	cases := []struct {
		name     string
		f        Facts
		observed *int64
		want     kstatus.Status
	}{
		{"first install", Facts{}, nil, kstatus.InProgressStatus},
		{"waiting for the strategy Job", Facts{StrategyPending: "waiting"}, nil, kstatus.InProgressStatus},
		{"created, not ready", Facts{Created: true, WaitingOn: "Deployment virt-api"}, nil, kstatus.InProgressStatus},
		{"update in progress", Facts{Created: true, Updating: true}, ptr.To[int64](1), kstatus.InProgressStatus},
		{"ready", Facts{Created: true, Ready: true}, ptr.To[int64](2), kstatus.CurrentStatus},
		{"invalid configuration", Facts{Invalid: errors.New("spec.imageTag: bad")}, ptr.To[int64](2), kstatus.FailedStatus},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			kv := &kvv1.KubeVirt{TypeMeta: metav1.TypeMeta{APIVersion: "kubevirt.io/v1", Kind: "KubeVirt"}}
			kv.Name, kv.Namespace, kv.Generation = "kubevirt", "kubevirt", 2
			kv.Status.Conditions = Merge(nil, Conditions(tc.f), metav1.Now())
			kv.Status.ObservedGeneration = tc.observed
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(kv)
			if err != nil {
				t.Fatal(err)
			}
			res, err := kstatus.Compute(&unstructured.Unstructured{Object: m})
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
	f := Facts{Created: true, Ready: true}
	t0 := metav1.NewTime(metav1.Now().Add(-3600e9))
	first := Merge(nil, Conditions(f), t0)
	second := Merge(first, Conditions(f), metav1.Now())
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
	f2 := Facts{Created: true, ApplyErr: errors.New("boom")}
	third := Merge(second, Conditions(f2), metav1.Now())
	for _, c := range third {
		if c.Type == kvv1.KubeVirtConditionDegraded && (c.Status != corev1.ConditionTrue || c.LastTransitionTime.Equal(&t0)) {
			t.Errorf("Degraded after an error: %+v", c)
		}
	}
}

func TestMonitoringReadyCondition(t *testing.T) {
	prev := &kvv1.KubeVirtCondition{Type: kvv1.KubeVirtConditionMonitoringReady, Status: corev1.ConditionTrue, Reason: "Applied", Message: "before"}
	cases := []struct {
		name    string
		f       Facts
		present bool
		status  corev1.ConditionStatus
		reason  string
	}{
		{"no plan, no previous: absent", Facts{}, false, "", ""},
		{"no plan: kept as it was", Facts{PreviousMonitoring: prev}, true, corev1.ConditionTrue, "Applied"},
		{"no API", Facts{Monitoring: &placement.Placement{Reason: placement.ReasonNoMonitoringAPI}}, true, corev1.ConditionFalse, "NoMonitoringAPI"},
		{"no Prometheus", Facts{Monitoring: &placement.Placement{Reason: placement.ReasonNoPrometheusFound}}, true, corev1.ConditionFalse, "NoPrometheusFound"},
		{"not selected", Facts{Monitoring: &placement.Placement{Reason: placement.ReasonNotSelected}}, true, corev1.ConditionFalse, "NotSelected"},
		{"applied", Facts{Monitoring: &placement.Placement{Reason: placement.ReasonApplied}}, true, corev1.ConditionTrue, "Applied"},
		{"apply failed", Facts{Monitoring: &placement.Placement{Reason: placement.ReasonApplied}, MonitoringErr: errors.New("boom")}, true, corev1.ConditionFalse, "ApplyFailed"},
	}
	for _, tc := range cases {
		got := Conditions(tc.f)
		c, ok := got[kvv1.KubeVirtConditionMonitoringReady]
		if ok != tc.present || c.Status != tc.status || c.Reason != tc.reason {
			t.Errorf("%s: got %v %+v", tc.name, ok, c)
		}
	}
	// Monitoring never touches Available.
	f := Facts{Ready: true, Monitoring: &placement.Placement{Reason: placement.ReasonNotSelected}, MonitoringErr: errors.New("x")}
	if a := Conditions(f)[kvv1.KubeVirtConditionAvailable]; a.Status != corev1.ConditionTrue {
		t.Errorf("Available %v", a)
	}
	// Deleting: the condition is not computed (and so removed).
	if _, ok := Conditions(Facts{Deleting: true, PreviousMonitoring: prev})[kvv1.KubeVirtConditionMonitoringReady]; ok {
		t.Errorf("MonitoringReady computed while deleting")
	}
}

func TestFactsSettled(t *testing.T) {
	done := Facts{Created: true, Ready: true}
	if !done.Settled() {
		t.Error("a rolled-out pass is not settled")
	}
	for name, f := range map[string]Facts{
		"not created": {Ready: true},
		"not ready":   {Created: true},
		"waiting":     {Created: true, Ready: true, WaitingOn: "virt-handler"},
		"updating":    {Created: true, Ready: true, Updating: true},
		"pending":     {Created: true, Ready: true, StrategyPending: "job"},
		"deleting":    {Created: true, Ready: true, Deleting: true},
	} {
		if f.Settled() {
			t.Errorf("%s: settled", name)
		}
	}
}

type reasoned struct{ reason string }

func (r reasoned) Error() string           { return "refused: " + r.reason }
func (r reasoned) ConditionReason() string { return r.reason }

// An error that names its reason is reported under it, wrapped or not;
// others under the reason of their fact.
func TestReasonedErrors(t *testing.T) {
	refused := fmt.Errorf("configure: %w", reasoned{kvv1.ReasonUpgradeSkipsMinorVersion})
	c := Conditions(Facts{Invalid: refused, PreviouslyAvailable: corev1.ConditionTrue})
	for _, typ := range []kvv1.KubeVirtConditionType{kvv1.KubeVirtConditionStalled, kvv1.KubeVirtConditionSynchronized, kvv1.KubeVirtConditionAvailable} {
		if c[typ].Reason != kvv1.ReasonUpgradeSkipsMinorVersion {
			t.Errorf("invalid, reasoned: %s reason %s", typ, c[typ].Reason)
		}
	}
	if c[kvv1.KubeVirtConditionAvailable].Status != corev1.ConditionTrue {
		t.Errorf("a refused version took Available to %s", c[kvv1.KubeVirtConditionAvailable].Status)
	}
	c = Conditions(Facts{ApplyErr: reasoned{kvv1.ReasonStorageMigrationBlocked}, Updating: true})
	if d := c[kvv1.KubeVirtConditionDegraded]; d.Status != corev1.ConditionTrue || d.Reason != kvv1.ReasonStorageMigrationBlocked {
		t.Errorf("apply error, reasoned: Degraded %s %s", d.Status, d.Reason)
	}
	c = Conditions(Facts{ApplyErr: errors.New("boom")})
	if d := c[kvv1.KubeVirtConditionDegraded]; d.Reason != kvv1.ReasonDeploymentFailed {
		t.Errorf("plain apply error: Degraded reason %s", d.Reason)
	}
}
