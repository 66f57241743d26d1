package apply

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Ready judges whether a live object has settled, from its standard status.
// It returns false with a reason while it has not. Kinds without a notion of
// readiness are ready once they exist.
func Ready(live *unstructured.Unstructured) (bool, string) {
	if live == nil {
		return false, "not created yet"
	}
	gen := live.GetGeneration()
	observed, _, _ := unstructured.NestedInt64(live.Object, "status", "observedGeneration")
	switch live.GetKind() {
	case "CustomResourceDefinition":
		if conditionTrue(live, "Established") {
			return true, ""
		}
		return false, "not Established yet"
	case "Deployment":
		if observed < gen {
			return false, fmt.Sprintf("generation %d not observed yet (at %d)", gen, observed)
		}
		want, found, _ := unstructured.NestedInt64(live.Object, "spec", "replicas")
		if !found {
			want = 1
		}
		replicas := statusInt(live, "replicas")
		updated := statusInt(live, "updatedReplicas")
		available := statusInt(live, "availableReplicas")
		ready := statusInt(live, "readyReplicas")
		switch {
		case want == 0:
			return false, "scaled to 0 replicas"
		case updated < want:
			return false, fmt.Sprintf("%d of %d replicas updated", updated, want)
		case replicas > updated:
			return false, fmt.Sprintf("%d old replicas still running", replicas-updated)
		case available < want || ready < want:
			return false, fmt.Sprintf("%d of %d replicas available", available, want)
		}
		return true, ""
	case "DaemonSet":
		if observed < gen {
			return false, fmt.Sprintf("generation %d not observed yet (at %d)", gen, observed)
		}
		desired := statusInt(live, "desiredNumberScheduled")
		updated := statusInt(live, "updatedNumberScheduled")
		ready := statusInt(live, "numberReady")
		available := statusInt(live, "numberAvailable")
		switch {
		case desired == 0:
			return false, "no node to run on"
		case updated < desired:
			return false, fmt.Sprintf("%d of %d pods updated", updated, desired)
		case ready < desired || available < desired:
			return false, fmt.Sprintf("%d of %d pods ready", ready, desired)
		}
		return true, ""
	case "APIService":
		if conditionTrue(live, "Available") {
			return true, ""
		}
		return false, "not Available yet"
	}
	return true, ""
}

func statusInt(u *unstructured.Unstructured, field string) int64 {
	v, _, _ := unstructured.NestedInt64(u.Object, "status", field)
	return v
}

func conditionTrue(u *unstructured.Unstructured, typ string) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]interface{})
		if ok && m["type"] == typ && m["status"] == "True" {
			return true
		}
	}
	return false
}
