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

// Entry is one object an inventory holds.
type Entry struct {
	Namespace, Name string
	UID             types.UID
}

// Unseen returns the objects of kind gk that inv holds, whose UID is not
// in seen and that keep does not name (nil keeps nothing): those Sweep
// would forget. A list from a cache may not have seen an object created
// moments ago; a caller that must not lose one reads these uncached
// first.
func (inv *Inventory) Unseen(gk schema.GroupKind, seen map[types.UID]bool, keep func(namespace, name string) bool) []Entry {
	res := Resource(gk.Kind)
	var out []Entry
	for k, uid := range inv.m {
		if k.group != gk.Group || k.resource != res || seen[uid] || (keep != nil && keep(k.namespace, k.name)) {
			continue
		}
		out = append(out, Entry{Namespace: k.namespace, Name: k.name, UID: uid})
	}
	slices.SortFunc(out, func(a, b Entry) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out
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

// Changes is what one pass did to an inventory: the entries it added (or
// replaced with a newer UID) and those it forgot. A pass whose status
// write is refused (the resource changed since the pass read it) carries
// its Changes onto the current copy, so that an object it created is
// never left unrecorded: the next pass may no longer want that object
// and could not prune it.
type Changes struct {
	added, removed map[key]types.UID
}

// Diff returns the changes that turn before into after.
func Diff(before, after *Inventory) Changes {
	ch := Changes{added: map[key]types.UID{}, removed: map[key]types.UID{}}
	for k, uid := range after.m {
		if before.m[k] != uid {
			ch.added[k] = uid
		}
	}
	for k, uid := range before.m {
		if after.m[k] != uid {
			ch.removed[k] = uid
		}
	}
	return ch
}

// Empty says whether the changes change nothing.
func (ch Changes) Empty() bool { return len(ch.added) == 0 && len(ch.removed) == 0 }

// Apply makes ch's changes in inv: an entry is forgotten only while inv
// still holds it with the UID the pass forgot (a newer one recorded
// since is kept), and an added entry replaces what inv holds.
func (inv *Inventory) Apply(ch Changes) {
	if inv.m == nil {
		inv.m = map[key]types.UID{}
	}
	for k, uid := range ch.removed {
		if inv.m[k] == uid {
			delete(inv.m, k)
		}
	}
	for k, uid := range ch.added {
		inv.m[k] = uid
	}
}
