package controller

import (
	"testing"

	"github.com/virtop-dev/virtop/internal/monitoring/placement"
)

func TestMonitoringRecheck(t *testing.T) {
	if monitoringRecheck(nil) != 0 || monitoringRecheck(&placement.Placement{Reason: placement.ReasonApplied, Prometheus: "m/k8s"}) != 0 {
		t.Error("a placement by a watched Prometheus needs no recheck")
	}
	if monitoringRecheck(&placement.Placement{Reason: placement.ReasonNotSelected}) == 0 {
		t.Error("NotSelected is rechecked (namespace labels are not watched)")
	}
}
