package plan

import (
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/monitoring/placement"
	"github.com/virtop-dev/virtop/internal/stage"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// PlaceMonitoring resolves the monitoring placement from the facts and
// rewrites the planned monitoring objects accordingly: the ServiceMonitor
// moves to the resolved namespace (without its bearer token file for a
// Prometheus that refuses token files), the ServiceMonitor and
// PrometheusRule get the labels the chosen Prometheus selects on, the
// PrometheusRule moves when the install namespace is not selected, the
// subjects of the RoleBinding kubevirt-monitoring become the resolved
// accounts and those of the ClusterRoleBinding virtop-metrics-reader the
// ones among them the user named (placement.Placement.ReaderSubjects),
// and on OpenShift the install namespace gets the label the platform
// Prometheus selects namespaces by; the Grafana dashboard ConfigMap moves
// to the namespace of the dashboard sidecar convention found. The objects
// are the plan's own copies. It returns nil when no facts were gathered.
func PlaceMonitoring(p *Plan, in *placement.Input) *placement.Placement {
	if in == nil {
		return nil
	}
	var sm, rule, dash, reader client.Object
	var bindings []client.Object
	for _, o := range p.Objects {
		kind := o.GetObjectKind().GroupVersionKind().Kind
		switch {
		case kind == "ServiceMonitor" && o.GetName() == vocab.ServiceMonitorName:
			sm = o
		case kind == "PrometheusRule" && o.GetName() == vocab.PrometheusRuleName:
			rule = o
		case kind == "RoleBinding" && o.GetName() == vocab.MonitoringRBACName:
			bindings = append(bindings, o)
		case kind == "ClusterRoleBinding" && o.GetName() == vocab.MetricsReaderName:
			reader = o
		case kind == "ConfigMap" && o.GetName() == vocab.DashboardConfigMapName:
			dash = o
		}
	}
	var objs placement.Objects
	if sm != nil {
		objs.ServiceMonitorLabels = sm.GetLabels()
	}
	if rule != nil {
		objs.RuleLabels = rule.GetLabels()
	}
	pl := placement.Resolve(*in, objs)
	if sm != nil && pl.ServiceMonitorNamespace != "" {
		sm.SetNamespace(pl.ServiceMonitorNamespace)
		sm.SetLabels(withLabels(sm.GetLabels(), pl.Labels))
		if pl.NoTokenFile {
			dropTokenFile(sm)
		}
	}
	if rule != nil && pl.RuleNamespace != "" {
		rule.SetNamespace(pl.RuleNamespace)
		rule.SetLabels(withLabels(rule.GetLabels(), pl.RuleLabels))
	}
	for _, b := range bindings {
		setSubjects(b, pl.Subjects)
	}
	// The cluster-wide grant goes only to accounts the user named.
	if reader != nil {
		setSubjects(reader, pl.ReaderSubjects)
	}
	// The Grafana dashboard goes where a dashboard sidecar convention is
	// (its gate passed, so there is one).
	if dash != nil && pl.DashboardNamespace != "" {
		dash.SetNamespace(pl.DashboardNamespace)
	}
	if len(pl.InstallNamespaceLabels) > 0 {
		p.Objects = append(p.Objects, namespaceLabels(in.InstallNamespace, pl.InstallNamespaceLabels))
	}
	return &pl
}

// dropTokenFile removes the bearer token file of the ServiceMonitor's
// endpoints, for a Prometheus that would refuse the whole ServiceMonitor
// for it.
func dropTokenFile(o client.Object) {
	switch sm := o.(type) {
	case *monitoringv1.ServiceMonitor:
		for i := range sm.Spec.Endpoints {
			sm.Spec.Endpoints[i].BearerTokenFile = "" //nolint:staticcheck // the field prometheus-operator still reads
		}
	case *unstructured.Unstructured:
		eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		for _, e := range eps {
			if m, ok := e.(map[string]interface{}); ok {
				delete(m, "bearerTokenFile")
			}
		}
		if eps != nil {
			_ = unstructured.SetNestedSlice(sm.Object, eps, "spec", "endpoints")
		}
	}
}

func withLabels(have, add map[string]string) map[string]string {
	out := make(map[string]string, len(have)+len(add))
	for k, v := range have {
		out[k] = v
	}
	for k, v := range add {
		out[k] = v
	}
	return out
}

func setSubjects(o client.Object, subjects []rbacv1.Subject) {
	switch rb := o.(type) {
	case *rbacv1.RoleBinding:
		rb.Subjects = append([]rbacv1.Subject(nil), subjects...)
	case *rbacv1.ClusterRoleBinding:
		rb.Subjects = append([]rbacv1.Subject(nil), subjects...)
	case *unstructured.Unstructured:
		if len(subjects) == 0 {
			unstructured.RemoveNestedField(rb.Object, "subjects")
			return
		}
		list := make([]interface{}, 0, len(subjects))
		for _, s := range subjects {
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&s)
			if err == nil {
				list = append(list, m)
			}
		}
		_ = unstructured.SetNestedSlice(rb.Object, list, "subjects")
	}
}

// namespaceLabels is the install namespace with only the labels virtop
// owns on it (applied server-side, so other fields and labels stay as
// they are). It carries no managed-by label: virtop never prunes or
// deletes the namespace.
func namespaceLabels(name string, labels map[string]string) client.Object {
	ns := &corev1.Namespace{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: withLabels(nil, labels)},
	}
	stage.Set(ns, stage.Monitoring)
	return ns
}
