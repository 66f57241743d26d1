package controller

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
)

// TestConditionMetrics: one virtop_kubevirt_condition series per
// condition, with the current reason only, gone with the condition.
func TestConditionMetrics(t *testing.T) {
	kubevirtCondition.Reset()
	setConditionMetrics([]kvv1.KubeVirtCondition{
		{Type: kvv1.KubeVirtConditionStalled, Status: corev1.ConditionTrue, Reason: "InvalidConfiguration"},
		{Type: kvv1.KubeVirtConditionAvailable, Status: corev1.ConditionFalse, Reason: "DeploymentInProgress"},
	})
	if got := testutil.ToFloat64(kubevirtCondition.WithLabelValues("Stalled", "InvalidConfiguration")); got != 1 {
		t.Errorf("Stalled = %v, want 1", got)
	}
	if got := testutil.ToFloat64(kubevirtCondition.WithLabelValues("Available", "DeploymentInProgress")); got != 0 {
		t.Errorf("Available = %v, want 0", got)
	}
	setConditionMetrics([]kvv1.KubeVirtCondition{
		{Type: kvv1.KubeVirtConditionStalled, Status: corev1.ConditionFalse, Reason: "NoErrors"},
	})
	if n := testutil.CollectAndCount(kubevirtCondition); n != 1 {
		t.Errorf("%d series after the reasons changed and Available went, want 1", n)
	}
	if got := testutil.ToFloat64(kubevirtCondition.WithLabelValues("Stalled", "NoErrors")); got != 0 {
		t.Errorf("Stalled = %v, want 0", got)
	}
}
