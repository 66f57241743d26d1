// Package v1 holds the kubevirt.io/v1 KubeVirt resource as virtop serves it:
// the fields virtop acts on, named and shaped as upstream KubeVirt names them,
// with every other field preserved so an upstream kubevirt-cr.yaml applies
// unchanged.
//
// +kubebuilder:object:generate=true
// +groupName=kubevirt.io
package v1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the API group and version of the KubeVirt resource.
	GroupVersion = schema.GroupVersion{Group: "kubevirt.io", Version: "v1"}

	// SchemeBuilder registers the types of this package.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
