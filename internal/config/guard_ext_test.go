package config_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/testing/kvtest"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// What the operator's own objects may still receive: the local cluster's
// webhook patches (failurePolicy and timeoutSeconds by index), and labels
// and annotations, also through wildcards.
func TestOperatorOwnedObjectsAllowedPatches(t *testing.T) {
	kv := kvtest.KubeVirt(t, "kubevirt")
	kv.Spec.CustomizeComponents.Patches = append(kv.Spec.CustomizeComponents.Patches,
		kvv1.CustomizeComponentsPatch{ResourceType: "*", ResourceName: "*", Type: kvv1.MergePatchType, Patch: `{"metadata": {"labels": {"team": "virt"}}}`},
		kvv1.CustomizeComponentsPatch{ResourceType: "Service", ResourceName: "kubevirt-operator-webhook", Type: kvv1.JSONPatchType,
			Patch: `[{"op": "add", "path": "/metadata/annotations/example.com~1a", "value": "b"}]`},
		kvv1.CustomizeComponentsPatch{ResourceType: "Deployment", ResourceName: "*", Type: kvv1.StrategicMergePatchType, Patch: `{"spec": {"replicas": 2}}`},
	)
	if _, err := config.FromKubeVirt(kv, config.Settings{Namespace: "kubevirt"}); err != nil {
		t.Fatal(err)
	}
}

// TestOperatorOwnedObjectsExist: each object the guard protects is either
// one every catalog release renders (the operator's webhook, its Service
// and certificate) or the operator's own RBAC, which no strategy renders. A
// renamed or moved object would otherwise leave the guard protecting
// nothing.
func TestOperatorOwnedObjectsExist(t *testing.T) {
	rbac := map[string]bool{"ServiceAccount": true, "ClusterRole": true, "ClusterRoleBinding": true, "Role": true, "RoleBinding": true}
	for _, version := range release.Builtin().Versions() {
		kv := &kvv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: "kubevirt"}}
		kv.Spec.ImageTag = version
		cfg, err := config.FromKubeVirt(kv, config.Settings{Namespace: "kubevirt"})
		if err != nil {
			t.Fatal(err)
		}
		s, err := strategy.Generate(cfg)
		if err != nil {
			t.Fatal(err)
		}
		rendered := map[string]bool{}
		for _, o := range s.Objects {
			rendered[strategy.Kind(o)+" "+o.GetName()] = true
		}
		for kind, names := range config.OperatorOwned {
			for _, name := range names {
				switch {
				case rbac[kind] && name != vocab.OperatorRBACName:
					t.Errorf("%s %s: the operator's RBAC is named %s", kind, name, vocab.OperatorRBACName)
				case rbac[kind] && rendered[kind+" "+name]:
					t.Errorf("%s: %s %s is the operator's own, installed with it, yet the strategy renders it", version, kind, name)
				case !rbac[kind] && !rendered[kind+" "+name]:
					t.Errorf("%s: guarded %s %s is not rendered", version, kind, name)
				}
			}
		}
	}
}
