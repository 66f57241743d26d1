// Package plan turns a strategy and a snapshot of the live cluster's
// capabilities into the objects to apply: gates evaluated, replicas and
// PodDisruptionBudgets computed from the cluster. It is pure: the caller
// gathers the snapshot.
package plan

import (
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/monitoring/placement"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/strategy/stage"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// Capabilities is what the live cluster offers, as far as gates go.
type Capabilities struct {
	// APIs holds the served and established API resources, keyed
	// "group/version/resource" (core: "v1/resource").
	APIs map[string]bool
	// Nodes is the number of schedulable nodes, for virt-api's replicas.
	Nodes int
	// VirtAPIServing is true once virt-api really answers through the API
	// server; APIServices wait for it.
	VirtAPIServing bool
	// Monitoring holds the facts the monitoring placement is resolved
	// from (Prometheus resources, namespaces, accounts); nil when they were
	// not gathered, which keeps the objects gated by MonitoringTarget out.
	Monitoring *placement.Input
}

// Open reports whether a gate is open under these capabilities.
func (c Capabilities) Open(g stage.Gate) bool {
	if gv, res, ok := g.IsAPI(); ok {
		return c.APIs[gv+"/"+res]
	}
	switch g {
	case stage.VirtAPIServing:
		return c.VirtAPIServing
	case stage.MonitoringTarget:
		return c.Monitoring != nil
	case stage.GrafanaDashboards:
		return c.Monitoring != nil && len(c.Monitoring.DashboardNamespaces) > 0
	}
	return false
}

// ClosedGate records an object left out and why.
type ClosedGate struct {
	Object strategy.Key
	Gate   stage.Gate
}

// Plan is what to apply now.
type Plan struct {
	// Objects to apply, in stage order.
	Objects []client.Object
	// Closed lists the gated objects left out.
	Closed []ClosedGate
	// Monitoring is where the monitoring objects went and whether a
	// Prometheus selects them; nil when no facts were gathered.
	Monitoring *placement.Placement
}

// Build evaluates the strategy's gates against the capabilities and sizes
// the workloads for the cluster. The strategy is not modified.
func Build(s *strategy.Strategy, cfg *config.DeploymentConfig, caps Capabilities) *Plan {
	p := &Plan{}
	for _, o := range s.Objects {
		if g, open := gatesOpen(o, caps); !open {
			p.Closed = append(p.Closed, ClosedGate{Object: strategy.KeyOf(o), Gate: g})
			continue
		}
		// CRDs go out as they are: nothing after the plan changes one, and
		// copying their schemas on every pass was most of a pass's garbage.
		// Every other object is copied, because the plan (replicas,
		// monitoring placement, tuning) and the controller (certificates,
		// webhook settings) fill them in.
		if _, isCRD := o.(*apiextv1.CustomResourceDefinition); !isCRD {
			o = o.DeepCopyObject().(client.Object)
		}
		if d, ok := o.(*appsv1.Deployment); ok {
			sizeDeployment(d, cfg, caps)
			if pdb := disruptionBudget(d); pdb != nil {
				p.Objects = append(p.Objects, d, pdb)
				continue
			}
		}
		p.Objects = append(p.Objects, o)
	}
	p.Monitoring = PlaceMonitoring(p, caps.Monitoring)
	// A tuning step that rewrites the PrometheusRule's groups follows the
	// placement here.
	return p
}

func gatesOpen(o client.Object, caps Capabilities) (stage.Gate, bool) {
	for _, g := range stage.GatesOf(o) {
		if !caps.Open(g) {
			return g, false
		}
	}
	return "", true
}

// APIReplicas is virt-api's replica count for a cluster of n nodes, as
// upstream computes it: 1 on a single node, else at least 2 and about one
// per 10 nodes.
func APIReplicas(nodes int) int32 {
	if nodes <= 1 {
		return 1
	}
	return int32(max(2, nodes/10))
}

// sizeDeployment sets the replicas the live cluster calls for. Replicas set
// in the KubeVirt resource (spec.infra.replicas) were already rendered and
// win; so does a customizeComponents patch of /spec/replicas.
func sizeDeployment(d *appsv1.Deployment, cfg *config.DeploymentConfig, caps Capabilities) {
	if cfg.Infra.Replicas != nil || patchesReplicas(cfg, d.Name) {
		return
	}
	if d.Name == vocab.VirtAPI {
		d.Spec.Replicas = ptr.To(APIReplicas(caps.Nodes))
	}
}

func patchesReplicas(cfg *config.DeploymentConfig, name string) bool {
	for _, p := range cfg.Customize.Patches {
		if (p.ResourceType == "Deployment" || p.ResourceType == "*") && (p.ResourceName == name || p.ResourceName == "*") &&
			strings.Contains(p.Patch, "replicas") {
			return true
		}
	}
	return false
}

// disruptionBudget returns <name>-pdb with minAvailable replicas-1, or nil
// when that would be 0 (a single replica must stay evictable).
func disruptionBudget(d *appsv1.Deployment) *policyv1.PodDisruptionBudget {
	replicas := ptr.Deref(d.Spec.Replicas, 1)
	if replicas < 2 {
		return nil
	}
	st, _ := stage.Of(d)
	pdb := &policyv1.PodDisruptionBudget{
		TypeMeta: metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        d.Name + "-pdb",
			Namespace:   d.Namespace,
			Labels:      copyMap(d.Labels),
			Annotations: copyMap(d.Annotations),
		},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(replicas - 1)),
			Selector:     d.Spec.Selector.DeepCopy(),
		},
	}
	stage.Set(pdb, st)
	return pdb
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
