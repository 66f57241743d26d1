// Package apply writes desired objects to the cluster with server-side
// apply under one field manager, skipping objects that are already as
// desired, and judges their readiness from their status (apply.go,
// staged.go, readiness.go). It also deletes what virtop created: what the
// strategy no longer holds, and everything at uninstall (prune.go), only
// what the inventory records, which Seed fills once for an installation
// made before it (seed.go).
package apply

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// Result says what applying one object did.
type Result string

const (
	Unchanged  Result = "unchanged"
	Created    Result = "created"
	Configured Result = "configured"
)

// Applier applies objects. It remembers, per object, the hash of what it
// last applied and the resourceVersion the server returned, so an object
// that neither virtop nor anyone else changed since is skipped without a
// request. After a restart the memory is empty; then an object that carries
// the same applied hash and still holds every desired field is skipped too.
type Applier struct {
	// Client writes (and reads live objects; a cached client keeps steady
	// state free of requests).
	Client client.Client
	// Reader reads uncached (the cache drops managedFields): Seed reads
	// each object's managers. Nil means Client.
	Reader client.Reader
	// InstallNamespaceOnly are the namespaced kinds virtop applies in the
	// install namespace only (ownership.Kinds.InstallNamespaceOnly): prune
	// and uninstall list them there, where the operator's cache and Role
	// cover them. Others, and all kinds when nil, are listed cluster-wide.
	InstallNamespaceOnly map[schema.GroupVersionKind]bool

	mu      sync.Mutex
	applied map[strategy.Key]record
	// crdHashes remembers the hash of each CRD object applied (see Apply).
	crdHashes map[*apiextv1.CustomResourceDefinition]string
	// foreign remembers the objects appliedByVirtop found virtop never
	// applied (UID -> resourceVersion then), so a pass does not read their
	// managers again while they are unchanged.
	foreign map[types.UID]string
	// leftAlone remembers the labelled objects prune and uninstall left
	// alone (UID -> resourceVersion then), logged once per version.
	leftAlone map[types.UID]string
}

// reader reads uncached: Reader, or Client when it is nil.
func (a *Applier) reader() client.Reader {
	if a.Reader == nil {
		return a.Client
	}
	return a.Reader
}

type record struct {
	hash            string
	resourceVersion string
}

// New returns an Applier.
func New(c client.Client) *Applier {
	return &Applier{Client: c, applied: map[strategy.Key]record{}, foreign: map[types.UID]string{}}
}

// Desired converts a typed object to the unstructured form that is applied:
// no status, no creationTimestamp.
func Desired(o client.Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return nil, fmt.Errorf("convert %s: %w", strategy.KeyOf(o), err)
	}
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]interface{}); ok {
		delete(md, "creationTimestamp")
		delete(md, "resourceVersion")
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(o.GetObjectKind().GroupVersionKind())
	return u, nil
}

func hashOf(u *unstructured.Unstructured) string {
	b, _ := json.Marshal(u.Object)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}

// desiredWithHash is Desired with the hash annotation set.
func (a *Applier) desiredWithHash(o client.Object) (*unstructured.Unstructured, error) {
	desired, err := Desired(o)
	if err != nil {
		return nil, err
	}
	ann := desired.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[vocab.AppliedHashAnnotation] = hashOf(desired)
	desired.SetAnnotations(ann)
	return desired, nil
}

// crdHash returns the remembered hash of a CRD object ("" if none). The
// memo holds at most the CRDs of a few strategies; it is dropped whole
// when it grows past that.
func (a *Applier) crdHash(crd *apiextv1.CustomResourceDefinition) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.crdHashes == nil || len(a.crdHashes) > 64 {
		a.crdHashes = map[*apiextv1.CustomResourceDefinition]string{}
	}
	return a.crdHashes[crd]
}

// Apply makes the live object hold the desired fields. It returns what it
// did and the live object after it.
func (a *Applier) Apply(ctx context.Context, o client.Object) (Result, *unstructured.Unstructured, error) {
	key := strategy.KeyOf(o)
	gvk := o.GetObjectKind().GroupVersionKind()
	// A CRD comes straight from the strategy (plan.Build does not copy
	// one) and never changes: its hash is computed once, and a pass that
	// finds it as applied converts nothing (the conversion of a CRD's
	// schemas was most of a steady pass's garbage).
	crd, isCRD := o.(*apiextv1.CustomResourceDefinition)
	var desired *unstructured.Unstructured
	hash := ""
	if isCRD {
		hash = a.crdHash(crd)
	}
	if hash == "" {
		var err error
		if desired, err = a.desiredWithHash(o); err != nil {
			return "", nil, err
		}
		hash = desired.GetAnnotations()[vocab.AppliedHashAnnotation]
		if isCRD {
			a.mu.Lock()
			a.crdHashes[crd] = hash
			a.mu.Unlock()
		}
	}
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(gvk)
	err := a.Client.Get(ctx, client.ObjectKeyFromObject(o), live)
	switch {
	case apierrors.IsNotFound(err):
		live = nil
	case err != nil:
		return "", nil, fmt.Errorf("get %s: %w", key, err)
	}
	if live != nil {
		a.mu.Lock()
		rec, ok := a.applied[key]
		a.mu.Unlock()
		if ok && rec.hash == hash && rec.resourceVersion == live.GetResourceVersion() {
			return Unchanged, live, nil
		}
	}
	if desired == nil {
		if desired, err = a.desiredWithHash(o); err != nil {
			return "", nil, err
		}
	}
	if live != nil {
		if err := ExpandCRD(live); err != nil {
			return "", nil, err
		}
		if live.GetAnnotations()[vocab.AppliedHashAnnotation] == hash && Contains(live.Object, desired.Object) {
			a.remember(key, hash, live.GetResourceVersion())
			return Unchanged, live, nil
		}
	}
	result := Configured
	if live == nil {
		result = Created
	}
	out := desired.DeepCopy()
	if err := a.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(out), client.FieldOwner(vocab.FieldManager), client.ForceOwnership); err != nil {
		return "", nil, fmt.Errorf("apply %s: %w", key, err)
	}
	a.remember(key, hash, out.GetResourceVersion())
	return result, out, nil
}

func (a *Applier) remember(key strategy.Key, hash, rv string) {
	a.mu.Lock()
	a.applied[key] = record{hash: hash, resourceVersion: rv}
	a.mu.Unlock()
}

// Forget drops what the applier remembers of an object (after deleting it).
func (a *Applier) Forget(key strategy.Key) {
	a.mu.Lock()
	delete(a.applied, key)
	a.mu.Unlock()
}

// Contains reports whether live holds every field of desired with the same
// value. Maps may hold more keys (server defaults, others' fields); lists
// must have the same length and each element must contain the desired one.
// Numbers compare by value whatever their Go type.
func Contains(live, desired interface{}) bool {
	switch d := desired.(type) {
	case map[string]interface{}:
		l, ok := live.(map[string]interface{})
		if !ok {
			return len(d) == 0 && live == nil
		}
		for k, dv := range d {
			lv, present := l[k]
			if !present {
				if isEmpty(dv) {
					continue
				}
				return false
			}
			if !Contains(lv, dv) {
				return false
			}
		}
		return true
	case []interface{}:
		l, ok := live.([]interface{})
		if !ok {
			return len(d) == 0 && live == nil
		}
		if len(l) != len(d) {
			return false
		}
		for i := range d {
			if !Contains(l[i], d[i]) {
				return false
			}
		}
		return true
	case nil:
		return true
	default:
		if ln, ok := number(live); ok {
			if dn, ok := number(desired); ok {
				return ln == dn
			}
		}
		return reflect.DeepEqual(live, desired)
	}
}

func isEmpty(v interface{}) bool {
	switch x := v.(type) {
	case nil:
		return true
	case map[string]interface{}:
		return len(x) == 0
	case []interface{}:
		return len(x) == 0
	case string:
		return x == ""
	case bool:
		return !x
	}
	if n, ok := number(v); ok {
		return n == 0
	}
	return false
}

func number(v interface{}) (float64, bool) {
	switch x := v.(type) {
	case int64:
		return float64(x), true
	case int32:
		return float64(x), true
	case int:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}
