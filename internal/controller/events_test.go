package controller

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
)

func TestEventTypesForConditionChanges(t *testing.T) {
	withConds := func(conds ...kvv1.KubeVirtCondition) *kvv1.KubeVirt {
		kv := &kvv1.KubeVirt{}
		kv.Status.Conditions = conds
		return kv
	}
	cond := func(typ kvv1.KubeVirtConditionType, st corev1.ConditionStatus, reason string) kvv1.KubeVirtCondition {
		return kvv1.KubeVirtCondition{Type: typ, Status: st, Reason: reason, Message: "m"}
	}
	for _, tc := range []struct {
		name        string
		orig, now   *kvv1.KubeVirt
		wantPrefix  string
		wantNoEvent bool
	}{
		{"deletion blocked is a warning",
			withConds(cond(kvv1.KubeVirtConditionSynchronized, corev1.ConditionTrue, kvv1.ReasonSynchronized)),
			withConds(cond(kvv1.KubeVirtConditionSynchronized, corev1.ConditionFalse, kvv1.ReasonDeletionBlocked)),
			"Warning DeletionBlocked", false},
		{"synchronized again is normal",
			withConds(cond(kvv1.KubeVirtConditionSynchronized, corev1.ConditionFalse, kvv1.ReasonDeploymentFailed)),
			withConds(cond(kvv1.KubeVirtConditionSynchronized, corev1.ConditionTrue, kvv1.ReasonSynchronized)),
			"Normal Synchronized", false},
		{"Available lost is a warning",
			withConds(cond(kvv1.KubeVirtConditionAvailable, corev1.ConditionTrue, "AllComponentsReady")),
			withConds(cond(kvv1.KubeVirtConditionAvailable, corev1.ConditionFalse, "DeploymentInProgress")),
			"Warning DeploymentInProgress", false},
		{"no change, no event",
			withConds(cond(kvv1.KubeVirtConditionDegraded, corev1.ConditionFalse, kvv1.ReasonNoErrors)),
			withConds(cond(kvv1.KubeVirtConditionDegraded, corev1.ConditionFalse, kvv1.ReasonNoErrors)),
			"", true},
	} {
		rec := events.NewFakeRecorder(4)
		r := &Reconciler{Recorder: rec}
		r.eventForChanges(tc.orig, tc.now)
		select {
		case e := <-rec.Events:
			if tc.wantNoEvent || !strings.HasPrefix(e, tc.wantPrefix) {
				t.Errorf("%s: event %q, want prefix %q", tc.name, e, tc.wantPrefix)
			}
		default:
			if !tc.wantNoEvent {
				t.Errorf("%s: no event, want %q", tc.name, tc.wantPrefix)
			}
		}
	}
}
