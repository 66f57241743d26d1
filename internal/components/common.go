// Package components renders the objects of a KubeVirt control plane from a
// DeploymentConfig. Every renderer is a pure function: no client, clock or
// randomness, and the same config gives the same objects. Each rendered
// object carries its apply stage and, when optional, its gates (package
// stage).
package components

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/release"
)

// VMExportFeatureGate enables virt-exportproxy.
const VMExportFeatureGate = "VMExport"

// Renderer renders one family of objects for a release.
type Renderer func(c *config.DeploymentConfig, r *release.Release) ([]client.Object, error)

// Renderers lists every family, in no particular order: the strategy sorts
// objects by stage.
var Renderers = map[string]Renderer{}

// register adds a renderer; each family's file calls it from init.
func register(name string, r Renderer) {
	if _, dup := Renderers[name]; dup {
		panic("components: duplicate renderer " + name)
	}
	Renderers[name] = r
}

// GVKs of the kinds renderers produce, for setting TypeMeta.
var (
	gvkServiceAccount = schema.GroupVersionKind{Version: "v1", Kind: "ServiceAccount"}
)
