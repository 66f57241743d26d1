package controller

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/monitoring/placement"
)

func TestMonitoringReadyCondition(t *testing.T) {
	prev := &kvv1.KubeVirtCondition{Type: kvv1.KubeVirtConditionMonitoringReady, Status: corev1.ConditionTrue, Reason: "Applied", Message: "before"}
	cases := []struct {
		name    string
		f       facts
		present bool
		status  corev1.ConditionStatus
		reason  string
	}{
		{"no plan, no previous: absent", facts{}, false, "", ""},
		{"no plan: kept as it was", facts{previousMonitoring: prev}, true, corev1.ConditionTrue, "Applied"},
		{"no API", facts{monitoring: &placement.Placement{Reason: placement.ReasonNoMonitoringAPI}}, true, corev1.ConditionFalse, "NoMonitoringAPI"},
		{"no Prometheus", facts{monitoring: &placement.Placement{Reason: placement.ReasonNoPrometheusFound}}, true, corev1.ConditionFalse, "NoPrometheusFound"},
		{"not selected", facts{monitoring: &placement.Placement{Reason: placement.ReasonNotSelected}}, true, corev1.ConditionFalse, "NotSelected"},
		{"applied", facts{monitoring: &placement.Placement{Reason: placement.ReasonApplied}}, true, corev1.ConditionTrue, "Applied"},
		{"apply failed", facts{monitoring: &placement.Placement{Reason: placement.ReasonApplied}, monitoringErr: errors.New("boom")}, true, corev1.ConditionFalse, "ApplyFailed"},
	}
	for _, tc := range cases {
		got := conditions(tc.f)
		c, ok := got[kvv1.KubeVirtConditionMonitoringReady]
		if ok != tc.present || c.status != tc.status || c.reason != tc.reason {
			t.Errorf("%s: got %v %+v", tc.name, ok, c)
		}
	}
	// Monitoring never touches Available.
	f := facts{ready: true, monitoring: &placement.Placement{Reason: placement.ReasonNotSelected}, monitoringErr: errors.New("x")}
	if a := conditions(f)[kvv1.KubeVirtConditionAvailable]; a.status != corev1.ConditionTrue {
		t.Errorf("Available %v", a)
	}
	// Deleting: the condition is not computed (and so removed).
	if _, ok := conditions(facts{deleting: true, previousMonitoring: prev})[kvv1.KubeVirtConditionMonitoringReady]; ok {
		t.Errorf("MonitoringReady computed while deleting")
	}
}

func TestMonitoringRecheck(t *testing.T) {
	if monitoringRecheck(nil) != 0 || monitoringRecheck(&placement.Placement{Reason: placement.ReasonApplied, Prometheus: "m/k8s"}) != 0 {
		t.Error("a placement by a watched Prometheus needs no recheck")
	}
	if monitoringRecheck(&placement.Placement{Reason: placement.ReasonNotSelected}) == 0 {
		t.Error("NotSelected is rechecked (namespace labels are not watched)")
	}
}
