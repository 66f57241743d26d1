package config_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/localcluster"
)

// What the operator's own objects may still receive: the local cluster's
// webhook patches (failurePolicy and timeoutSeconds by index), and labels
// and annotations, also through wildcards.
func TestOperatorOwnedObjectsAllowedPatches(t *testing.T) {
	kv := &kvv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: "kubevirt"}}
	if err := localcluster.Prepare(kv); err != nil {
		t.Fatal(err)
	}
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
