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
package storagemigration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
	// Rewritten counts the objects written again.
	Rewritten int
}

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
// CRD's storage there first when needed) and trims status.storedVersions
// to it. A *Blocked error means the objects cannot be migrated; any other
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
	n, err := m.rewriteAll(ctx, live, served)
	res.Rewritten = n
	if err != nil {
		return res, err
	}
	if err := m.trim(ctx, live.Name, target); err != nil {
		return res, err
	}
	faultpoint.Hit("storage-migration:trimmed")
	return res, nil
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

// rewriteAll writes every object of the CRD again, unchanged, through the
// served version: the API server stores each at the CRD's storage version.
func (m *Migrator) rewriteAll(ctx context.Context, crd *apiextv1.CustomResourceDefinition, served string) (int, error) {
	gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: served, Kind: crd.Spec.Names.Kind}
	size := m.PageSize
	if size <= 0 {
		size = 250
	}
	n := 0
	cont := ""
	for {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(crd.Spec.Names.Kind + "List"))
		if err := m.Reader.List(ctx, list, client.Limit(size), client.Continue(cont)); err != nil {
			if apierrors.IsResourceExpired(err) {
				// The continue token outlived the compaction window:
				// start again; rewriting twice is harmless.
				cont = ""
				continue
			}
			return n, fmt.Errorf("CRD %s: list objects: %w", crd.Name, err)
		}
		for i := range list.Items {
			if err := m.rewrite(ctx, crd.Name, &list.Items[i]); err != nil {
				return n, err
			}
			n++
			faultpoint.Hit("storage-migration:rewritten")
		}
		cont = list.GetContinue()
		if cont == "" {
			return n, nil
		}
	}
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
// stored at. The live CRD must still store at it (nothing else moves it).
func (m *Migrator) trim(ctx context.Context, name, version string) error {
	live := &apiextv1.CustomResourceDefinition{}
	if err := m.Reader.Get(ctx, client.ObjectKey{Name: name}, live); err != nil {
		return fmt.Errorf("read CRD %s: %w", name, err)
	}
	if s := storageVersion(live); s != version {
		return fmt.Errorf("CRD %s: its storage version moved to %s during the migration; starting again", name, s)
	}
	if slices.Equal(live.Status.StoredVersions, []string{version}) {
		return nil
	}
	orig := live.DeepCopy()
	live.Status.StoredVersions = []string{version}
	patch := client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})
	if err := m.Client.Status().Patch(ctx, live, patch, client.FieldOwner(vocab.StatusFieldManager)); err != nil {
		return fmt.Errorf("CRD %s: trim status.storedVersions to %s: %w", name, version, err)
	}
	return nil
}

// IsBlocked reports whether err says the objects cannot be migrated.
func IsBlocked(err error) bool {
	var b *Blocked
	return errors.As(err, &b)
}
