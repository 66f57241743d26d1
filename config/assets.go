// Package config embeds the install base of virtop's release manifests
// (kustomize builds dist/virtop-operator.yaml from this directory): the
// CRDs, the install namespace and the PriorityClass, and the sample KubeVirt
// resource, so that `virtop up` installs exactly these objects from an
// installed binary, without a checkout. One definition of each object: a
// release manifest applied server-side on a `virtop up` cluster finds every
// field already holding its value and conflicts with nothing.
package config

import (
	"embed"
	"io/fs"
	"sort"
)

// FS holds the embedded files, by their paths in this directory.
//
//go:embed crd/bases/*.yaml namespace/namespace.yaml manager/priority_class.yaml samples/kubevirt-cr.yaml
var FS embed.FS

// SampleKubeVirt is the sample KubeVirt resource.
const SampleKubeVirt = "samples/kubevirt-cr.yaml"

// Base lists the files of the install base in apply order: the CRDs, the
// namespace, the PriorityClass.
func Base() []string {
	crds, _ := fs.Glob(FS, "crd/bases/*.yaml")
	sort.Strings(crds)
	return append(crds, "namespace/namespace.yaml", "manager/priority_class.yaml")
}
