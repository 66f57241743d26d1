package diff

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// Result is what differs between operand A and operand B. Added objects are
// in B only, removed ones in A only. Every list is sorted and never nil, so
// the JSON form has a stable shape.
type Result struct {
	Added   []ObjectRef  `json:"added"`
	Removed []ObjectRef  `json:"removed"`
	Changed []ObjectDiff `json:"changed"`
}

// Equal reports whether the operands have the same objects with the same
// fields (after what the options ignore).
func (r Result) Equal() bool {
	return len(r.Added) == 0 && len(r.Removed) == 0 && len(r.Changed) == 0
}

// ObjectRef names an object.
type ObjectRef struct {
	Group     string `json:"group"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

func refOf(k strategy.Key) ObjectRef {
	return ObjectRef{Group: k.Group, Kind: k.Kind, Namespace: k.Namespace, Name: k.Name}
}

// Key returns the strategy key the reference names.
func (r ObjectRef) Key() strategy.Key {
	return strategy.Key{Group: r.Group, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name}
}

func (r ObjectRef) String() string { return r.Key().String() }

// ObjectDiff is an object both operands have, with different fields.
type ObjectDiff struct {
	ObjectRef
	Fields []FieldChange `json:"fields"`
	// Rules compares a PrometheusRule's alerts and recording rules by
	// name; nil for other kinds.
	Rules *RuleDiff `json:"rules,omitempty"`
}

// Change says how a field differs.
type Change string

// Kinds of field changes.
const (
	FieldAdded   Change = "added"   // only B has it
	FieldRemoved Change = "removed" // only A has it
	FieldChanged Change = "changed" // both have it, with different values
)

// FieldChange is one differing field. Path is written as
// spec.template.spec.containers[name=virt-api].image: map keys joined by
// dots (quoted in brackets when not plain identifiers), items of lists whose
// items all have a name (or, in rule lists, an alert or record name) by that
// name, items of other lists by index.
type FieldChange struct {
	Path   string      `json:"path"`
	Change Change      `json:"change"`
	Old    interface{} `json:"old,omitempty"`
	New    interface{} `json:"new,omitempty"`
}

// Options tune the comparison.
type Options struct {
	// IgnoreMetadata ignores labels and annotations altogether: those of
	// the objects and those of the object metadata inside them (pod
	// templates, for example), not the labels of alerts and recording rules.
	IgnoreMetadata bool
	// ShowStamps compares what is ignored by default, in objects and pod
	// templates alike: the version stamps (VersionStamps) and the
	// bookkeeping (virtop's virtop.dev/... annotations and the
	// app.kubernetes.io/managed-by label), which say nothing of what a
	// component does and buried real changes between versions.
	ShowStamps bool
}

// VersionStamps are the labels and annotations that only record which
// version and registry an object was installed for (the
// install-strategy-identifier annotation is always ignored).
var VersionStamps = []string{
	vocab.InstallStrategyVersionAnnotation,
	vocab.InstallStrategyRegistryAnnotation,
	vocab.UpstreamGenerationAnnotation,
	vocab.AppVersionLabel,
}

// bookkeepingPrefix starts virtop's own annotations (stage, gates,
// certificate specs).
const bookkeepingPrefix = vocab.VirtopKeyPrefix

// managerLabel says which operator manages an object: bookkeeping too, and
// on every object, so a comparison of virtop's strategy with upstream's
// would otherwise list every object.
const managerLabel = vocab.ManagedByLabel

// Compare compares two lists of objects with the default options.
func Compare(a, b []client.Object) Result { return Options{}.Compare(a, b) }

// Compare matches objects by strategy.KeyOf and compares them. The
// kubevirt.io/install-strategy-identifier annotation is always ignored: it
// is a hash of the whole deployment config, so it differs whenever anything
// does and says nothing of its own. Server-written metadata (uid,
// resourceVersion, generation, managedFields, creationTimestamp) and status
// are ignored too, so dumps of live objects compare with rendered ones.
func (o Options) Compare(a, b []client.Object) Result {
	am, bm := o.index(a), o.index(b)
	res := Result{Added: []ObjectRef{}, Removed: []ObjectRef{}, Changed: []ObjectDiff{}}
	for _, k := range sortedKeys(am) {
		bv, ok := bm[k]
		if !ok {
			res.Removed = append(res.Removed, refOf(k))
			continue
		}
		av := am[k]
		var fields []FieldChange
		diffValues("", av, bv, &fields)
		if len(fields) == 0 {
			continue
		}
		d := ObjectDiff{ObjectRef: refOf(k), Fields: fields}
		if k.Kind == "PrometheusRule" {
			rd := compareRules(av, bv)
			d.Rules = &rd
		}
		res.Changed = append(res.Changed, d)
	}
	for _, k := range sortedKeys(bm) {
		if _, ok := am[k]; !ok {
			res.Added = append(res.Added, refOf(k))
		}
	}
	return res
}

func sortedKeys(m map[strategy.Key]map[string]interface{}) []strategy.Key {
	keys := make([]strategy.Key, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return lessKey(keys[i], keys[j]) })
	return keys
}

func lessKey(a, b strategy.Key) bool {
	if a.Kind != b.Kind {
		return a.Kind < b.Kind
	}
	if a.Group != b.Group {
		return a.Group < b.Group
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}

// index normalises objects into JSON-shaped maps keyed by strategy key. A
// later object with the same key replaces an earlier one; Load refuses such
// operands.
func (o Options) index(objs []client.Object) map[strategy.Key]map[string]interface{} {
	out := make(map[strategy.Key]map[string]interface{}, len(objs))
	for _, obj := range objs {
		out[strategy.KeyOf(obj)] = o.normalise(obj)
	}
	return out
}

// serverWritten are metadata fields a desired object never carries.
var serverWritten = []string{"creationTimestamp", "resourceVersion", "uid", "generation", "managedFields", "selfLink"}

// normalise turns an object into the map its JSON form decodes to, so that
// typed and unstructured objects of the same content compare equal (every
// number a float64, every absent field absent).
func (o Options) normalise(obj client.Object) map[string]interface{} {
	b, err := json.Marshal(obj)
	if err != nil {
		// Objects come from decoding JSON-compatible documents or from
		// typed renderers; neither can fail to encode.
		panic(fmt.Sprintf("diff: encode %s: %v", strategy.KeyOf(obj), err))
	}
	var m map[string]interface{}
	if err := json.Unmarshal(b, &m); err != nil {
		panic(fmt.Sprintf("diff: decode %s: %v", strategy.KeyOf(obj), err))
	}
	delete(m, "status")
	if o.IgnoreMetadata {
		stripMetadata(m)
	} else if !o.ShowStamps {
		stripStamps(m)
	}
	md, _ := m["metadata"].(map[string]interface{})
	if md == nil {
		return m
	}
	for _, f := range serverWritten {
		delete(md, f)
	}
	if ann, ok := md["annotations"].(map[string]interface{}); ok {
		delete(ann, vocab.InstallStrategyIdentifierAnnotation)
		if len(ann) == 0 {
			delete(md, "annotations")
		}
	}
	return m
}

// stripStamps deletes the version stamps and virtop's bookkeeping from
// every "metadata" map in v.
func stripStamps(v interface{}) {
	switch x := v.(type) {
	case map[string]interface{}:
		if md, ok := x["metadata"].(map[string]interface{}); ok {
			for _, field := range []string{"labels", "annotations"} {
				m, _ := md[field].(map[string]interface{})
				for k := range m {
					if strings.HasPrefix(k, bookkeepingPrefix) || k == managerLabel || slices.Contains(VersionStamps, k) {
						delete(m, k)
					}
				}
				if m != nil && len(m) == 0 {
					delete(md, field)
				}
			}
		}
		for _, c := range x {
			stripStamps(c)
		}
	case []interface{}:
		for _, c := range x {
			stripStamps(c)
		}
	}
}

// stripMetadata deletes the labels and annotations of every "metadata" map
// in v.
func stripMetadata(v interface{}) {
	switch x := v.(type) {
	case map[string]interface{}:
		if md, ok := x["metadata"].(map[string]interface{}); ok {
			delete(md, "labels")
			delete(md, "annotations")
		}
		for _, c := range x {
			stripMetadata(c)
		}
	case []interface{}:
		for _, c := range x {
			stripMetadata(c)
		}
	}
}

// diffValues appends the changes from a to b under path. A nil value (JSON
// null) counts as absent.
func diffValues(path string, a, b interface{}, out *[]FieldChange) {
	switch {
	case a == nil && b == nil:
		return
	case a == nil:
		*out = append(*out, FieldChange{Path: path, Change: FieldAdded, New: b})
		return
	case b == nil:
		*out = append(*out, FieldChange{Path: path, Change: FieldRemoved, Old: a})
		return
	}
	switch av := a.(type) {
	case map[string]interface{}:
		if bv, ok := b.(map[string]interface{}); ok {
			diffMaps(path, av, bv, out)
			return
		}
	case []interface{}:
		if bv, ok := b.([]interface{}); ok {
			diffLists(path, av, bv, out)
			return
		}
	}
	if !reflect.DeepEqual(a, b) {
		*out = append(*out, FieldChange{Path: path, Change: FieldChanged, Old: a, New: b})
	}
}

func diffMaps(path string, a, b map[string]interface{}, out *[]FieldChange) {
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		diffValues(childPath(path, k), a[k], b[k], out)
	}
}

// diffLists matches items by name when both lists are named (see itemKeys),
// else by index.
func diffLists(path string, a, b []interface{}, out *[]FieldChange) {
	ak, aok := itemKeys(a)
	bk, bok := itemKeys(b)
	if !aok || !bok {
		n := max(len(a), len(b))
		for i := 0; i < n; i++ {
			var av, bv interface{}
			if i < len(a) {
				av = a[i]
			}
			if i < len(b) {
				bv = b[i]
			}
			diffValues(path+"["+strconv.Itoa(i)+"]", av, bv, out)
		}
		return
	}
	bIndex := make(map[string]int, len(bk))
	for i, k := range bk {
		bIndex[k] = i
	}
	aSeen := make(map[string]bool, len(ak))
	for i, k := range ak {
		aSeen[k] = true
		var bv interface{}
		if j, ok := bIndex[k]; ok {
			bv = b[j]
		}
		diffValues(path+"["+k+"]", a[i], bv, out)
	}
	for j, k := range bk {
		if !aSeen[k] {
			diffValues(path+"["+k+"]", nil, b[j], out)
		}
	}
}

// itemKeys names the items of a list when every item is an object with a
// non-empty string "name" (name=virt-api), or, as in a rule group's rules,
// with an "alert" or "record" (alert=VirtAPIDown). A name that repeats gets
// its occurrence appended from the second one on (record=x#2). An empty list
// is named trivially. ok is false when items cannot all be named.
func itemKeys(l []interface{}) (keys []string, ok bool) {
	keys = make([]string, 0, len(l))
	count := map[string]int{}
	for _, it := range l {
		m, isMap := it.(map[string]interface{})
		if !isMap {
			return nil, false
		}
		var k string
		for _, field := range []string{"name", "alert", "record"} {
			if s, _ := m[field].(string); s != "" {
				k = field + "=" + quoteSelector(s)
				break
			}
		}
		if k == "" {
			return nil, false
		}
		count[k]++
		if n := count[k]; n > 1 {
			k += "#" + strconv.Itoa(n)
		}
		keys = append(keys, k)
	}
	return keys, true
}

var (
	plainKey      = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)
	plainSelector = regexp.MustCompile(`^[A-Za-z0-9_.:/-]+$`)
)

func childPath(path, key string) string {
	if !plainKey.MatchString(key) {
		return path + "[" + strconv.Quote(key) + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

func quoteSelector(s string) string {
	if plainSelector.MatchString(s) {
		return s
	}
	return strconv.Quote(s)
}

// formatValue writes a value as compact JSON, without escaping <, > and &
// (common in PromQL), or "(absent)".
func formatValue(v interface{}, present bool) string {
	if !present {
		return "(absent)"
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(bytes.TrimRight(buf.Bytes(), "\n"))
}
