package devcluster

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/virtop-dev/virtop/internal/tools/crds"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// PrometheusMode says whether and when `up` installs a Prometheus stack.
type PrometheusMode string

const (
	PrometheusNone   PrometheusMode = "none"
	PrometheusBefore PrometheusMode = "before" // before the KubeVirt resource
	PrometheusLate   PrometheusMode = "late"   // after the control plane is Available
)

// ParsePrometheusMode checks a --prometheus value.
func ParsePrometheusMode(s string) (PrometheusMode, error) {
	switch m := PrometheusMode(s); m {
	case PrometheusNone, PrometheusBefore, PrometheusLate:
		return m, nil
	case "":
		return PrometheusNone, nil
	}
	return "", fmt.Errorf("invalid --prometheus %q: use none, before or late", s)
}

// The names a kube-prometheus-stack release called kube-prometheus-stack
// gives its Prometheus.
const (
	MonitoringNamespace = "monitoring"
	PrometheusName      = "kube-prometheus-stack-prometheus"
	PrometheusRelease   = "kube-prometheus-stack"
)

// prometheusObjects is a kube-prometheus-stack-shaped Prometheus: its
// namespace, ServiceAccount and Prometheus resource, which select
// ServiceMonitors and PrometheusRules labelled release=kube-prometheus-stack
// in every namespace. No prometheus-operator runs, so no pod appears; the
// resource is what virtop discovers.
func prometheusObjects() []*unstructured.Unstructured {
	labels := map[string]any{
		"app":                  "kube-prometheus-stack-prometheus",
		"release":              PrometheusRelease,
		vocab.AppInstanceLabel: PrometheusRelease,
		vocab.AppPartOfLabel:   "kube-prometheus-stack",
		vocab.ManagedByLabel:   "Helm",
	}
	selector := map[string]any{"matchLabels": map[string]any{"release": PrometheusRelease}}
	return []*unstructured.Unstructured{
		{Object: map[string]any{
			"apiVersion": "v1", "kind": "Namespace",
			"metadata": map[string]any{"name": MonitoringNamespace},
		}},
		{Object: map[string]any{
			"apiVersion": "v1", "kind": "ServiceAccount",
			"metadata": map[string]any{"name": PrometheusName, "namespace": MonitoringNamespace, "labels": labels},
		}},
		{Object: map[string]any{
			"apiVersion": "monitoring.coreos.com/v1", "kind": "Prometheus",
			"metadata": map[string]any{"name": PrometheusName, "namespace": MonitoringNamespace, "labels": labels},
			"spec": map[string]any{
				"serviceAccountName":              PrometheusName,
				"replicas":                        int64(1),
				"serviceMonitorSelector":          selector,
				"serviceMonitorNamespaceSelector": map[string]any{},
				"podMonitorSelector":              selector,
				"podMonitorNamespaceSelector":     map[string]any{},
				"probeSelector":                   selector,
				"probeNamespaceSelector":          map[string]any{},
				"ruleSelector":                    selector,
				"ruleNamespaceSelector":           map[string]any{},
			},
		}},
	}
}

// installPrometheus applies the monitoring.coreos.com CRDs (embedded from
// internal/tools/crds/monitoring), then the Prometheus objects. With a stack serving
// it (real, on a cluster with a real node), the Prometheus resource says
// what that stack needs (realPrometheusSpec).
func installPrometheus(ctx context.Context, cl *Clients, real *promStack) error {
	if _, err := applyFS(ctx, cl, crds.FS, crds.Monitoring()); err != nil {
		return err
	}
	objs := prometheusObjects()
	if real != nil {
		// The Secret before the resource that names it.
		prom := objs[len(objs)-1]
		objs = append(objs[:len(objs)-1], realPrometheusSpec(prom, real), prom)
	}
	for _, obj := range objs {
		if err := apply(ctx, cl, obj, ""); err != nil {
			return err
		}
	}
	return nil
}
