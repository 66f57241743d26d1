package strategy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/scheme"
)

// renderTemplates turns a release's object templates into the objects of a
// config: the feature-gated objects whose gate is off dropped, the
// variants whose gate is on applied, the tokens replaced by the config's
// values, each decoded into a fresh typed object (unstructured for kinds
// without Go types), and the CRDs given the release's schemas.
func renderTemplates(c *config.DeploymentConfig, rel *release.Release, withSchemas bool) ([]client.Object, error) {
	ts, err := rel.Templates()
	if err != nil {
		return nil, err
	}
	ts, named, err := applyVariants(c, rel, ts)
	if err != nil {
		return nil, err
	}
	var schemas map[string]*apiextv1.JSONSchemaProps
	if withSchemas {
		if schemas, err = rel.Schemas(); err != nil {
			return nil, err
		}
	}
	tok := tokenValues(c, rel)
	out := make([]client.Object, 0, len(ts))
	for _, t := range ts {
		js, err := substitute(t.JSON, tok)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t.Key, err)
		}
		o, err := decodeTemplate(t, js)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t.Key, err)
		}
		if !gateOn(c, rel, o) {
			continue
		}
		if crd, ok := o.(*apiextv1.CustomResourceDefinition); ok && withSchemas {
			s := schemas[crd.Name]
			if s == nil {
				return nil, fmt.Errorf("release %s has no schema for CRD %s", rel.Version, crd.Name)
			}
			for i := range crd.Spec.Versions {
				// Shared, not copied: nothing writes into a strategy's
				// objects (the plan copies before changing one;
				// customizeComponents patches a copy), and a copy per
				// version would keep every cached strategy megabytes
				// larger. Every served version gets the storage
				// version's schema, as upstream does.
				crd.Spec.Versions[i].Schema = &apiextv1.CustomResourceValidation{OpenAPIV3Schema: s}
			}
		}
		out = append(out, o)
	}
	for _, name := range named {
		fn, ok := variantTransforms[name]
		if !ok {
			return nil, fmt.Errorf("release %s names transform %q, which this virtop does not have", rel.Version, name)
		}
		fn(out)
	}
	return out, nil
}

// gateOn says whether the release renders an object for the config: an
// object a gated-object entry selects needs its condition to hold.
func gateOn(c *config.DeploymentConfig, rel *release.Release, o client.Object) bool {
	for _, g := range rel.GatedObjects {
		sel := g.Kind != "" && g.Kind == Kind(o) && g.Name == o.GetName()
		if g.Annotation != "" {
			_, sel = o.GetAnnotations()[g.Annotation]
		}
		if sel && !holds(c, rel, g.Condition) {
			return false
		}
	}
	return true
}

// holds evaluates a release's condition for a config.
func holds(c *config.DeploymentConfig, rel *release.Release, cond release.Condition) bool {
	if cond.Setting != "" && cond.SettingDecides {
		if v, set := settingValue(c, cond.Setting); set {
			return v == cond.Value
		}
	}
	if cond.ImagePullSecrets && len(c.ImagePullSecrets) == 0 {
		return false
	}
	if cond.FeatureGate != "" {
		on := rel.GateEnabled(cond.FeatureGate, c.FeatureGates, c.DisabledFeatureGates)
		if cond.Listed {
			on = slices.Contains(c.FeatureGates, cond.FeatureGate)
		}
		if on == cond.WhileOff {
			return false
		}
	}
	if cond.Setting != "" && !cond.SettingDecides {
		v, set := settingValue(c, cond.Setting)
		if !set {
			v = release.Settings[cond.Setting]
		}
		return v == cond.Value
	}
	return true
}

// settingValue reads a KubeVirt setting a condition names
// (release.Settings) from the config; set is false when the resource
// leaves it unset.
func settingValue(c *config.DeploymentConfig, name string) (v string, set bool) {
	boolean := func(b *bool) (string, bool) {
		if b == nil {
			return "", false
		}
		return strconv.FormatBool(*b), true
	}
	switch name {
	case "virtTemplateDeployment.enabled":
		return boolean(c.VirtTemplateDeployment)
	case "persistentReservationConfiguration.enabled":
		return boolean(c.PersistentReservation)
	case "roleAggregationStrategy":
		return c.RoleAggregationStrategy, c.RoleAggregationStrategy != ""
	case "hypervisor":
		return c.Hypervisor, c.Hypervisor != ""
	}
	return "", false
}

// applyVariants applies, in order, the release's variants the config turns
// on: their patches to the objects they change (new templates) and the
// objects they add. It returns the transforms the variants name, to run on
// the decoded objects.
func applyVariants(c *config.DeploymentConfig, rel *release.Release, ts []*release.Template) ([]*release.Template, []string, error) {
	var changes []release.Change
	var added []*release.Template
	var named []string
	for _, v := range rel.Variants {
		if !holds(c, rel, v.Condition) {
			continue
		}
		cs, err := rel.VariantPatches(v)
		if err != nil {
			return nil, nil, err
		}
		changes = append(changes, cs...)
		objs, err := rel.VariantObjects(v)
		if err != nil {
			return nil, nil, err
		}
		added = append(added, objs...)
		if v.Transform != "" {
			named = append(named, v.Transform)
		}
	}
	if len(changes) == 0 && len(added) == 0 {
		return ts, named, nil
	}
	out := slices.Clone(ts)
	for _, ch := range changes {
		i := slices.IndexFunc(out, func(t *release.Template) bool { return t.Key == ch.Key })
		if i < 0 {
			return nil, nil, fmt.Errorf("variant changes %s, which release %s does not have", ch.Key, rel.Version)
		}
		t, err := release.ApplyChange(out[i], ch)
		if err != nil {
			return nil, nil, fmt.Errorf("variant on %s: %w", ch.Key, err)
		}
		out[i] = t
	}
	for _, t := range added {
		if slices.ContainsFunc(out, func(x *release.Template) bool { return x.Key == t.Key }) {
			return nil, nil, fmt.Errorf("variant adds %s, which release %s already has", t.Key, rel.Version)
		}
		out = append(out, t)
	}
	return out, named, nil
}

// tokenValues maps each token of the release's templates to the config's
// value. Image tokens are resolved on the fly (image).
func tokenValues(c *config.DeploymentConfig, rel *release.Release) func(tok string) (string, bool) {
	productVersion := c.ProductVersion
	if productVersion == "" {
		productVersion = c.Version
	}
	return func(tok string) (string, bool) {
		switch tok {
		case release.TokenNamespace:
			return c.Namespace, true
		case release.TokenImagePullPolicy:
			return string(c.ImagePullPolicy), true
		case release.TokenProductVersion:
			return productVersion, true
		}
		if name, ok := strings.CutPrefix(tok, "[[image:"); ok {
			return image(c, rel, strings.TrimSuffix(name, "]]")), true
		}
		return "", false
	}
}

// image is a component image's reference: registry, prefix and name, then
// the pinned digest or the tag (the release's version, or the image's own
// version for images that carry one, such as virt-template's).
func image(c *config.DeploymentConfig, rel *release.Release, name string) string {
	if img, ok := rel.Image(name); ok && img.Version != "" && c.ImageDigests[name] == "" {
		return c.Registry + "/" + c.ImagePrefix + name + ":" + img.Version
	}
	return c.Image(name)
}

// substitute replaces every [[token]] in js. Tokens sit inside JSON
// strings, and no value it puts there needs escaping: config.Validate
// allows no quote or backslash in them.
func substitute(js []byte, value func(string) (string, bool)) ([]byte, error) {
	if !bytes.Contains(js, []byte("[[")) {
		return js, nil
	}
	var b bytes.Buffer
	b.Grow(len(js) + 64)
	rest := js
	for {
		i := bytes.Index(rest, []byte("[["))
		if i < 0 {
			b.Write(rest)
			return b.Bytes(), nil
		}
		j := bytes.Index(rest[i:], []byte("]]"))
		if j < 0 {
			return nil, fmt.Errorf("unterminated token at %q", clip(string(rest[i:])))
		}
		tok := string(rest[i : i+j+2])
		v, ok := value(tok)
		if !ok {
			return nil, fmt.Errorf("unknown token %s", tok)
		}
		if strings.ContainsAny(v, "\"\\") {
			return nil, fmt.Errorf("value %q of %s cannot stand in JSON unescaped", v, tok)
		}
		b.Write(rest[:i])
		b.WriteString(v)
		rest = rest[i+j+2:]
	}
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// decodeTemplate decodes one object into its Go type, refusing fields the
// type does not have (they would be lost silently).
func decodeTemplate(t *release.Template, js []byte) (client.Object, error) {
	gv, err := schema.ParseGroupVersion(t.APIVersion)
	if err != nil {
		return nil, err
	}
	gvk := gv.WithKind(t.Key.Kind)
	if !scheme.Scheme.Recognizes(gvk) {
		u := &unstructured.Unstructured{}
		if err := json.Unmarshal(js, &u.Object); err != nil {
			return nil, err
		}
		return u, nil
	}
	typed, err := scheme.Scheme.New(gvk)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(typed); err != nil {
		return nil, err
	}
	o, ok := typed.(client.Object)
	if !ok {
		return nil, fmt.Errorf("%s is not an object kind", gvk)
	}
	o.GetObjectKind().SetGroupVersionKind(gvk)
	return o, nil
}
