// Package storagemigration makes a live CustomResourceDefinition ready for
// a new release's version of it when that version stops listing API
// versions objects may still be stored at.
//
// The API server refuses a CRD whose spec.versions lacks a version of its
// status.storedVersions (objects might be stored at it and could no longer
// be read). KubeVirt drops such versions between releases: the instancetype
// and preference CRDs stop serving v1alpha1 and v1alpha2 in v1.6 and drop
// them in v1.7; v1.9.0's VirtualMachineExport CRD drops v1alpha1. Upstream's
// operator does nothing about it (docs/updates.md at v1.9.0 asks operators
// to run kube-storage-version-migrator); its CRD update then fails on a
// cluster that once stored objects at the dropped versions.
//
// Prepare does what the storage version migrator does, for one CRD, before
// the new CRD is applied: it rewrites every object so the API server stores
// it at a version the new CRD keeps, then trims status.storedVersions to
// that version. It never deletes an object, never changes a served version
// or a schema, and stops with a *Blocked error, leaving the CRD as it was,
// when an object cannot be rewritten. Every step can be repeated: a process
// killed halfway picks up where the cluster is.
//
// A kind can hold more objects than one reconcile pass can rewrite (one
// update each, at the client's QPS). The rewrite therefore goes in the API
// server's key order and records how far it got (Progress) on the CRD
// itself, after every list page and whenever its context ends; the next
// Prepare, in the next pass or another process, resumes after the last
// object recorded. The record holds only while the CRD's generation is the
// one it names: a CRD whose spec (and so perhaps its storage version)
// changed meanwhile is migrated again from the first object.
package storagemigration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/faultpoint"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// Dropped returns the versions of the live CRD's status.storedVersions that
// the desired CRD no longer lists: the API server refuses desired while any
// is left. Pure.
func Dropped(live, desired *apiextv1.CustomResourceDefinition) []string {
	var out []string
	for _, v := range live.Status.StoredVersions {
		if !hasVersion(desired, v) {
			out = append(out, v)
		}
	}
	return out
}

// Target is the version the objects are rewritten at: the live CRD's
// storage version when desired keeps it (nothing about the live CRD
// changes), else desired's storage version when the live CRD has it (the
// live CRD's storage is moved there first). ok is false when neither holds:
// no version both CRDs have can hold the objects. Pure.
func Target(live, desired *apiextv1.CustomResourceDefinition) (version string, moveStorage, ok bool) {
	if s := storageVersion(live); s != "" && hasVersion(desired, s) {
		return s, false, true
	}
	if s := storageVersion(desired); s != "" && hasVersion(live, s) {
		return s, true, true
	}
	return "", false, false
}

func hasVersion(crd *apiextv1.CustomResourceDefinition, v string) bool {
	return slices.ContainsFunc(crd.Spec.Versions, func(x apiextv1.CustomResourceDefinitionVersion) bool { return x.Name == v })
}

func storageVersion(crd *apiextv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
}

// servedVersion is a version of the live CRD to read and write the
// objects through: the target when served, else any served one.
func servedVersion(live *apiextv1.CustomResourceDefinition, target string) string {
	served := ""
	for _, v := range live.Spec.Versions {
		if !v.Served {
			continue
		}
		if v.Name == target {
			return v.Name
		}
		if served == "" {
			served = v.Name
		}
	}
	return served
}

// Blocked says why a CRD's objects cannot be migrated: the new CRD must
// not be applied, and only a person can fix it. Nothing was lost.
type Blocked struct {
	CRD string
	// Object is the object that could not be rewritten, "" when the CRD
	// itself is the obstacle.
	Object string
	Reason string
}

func (b *Blocked) Error() string {
	if b.Object == "" {
		return fmt.Sprintf("CRD %s cannot be updated without losing access to stored objects: %s", b.CRD, b.Reason)
	}
	return fmt.Sprintf("CRD %s: object %s cannot be rewritten at a version the new CRD keeps (%s); the CRD stays as it is until it can", b.CRD, b.Object, b.Reason)
}

// Result is what one Prepare did.
type Result struct {
	// Dropped are the stored versions the desired CRD lacks (empty: the
	// CRD needed nothing).
	Dropped []string
	// Version is the version the objects were rewritten at.
	Version string
	// MovedStorage: the live CRD's storage version was moved to Version.
	MovedStorage bool
	// Rewritten counts the objects written again by this Prepare.
	Rewritten int
	// Total counts the objects written again by this migration so far,
	// over every Prepare that worked on it.
	Total int
	// Pending: the context ended before every object was rewritten. What
	// is done is recorded on the CRD (Progress), and the next Prepare
	// resumes after it; status.storedVersions is not trimmed yet.
	Pending bool
}

// Progress is how far the rewrite of a CRD's objects got, as recorded on
// the CRD (annotation vocab.StorageMigrationAnnotation). It holds while the
// CRD's generation is the one recorded: its spec, and so its storage
// version, did not change since, so every object at or before After in the
// API server's key order is stored at Version (rewritten then, or written
// since, which stores it at the same version).
type Progress struct {
	// Version is the version the objects are rewritten at.
	Version string `json:"version"`
	// Generation is the CRD's metadata.generation the rewrite runs under.
	Generation int64 `json:"generation"`
	// After is the key of the last object rewritten ("namespace/name", or
	// "name" for a cluster-scoped kind); "" before the first.
	After string `json:"after,omitempty"`
	// Continue is the continue token of the list page After is on, so a
	// resumed walk starts at that page rather than the first; a hint
	// only, since tokens expire.
	Continue string `json:"continue,omitempty"`
	// Rewritten counts the objects rewritten so far.
	Rewritten int `json:"rewritten,omitempty"`
}

// ProgressOf returns the progress recorded on the live CRD for a rewrite
// at version, or a fresh one (nothing done, the CRD's generation) when
// none is recorded, the record does not parse, or it is for another
// version or generation. Pure.
func ProgressOf(live *apiextv1.CustomResourceDefinition, version string) Progress {
	fresh := Progress{Version: version, Generation: live.Generation}
	raw, ok := live.Annotations[vocab.StorageMigrationAnnotation]
	if !ok {
		return fresh
	}
	var p Progress
	if err := json.Unmarshal([]byte(raw), &p); err != nil || p.Version != version || p.Generation != live.Generation || p.Rewritten < 0 {
		return fresh
	}
	return p
}

// keyOf is the object's key in the order the API server lists objects:
// the storage key's suffix, namespace then name, compared bytewise.
func keyOf(o *unstructured.Unstructured) string {
	if o.GetNamespace() == "" {
		return o.GetName()
	}
	return o.GetNamespace() + "/" + o.GetName()
}

// recordTimeout bounds the write of the progress once the context that
// ran the rewrite has ended.
const recordTimeout = 10 * time.Second

// Migrator prepares CRDs. Client writes (CRDs, the CRD status, the
// objects); Reader reads uncached (APIReader); Metadata reads CRD metadata
// from a cache, so a CRD already found in order is not read in full again
// until its resourceVersion moves.
type Migrator struct {
	Client   client.Client
	Reader   client.Reader
	Metadata client.Reader
	// PageSize is how many objects one list reads; 0 means 250.
	PageSize int64

	mu sync.Mutex
	// fine remembers, by CRD name, the resourceVersion at which the live
	// CRD needed nothing for the desired version names.
	fine map[string]fineAt
}

type fineAt struct {
	resourceVersion string
	versions        string
}

// Prepare makes the live CRD acceptable for desired: it returns at once
// when no CRD of that name exists or when desired keeps every stored
// version; otherwise it rewrites every object at Target (moving the live
// CRD's storage there first when needed), resuming after the progress
// recorded on the CRD, and trims status.storedVersions to it. When ctx
// ends first it records the progress and returns a Pending result, no
// error. A *Blocked error means the objects cannot be migrated; any other
// error is worth a retry.
func (m *Migrator) Prepare(ctx context.Context, desired *apiextv1.CustomResourceDefinition) (Result, error) {
	versions := versionNames(desired)
	if m.Metadata != nil {
		meta := &metav1.PartialObjectMetadata{}
		meta.SetGroupVersionKind(apiextv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
		err := m.Metadata.Get(ctx, client.ObjectKey{Name: desired.Name}, meta)
		if apierrors.IsNotFound(err) {
			return Result{}, nil
		}
		if err == nil && m.isFine(desired.Name, meta.ResourceVersion, versions) {
			return Result{}, nil
		}
	}
	live := &apiextv1.CustomResourceDefinition{}
	if err := m.Reader.Get(ctx, client.ObjectKey{Name: desired.Name}, live); err != nil {
		if apierrors.IsNotFound(err) {
			return Result{}, nil
		}
		return Result{}, fmt.Errorf("read CRD %s: %w", desired.Name, err)
	}
	res := Result{Dropped: Dropped(live, desired)}
	if len(res.Dropped) == 0 {
		// A record left by a migration that completed (or whose
		// release was given up) means nothing any more.
		if err := m.forget(ctx, live); err != nil {
			return res, err
		}
		m.remember(desired.Name, live.ResourceVersion, versions)
		return res, nil
	}
	target, move, ok := Target(live, desired)
	if !ok {
		return res, &Blocked{CRD: live.Name, Reason: fmt.Sprintf(
			"it stores objects at %s, which the new CRD drops, and no version the new CRD keeps (%s) is one the live CRD has (%s) to rewrite them at",
			strings.Join(res.Dropped, ", "), versions, versionNames(live))}
	}
	res.Version, res.MovedStorage = target, move
	if move {
		if err := m.moveStorage(ctx, live, target); err != nil {
			return res, err
		}
		faultpoint.Hit("storage-migration:storage-moved")
	}
	served := servedVersion(live, target)
	if served == "" {
		return res, &Blocked{CRD: live.Name, Reason: "the live CRD serves no version to read its objects through"}
	}
	from := ProgressOf(live, target)
	p, done, err := m.rewriteAll(ctx, live, served, from)
	res.Rewritten, res.Total = p.Rewritten-from.Rewritten, p.Rewritten
	if err != nil {
		return res, err
	}
	if !done {
		res.Pending = true
		return res, nil
	}
	trimmed, err := m.trim(ctx, live.Name, p)
	if err != nil {
		return res, err
	}
	faultpoint.Hit("storage-migration:trimmed")
	return res, m.forget(ctx, trimmed)
}

func versionNames(crd *apiextv1.CustomResourceDefinition) string {
	names := make([]string, 0, len(crd.Spec.Versions))
	for _, v := range crd.Spec.Versions {
		names = append(names, v.Name)
	}
	return strings.Join(names, ",")
}

func (m *Migrator) isFine(name, rv, versions string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	f, ok := m.fine[name]
	return ok && f.resourceVersion == rv && f.versions == versions
}

func (m *Migrator) remember(name, rv, versions string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fine == nil {
		m.fine = map[string]fineAt{}
	}
	m.fine[name] = fineAt{resourceVersion: rv, versions: versions}
}

// moveStorage makes version the live CRD's storage version, changing
// nothing else, so new writes store objects there.
func (m *Migrator) moveStorage(ctx context.Context, live *apiextv1.CustomResourceDefinition, version string) error {
	orig := live.DeepCopy()
	for i := range live.Spec.Versions {
		live.Spec.Versions[i].Storage = live.Spec.Versions[i].Name == version
	}
	patch := client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})
	if err := m.Client.Patch(ctx, live, patch, client.FieldOwner(vocab.FieldManager)); err != nil {
		return fmt.Errorf("CRD %s: move the storage version to %s: %w", live.Name, version, err)
	}
	return nil
}

// rewriteAll writes every object of the CRD after p.After again,
// unchanged, through the served version (the API server stores each at the
// CRD's storage version), in the API server's key order. It records the
// progress on the CRD after every page, and when ctx ends or an object
// cannot be rewritten. It returns the progress and whether every object is
// done; the end of ctx is no error, the progress being kept.
func (m *Migrator) rewriteAll(ctx context.Context, crd *apiextv1.CustomResourceDefinition, served string, p Progress) (Progress, bool, error) {
	gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: served, Kind: crd.Spec.Names.Kind}
	size := m.PageSize
	if size <= 0 {
		size = 250
	}
	saved := p
	save := func(ctx context.Context) error {
		if p == saved {
			return nil
		}
		if err := m.record(ctx, crd.Name, &p); err != nil {
			return err
		}
		saved = p
		faultpoint.Hit("storage-migration:progress-recorded")
		return nil
	}
	// stop records the progress once ctx has ended (the pass's bound, or
	// the migration's share of it), with a bound of its own, and pauses.
	stop := func() (Progress, bool, error) {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
		defer cancel()
		return p, false, save(sctx)
	}
	cont := p.Continue
	// last is the key listed last in this walk, to check the order that
	// resuming by key relies on.
	last := ""
	for {
		if ctx.Err() != nil {
			return stop()
		}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(crd.Spec.Names.Kind + "List"))
		err := m.Reader.List(ctx, list, client.Limit(size), client.Continue(cont))
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return stop()
		case apierrors.IsResourceExpired(err):
			// The continue token outlived the compaction window. The API
			// server offers one that goes on from the same key at the
			// latest state, which is all a migration needs (objects
			// written since are stored at the storage version anyway);
			// without one, start at the first page again, skipping what
			// is done.
			cont, last = inconsistentContinue(err), ""
			continue
		case cont != "" && apierrors.IsBadRequest(err):
			// A recorded token this API server does not take.
			cont, last = "", ""
			continue
		default:
			return p, false, fmt.Errorf("CRD %s: list objects: %w", crd.Name, err)
		}
		page := cont
		for i := range list.Items {
			o := &list.Items[i]
			key := keyOf(o)
			if last != "" && key <= last {
				return p, false, fmt.Errorf("CRD %s: the API server listed %s after %s, not in key order, so what is migrated cannot be told by key", crd.Name, key, last)
			}
			last = key
			if p.After != "" && key <= p.After {
				continue // rewritten in an earlier pass
			}
			if ctx.Err() != nil {
				return stop()
			}
			if err := m.rewrite(ctx, crd.Name, o); err != nil {
				if ctx.Err() != nil {
					return stop()
				}
				// Keep what is done: once the object can be
				// rewritten, the migration goes on from it.
				if _, _, serr := stop(); serr != nil {
					err = errors.Join(err, serr)
				}
				return p, false, err
			}
			p.After, p.Continue = key, page
			p.Rewritten++
			faultpoint.Hit("storage-migration:rewritten")
		}
		cont = list.GetContinue()
		if cont == "" {
			return p, true, nil
		}
		if err := save(ctx); err != nil {
			if ctx.Err() != nil {
				return stop()
			}
			return p, false, err
		}
	}
}

// inconsistentContinue is the continue token an expired-token error
// carries, going on from the same key at the latest state; "" when none.
func inconsistentContinue(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return status.Status().ListMeta.Continue
	}
	return ""
}

// record writes the progress on the CRD, or removes it (nil). Only the
// annotation is patched: the CRD's spec, and so its generation, stays.
func (m *Migrator) record(ctx context.Context, name string, p *Progress) error {
	var value any
	if p != nil {
		b, err := json.Marshal(p)
		if err != nil {
			return err
		}
		value = string(b)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{vocab.StorageMigrationAnnotation: value}}})
	if err != nil {
		return err
	}
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(apiextv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	meta.Name = name
	if err := m.Client.Patch(ctx, meta, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(vocab.StatusFieldManager)); err != nil {
		return fmt.Errorf("CRD %s: record the storage migration's progress: %w", name, err)
	}
	return nil
}

// forget removes a progress record from the live CRD, if it has one.
func (m *Migrator) forget(ctx context.Context, live *apiextv1.CustomResourceDefinition) error {
	if _, ok := live.Annotations[vocab.StorageMigrationAnnotation]; !ok {
		return nil
	}
	return client.IgnoreNotFound(m.record(ctx, live.Name, nil))
}

// rewrite writes one object again as read; a conflict (someone wrote it
// meanwhile, which stored it at the storage version too) or its deletion
// ends the job for it.
func (m *Migrator) rewrite(ctx context.Context, crd string, o *unstructured.Unstructured) error {
	err := m.Client.Update(ctx, o, client.FieldOwner(vocab.FieldManager))
	switch {
	case err == nil, apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return nil
	case apierrors.IsInvalid(err), apierrors.IsForbidden(err), apierrors.IsBadRequest(err):
		// The API server (validation, an admission policy or webhook)
		// refuses the object as it is: only a person can resolve it.
		return &Blocked{CRD: crd, Object: objectName(o), Reason: err.Error()}
	}
	return fmt.Errorf("CRD %s: rewrite %s: %w", crd, objectName(o), err)
}

func objectName(o *unstructured.Unstructured) string {
	if o.GetNamespace() == "" {
		return o.GetName()
	}
	return o.GetNamespace() + "/" + o.GetName()
}

// trim sets status.storedVersions to the one version every object is now
// stored at, and returns the live CRD. The live CRD must still store at
// it, and its spec must not have changed since the rewrite began (its
// storage version could have moved away and back meanwhile): otherwise the
// progress no longer holds, and the next Prepare starts again.
func (m *Migrator) trim(ctx context.Context, name string, p Progress) (*apiextv1.CustomResourceDefinition, error) {
	live := &apiextv1.CustomResourceDefinition{}
	if err := m.Reader.Get(ctx, client.ObjectKey{Name: name}, live); err != nil {
		return nil, fmt.Errorf("read CRD %s: %w", name, err)
	}
	if s := storageVersion(live); s != p.Version {
		return nil, fmt.Errorf("CRD %s: its storage version moved to %s during the migration; starting again", name, s)
	}
	if live.Generation != p.Generation {
		return nil, fmt.Errorf("CRD %s: its spec changed during the migration (generation %d, migrated under %d); starting again", name, live.Generation, p.Generation)
	}
	if slices.Equal(live.Status.StoredVersions, []string{p.Version}) {
		return live, nil
	}
	orig := live.DeepCopy()
	live.Status.StoredVersions = []string{p.Version}
	patch := client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})
	if err := m.Client.Status().Patch(ctx, live, patch, client.FieldOwner(vocab.StatusFieldManager)); err != nil {
		return nil, fmt.Errorf("CRD %s: trim status.storedVersions to %s: %w", name, p.Version, err)
	}
	return live, nil
}

// IsBlocked reports whether err says the objects cannot be migrated.
func IsBlocked(err error) bool {
	var b *Blocked
	return errors.As(err, &b)
}
