package components

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/virtop-dev/virtop/internal/strategy/stage"
)

func TestCertificates(t *testing.T) {
	// upstream-facts.md §3.2; components/secrets.go.
	wantSecrets := []string{
		"kubevirt-virt-api-certs",
		"kubevirt-controller-certs",
		"kubevirt-exportproxy-certs",
		"kubevirt-virt-handler-server-certs",
		"kubevirt-virt-handler-certs",
		"kubevirt-operator-certs",
		"kubevirt-ca",
		"kubevirt-export-ca",
	}
	// Upstream lists each CA ConfigMap twice; virtop once.
	wantConfigMaps := []string{"kubevirt-ca", "kubevirt-export-ca"}

	// The export Secrets and ConfigMap do not follow the VMExport gate
	// upstream: the same set with the gate off and on.
	for _, gates := range [][]string{nil, {"VMExport"}} {
		var secrets, cms []string
		seen := map[string]bool{}
		for _, o := range renderFamily(t, "certificates", gates...) {
			key := o.GetObjectKind().GroupVersionKind().Kind + "/" + o.GetName()
			if seen[key] {
				t.Errorf("gates %v: duplicate %s", gates, key)
			}
			seen[key] = true
			if o.GetNamespace() != "kubevirt" {
				t.Errorf("%s: namespace %q", key, o.GetNamespace())
			}
			if s, err := stage.Of(o); err != nil || s != stage.Certificates {
				t.Errorf("%s: stage %q, %v", key, s, err)
			}
			if g := stage.GatesOf(o); len(g) != 0 {
				t.Errorf("%s: gates %v", key, g)
			}
			if len(o.GetLabels()) != 0 {
				t.Errorf("%s: labels %v; upstream sets only managed-by, which the strategy stamps", key, o.GetLabels())
			}
			switch obj := o.(type) {
			case *corev1.Secret:
				secrets = append(secrets, obj.Name)
				if obj.APIVersion != "v1" || obj.Kind != "Secret" {
					t.Errorf("%s: TypeMeta %s %s", key, obj.APIVersion, obj.Kind)
				}
				if obj.Type != "kubernetes.io/tls" {
					t.Errorf("%s: type %q", key, obj.Type)
				}
				crt, hasCrt := obj.Data["tls.crt"]
				k, hasKey := obj.Data["tls.key"]
				if !hasCrt || !hasKey || len(crt) != 0 || len(k) != 0 || len(obj.Data) != 2 {
					t.Errorf("%s: data %v, want empty tls.crt and tls.key", key, obj.Data)
				}
			case *corev1.ConfigMap:
				cms = append(cms, obj.Name)
				if obj.APIVersion != "v1" || obj.Kind != "ConfigMap" {
					t.Errorf("%s: TypeMeta %s %s", key, obj.APIVersion, obj.Kind)
				}
				if len(obj.Data) != 0 {
					t.Errorf("%s: data %v, want none until the CA is issued", key, obj.Data)
				}
			default:
				t.Errorf("unexpected %T", o)
			}
		}
		if !slices.Equal(secrets, wantSecrets) {
			t.Errorf("gates %v: Secrets %v, want %v", gates, secrets, wantSecrets)
		}
		if !slices.Equal(cms, wantConfigMaps) {
			t.Errorf("gates %v: ConfigMaps %v, want %v", gates, cms, wantConfigMaps)
		}
	}
}
