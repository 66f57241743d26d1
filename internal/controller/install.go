package controller

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/apply"
	"github.com/virtop-dev/virtop/internal/certs"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/faultpoint"
	"github.com/virtop-dev/virtop/internal/inventory"
	"github.com/virtop-dev/virtop/internal/ownership"
	"github.com/virtop-dev/virtop/internal/plan"
	"github.com/virtop-dev/virtop/internal/stage"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// configure turns the resource into its deployment config and records the
// target in the status. An invalid resource, or a version the upgrade path
// refuses (one minor version at a time, no downgrade across minors), ends
// the pass: what runs keeps running.
func (r *Reconciler) configure(ctx context.Context, s *scope) (bool, error) {
	kv := s.kv
	kv.Status.OperatorVersion = r.OperatorVersion
	setDefaultArchitecture(kv)
	cfg, err := config.FromKubeVirt(kv, r.Settings)
	if err != nil {
		s.invalid = err
		ctrl.LoggerFrom(ctx).Info("KubeVirt resource is invalid; leaving the control plane as it is", "reason", err.Error())
		return false, nil
	}
	if err := r.checkPath(kv.Status.ObservedKubeVirtVersion, cfg.Version); err != nil {
		s.invalid = err
		ctrl.LoggerFrom(ctx).Info("Requested KubeVirt version refused; leaving the control plane as it is", "reason", err.Error())
		return false, nil
	}
	s.cfg = cfg
	kv.Status.TargetKubeVirtVersion = cfg.Version
	kv.Status.TargetKubeVirtRegistry = cfg.Registry
	kv.Status.TargetDeploymentID = cfg.ID
	kv.Status.TargetDeploymentConfig = cfg.JSON()
	return true, nil
}

// setDefaultArchitecture records the cluster's default architecture in
// status.defaultArchitecture, as upstream's operator does on every pass:
// spec.configuration.architectureConfiguration.defaultArchitecture when
// set, else the operator's own architecture, once (a recorded one is kept).
// virt-api and virt-controller read it only from the status; without it
// upstream's VMI validator refuses every VMI that names no architecture.
func setDefaultArchitecture(kv *kvv1.KubeVirt) {
	if ac := kv.Spec.Configuration.ArchitectureConfiguration; ac != nil && ac.DefaultArchitecture != "" {
		kv.Status.DefaultArchitecture = ac.DefaultArchitecture
		return
	}
	if kv.Status.DefaultArchitecture == "" {
		kv.Status.DefaultArchitecture = runtime.GOARCH
	}
}

// resolveStrategy gets the config's strategy; the pass waits while it is
// being produced.
func (r *Reconciler) resolveStrategy(ctx context.Context, s *scope) (bool, error) {
	res, err := r.Strategies.Resolve(ctx, s.kv, s.cfg)
	if err != nil {
		return false, err
	}
	s.strategy = res
	s.requeueAfter = res.RequeueAfter
	if res.ConfigMap != nil {
		addToInventory(s.inv, res.ConfigMap)
	}
	return res.Strategy != nil, nil
}

// plan gathers what the plan needs from the cluster (capabilities, the
// honoured KubeVirtMonitoring, the live certificates) and builds it.
func (r *Reconciler) plan(ctx context.Context, s *scope) (bool, error) {
	caps, err := r.Capabilities.Snapshot(ctx, s.cfg)
	if err != nil {
		return false, fmt.Errorf("reading the cluster's capabilities: %w", err)
	}
	if caps.RegisteredAPIServices, err = r.registeredAPIServices(ctx, s.cfg.Namespace); err != nil {
		return false, err
	}
	if s.tuning, err = r.selectTuning(ctx, s.cfg); err != nil {
		return false, err
	}
	live, err := r.liveCertificates(ctx, s.kv.Namespace, s.strategy.Strategy.Objects)
	if err != nil {
		return false, err
	}
	handler, err := r.liveHandler(ctx, s.kv.Namespace)
	if err != nil {
		return false, err
	}
	keep, err := r.keptTemplates(ctx, s)
	if err != nil {
		return false, err
	}
	s.caps = caps
	p, err := plan.Build(s.strategy.Strategy, s.cfg, caps, plan.Options{Tuning: s.tuning.input, Certificates: live, Adjust: r.AdjustObject, HandlerTLS: handler, KeepTemplates: keep})
	s.tuning.planned(ctx, p)
	if err != nil {
		return false, err
	}
	s.plan = p
	setMonitoringGate(p.Monitoring)
	r.reportCertificates(ctx, s.kv, p.Certificates)
	return true, nil
}

// registeredAPIServices names the APIServices virtop registered for the
// installation in namespace ns: labelled as virtop's, pointing at a
// Service of ns, not being deleted. Once registered (virt-api answered),
// an APIService is kept through an outage of virt-api, also across an
// operator restart: the fact comes from the cluster, not from memory.
func (r *Reconciler) registeredAPIServices(ctx context.Context, ns string) (map[string]bool, error) {
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion("apiregistration.k8s.io/v1")
	list.SetKind("APIServiceList")
	if err := r.Client.List(ctx, list, client.MatchingLabels{vocab.ManagedByLabel: vocab.ManagedByValue}); err != nil {
		return nil, fmt.Errorf("listing virtop's APIServices: %w", err)
	}
	out := map[string]bool{}
	for _, o := range list.Items {
		if svcNS, _, _ := unstructured.NestedString(o.Object, "spec", "service", "namespace"); svcNS == ns && o.GetDeletionTimestamp() == nil {
			out[o.GetName()] = true
		}
	}
	return out, nil
}

// liveHandler reads the live virt-handler DaemonSet for the staged TLS
// rollout (none yet: a fresh install).
func (r *Reconciler) liveHandler(ctx context.Context, ns string) (*plan.HandlerTLSInput, error) {
	ds := &appsv1.DaemonSet{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: vocab.VirtHandler}, ds)
	switch {
	case apierrors.IsNotFound(err):
		return &plan.HandlerTLSInput{}, nil
	case err != nil:
		return nil, fmt.Errorf("reading the virt-handler DaemonSet: %w", err)
	}
	return &plan.HandlerTLSInput{Live: ds}, nil
}

// apply applies the plan stage by stage, in the update order when an
// earlier deployment is being replaced, and says in one event what it
// changed. The pass goes on to prune once everything is ready.
func (r *Reconciler) apply(ctx context.Context, s *scope) (bool, error) {
	order := stage.Install
	if s.updating() {
		order = stage.Update
	}
	// Trust first: the CA bundles of the live webhook configurations and
	// APIServices take the plan's before any certificate Secret is written.
	// The staged apply writes the Secrets early and the webhook
	// configurations only once the workloads are rolled out, and a leaf the
	// new CA signed reaches virt-api (kubelet refreshes its volume) long
	// before a rollout ends: until then, every request the webhooks match
	// would be refused (found on the real node).
	ren, err := certs.RenewalOf(s.plan.Objects)
	if err != nil {
		return false, err
	}
	if err := r.injectBundles(ctx, ren.Bundles); err != nil {
		return false, err
	}
	out, err := r.Applier.ApplyStaged(ctx, s.plan.Objects, order)
	addToInventory(s.inv, out.Applied...)
	// The strategy's ConfigMap comes after the objects, whatever their
	// stage: its encoding is not on the first install's critical path.
	if kerr := r.keepStrategy(ctx, s); kerr != nil {
		err = errors.Join(err, kerr)
	}
	if len(out.Changes) > 0 && r.Recorder != nil {
		changed := make([]string, len(out.Changes))
		for i, c := range out.Changes {
			changed[i] = c.String()
		}
		r.Recorder.Eventf(s.kv, nil, corev1.EventTypeNormal, "Applied", "Apply", "Applied %d objects: %s", len(changed), summarize(changed))
	}
	s.tuning.observe(out.MonitoringReached, out.MonitoringErr)
	if err != nil {
		return false, err
	}
	if h := s.plan.HandlerTLS; h != nil && wroteHandler(out.Changes) && (h.Step == plan.HandlerTLSRollout || h.Step == plan.HandlerTLSEnforce) {
		// virt-handler's DaemonSet was just written at an intermediate
		// step of the staged TLS rollout (the fault suite kills here).
		faultpoint.Hit("handler-tls:" + string(h.Step))
	}
	s.applied = out
	if !out.Ready {
		// Readiness arrives as watch events; the requeue is only a safety
		// net for events missed while disconnected.
		s.requeueAfter = time.Minute
		return false, nil
	}
	s.requeueAfter = lowestNonZero(out.RequeueAfter, monitoringRecheck(s.plan.Monitoring))
	if h := s.plan.HandlerTLS; h != nil && !h.Done() {
		// The next step of virt-handler's TLS rollout follows its pods'
		// readiness (watch events); the requeue is a safety net.
		s.requeueAfter = lowestNonZero(s.requeueAfter, 30*time.Second)
	}
	if c := s.plan.Certificates; c != nil {
		s.requeueAfter = lowestNonZero(s.requeueAfter, c.RequeueAfter(r.now().Time))
	}
	return true, nil
}

// keepStrategy writes the ConfigMap of a strategy rendered in process,
// or writes it again when it was deleted or changed, and records it.
func (r *Reconciler) keepStrategy(ctx context.Context, s *scope) error {
	ref, err := r.Strategies.Keep(ctx, s.kv, s.cfg)
	if ref != nil {
		addToInventory(s.inv, ref)
	}
	return err
}

// wroteHandler reports whether changes hold the virt-handler DaemonSet.
func wroteHandler(changes []apply.Change) bool {
	for _, c := range changes {
		if c.Key.Kind == "DaemonSet" && c.Key.Name == vocab.VirtHandler {
			return true
		}
	}
	return false
}

func summarize(items []string) string {
	if len(items) > 5 {
		return strings.Join(items[:5], ", ") + fmt.Sprintf(" and %d more", len(items)-5)
	}
	return strings.Join(items, ", ")
}

// prune deletes what virtop created and the plan no longer holds, once the
// new state is rolled out; CRDs are never pruned.
func (r *Reconciler) prune(ctx context.Context, s *scope) (bool, error) {
	want := map[strategy.Key]bool{}
	for _, o := range s.plan.Objects {
		want[strategy.KeyOf(o)] = true
	}
	kinds, err := ownership.Get()
	if err != nil {
		return false, err
	}
	// A kind whose API the snapshot saw gone (a removed monitoring stack)
	// has no object to prune: listing it would only ask a removed API, on
	// every pass.
	var listed []schema.GroupVersionKind
	for _, gvk := range kinds.Managed {
		if !apiGone(s.caps, gvk) {
			listed = append(listed, gvk)
		}
	}
	pruned, err := r.Applier.Prune(ctx, listed, s.kv.Namespace, want, s.inv)
	if r.Recorder != nil {
		versions := map[schema.GroupKind]string{}
		for _, gvk := range listed {
			versions[gvk.GroupKind()] = gvk.GroupVersion().String()
		}
		for _, key := range pruned {
			// The object as the related one: the recorder folds events
			// of one key (type, reason, action, regarding, related) into
			// a series that keeps the first note, which left one Pruned
			// event for a pass that deleted several objects.
			related := &corev1.ObjectReference{APIVersion: versions[schema.GroupKind{Group: key.Group, Kind: key.Kind}], Kind: key.Kind, Namespace: key.Namespace, Name: key.Name}
			r.Recorder.Eventf(s.kv, related, corev1.EventTypeNormal, "Pruned", "Delete", "Deleted %s, which the install strategy no longer holds", key)
		}
	}
	if err != nil {
		return false, err
	}
	faultpoint.Hit("pruned")
	return true, nil
}

// seedInventory gives an installation made before the inventory existed
// (a status with none, and a deployment observed) its inventory once:
// the objects virtop's field manager applied, strategy ConfigMaps
// included (Applier.Seed). A fresh install and an installation of
// upstream's being taken over start from an empty inventory: what the
// pass applies is recorded as it goes.
func (r *Reconciler) seedInventory(ctx context.Context, s *scope) (bool, error) {
	if inventory.Recorded(s.kv.Status.Generations) || s.inv.Len() > 0 || s.kv.Status.ObservedDeploymentID == "" || s.adoption.take {
		return true, nil
	}
	kinds, err := ownership.Get()
	if err != nil {
		return false, err
	}
	if err := r.Applier.Seed(ctx, kinds.Managed, s.kv.Namespace, s.inv); err != nil {
		return false, fmt.Errorf("recording what earlier versions of virtop created: %w", err)
	}
	ctrl.LoggerFrom(ctx).Info("Recorded the inventory of an installation made before it existed", "objects", s.inv.Len())
	return true, nil
}

// addToInventory adds live objects to the inventory.
func addToInventory(inv *inventory.Inventory, objs ...*metav1.PartialObjectMetadata) {
	for _, o := range objs {
		inv.Add(o.GroupVersionKind().GroupKind(), o)
	}
}

// record collects the strategy ConfigMaps of older deployments and
// records the rollout in the status.
func (r *Reconciler) record(ctx context.Context, s *scope) (bool, error) {
	kv, cfg := s.kv, s.cfg
	if err := r.Strategies.Collect(ctx, kv.Namespace, cfg.ID, kv.Status.ObservedDeploymentID, s.inv); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Failed to delete old strategy ConfigMaps")
	}
	kv.Status.ObservedKubeVirtVersion = cfg.Version
	kv.Status.ObservedKubeVirtRegistry = cfg.Registry
	kv.Status.ObservedDeploymentID = cfg.ID
	kv.Status.ObservedDeploymentConfig = cfg.JSON()
	return true, nil
}

// apiGone reports whether the snapshot knows gvk's API and saw it not
// served. Only gated APIs are in the snapshot, keyed by resource: the kind's
// lower-case plural, which is what every gated kind virtop manages uses; a
// kind it cannot place counts as served.
func apiGone(caps plan.Capabilities, gvk schema.GroupVersionKind) bool {
	res := strings.ToLower(gvk.Kind)
	if !strings.HasSuffix(res, "s") {
		res += "s"
	}
	served, known := caps.APIs[gvk.GroupVersion().String()+"/"+res]
	return known && !served
}
