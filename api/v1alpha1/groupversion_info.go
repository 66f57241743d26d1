// Package v1alpha1 holds virtop's own resources in the virtop.dev group:
// KubeVirtMonitoring, the tuning of the monitoring objects virtop installs
// with KubeVirt (the ServiceMonitor's and PrometheusRule's metadata and
// scrape interval, per-alert settings and the user's own rule groups).
//
// +kubebuilder:object:generate=true
// +groupName=virtop.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the API group and version of virtop's resources.
	GroupVersion = schema.GroupVersion{Group: "virtop.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
