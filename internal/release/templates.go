package release

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"sync"

	jsonpatch "github.com/evanphx/json-patch/v5"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/virtop-dev/virtop/internal/scheme"
)

// Key names a template: kind, namespace (a token for namespaced objects)
// and name.
type Key struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

func (k Key) String() string {
	if k.Namespace == "" {
		return k.Kind + "/" + k.Name
	}
	return k.Kind + "/" + k.Namespace + "/" + k.Name
}

// Template is one object of a release, with tokens, as JSON. It is shared:
// callers decode it into a fresh object and never change JSON.
type Template struct {
	Key        Key
	APIVersion string
	JSON       []byte
}

// Change is one entry of changed.yaml or of a variant: how an object
// changes. Exactly one of Strategic (a strategic merge patch, for kinds with
// Go types), Merge (a JSON merge patch), JSON (a JSON patch, RFC 6902, whose
// "add" puts a list item exactly where upstream puts it) and Replace (the
// whole object) is set.
type Change struct {
	Key       `json:",inline"`
	Strategic json.RawMessage `json:"strategic,omitempty"`
	Merge     json.RawMessage `json:"merge,omitempty"`
	JSON      json.RawMessage `json:"json,omitempty"`
	Replace   json.RawMessage `json:"replace,omitempty"`
}

// File names in a release's data directory.
const (
	ObjectsFile = "objects.yaml"
	AddedFile   = "added.yaml"
	ChangedFile = "changed.yaml"
	RemovedFile = "removed.yaml"
	SchemasDir  = "schemas"
)

// Templates returns the release's objects (without instancetypes and
// monitoring, which are rendered otherwise), in the data's order. The
// slice and its templates are shared and must not be modified.
func (r *Release) Templates() ([]*Template, error) {
	return r.objects.get(r.resolveTemplates)
}

func (r *Release) dir() string { return path.Join("data", r.Version) }

func (r *Release) resolveTemplates() ([]*Template, error) {
	if r.Base == "" {
		raw, err := dataFS.ReadFile(path.Join(r.dir(), ObjectsFile))
		if err != nil {
			return nil, err
		}
		return ParseTemplates(raw)
	}
	base, _ := Lookup(r.Base)
	bt, err := base.Templates()
	if err != nil {
		return nil, fmt.Errorf("base %s: %w", r.Base, err)
	}
	d, err := r.readDelta()
	if err != nil {
		return nil, err
	}
	out, err := ApplyDelta(bt, d)
	if err != nil {
		return nil, fmt.Errorf("release %s: %w", r.Version, err)
	}
	return out, nil
}

// Delta is what a derived release changes in its base's objects.
type Delta struct {
	Added   []*Template
	Changed []Change
	Removed []Key
}

func (r *Release) readDelta() (*Delta, error) {
	d := &Delta{}
	read := func(name string) ([]byte, error) {
		b, err := dataFS.ReadFile(path.Join(r.dir(), name))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return b, err
	}
	raw, err := read(AddedFile)
	if err != nil {
		return nil, err
	}
	if d.Added, err = ParseTemplates(raw); err != nil {
		return nil, fmt.Errorf("%s: %w", AddedFile, err)
	}
	raw, err = read(ChangedFile)
	if err != nil {
		return nil, err
	}
	docs, err := splitYAML(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ChangedFile, err)
	}
	for _, doc := range docs {
		var c Change
		if err := json.Unmarshal(doc, &c); err != nil {
			return nil, fmt.Errorf("%s: %w", ChangedFile, err)
		}
		d.Changed = append(d.Changed, c)
	}
	raw, err = read(RemovedFile)
	if err != nil {
		return nil, err
	}
	if len(raw) > 0 {
		if err := yaml.UnmarshalStrict(raw, &d.Removed); err != nil {
			return nil, fmt.Errorf("%s: %w", RemovedFile, err)
		}
	}
	return d, nil
}

// ApplyDelta derives a release's templates from its base's: removed ones
// dropped, changed ones patched in place, added ones appended.
func ApplyDelta(base []*Template, d *Delta) ([]*Template, error) {
	byKey := make(map[Key]int, len(base))
	out := make([]*Template, 0, len(base)+len(d.Added))
	for _, t := range base {
		byKey[t.Key] = len(out)
		out = append(out, t)
	}
	gone := map[Key]bool{}
	for _, k := range d.Removed {
		if _, ok := byKey[k]; !ok {
			return nil, fmt.Errorf("removed %s is not in the base", k)
		}
		gone[k] = true
	}
	for _, c := range d.Changed {
		i, ok := byKey[c.Key]
		if !ok {
			return nil, fmt.Errorf("changed %s is not in the base", c.Key)
		}
		t, err := applyChange(out[i], c)
		if err != nil {
			return nil, fmt.Errorf("changed %s: %w", c.Key, err)
		}
		out[i] = t
	}
	kept := out[:0]
	for _, t := range out {
		if !gone[t.Key] {
			kept = append(kept, t)
		}
	}
	for _, t := range d.Added {
		if i, ok := byKey[t.Key]; ok && !gone[t.Key] {
			return nil, fmt.Errorf("added %s is already in the base (at %d)", t.Key, i)
		}
		kept = append(kept, t)
	}
	return kept, nil
}

func applyChange(t *Template, c Change) (*Template, error) {
	var out []byte
	var err error
	switch {
	case c.Replace != nil:
		out = c.Replace
	case c.Merge != nil:
		out, err = jsonpatch.MergePatch(t.JSON, c.Merge)
	case c.JSON != nil:
		var p jsonpatch.Patch
		if p, err = jsonpatch.DecodePatch(c.JSON); err == nil {
			out, err = p.Apply(t.JSON)
		}
	case c.Strategic != nil:
		var typed any
		typed, err = TypedFor(t.APIVersion, t.Key.Kind)
		if err == nil {
			out, err = strategicpatch.StrategicMergePatch(t.JSON, c.Strategic, typed)
		}
	default:
		err = errors.New("no patch")
	}
	if err != nil {
		return nil, err
	}
	nt, err := newTemplate(out)
	if err != nil {
		return nil, err
	}
	if nt.Key != t.Key {
		return nil, fmt.Errorf("the change makes it %s", nt.Key)
	}
	return nt, nil
}

// TypedFor returns a zero Go value of a kind the scheme knows (for strategic
// merge patches), or an error for kinds without Go types.
func TypedFor(apiVersion, kind string) (any, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, err
	}
	o, err := scheme.Scheme.New(gv.WithKind(kind))
	if err != nil {
		return nil, fmt.Errorf("%s %s has no Go type: use a merge patch", apiVersion, kind)
	}
	return o, nil
}

// ParseTemplates reads a YAML stream of objects into templates.
func ParseTemplates(raw []byte) ([]*Template, error) {
	docs, err := splitYAML(raw)
	if err != nil {
		return nil, err
	}
	out := make([]*Template, 0, len(docs))
	seen := map[Key]bool{}
	for i, doc := range docs {
		t, err := newTemplate(doc)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if seen[t.Key] {
			return nil, fmt.Errorf("%s appears twice", t.Key)
		}
		seen[t.Key] = true
		out = append(out, t)
	}
	return out, nil
}

// newTemplate makes a template of one object's JSON, compacted.
func newTemplate(js []byte) (*Template, error) {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(js, &head); err != nil {
		return nil, err
	}
	if head.Kind == "" || head.APIVersion == "" || head.Metadata.Name == "" {
		return nil, fmt.Errorf("object without apiVersion, kind or name")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, js); err != nil {
		return nil, err
	}
	return &Template{
		Key:        Key{Kind: head.Kind, Namespace: head.Metadata.Namespace, Name: head.Metadata.Name},
		APIVersion: head.APIVersion,
		JSON:       buf.Bytes(),
	}, nil
}

// splitYAML splits a YAML stream into JSON documents, skipping empty ones.
func splitYAML(raw []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	var out [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		js, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			return nil, err
		}
		if string(js) == "null" {
			continue
		}
		out = append(out, js)
	}
}

func stripComments(doc []byte) []byte {
	var b bytes.Buffer
	for _, l := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "#") {
			continue
		}
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// Schemas returns the CRD schemas of the release, by "<plural>.<group>":
// the release's own files over its base's. Only the files the release uses
// are parsed (a base's schema that the release replaces is not), each once
// for every release that uses it. Shared; nothing may modify them.
func (r *Release) Schemas() (map[string]*apiextv1.JSONSchemaProps, error) {
	return r.schemas.get(func() (map[string]*apiextv1.JSONSchemaProps, error) {
		files := map[string]string{}
		var chain []*Release
		for cur := r; cur != nil; {
			chain = append(chain, cur)
			if cur.Base == "" {
				break
			}
			cur, _ = Lookup(cur.Base)
		}
		for i := len(chain) - 1; i >= 0; i-- {
			fs, err := fs.Glob(dataFS, path.Join(chain[i].dir(), SchemasDir, "*.yaml"))
			if err != nil {
				return nil, err
			}
			for _, f := range fs {
				files[strings.TrimSuffix(path.Base(f), ".yaml")] = f
			}
		}
		m := make(map[string]*apiextv1.JSONSchemaProps, len(files))
		for name, f := range files {
			s, err := parsedSchema(f)
			if err != nil {
				return nil, err
			}
			m[name] = s
		}
		return m, nil
	})
}

var (
	schemaFilesMu sync.Mutex
	schemaFiles   = map[string]*lazy[*apiextv1.JSONSchemaProps]{}
)

// parsedSchema parses a schema file once for every release that uses it.
func parsedSchema(file string) (*apiextv1.JSONSchemaProps, error) {
	schemaFilesMu.Lock()
	l, ok := schemaFiles[file]
	if !ok {
		l = &lazy[*apiextv1.JSONSchemaProps]{}
		schemaFiles[file] = l
	}
	schemaFilesMu.Unlock()
	return l.get(func() (*apiextv1.JSONSchemaProps, error) {
		raw, err := dataFS.ReadFile(file)
		if err != nil {
			return nil, err
		}
		s := &apiextv1.JSONSchemaProps{}
		if err := yaml.UnmarshalStrict(raw, s); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		return s, nil
	})
}

// readInherited reads a file of the release's directory or, when it has
// none, of the nearest base that has it.
func (r *Release) readInherited(file string) ([]byte, error) {
	raw, err := dataFS.ReadFile(path.Join(r.dir(), file))
	for cur := r; errors.Is(err, fs.ErrNotExist) && cur.Base != ""; {
		cur, _ = Lookup(cur.Base)
		raw, err = dataFS.ReadFile(path.Join(cur.dir(), file))
	}
	return raw, err
}

// VariantPatches returns the patches of a variant, one per object, from
// the release's directory or, when it has no such file, its base's.
func (r *Release) VariantPatches(v Variant) ([]Change, error) {
	if v.File == "" {
		return nil, nil
	}
	raw, err := r.readInherited(v.File)
	if err != nil {
		return nil, err
	}
	docs, err := splitYAML(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", v.File, err)
	}
	var out []Change
	for _, doc := range docs {
		var c Change
		if err := json.Unmarshal(doc, &c); err != nil {
			return nil, fmt.Errorf("%s: %w", v.File, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// VariantObjects returns the objects a variant adds, as templates, from
// the release's directory or its base's.
func (r *Release) VariantObjects(v Variant) ([]*Template, error) {
	if v.Objects == "" {
		return nil, nil
	}
	raw, err := r.readInherited(v.Objects)
	if err != nil {
		return nil, err
	}
	ts, err := ParseTemplates(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", v.Objects, err)
	}
	return ts, nil
}

// ApplyChange applies one change to a template (for variants).
func ApplyChange(t *Template, c Change) (*Template, error) { return applyChange(t, c) }
