package devcluster

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ApplyDir applies every manifest in dir (CRDs are waited for until
// Established) and returns how many objects it applied.
func ApplyDir(ctx context.Context, cl *Clients, dir string) (int, error) {
	return applyDir(ctx, cl, dir)
}

// Apply applies one object server-side (field manager FieldManager); a
// CRD is waited for until Established.
func Apply(ctx context.Context, cl *Clients, obj *unstructured.Unstructured) error {
	return apply(ctx, cl, obj, "")
}

// PrometheusObjects are the objects of a kube-prometheus-stack-shaped
// Prometheus, in the order they are applied (the Prometheus resource
// last): its namespace, ServiceAccount and Prometheus resource.
func PrometheusObjects() []*unstructured.Unstructured { return prometheusObjects() }
