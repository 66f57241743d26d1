// Package inventory is virtop's record of the objects it created for an
// installation, in the spirit of Flux's status.inventory: kind, namespace,
// name and UID of each, kept in the KubeVirt resource's
// status.generations (upstream's list of the objects its operator
// created), which only the operator writes. Prune, uninstall, the strategy
// store's garbage collection and `virtop handback` act on an object only
// when the inventory holds it with its UID: a label, an annotation or a
// field manager can be set by anyone who may patch the object, a UID
// cannot, and only the status subresource's writers can add an entry.
// The package is pure: it reads and writes no cluster.
package inventory

import (
	"cmp"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
)

// uidPrefix starts the hash field of an inventory entry: its UID. Other
// entries of status.generations (the strategy signing key's fingerprint,
// upstream's records) are left as they are.
const uidPrefix = "uid:"

type key struct {
	group, resource, namespace, name string
}

// Inventory is a set of objects with their UIDs. The zero value is empty;
// it is not safe for concurrent use.
type Inventory struct {
	m map[key]types.UID
}

// FromStatus reads the inventory entries of status.generations.
func FromStatus(gens []kvv1.GenerationStatus) *Inventory {
	inv := &Inventory{m: map[key]types.UID{}}
	for _, g := range gens {
		if uid, ok := strings.CutPrefix(g.Hash, uidPrefix); ok && uid != "" {
			inv.m[key{g.Group, g.Resource, g.Namespace, g.Name}] = types.UID(uid)
		}
	}
	return inv
}

// Recorded says whether gens holds an inventory at all: an installation
// made by a virtop before the inventory has none.
func Recorded(gens []kvv1.GenerationStatus) bool {
	return slices.ContainsFunc(gens, isEntry)
}

func isEntry(g kvv1.GenerationStatus) bool { return strings.HasPrefix(g.Hash, uidPrefix) }

// Strip returns gens without the inventory's entries (what `virtop
// handback` leaves for upstream's operator).
func Strip(gens []kvv1.GenerationStatus) []kvv1.GenerationStatus {
	out := slices.DeleteFunc(slices.Clone(gens), isEntry)
	if len(out) == 0 {
		return nil
	}
	return out
}

// Into returns gens with its inventory entries replaced by inv's, in a
// stable order (so an unchanged inventory writes nothing): the other
// entries first, as they were, then the inventory sorted. lastGeneration
// is 0, which matches no live object, so upstream's operator, should it
// take the installation back, never takes an entry for "up to date".
func (inv *Inventory) Into(gens []kvv1.GenerationStatus) []kvv1.GenerationStatus {
	out := Strip(gens)
	keys := make([]key, 0, len(inv.m))
	for k := range inv.m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(cmp.Compare(a.group, b.group), cmp.Compare(a.resource, b.resource), cmp.Compare(a.namespace, b.namespace), cmp.Compare(a.name, b.name))
	})
	for _, k := range keys {
		out = append(out, kvv1.GenerationStatus{Group: k.group, Resource: k.resource, Namespace: k.namespace, Name: k.name, Hash: uidPrefix + string(inv.m[k])})
	}
	return out
}

// Len is the number of objects recorded.
func (inv *Inventory) Len() int { return len(inv.m) }

func keyOf(gk schema.GroupKind, namespace, name string) key {
	return key{gk.Group, Resource(gk.Kind), namespace, name}
}

// Owns says whether inv holds o, of kind gk, with o's UID.
func (inv *Inventory) Owns(gk schema.GroupKind, o metav1.Object) bool {
	uid, ok := inv.m[keyOf(gk, o.GetNamespace(), o.GetName())]
	return ok && o.GetUID() != "" && uid == o.GetUID()
}

// Add records o, of kind gk, with its UID (replacing an entry of the same
// name and an older UID).
func (inv *Inventory) Add(gk schema.GroupKind, o metav1.Object) {
	if o.GetUID() == "" {
		return
	}
	if inv.m == nil {
		inv.m = map[key]types.UID{}
	}
	inv.m[keyOf(gk, o.GetNamespace(), o.GetName())] = o.GetUID()
}

// Remove forgets o, of kind gk, if inv holds it with o's UID.
func (inv *Inventory) Remove(gk schema.GroupKind, o metav1.Object) {
	k := keyOf(gk, o.GetNamespace(), o.GetName())
	if uid, ok := inv.m[k]; ok && uid == o.GetUID() {
		delete(inv.m, k)
	}
}

// Sweep forgets the objects of kind gk whose UID is not in seen (a list
// of that kind found them gone) and that keep does not name (nil keeps
// nothing). Only kinds that were listed whole may be swept.
func (inv *Inventory) Sweep(gk schema.GroupKind, seen map[types.UID]bool, keep func(namespace, name string) bool) {
	res := Resource(gk.Kind)
	for k, uid := range inv.m {
		if k.group != gk.Group || k.resource != res || seen[uid] {
			continue
		}
		if keep != nil && keep(k.namespace, k.name) {
			continue
		}
		delete(inv.m, k)
	}
}

// Resource is the resource name of a kind as status.generations spells
// it: lower case, plural (every kind virtop manages forms its plural this
// way).
func Resource(kind string) string {
	r := strings.ToLower(kind)
	switch {
	case strings.HasSuffix(r, "s"):
		return r
	case strings.HasSuffix(r, "y"):
		return strings.TrimSuffix(r, "y") + "ies"
	}
	return r + "s"
}
