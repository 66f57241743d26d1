package devcluster

import (
	"slices"
	"testing"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/tools/realnode"
)

func TestPlaceOnRealNode(t *testing.T) {
	t.Run("control plane only: virt-handler on the fake nodes, no emulation", func(t *testing.T) {
		kv := &kvv1.KubeVirt{}
		placeOnRealNode(kv, false)
		if kv.Spec.Infra.NodePlacement.NodeSelector[realnode.Label] != "true" {
			t.Errorf("infra placement %v", kv.Spec.Infra.NodePlacement)
		}
		if kv.Spec.Workloads.NodePlacement.NodeSelector["type"] != "kwok" {
			t.Errorf("workloads placement %v, want type=kwok", kv.Spec.Workloads.NodePlacement)
		}
		if kv.Spec.Configuration.DeveloperConfiguration != nil {
			t.Errorf("developerConfiguration set: %+v", kv.Spec.Configuration.DeveloperConfiguration)
		}
	})
	t.Run("VMs: virt-handler everywhere, emulation on, image volumes off", func(t *testing.T) {
		kv := &kvv1.KubeVirt{}
		placeOnRealNode(kv, true)
		if kv.Spec.Workloads.NodePlacement != nil {
			t.Errorf("workloads placement %v, want none (every node)", kv.Spec.Workloads.NodePlacement)
		}
		dc := kv.Spec.Configuration.DeveloperConfiguration
		if dc == nil || !dc.UseEmulation || !slices.Equal(dc.DisabledFeatureGates, []string{imageVolumeGate}) {
			t.Errorf("developerConfiguration %+v, want useEmulation and ImageVolume disabled", dc)
		}
		placeOnRealNode(kv, true)
		if n := len(kv.Spec.Configuration.DeveloperConfiguration.DisabledFeatureGates); n != 1 {
			t.Errorf("placed twice: %d disabled gates, want 1", n)
		}
	})
	t.Run("VMs: the resource's own choices stay", func(t *testing.T) {
		kv := &kvv1.KubeVirt{}
		kv.Spec.Configuration.DeveloperConfiguration = &kvv1.DeveloperConfiguration{FeatureGates: []string{imageVolumeGate}}
		kv.Spec.Workloads = &kvv1.ComponentConfig{NodePlacement: &kvv1.NodePlacement{NodeSelector: map[string]string{"x": "y"}}}
		placeOnRealNode(kv, true)
		if len(kv.Spec.Configuration.DeveloperConfiguration.DisabledFeatureGates) != 0 {
			t.Errorf("a gate the resource enables was disabled: %+v", kv.Spec.Configuration.DeveloperConfiguration)
		}
		if kv.Spec.Workloads.NodePlacement.NodeSelector["x"] != "y" {
			t.Errorf("the resource's workloads placement was replaced: %v", kv.Spec.Workloads.NodePlacement)
		}
	})
}
