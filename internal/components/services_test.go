package components

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/virtop-dev/virtop/internal/strategy/stage"
)

func TestServices(t *testing.T) {
	// upstream-facts.md §3.3; components/deployments.go and webhooks.go.
	tests := []struct {
		name      string
		labels    map[string]string
		selector  map[string]string
		portName  string
		target    intstr.IntOrString
		clusterIP string
	}{
		{
			name:      "kubevirt-prometheus-metrics",
			labels:    map[string]string{"kubevirt.io": "", "prometheus.kubevirt.io": "true"},
			selector:  map[string]string{"prometheus.kubevirt.io": "true"},
			portName:  "metrics",
			target:    intstr.FromString("metrics"),
			clusterIP: "None",
		},
		{
			name:     "virt-api",
			labels:   map[string]string{"kubevirt.io": "virt-api"},
			selector: map[string]string{"kubevirt.io": "virt-api"},
			target:   intstr.FromInt32(8443),
		},
		{
			name:     "kubevirt-operator-webhook",
			labels:   map[string]string{"kubevirt.io": "", "prometheus.kubevirt.io": "true"},
			selector: map[string]string{"kubevirt.io": "virt-operator"},
			portName: "webhooks",
			target:   intstr.FromString("webhooks"),
		},
		{
			name:     "virt-exportproxy",
			labels:   map[string]string{"kubevirt.io": "virt-exportproxy"},
			selector: map[string]string{"kubevirt.io": "virt-exportproxy"},
			target:   intstr.FromInt32(8443),
		},
	}
	// Upstream applies the virt-exportproxy Service whatever the VMExport
	// gate says; only its Deployment follows the gate.
	for _, gates := range [][]string{nil, {"VMExport"}} {
		objs := renderFamily(t, "services", gates...)
		if len(objs) != len(tests) {
			t.Fatalf("gates %v: %d Services, want %d", gates, len(objs), len(tests))
		}
		for i, tt := range tests {
			svc, ok := objs[i].(*corev1.Service)
			if !ok {
				t.Fatalf("object %d is %T", i, objs[i])
			}
			if svc.Name != tt.name {
				t.Fatalf("Service %d is %s, want %s", i, svc.Name, tt.name)
			}
			if svc.APIVersion != "v1" || svc.Kind != "Service" || svc.Namespace != "kubevirt" {
				t.Errorf("%s: %s %s in %q", tt.name, svc.APIVersion, svc.Kind, svc.Namespace)
			}
			if !reflect.DeepEqual(svc.Labels, tt.labels) {
				t.Errorf("%s: labels %v, want %v", tt.name, svc.Labels, tt.labels)
			}
			if !reflect.DeepEqual(svc.Spec.Selector, tt.selector) {
				t.Errorf("%s: selector %v, want %v", tt.name, svc.Spec.Selector, tt.selector)
			}
			if svc.Spec.Type != corev1.ServiceTypeClusterIP || svc.Spec.ClusterIP != tt.clusterIP {
				t.Errorf("%s: type %s clusterIP %q, want ClusterIP %q", tt.name, svc.Spec.Type, svc.Spec.ClusterIP, tt.clusterIP)
			}
			want := []corev1.ServicePort{{Name: tt.portName, Port: 443, TargetPort: tt.target, Protocol: corev1.ProtocolTCP}}
			if !reflect.DeepEqual(svc.Spec.Ports, want) {
				t.Errorf("%s: ports %+v, want %+v", tt.name, svc.Spec.Ports, want)
			}
			if svc.Spec.SessionAffinity != "" {
				t.Errorf("%s: sessionAffinity %q, upstream leaves it to the server", tt.name, svc.Spec.SessionAffinity)
			}
			if s, err := stage.Of(svc); err != nil || s != stage.Services {
				t.Errorf("%s: stage %q, %v", tt.name, s, err)
			}
			if g := stage.GatesOf(svc); len(g) != 0 {
				t.Errorf("%s: gates %v", tt.name, g)
			}
		}
	}
}
