// Package detect finds install strategies that were generated without
// KubeVirt's monitoring objects while a Prometheus exists: upstream's
// one-shot Gate B (the monitor ServiceAccount looked up once, in the
// dump-install-strategy Job) bakes a strategy without ServiceMonitor and
// PrometheusRule that is reused forever for its deployment ID. `virtop
// doctor` calls it.
package detect

import (
	"context"
	"fmt"
	"sort"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// Finding is one strategy ConfigMap that lacks monitoring objects although
// a Prometheus exists.
type Finding struct {
	// ConfigMap is the strategy ConfigMap.
	ConfigMap types.NamespacedName
	// Owner is "virtop" for virtop's ConfigMaps, else "upstream".
	Owner string
	// Version and ID are the strategy's KubeVirt version and deployment ID.
	Version, ID string
	// Missing lists the kinds absent: ServiceMonitor, PrometheusRule.
	Missing []string
	// Prometheuses are the Prometheus resources found, "namespace/name".
	Prometheuses []string
	// Err is set when the ConfigMap could not be read as a strategy; such
	// a ConfigMap is reported whatever it holds.
	Err string
	// Message explains the finding and the remedy.
	Message string
}

// FindStrategiesMissingMonitoring reads the install-strategy ConfigMaps of
// namespace (virtop's and upstream's) and reports those without a
// ServiceMonitor or PrometheusRule while at least one Prometheus resource
// exists in the cluster. Without the Prometheus API or any Prometheus
// resource there is nothing to report.
func FindStrategiesMissingMonitoring(ctx context.Context, r client.Reader, namespace string) ([]Finding, error) {
	var proms monitoringv1.PrometheusList
	if err := r.List(ctx, &proms); err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("list Prometheus resources: %w", err)
	}
	if len(proms.Items) == 0 {
		return nil, nil
	}
	names := make([]string, 0, len(proms.Items))
	for _, p := range proms.Items {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	sort.Strings(names)

	var cms corev1.ConfigMapList
	if err := r.List(ctx, &cms, client.InNamespace(namespace), client.HasLabels{vocab.InstallStrategyLabel}); err != nil {
		return nil, fmt.Errorf("list install strategy ConfigMaps in %s: %w", namespace, err)
	}
	var out []Finding
	for i := range cms.Items {
		if f, ok := check(&cms.Items[i], names); ok {
			out = append(out, f)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ConfigMap.Name < out[j].ConfigMap.Name })
	return out, nil
}

// check inspects one ConfigMap.
func check(cm *corev1.ConfigMap, prometheuses []string) (Finding, bool) {
	f := Finding{
		ConfigMap:    types.NamespacedName{Namespace: cm.Namespace, Name: cm.Name},
		Owner:        "upstream",
		Version:      cm.Annotations[vocab.InstallStrategyVersionAnnotation],
		ID:           cm.Annotations[vocab.InstallStrategyIdentifierAnnotation],
		Prometheuses: prometheuses,
	}
	if cm.Labels[vocab.ManagedByLabel] == vocab.ManagedByValue {
		f.Owner = "virtop"
	}
	st, err := strategy.FromConfigMap(cm)
	if err != nil {
		f.Err = err.Error()
		f.Message = fmt.Sprintf("Install strategy %s could not be read (%v); its monitoring objects cannot be checked", cm.Name, err)
		return f, true
	}
	have := map[string]bool{}
	for _, o := range st.Objects {
		have[o.GetObjectKind().GroupVersionKind().Kind] = true
	}
	for _, kind := range []string{monitoringv1.ServiceMonitorsKind, monitoringv1.PrometheusRuleKind} {
		if !have[kind] {
			f.Missing = append(f.Missing, kind)
		}
	}
	if len(f.Missing) == 0 {
		return f, false
	}
	remedy := "virtop places them at apply time: let virtop serve this KubeVirt resource"
	if f.Owner == "upstream" {
		remedy = "upstream's operator reuses this strategy for its deployment ID and never adds them; delete the ConfigMap and restart virt-operator (or change spec.monitorNamespace/monitorAccount), or let virtop serve the KubeVirt resource"
	}
	f.Message = fmt.Sprintf("Install strategy %s (%s, version %s) has no %s although Prometheus %s exists; %s",
		cm.Name, f.Owner, f.Version, strings.Join(f.Missing, " or "), strings.Join(prometheuses, ", "), remedy)
	return f, true
}
