// Package plan is the one producer of the objects virtop applies: it turns
// a strategy and a snapshot of the live cluster into the finished desired
// objects — gates evaluated, virt-api's replicas and the
// PodDisruptionBudgets sized for the cluster, the monitoring objects placed
// and tuned, certificate data filled, the install-namespace label stamped,
// the caller's last adjustment made, the pod templates of a taken-over
// installation left out while they stay upstream's (Options.KeepTemplates).
// Nothing rewrites the list after Build.
// It is pure: the caller gathers the snapshot, the live certificates and
// the honoured KubeVirtMonitoring.
package plan

import (
	"fmt"
	"maps"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/certs"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/monitoring/placement"
	"github.com/virtop-dev/virtop/internal/stage"
	"github.com/virtop-dev/virtop/internal/strategy"
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
	// server; an APIService's first creation waits for it.
	VirtAPIServing bool
	// VirtAPIRecheck is how long until virt-api is probed again (zero: it
	// is not probed). A plan whose objects wait for virt-api asks for a
	// pass then (Plan.RecheckAfter): no watch event tells that virt-api
	// started answering.
	VirtAPIRecheck time.Duration
	// RegisteredAPIServices names the APIServices virtop has registered
	// for this installation (they exist and are labelled as virtop's).
	// Registered once virt-api answered, they stay while it does not (a
	// crash loop, a drain, a rollout replacing every virt-api pod), as
	// upstream's operator keeps them: the VirtAPIServing gate holds back
	// only an APIService's first creation. Read from the cluster, so an
	// operator restart during an outage keeps them too.
	RegisteredAPIServices map[string]bool
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

// openFor reports whether a gate of o is open: Open, except that an
// APIService already registered does not wait for virt-api again.
func (c Capabilities) openFor(o client.Object, g stage.Gate) bool {
	if g == stage.VirtAPIServing && o.GetObjectKind().GroupVersionKind().Kind == "APIService" && c.RegisteredAPIServices[o.GetName()] {
		return true
	}
	return c.Open(g)
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
	// RecheckAfter is when to plan again without an event, because an
	// object waits for a gate that only a probe opens (virt-api
	// answering: Capabilities.VirtAPIRecheck); zero when none does.
	RecheckAfter time.Duration
	// Monitoring is where the monitoring objects went and whether a
	// Prometheus selects them; nil when no facts were gathered.
	Monitoring *placement.Placement
	// Tuning is what the tuning step did; nil when Options.Tuning was.
	Tuning *TuningOutcome
	// Certificates is what the certificate step decided; nil when
	// Options.Certificates was.
	Certificates *certs.Report
	// HandlerTLS is the step of virt-handler's staged TLS rollout; nil
	// when Options.HandlerTLS was.
	HandlerTLS *HandlerTLS
	// KeptTemplates are the workloads planned without their pod template
	// (Options.KeepTemplates), in plan order.
	KeptTemplates []KeptTemplate
}

// KeptTemplate is a workload whose live pod template stays as it is.
type KeptTemplate struct {
	Key strategy.Key
	// Rendered is the workload as virtop renders it, pod template
	// included: what the next change of the deployment applies.
	Rendered client.Object
}

// Options are the inputs of a plan beyond the strategy, its config and
// the capabilities. The zero value plans what an offline rendering shows:
// the monitoring objects untuned, the certificate data placeholders.
type Options struct {
	// Tuning is the KubeVirtMonitoring honoured in the install namespace;
	// nil leaves the monitoring objects as the strategy renders them.
	Tuning *Tuning
	// Certificates, when set, fills the certificate Secrets, CA
	// ConfigMaps, webhooks, APIServices and Routes (certs.Manager.Fill):
	// live certificates kept while valid, others issued.
	Certificates *Certificates
	// Adjust, when set, is applied to each planned object last (for
	// example to point the operator's webhook at a host process by URL);
	// it must be pure and return the object itself or a changed copy.
	Adjust func(client.Object) client.Object
	// HandlerTLS, when set, stages virt-handler's TLS rollout against the
	// live DaemonSet (StageHandlerTLS); unset, virt-handler stays as the
	// strategy renders it (the form upstream's strategy holds).
	HandlerTLS *HandlerTLSInput
	// KeepTemplates names the workloads (Deployments, DaemonSets) whose
	// live pod template stays as it is: an installation taken over from
	// upstream's operator keeps upstream's templates until the next change
	// of its deployment (adopt.KeepsTemplate), so the takeover rolls
	// nothing. Their planned objects leave spec.template out.
	KeepTemplates map[strategy.Key]bool
}

// HandlerTLSInput is the input of the staged virt-handler TLS rollout.
type HandlerTLSInput struct {
	// Live is the virt-handler DaemonSet on the cluster, nil when there is
	// none (a fresh install).
	Live *appsv1.DaemonSet
}

// Certificates are the inputs of the certificate step.
type Certificates struct {
	// Manager issues and rotates; nil means one with the real clock.
	Manager *certs.Manager
	// Live are the install namespace's Secrets.
	Live certs.Live
}

// Build plans a strategy: it evaluates the gates against the
// capabilities, sizes the workloads for the cluster, places and tunes the
// monitoring objects, fills the certificate data and labels every
// namespaced object with the install namespace. The strategy is not
// modified. Only the certificate step fails (the plan is then returned as
// far as it got, for reports, never to apply): a tuning that does not
// apply leaves the monitoring objects untuned and says why in Plan.Tuning.
func Build(s *strategy.Strategy, cfg *config.DeploymentConfig, caps Capabilities, opts Options) (*Plan, error) {
	p := &Plan{}
	for _, o := range s.Objects {
		if g, open := gatesOpen(o, caps); !open {
			p.Closed = append(p.Closed, ClosedGate{Object: strategy.KeyOf(o), Gate: g})
			if g == stage.VirtAPIServing {
				p.RecheckAfter = caps.VirtAPIRecheck
			}
			continue
		}
		// CRDs go out as they are: no step changes one, and copying their
		// schemas on every pass was most of a pass's garbage. Every other
		// object is copied, because the steps below (replicas, monitoring
		// placement, tuning, certificates, labels, the adjustment) fill
		// them in.
		if _, isCRD := o.(*apiextv1.CustomResourceDefinition); !isCRD {
			o = o.DeepCopyObject().(client.Object)
		}
		if ds, ok := o.(*appsv1.DaemonSet); ok && ds.Name == vocab.VirtHandler && opts.HandlerTLS != nil {
			h := StageHandlerTLS(ds, opts.HandlerTLS.Live)
			p.HandlerTLS = &h
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
	if opts.Tuning != nil {
		p.Objects, p.Tuning = Tune(p.Objects, cfg, opts.Tuning)
		p.Tuning.Waiting = tuningWaits(p.Closed)
	}
	if c := opts.Certificates; c != nil {
		m := c.Manager
		if m == nil {
			m = &certs.Manager{}
		}
		objs, rep, err := m.Fill(p.Objects, c.Live, cfg.Certificates)
		if err != nil {
			// The plan as far as it got, for the tuning's report; its
			// objects are not to be applied.
			return p, fmt.Errorf("certificates: %w", err)
		}
		p.Objects, p.Certificates = objs, rep
	}
	for i, o := range p.Objects {
		if opts.Adjust != nil {
			o = opts.Adjust(o)
		}
		if o.GetNamespace() != "" {
			labels := o.GetLabels()
			if labels == nil {
				labels = map[string]string{}
			}
			labels[vocab.InstallNamespaceLabel] = cfg.Namespace
			o.SetLabels(labels)
		}
		if k := strategy.KeyOf(o); opts.KeepTemplates[k] {
			u, err := withoutTemplate(o)
			if err != nil {
				return p, err
			}
			p.KeptTemplates = append(p.KeptTemplates, KeptTemplate{Key: k, Rendered: o})
			o = u
		}
		p.Objects[i] = o
	}
	return p, nil
}

// withoutTemplate is a workload without its pod template: applied, it
// leaves the live template as it is (its fields are another manager's).
func withoutTemplate(o client.Object) (client.Object, error) {
	switch o.(type) {
	case *appsv1.Deployment, *appsv1.DaemonSet:
	default:
		return o, nil
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", strategy.KeyOf(o), err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(o.GetObjectKind().GroupVersionKind())
	unstructured.RemoveNestedField(u.Object, "spec", "template")
	return u, nil
}

func gatesOpen(o client.Object, caps Capabilities) (stage.Gate, bool) {
	for _, g := range stage.GatesOf(o) {
		if !caps.openFor(o, g) {
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
// win; so do those a customizeComponents patch set, which the strategy
// marks (strategy.Pinned).
func sizeDeployment(d *appsv1.Deployment, cfg *config.DeploymentConfig, caps Capabilities) {
	if cfg.Infra.Replicas != nil || strategy.Pinned(d, "spec.replicas") {
		return
	}
	if d.Name == vocab.VirtAPI {
		d.Spec.Replicas = ptr.To(APIReplicas(caps.Nodes))
	}
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
			Labels:      maps.Clone(d.Labels),
			Annotations: maps.Clone(d.Annotations),
		},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(replicas - 1)),
			Selector:     d.Spec.Selector.DeepCopy(),
		},
	}
	stage.Set(pdb, st)
	return pdb
}
