// Package controller reconciles the KubeVirt resource. A pass is a list of
// ordered steps over a scope: installing resolves the strategy
// (internal/strategystore), plans it against the live cluster
// (internal/plan), applies it stage by stage and prunes (internal/apply);
// uninstalling checks the data-safety rules (internal/uninstall) and
// removes what virtop created. Each step records what it found in the
// scope; one status patch at the end computes the conditions from that
// (status.go) and writes them.
package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/apply"
	"github.com/virtop-dev/virtop/internal/certs"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/inventory"
	"github.com/virtop-dev/virtop/internal/plan"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/storagemigration"
	"github.com/virtop-dev/virtop/internal/strategystore"
)

// Reconciler reconciles the KubeVirt resource.
type Reconciler struct {
	// Client reads from the cache and writes.
	Client client.Client
	// APIReader reads uncached (CRDs in full, objects outside the cache).
	APIReader client.Reader
	// Settings are the operator's settings that shape the strategy.
	Settings config.Settings
	// Catalog is what this operator renders in process; a tuning is
	// checked against its rules, and a refused upgrade names the next
	// version from it.
	Catalog release.Catalog
	// Strategies resolves the install strategy of a config and keeps the
	// strategy ConfigMaps.
	Strategies *strategystore.Store
	// Applier writes the planned objects.
	Applier *apply.Applier
	// Capabilities reads what the live cluster offers.
	Capabilities CapabilityReader
	// Recorder emits events; nil disables them.
	Recorder events.EventRecorder
	// OperatorVersion is reported in status.operatorVersion.
	OperatorVersion string
	// Certs issues and rotates KubeVirt's CA and serving certificates; nil
	// means a manager on Clock with the default settings.
	Certs *certs.Manager
	// Clock is injectable for tests.
	Clock clock.PassiveClock
	// AdjustObject, when set, is the plan's last step for each object
	// (plan.Options.Adjust).
	AdjustObject func(client.Object) client.Object
	// Migrator rewrites stored objects before a CRD update drops their
	// version; nil means one on Client and APIReader (no metadata cache).
	Migrator *storagemigration.Migrator

	// PassTimeout bounds the steps of one pass; zero means
	// DefaultPassTimeout. A step that has not finished by then ends the
	// pass as failed (Degraded, reason PassTimedOut, naming the step), and
	// the status is still written: one read that can never finish (an
	// informer whose list RBAC refuses) no longer holds every later pass,
	// certificate renewal included, without a word.
	PassTimeout time.Duration
	// NodeCleanupTimeout bounds the uninstall's cleanup of one node; zero
	// means DefaultNodeCleanupTimeout.
	NodeCleanupTimeout time.Duration

	migratorOnce sync.Once
	memory       memorySettler
	// conflicts counts the status writes in a row that met a conflict.
	conflicts atomic.Int32
	// tunings keeps recently rendered monitoring tunings.
	tunings plan.TuningCache
}

// CapabilityReader gathers a snapshot of the live cluster for the plan.
type CapabilityReader interface {
	Snapshot(ctx context.Context, cfg *config.DeploymentConfig) (plan.Capabilities, error)
}

// scope is one pass over the served KubeVirt resource: the resource, and
// what each step found, in the step's own fields. The status is computed
// from them (scope.facts) once the steps are done.
type scope struct {
	// kv is the resource; steps set its status fields and finalizer. orig
	// is the resource as read.
	kv, orig *kvv1.KubeVirt
	// notServed says why no step runs: another resource is served.
	notServed string

	// configure: the deployment config, or why the resource is invalid.
	cfg     *config.DeploymentConfig
	invalid error
	// adopt: an installation of upstream's operator taken over or refused.
	adoption adoption
	// strategy: the strategy, or why there is none yet.
	strategy strategystore.Resolution
	// plan: what to apply; the tuning is reported however the pass ends.
	plan   *plan.Plan
	tuning *tuningPass
	// caps is the snapshot the plan was built from (prune skips the kinds
	// whose API it saw gone).
	caps plan.Capabilities
	// migrate: the storage migration still under way or stopped, which
	// holds the new release back (renew then renews the certificates
	// alone and ends the pass).
	migration migration
	// apply: how the rollout stands.
	applied apply.Outcome
	// uninstall: why it waits for the user; deleted once nothing is left.
	blocked string
	deleted bool

	// err ended the pass; degraded says it is a failed deployment or
	// deletion (Degraded=True), not only a retry.
	err      error
	degraded bool
	// requeueAfter is when to look again without an event.
	requeueAfter time.Duration
	// inv is virtop's inventory of what it created, read from the status
	// when the pass starts; steps add what they apply and forget what
	// they delete, and the status patch writes it back when it changed.
	inv *inventory.Inventory
}

// newScope starts a pass over kv: its status as read, its inventory.
func newScope(kv *kvv1.KubeVirt) *scope {
	return &scope{kv: kv, orig: kv.DeepCopy(), inv: inventory.FromStatus(kv.Status.Generations)}
}

// updating is true while an earlier deployment is being replaced.
func (s *scope) updating() bool {
	observed := s.kv.Status.ObservedDeploymentID
	return s.cfg != nil && observed != "" && observed != s.cfg.ID
}

// A step does one part of a pass. It returns false to end the pass after
// it (waiting for something, or nothing more to do); an error ends it too.
type step struct {
	name string
	// degrades: an error of this step fails the deployment (or deletion)
	// in the status; the others are only retried.
	degrades bool
	run      func(context.Context, *scope) (bool, error)
}

// installSteps install, update and keep the control plane.
func (r *Reconciler) installSteps() []step {
	return []step{
		{"configure", false, r.configure},
		{"adopt", false, r.checkAdoption},
		{"strategy", false, r.resolveStrategy},
		{"finalizer", false, r.ensureFinalizer},
		{"inventory", true, r.seedInventory},
		{"plan", true, r.plan},
		{"takeover", true, r.takeOver},
		{"migrate", true, r.migrateStorage},
		{"renew", true, r.renewWhileMigrating},
		{"apply", true, r.apply},
		{"prune", true, r.prune},
		{"record", false, r.record},
	}
}

// deleteSteps remove it: nothing while workloads exist, webhooks and
// APIServices first, CRDs last and only without user data (or under
// RemoveWorkloads), then what virt-handler left on the nodes, then the
// strategy ConfigMaps; the finalizer goes with the status patch.
func (r *Reconciler) deleteSteps() []step {
	return []step{
		{"finalizer", false, hasFinalizer},
		{"inventory", true, r.seedInventory},
		{"workloads", true, r.checkWorkloads},
		{"remove", true, r.remove},
		{"nodes", true, r.cleanNodes},
		{"strategies", true, r.removeStrategies},
	}
}

// DefaultPassTimeout bounds a pass when Reconciler.PassTimeout is zero. A
// healthy pass takes milliseconds to seconds (docs/benchmarks.md); storage
// migration of many objects is the longest step: it takes at most half of
// what is left of a pass, and resumes in the next pass where it stopped
// (its progress is recorded on the CRD).
const DefaultPassTimeout = 5 * time.Minute

// finishTimeout bounds the status writes that end a pass, timed out or not.
const finishTimeout = 30 * time.Second

// passTimedOut is the error of a step still running when the pass's bound
// passed.
type passTimedOut struct {
	step  string
	after time.Duration
	err   error
}

func (e *passTimedOut) Error() string {
	return fmt.Sprintf("step %q did not finish within %s (retried in the next pass): %v", e.step, e.after, e.err)
}
func (e *passTimedOut) Unwrap() error           { return e.err }
func (e *passTimedOut) ConditionReason() string { return kvv1.ReasonPassTimedOut }

// Reconcile runs one pass for a KubeVirt resource.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, err error) {
	timeout := cmp.Or(r.PassTimeout, DefaultPassTimeout)
	passCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	kv := &kvv1.KubeVirt{}
	if err := r.Client.Get(passCtx, req.NamespacedName, kv); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if kv.Status.Phase == kvv1.KubeVirtPhaseDeleted {
		// The uninstall is done: the resource is served no more and
		// nothing is reported on it (it is not "in the wrong namespace").
		// Another finalizer may hold it; only the KubeVirt finalizer, if
		// an earlier pass failed to remove it, is removed now.
		if kv.DeletionTimestamp == nil {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, r.removeFinalizer(passCtx, kv)
	}
	served, err := r.servedKey(passCtx)
	if err != nil {
		return ctrl.Result{}, err
	}
	s := &scope{kv: kv}
	defer func() {
		// The report gets a bound of its own: the pass's may be spent.
		fctx, cancel := context.WithTimeout(ctx, finishTimeout)
		defer cancel()
		res, err = r.finish(fctx, s)
	}()
	if served != client.ObjectKeyFromObject(kv) {
		s.orig = kv.DeepCopy()
		s.notServed = r.notServed(served)
		return
	}
	setEmulationEnabled(kv)
	s.orig = kv.DeepCopy()
	s.inv = inventory.FromStatus(kv.Status.Generations)
	steps := r.installSteps()
	if kv.DeletionTimestamp != nil {
		steps = r.deleteSteps()
	}
	for _, st := range steps {
		more, serr := st.run(passCtx, s)
		if errors.Is(passCtx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
			// A pass that cannot finish degrades whatever the step, also
			// one that stopped on the bound without saying so.
			s.err, s.degraded = &passTimedOut{step: st.name, after: timeout, err: cmp.Or(serr, passCtx.Err())}, true
			ctrl.LoggerFrom(ctx).Error(s.err, "Pass timed out", "step", st.name)
			return
		}
		if serr != nil {
			s.err, s.degraded = serr, st.degrades
			ctrl.LoggerFrom(ctx).V(1).Info("Step failed", "step", st.name, "reason", serr.Error())
			return
		}
		if !more {
			return
		}
	}
	return
}

// finish reports the pass: the KubeVirtMonitoring status, then the
// KubeVirt status (one patch), and for a finished uninstall the
// finalizer.
func (r *Reconciler) finish(ctx context.Context, s *scope) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	err := s.err
	if serr := r.reportTuning(ctx, s.tuning); serr != nil {
		log.Error(serr, "Failed to write the KubeVirtMonitoring status")
		err = errors.Join(err, serr)
	}
	f := s.facts()
	if werr := r.patchStatus(ctx, s, f); werr != nil {
		if isConflict(werr) {
			// What the pass created or deleted must not be lost with
			// the rest of its report: the next pass may no longer want
			// an object this one created, and prunes only what the
			// inventory holds.
			if ierr := r.carryInventory(ctx, s); ierr != nil {
				log.Error(ierr, "Failed to record the objects this pass created or deleted")
				return ctrl.Result{}, errors.Join(err, werr, ierr)
			}
		}
		if isConflict(werr) && err == nil {
			// The resource changed since this pass read it (the cache is
			// behind a write of ours, or the user edited it): routine, not
			// an error. Run again on the current copy.
			// Each conflict in a row doubles the wait: a writer that
			// keeps changing the resource does not get a pass every 200 ms.
			wait := conflictDelay(int(r.conflicts.Add(1)))
			log.V(1).Info("The KubeVirt resource changed during the pass; running again", "reason", werr.Error(), "after", wait.String())
			return ctrl.Result{RequeueAfter: wait}, nil
		}
		log.Error(werr, "Failed to write status")
		return ctrl.Result{}, errors.Join(err, werr)
	}
	r.conflicts.Store(0)
	switch {
	case s.deleted:
		if ferr := r.removeFinalizer(ctx, s.kv); ferr != nil {
			return ctrl.Result{}, ferr
		}
		// No KubeVirt resource configures emulation any more.
		emulationEnabled.Set(0)
		log.Info("Removed the KubeVirt control plane")
		return ctrl.Result{}, err
	case s.notServed == "":
		r.memory.observe(err == nil && f.Settled())
	}
	requeue := s.requeueAfter
	if s.plan != nil && err == nil {
		// An object waits for a probe (virt-api answering): no event
		// would start the pass that applies it.
		requeue = lowestNonZero(requeue, s.plan.RecheckAfter)
	}
	return ctrl.Result{RequeueAfter: requeue}, err
}

// conflictDelay is the wait before the pass after the nth status
// conflict in a row: 200 ms, doubling, at most 10 s.
func conflictDelay(n int) time.Duration {
	d := 200 * time.Millisecond
	for i := 1; i < n && d < 10*time.Second; i++ {
		d *= 2
	}
	return min(d, 10*time.Second)
}

// servedKey is the KubeVirt resource this operator serves: the oldest one
// in the operator's namespace.
func (r *Reconciler) servedKey(ctx context.Context) (client.ObjectKey, error) {
	var list kvv1.KubeVirtList
	if err := r.Client.List(ctx, &list, client.InNamespace(r.Settings.Namespace)); err != nil {
		return client.ObjectKey{}, err
	}
	var live []kvv1.KubeVirt
	for _, kv := range list.Items {
		if kv.Status.Phase != kvv1.KubeVirtPhaseDeleted {
			live = append(live, kv)
		}
	}
	if len(live) == 0 {
		return client.ObjectKey{}, nil
	}
	sort.Slice(live, func(i, j int) bool {
		a, b := live[i], live[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
	return client.ObjectKeyFromObject(&live[0]), nil
}

// notServed says why a resource other than the served one is left alone.
func (r *Reconciler) notServed(served client.ObjectKey) string {
	if served.Name == "" {
		return fmt.Sprintf("A KubeVirt resource must live in the operator's namespace %s", r.Settings.Namespace)
	}
	return fmt.Sprintf("This operator serves only one KubeVirt resource, in namespace %s; it serves %s", r.Settings.Namespace, served)
}

func (r *Reconciler) now() metav1.Time {
	if r.Clock == nil {
		return metav1.Now()
	}
	return metav1.NewTime(r.Clock.Now())
}

// lowestNonZero returns the smaller positive duration.
func lowestNonZero(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	}
	return min(a, b)
}
