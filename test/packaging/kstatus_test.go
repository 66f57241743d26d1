package packaging

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
)

// TestKStatusOfKubeVirtStatus reads, with the kstatus library, KubeVirt
// statuses of the shapes the operator writes (the condition sets of
// internal/controller/status.go). The live install, upgrade and uninstall
// are read in TestLeastPrivilegeRBAC.
func TestKStatusOfKubeVirtStatus(t *testing.T) {
	cond := func(typ kvv1.KubeVirtConditionType, s corev1.ConditionStatus, reason string) kvv1.KubeVirtCondition {
		return kvv1.KubeVirtCondition{Type: typ, Status: s, Reason: reason}
	}
	tr, fl := corev1.ConditionTrue, corev1.ConditionFalse
	for _, tc := range []struct {
		name       string
		generation int64
		observed   *int64
		conds      []kvv1.KubeVirtCondition
		want       status.Status
	}{
		{"available", 2, ptr.To[int64](2), []kvv1.KubeVirtCondition{
			cond("Available", tr, "AllComponentsReady"), cond("Progressing", fl, "AllComponentsReady"),
			cond("Degraded", fl, "NoErrors"), cond("Stalled", fl, "NoErrors")}, status.CurrentStatus},
		{"update in progress (new generation not yet observed)", 3, ptr.To[int64](2), []kvv1.KubeVirtCondition{
			cond("Available", tr, "UpdateInProgress"), cond("Progressing", tr, "UpdateInProgress"),
			cond("Degraded", fl, "NoErrors"), cond("Stalled", fl, "NoErrors")}, status.InProgressStatus},
		{"stalled: invalid configuration", 2, ptr.To[int64](2), []kvv1.KubeVirtCondition{
			cond("Available", fl, "InvalidConfiguration"), cond("Progressing", fl, "InvalidConfiguration"),
			cond("Stalled", tr, "InvalidConfiguration")}, status.FailedStatus},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kv := &kvv1.KubeVirt{}
			kv.Name, kv.Namespace, kv.Generation = "kubevirt", "kubevirt", tc.generation
			kv.Status.ObservedGeneration = tc.observed
			kv.Status.Conditions = tc.conds
			if got := kstatusOf(t, kv); got.Status != tc.want {
				t.Errorf("kstatus %s (%s), want %s", got.Status, got.Message, tc.want)
			}
		})
	}
}
