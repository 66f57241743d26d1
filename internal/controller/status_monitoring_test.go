package controller

import (
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/virtop-dev/virtop/internal/monitoring/placement"
)

func TestMonitoringRecheck(t *testing.T) {
	if monitoringRecheck(nil) != 0 || monitoringRecheck(&placement.Placement{Reason: placement.ReasonApplied, Prometheus: "m/k8s"}) != 0 {
		t.Error("a placement by a watched Prometheus, binding no account, needs no recheck")
	}
	bound := &placement.Placement{Reason: placement.ReasonApplied, Prometheus: "m/k8s", Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "m", Name: "p"}}}
	if monitoringRecheck(bound) == 0 {
		t.Error("a bound account is rechecked (ServiceAccounts are not watched)")
	}
	if monitoringRecheck(&placement.Placement{Reason: placement.ReasonAccountNotFound}) == 0 {
		t.Error("AccountNotFound is rechecked")
	}
	if monitoringRecheck(&placement.Placement{Reason: placement.ReasonNotSelected}) == 0 {
		t.Error("NotSelected is rechecked (namespace labels are not watched)")
	}
}
