package controller

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/virtop-dev/virtop/internal/plan"
)

// Prune leaves out only the kinds whose API the snapshot saw gone.
func TestAPIGone(t *testing.T) {
	caps := plan.Capabilities{APIs: map[string]bool{
		"monitoring.coreos.com/v1/servicemonitors":                          false,
		"monitoring.coreos.com/v1/prometheusrules":                          true,
		"security.openshift.io/v1/securitycontextconstraints":               false,
		"instancetype.kubevirt.io/v1beta1/virtualmachineclusterpreferences": false,
	}}
	for _, c := range []struct {
		gvk  schema.GroupVersionKind
		gone bool
	}{
		{schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "ServiceMonitor"}, true},
		{schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "PrometheusRule"}, false},
		{schema.GroupVersionKind{Group: "security.openshift.io", Version: "v1", Kind: "SecurityContextConstraints"}, true},
		{schema.GroupVersionKind{Group: "instancetype.kubevirt.io", Version: "v1beta1", Kind: "VirtualMachineClusterPreference"}, true},
		// Not in the snapshot (ungated): listed as before.
		{schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, false},
		{schema.GroupVersionKind{Group: "route.openshift.io", Version: "v1", Kind: "Route"}, false},
	} {
		if got := apiGone(caps, c.gvk); got != c.gone {
			t.Errorf("apiGone(%s) = %v, want %v", c.gvk, got, c.gone)
		}
	}
}
