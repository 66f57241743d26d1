package tuning

import (
	"fmt"
	"maps"
	"slices"
	"sort"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/virtop-dev/virtop/api/v1alpha1"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// Apply renders the tuning for the input and applies it to planned objects:
// the PrometheusRule prometheus-kubevirt-rules gets the tuned spec and the
// extra labels and annotations, the ServiceMonitor prometheus-kubevirt-rules
// the extra labels and annotations and the scrape interval on every
// endpoint. Those two are replaced by tuned copies; every other object (and
// the slice passed in) is left as it is. Objects absent from objs (a gate
// closed) are simply not tuned. spec.dashboard.disabled leaves the Grafana
// dashboard ConfigMap out of the returned objects, so prune removes one
// already applied.
//
// A nil tuning returns objs unchanged and an empty result. A tuning label or
// annotation that would change a key the planned object already carries
// (virtop's or the plan's, for example a Prometheus selector label) is an
// *InvalidError naming the field.
func Apply(objs []client.Object, t *v1alpha1.KubeVirtMonitoring, in Input) ([]client.Object, *Result, error) {
	if t == nil {
		return objs, &Result{}, nil
	}
	res, err := Render(in, t)
	if err != nil {
		return nil, nil, err
	}
	out := make([]client.Object, len(objs))
	copy(out, objs)
	var errs field.ErrorList
	spec := field.NewPath("spec")
	for i, o := range out {
		switch x := o.(type) {
		case *monitoringv1.PrometheusRule:
			if x.Name != vocab.PrometheusRuleName {
				continue
			}
			c := x.DeepCopy()
			c.Spec = *res.Rules.DeepCopy()
			p := spec.Child("prometheusRule")
			c.Labels, errs = merge(c.Labels, res.PrometheusRule.Labels, p.Child("labels"), errs)
			c.Annotations, errs = merge(c.Annotations, res.PrometheusRule.Annotations, p.Child("annotations"), errs)
			out[i] = c
		case *monitoringv1.ServiceMonitor:
			if x.Name != vocab.ServiceMonitorName {
				continue
			}
			c := x.DeepCopy()
			p := spec.Child("serviceMonitor")
			c.Labels, errs = merge(c.Labels, res.ServiceMonitor.Labels, p.Child("labels"), errs)
			c.Annotations, errs = merge(c.Annotations, res.ServiceMonitor.Annotations, p.Child("annotations"), errs)
			if res.Interval != "" {
				for e := range c.Spec.Endpoints {
					c.Spec.Endpoints[e].Interval = res.Interval
				}
			}
			out[i] = c
		}
	}
	if len(errs) > 0 {
		ie := &InvalidError{Errs: errs}
		if t.Name != "" {
			ie.Name = t.Namespace + "/" + t.Name
		}
		return nil, nil, ie
	}
	return res.Drop(out), res, nil
}

// Drop returns objs without the objects the tuning leaves out (the
// dashboard ConfigMap when spec.dashboard.disabled), in a new slice.
func (r *Result) Drop(objs []client.Object) []client.Object {
	out := make([]client.Object, 0, len(objs))
	for _, o := range objs {
		if r != nil && r.DashboardDisabled && o.GetObjectKind().GroupVersionKind().Kind == "ConfigMap" && o.GetName() == vocab.DashboardConfigMapName {
			continue
		}
		out = append(out, o)
	}
	return out
}

// merge adds extra keys to m (a fresh map); changing a key m has is an
// error.
func merge(m, extra map[string]string, p *field.Path, errs field.ErrorList) (map[string]string, field.ErrorList) {
	if len(extra) == 0 {
		return m, errs
	}
	out := make(map[string]string, len(m)+len(extra))
	for k, v := range m {
		out[k] = v
	}
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		if have, ok := m[k]; ok && have != extra[k] {
			errs = append(errs, field.Forbidden(p.Key(k), fmt.Sprintf("virtop sets %s=%q on this object", k, have)))
			continue
		}
		out[k] = extra[k]
	}
	return out, errs
}

// Select picks the KubeVirtMonitoring honoured in a namespace: the oldest by
// creation time, then the first by name. The others are superseded (their
// Accepted condition is False, reason Superseded, naming the chosen one).
// Resources being deleted are not chosen. Items may come in any order.
func Select(items []v1alpha1.KubeVirtMonitoring) (chosen *v1alpha1.KubeVirtMonitoring, superseded []*v1alpha1.KubeVirtMonitoring) {
	var live []*v1alpha1.KubeVirtMonitoring
	for i := range items {
		if items[i].DeletionTimestamp == nil {
			live = append(live, &items[i])
		}
	}
	sort.SliceStable(live, func(i, j int) bool {
		a, b := live[i], live[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
	if len(live) == 0 {
		return nil, nil
	}
	return live[0], live[1:]
}

// Decode reads one KubeVirtMonitoring from YAML or JSON (a file given to
// --tuning). Unknown fields are errors, so a misspelt setting does not
// silently do nothing.
func Decode(data []byte) (*v1alpha1.KubeVirtMonitoring, error) {
	var t v1alpha1.KubeVirtMonitoring
	if err := yaml.UnmarshalStrict(data, &t); err != nil {
		return nil, err
	}
	gvk := t.GroupVersionKind()
	if gvk.Group != v1alpha1.GroupVersion.Group || gvk.Version != v1alpha1.GroupVersion.Version || gvk.Kind != "KubeVirtMonitoring" {
		return nil, fmt.Errorf("want a %s KubeVirtMonitoring, found apiVersion %q kind %q", v1alpha1.GroupVersion, t.APIVersion, t.Kind)
	}
	return &t, nil
}
