// Package strategystore is the one home of the install strategy's
// storage and its Job. It resolves the install strategy of a deployment
// config and keeps the strategy ConfigMaps of the install namespace: it
// remembers the strategies it resolved, renders the versions of the
// operator's catalog in process and writes their ConfigMap once the
// pass has applied the strategy's objects (Keep: the encoding is off the
// install's critical path), loads the others from the ConfigMap the
// dump-install-strategy Job writes (driving the Job while it is missing:
// Runner, job.go and runner.go), writes a ConfigMap again when someone
// deleted or changed it, deletes one it cannot read so it is produced
// again, and collects the ConfigMaps of old deployments. The controller
// calls Resolve, Keep and Collect; the Job's pod
// (`virtop dump-install-strategy`) calls RenderForJob and CreateFromJob.
//
// It touches, in the install namespace only, the strategy ConfigMaps, the
// strategy Job and its pods (read), and the signing-key Secret, and records
// the key's fingerprint in the KubeVirt resource's status.
package strategystore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/apply"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/faultpoint"
	"github.com/virtop-dev/virtop/internal/inventory"
	"github.com/virtop-dev/virtop/internal/recent"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/vocab"
)

var generationSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
	Name:    "virtop_strategy_generation_seconds",
	Help:    "Time to render an install strategy in process.",
	Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1},
})

func init() { metrics.Registry.MustRegister(Collectors()...) }

// Collectors are the strategy store's metrics.
func Collectors() []prometheus.Collector { return []prometheus.Collector{generationSeconds} }

// Jobs runs the dump-install-strategy Job for versions outside the
// catalog (Runner).
type Jobs interface {
	// Ensure makes progress towards the strategy ConfigMap of cfg; it is
	// called while that ConfigMap is missing.
	Ensure(ctx context.Context, kv *kvv1.KubeVirt, cfg *config.DeploymentConfig) (State, error)
	// Done is called once the strategy of cfg has loaded from its
	// ConfigMap, to delete finished Jobs.
	Done(ctx context.Context, kv *kvv1.KubeVirt, cfg *config.DeploymentConfig) error
	// Verify says whether the Job wrote cm (its signature checks with the
	// key the operator created for kv); the Store decodes no ConfigMap
	// that fails.
	Verify(ctx context.Context, kv *kvv1.KubeVirt, cm *corev1.ConfigMap) error
}

// Store resolves strategies. Its memory is its own: one Store per
// operator process.
type Store struct {
	// Client reads (cached) and deletes the ConfigMaps.
	Client client.Client
	// Applier writes them, skipping a ConfigMap already as desired.
	Applier *apply.Applier
	// Catalog is what this operator renders in process.
	Catalog release.Catalog
	// Jobs runs the strategy Job; nil makes a version outside the catalog
	// a configuration error.
	Jobs Jobs
	// Recorder emits events on the KubeVirt resource; nil disables them.
	Recorder events.EventRecorder

	strategies recent.Cache[string, *resolved]
}

// kept is how many strategies the Store remembers: the current and the
// previous deployment's.
const kept = 2

type resolved struct {
	strategy *strategy.Strategy
	// rendered: the strategy was rendered in process (a catalog version),
	// so its ConfigMap is this process's to write and keep (Keep); false
	// for one the Job wrote.
	rendered bool
	// configMap is the encoded ConfigMap (Keep encodes it once); stored
	// says it was written once by this process, so a later create means
	// someone deleted it.
	configMap *corev1.ConfigMap
	stored    bool
}

// Resolution is how the strategy of a config stands. Exactly one of
// Strategy, Invalid and Pending is set.
type Resolution struct {
	// Strategy is the resolved strategy.
	Strategy *strategy.Strategy
	// Invalid is a problem with the config only the user can fix (a
	// customizeComponents patch that does not apply, a version no strategy
	// image can render).
	Invalid error
	// Pending says the strategy is being produced (the Job runs); Failed
	// that an attempt failed (it is retried) or why none can run, with
	// FailedReason as its condition reason (empty: StrategyJobFailed).
	// RequeueAfter is when to look again.
	Pending, Failed, FailedReason string
	RequeueAfter                  time.Duration
	// ConfigMap is the strategy's ConfigMap as it is live (kind,
	// namespace, name, UID), for the inventory: written by the Job and
	// found signed; nil when not read this pass. Keep returns the one of
	// a strategy rendered in process.
	ConfigMap *metav1.PartialObjectMetadata
}

// Resolve returns the strategy of cfg for the KubeVirt resource kv: from
// memory, from rendering in process (catalog versions; Keep writes their
// ConfigMap once the pass applied the objects) or from its ConfigMap
// (written by the dump-install-strategy Job for other versions). An error
// is a failure to read or write the cluster.
func (s *Store) Resolve(ctx context.Context, kv *kvv1.KubeVirt, cfg *config.DeploymentConfig) (Resolution, error) {
	if c := s.strategies.Get(cfg.ID); c != nil {
		return Resolution{Strategy: c.strategy}, nil
	}
	if _, ok := s.Catalog.Lookup(cfg.Version); ok {
		return s.render(cfg), nil
	}
	return s.load(ctx, kv, cfg)
}

// Keep writes the ConfigMap of a strategy Resolve rendered in process and
// keeps it applied: the controller calls it after applying the strategy's
// objects, so the encoding and the write of a large ConfigMap do not delay
// the control plane's first objects. A crash between the apply and Keep
// leaves the objects without the ConfigMap; the next process renders the
// strategy again and writes it. It returns the live ConfigMap's identity
// for the inventory; nil (and no write) for a strategy the Job wrote or
// one not resolved.
func (s *Store) Keep(ctx context.Context, kv *kvv1.KubeVirt, cfg *config.DeploymentConfig) (*metav1.PartialObjectMetadata, error) {
	c := s.strategies.Get(cfg.ID)
	if c == nil || !c.rendered {
		return nil, nil
	}
	if c.stored {
		live, err := s.restore(ctx, kv, c.configMap)
		if err != nil {
			return nil, err
		}
		return refOf(live), nil
	}
	faultpoint.Hit("strategy:applied")
	if c.configMap == nil {
		cm, err := c.strategy.ConfigMap(kv.Namespace)
		if err != nil {
			return nil, fmt.Errorf("encoding the install strategy: %w", err)
		}
		c.configMap = cm
	}
	faultpoint.Hit("strategy:before-write")
	res, live, err := s.Applier.Apply(ctx, c.configMap)
	faultpoint.Hit("strategy:after-write")
	if err != nil {
		return nil, fmt.Errorf("storing the install strategy: %w", err)
	}
	c.stored = true
	if res != apply.Unchanged {
		ctrl.LoggerFrom(ctx).Info("Stored install strategy", "configMap", c.configMap.Name, "version", cfg.Version, "objects", len(c.strategy.Objects))
	}
	return refOf(live), nil
}

// restore writes again a ConfigMap this process stored, when someone
// deleted or changed it, and says so.
func (s *Store) restore(ctx context.Context, kv *kvv1.KubeVirt, cm *corev1.ConfigMap) (*unstructured.Unstructured, error) {
	res, live, err := s.Applier.Apply(ctx, cm)
	if err != nil || res == apply.Unchanged {
		return live, err
	}
	// The events' action tells the two cases apart: events of one object,
	// reason and action fold into one series.
	found, action := "changed", "Update"
	if res == apply.Created {
		found, action = "deleted", "Create"
	}
	ctrl.LoggerFrom(ctx).Info("Restored install strategy ConfigMap", "configMap", cm.Name, "found", found)
	if s.Recorder != nil {
		s.Recorder.Eventf(kv, nil, corev1.EventTypeWarning, "StrategyRestored", action, "Install strategy ConfigMap %s was %s; wrote it again", cm.Name, found)
	}
	return live, nil
}

// refOf is the identity of a live strategy ConfigMap, for the inventory.
func refOf(o metav1.Object) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: o.GetNamespace(), Name: o.GetName(), UID: o.GetUID()}}
}

// render renders a catalog version in process and remembers it; Keep
// writes its ConfigMap.
func (s *Store) render(cfg *config.DeploymentConfig) Resolution {
	start := time.Now()
	st, err := strategy.Generate(cfg)
	if err != nil {
		// Rendering is pure: an error comes from the input (for example a
		// customizeComponents patch), which only the user can fix.
		return Resolution{Invalid: err}
	}
	generationSeconds.Observe(time.Since(start).Seconds())
	s.strategies.Put(cfg.ID, &resolved{strategy: st, rendered: true}, kept)
	return Resolution{Strategy: st}
}

// load reads the strategy of a version outside the catalog from the
// ConfigMap the Job writes, and drives the Job while there is none. A
// ConfigMap that cannot be read, or holds another deployment's strategy,
// is deleted so the Job produces it again.
func (s *Store) load(ctx context.Context, kv *kvv1.KubeVirt, cfg *config.DeploymentConfig) (Resolution, error) {
	if s.Jobs == nil {
		// No Job, so no ConfigMap of a version outside the catalog is
		// virtop's: none is read.
		return Resolution{Invalid: fmt.Errorf("spec.imageTag: %w; set the operator's --strategy-image to a virtop image whose catalog has it",
			&release.NotInCatalogError{Version: cfg.Version, Have: s.Catalog.Versions()})}, nil
	}
	cm := &corev1.ConfigMap{}
	err := s.Client.Get(ctx, client.ObjectKey{Namespace: kv.Namespace, Name: strategy.ConfigMapName(cfg.ID)}, cm)
	switch {
	case err == nil:
		st, refused, err := s.trusted(ctx, kv, cfg, cm)
		if err != nil {
			return Resolution{}, err
		}
		if st != nil {
			s.strategies.Put(cfg.ID, &resolved{strategy: st}, kept)
			if err := s.Jobs.Done(ctx, kv, cfg); err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "Failed to delete finished install strategy Jobs")
			}
			return Resolution{Strategy: st, ConfigMap: refOf(cm)}, nil
		}
		ctrl.LoggerFrom(ctx).Info("Deleting install strategy ConfigMap it will not load; it will be produced again", "configMap", cm.Name, "reason", refused.err.Error())
		if s.Recorder != nil {
			s.Recorder.Eventf(kv, nil, corev1.EventTypeWarning, refused.reason, "Delete", "Install strategy ConfigMap %s was not loaded (%v); producing it again", cm.Name, refused.err)
		}
		if err := s.Client.Delete(ctx, cm); client.IgnoreNotFound(err) != nil {
			return Resolution{}, err
		}
	case !apierrors.IsNotFound(err):
		return Resolution{}, err
	}
	state, err := s.Jobs.Ensure(ctx, kv, cfg)
	if err != nil {
		return Resolution{}, err
	}
	return Resolution{Pending: state.Pending, Failed: state.Failed, FailedReason: state.FailedReason, RequeueAfter: state.RequeueAfter}, nil
}

// refusal is why a ConfigMap is not loaded, with the event reason.
type refusal struct {
	reason string
	err    error
}

// trusted returns the strategy of a Job's ConfigMap when it may be
// applied: signed by the Job (checked before anything is decoded),
// readable, of the deployment, and holding only the kinds and namespaces
// a strategy holds. Otherwise it says why: StrategyUntrusted for a
// ConfigMap the Job did not write (or that was changed after),
// StrategyCorrupt for one that does not read as a strategy of cfg. An
// error is a failure to read the key.
func (s *Store) trusted(ctx context.Context, kv *kvv1.KubeVirt, cfg *config.DeploymentConfig, cm *corev1.ConfigMap) (*strategy.Strategy, *refusal, error) {
	if err := s.Jobs.Verify(ctx, kv, cm); err != nil {
		if isAPIError(err) {
			return nil, nil, err
		}
		return nil, &refusal{"StrategyUntrusted", err}, nil
	}
	st, err := strategy.FromConfigMap(cm)
	switch {
	case err != nil:
	case st.ID != cfg.ID:
		err = fmt.Errorf("it is labelled for deployment %s", st.ID)
	default:
		err = strategy.CheckContents(st.Objects, kv.Namespace)
	}
	if err != nil {
		return nil, &refusal{"StrategyCorrupt", err}, nil
	}
	return st, nil, nil
}

// isAPIError says whether err came from the API server (a read that
// failed), not from the check.
func isAPIError(err error) bool {
	var status apierrors.APIStatus
	return errors.As(err, &status)
}

// Collect keeps the strategy ConfigMaps of the current and the previous
// deployment of a namespace and deletes older ones; with no current ID
// (an uninstall) it deletes them all. Only ConfigMaps inv holds (with
// their UID) are virtop's: another, labelled alike, is neither deleted nor
// taken for the previous strategy. Collect forgets in inv what it deleted
// and what is gone.
func (s *Store) Collect(ctx context.Context, namespace, currentID, previousID string, inv *inventory.Inventory) error {
	var list corev1.ConfigMapList
	if err := s.Client.List(ctx, &list, client.InNamespace(namespace), client.HasLabels{vocab.InstallStrategyLabel},
		client.MatchingLabels{vocab.ManagedByLabel: vocab.ManagedByValue}); err != nil {
		return err
	}
	gk := schema.GroupKind{Kind: "ConfigMap"}
	seen := map[types.UID]bool{}
	var owned []corev1.ConfigMap
	for _, cm := range list.Items {
		seen[cm.UID] = true
		if inv.Owns(gk, &cm) {
			owned = append(owned, cm)
		}
	}
	keep := map[string]bool{}
	if currentID != "" {
		keep[strategy.ConfigMapName(currentID)] = true
		if previousID != "" && previousID != currentID {
			keep[strategy.ConfigMapName(previousID)] = true
		} else if newest := newestOther(owned, keep); newest != "" {
			// Once the rollout is recorded the observed ID is the current
			// one; the previous strategy is then the newest other
			// ConfigMap (by creation), kept for a rollback's diff.
			keep[newest] = true
		}
	}
	var errs []error
	for i := range owned {
		cm := &owned[i]
		if keep[cm.Name] {
			continue
		}
		if err := s.Client.Delete(ctx, cm, client.Preconditions{UID: &cm.UID}); client.IgnoreNotFound(err) != nil {
			errs = append(errs, err)
			continue
		}
		inv.Remove(gk, cm)
		ctrl.LoggerFrom(ctx).Info("Deleted old install strategy", "configMap", cm.Name)
	}
	// Only strategy ConfigMaps were listed; the current one stays
	// recorded while the cache has not seen it yet.
	inv.Sweep(gk, seen, func(ns, name string) bool {
		return ns != namespace || !strings.HasPrefix(name, vocab.InstallStrategyConfigMapPrefix) || keep[name]
	})
	return errors.Join(errs...)
}

// newestOther is the name of the newest ConfigMap (by creation, then
// name) not kept already, or "".
func newestOther(items []corev1.ConfigMap, keep map[string]bool) string {
	var newest *corev1.ConfigMap
	for i := range items {
		cm := &items[i]
		if keep[cm.Name] {
			continue
		}
		if newest == nil || newest.CreationTimestamp.Before(&cm.CreationTimestamp) ||
			(newest.CreationTimestamp.Equal(&cm.CreationTimestamp) && cm.Name > newest.Name) {
			newest = cm
		}
	}
	if newest == nil {
		return ""
	}
	return newest.Name
}
