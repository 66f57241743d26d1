package kvtest

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
)

// The conditions of each row are those the operator writes in that
// situation (internal/controller/kvstatus, docs/api.md).
func TestAvailableAndRolledOut(t *testing.T) {
	cond := func(typ kvv1.KubeVirtConditionType, s corev1.ConditionStatus) kvv1.KubeVirtCondition {
		return kvv1.KubeVirtCondition{Type: typ, Status: s}
	}
	tr, fl := corev1.ConditionTrue, corev1.ConditionFalse
	for _, tc := range []struct {
		name                  string
		available, progress   corev1.ConditionStatus
		wantAvail, wantRolled bool
	}{
		{"first install in progress", fl, tr, false, false},
		{"update in progress: the previous version serves", tr, tr, true, false},
		{"all components ready", tr, fl, true, true},
		{"invalid resource, control plane left serving", tr, fl, true, true},
		{"deleting", fl, fl, false, false},
		{"no status yet", "", "", false, false},
	} {
		kv := &kvv1.KubeVirt{}
		if tc.available != "" {
			kv.Status.Conditions = append(kv.Status.Conditions, cond(kvv1.KubeVirtConditionAvailable, tc.available))
		}
		if tc.progress != "" {
			kv.Status.Conditions = append(kv.Status.Conditions, cond(kvv1.KubeVirtConditionProgressing, tc.progress))
		}
		if got, why := Available(kv); got != tc.wantAvail {
			t.Errorf("%s: Available = %v (%s), want %v", tc.name, got, why, tc.wantAvail)
		}
		if got, why := RolledOut(kv); got != tc.wantRolled {
			t.Errorf("%s: RolledOut = %v (%s), want %v", tc.name, got, why, tc.wantRolled)
		}
	}
}
