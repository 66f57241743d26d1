// Package stage names the apply stages of a strategy and the gates of its
// optional objects, and holds the one order they are applied and removed
// in (order.go). Stages and gates travel with each object as annotations,
// so a strategy read back from its ConfigMap carries them too. A leaf:
// pure functions over objects, it imports only internal/vocab.
package stage

import (
	"fmt"
	"sort"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/vocab"
)

// Stage is an apply stage. Install and Update say in which order stages
// are applied.
type Stage string

// The stages.
const (
	CRDs            Stage = "crds"
	RBAC            Stage = "rbac"
	Certificates    Stage = "certificates"
	Services        Stage = "services"
	VirtAPI         Stage = vocab.VirtAPI
	Admission       Stage = "admission"
	VirtController  Stage = vocab.VirtController
	VirtHandler     Stage = vocab.VirtHandler
	VirtExportProxy Stage = vocab.VirtExportProxy
	Instancetypes   Stage = "instancetypes"
	Monitoring      Stage = "monitoring"
)

// Index is the stage's position in All (the install order), or -1 for an
// unknown stage.
func (s Stage) Index() int {
	for i, x := range All {
		if x == s {
			return i
		}
	}
	return -1
}

// Parse checks a stage name.
func Parse(s string) (Stage, error) {
	st := Stage(s)
	if st.Index() < 0 {
		return "", fmt.Errorf("unknown stage %q", s)
	}
	return st, nil
}

// Gate is one thing an optional object needs from the live cluster.
type Gate string

// API is the gate "this API resource is served", for example
// API("monitoring.coreos.com", "v1", "servicemonitors").
func API(group, version, resource string) Gate {
	gv := version
	if group != "" {
		gv = group + "/" + version
	}
	return Gate("api:" + gv + "/" + resource)
}

// Gates every renderer uses.
var (
	ServiceMonitorsAPI = API("monitoring.coreos.com", "v1", "servicemonitors")
	PrometheusRulesAPI = API("monitoring.coreos.com", "v1", "prometheusrules")
	SCCAPI             = API("security.openshift.io", "v1", "securitycontextconstraints")
	RouteAPI           = API("route.openshift.io", "v1", "routes")
	// PrometheusesAPI is prometheus-operator's Prometheus resource. No
	// object is gated on it; the monitoring placement reads Prometheus
	// resources when it is served.
	PrometheusesAPI = API("monitoring.coreos.com", "v1", "prometheuses")
	// MonitoringTarget passes when the plan found where monitoring goes
	// (a Prometheus, a user setting or an upstream default account).
	MonitoringTarget Gate = "monitoring:target"
	// GrafanaDashboards passes when a Grafana dashboard sidecar convention
	// is present where monitoring goes: ConfigMaps labelled
	// grafana_dashboard in a monitoring namespace (kube-prometheus-stack's
	// and Grafana's Helm charts ship theirs that way).
	GrafanaDashboards Gate = "monitoring:grafana-dashboards"
	// VirtAPIServing passes when virt-api really answers through the API
	// server; APIServices wait for it.
	VirtAPIServing Gate = "ready:virt-api"
)

// IsAPI reports whether the gate is an API gate and returns its
// group/version and resource.
func (g Gate) IsAPI() (groupVersion, resource string, ok bool) {
	s, found := strings.CutPrefix(string(g), "api:")
	if !found {
		return "", "", false
	}
	i := strings.LastIndex(s, "/")
	if i < 0 {
		return "", "", false
	}
	return s[:i], s[i+1:], true
}

// Set stamps the stage and gates on an object.
func Set(obj client.Object, s Stage, gates ...Gate) {
	ann := obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[vocab.StageAnnotation] = string(s)
	if len(gates) > 0 {
		ann[vocab.GateAnnotation] = joinGates(gates)
	}
	obj.SetAnnotations(ann)
}

func joinGates(gates []Gate) string {
	ss := make([]string, 0, len(gates))
	seen := map[Gate]bool{}
	for _, g := range gates {
		if !seen[g] {
			seen[g] = true
			ss = append(ss, string(g))
		}
	}
	sort.Strings(ss)
	return strings.Join(ss, ",")
}

// Of returns the object's stage, or an error when it has none or an unknown
// one.
func Of(obj client.Object) (Stage, error) {
	v, ok := obj.GetAnnotations()[vocab.StageAnnotation]
	if !ok {
		return "", fmt.Errorf("%s %s has no %s annotation", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), vocab.StageAnnotation)
	}
	return Parse(v)
}

// GatesOf returns the object's gates; none means the object is always
// applied.
func GatesOf(obj client.Object) []Gate {
	v := obj.GetAnnotations()[vocab.GateAnnotation]
	if v == "" {
		return nil
	}
	var out []Gate
	for _, s := range strings.Split(v, ",") {
		out = append(out, Gate(s))
	}
	return out
}
