package release

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// TestEveryReleaseResolves parses every release's data: objects (a root's
// or a base's with the delta), schemas, variants, and checks that the facts
// refer to objects the release has.
func TestEveryReleaseResolves(t *testing.T) {
	vs := Versions()
	if len(vs) < 6 {
		t.Fatalf("releases %v, want at least v1.5.0 … v1.9.0", vs)
	}
	tokenRE := regexp.MustCompile(`\[\[[^\]]*\]\]`)
	for _, v := range vs {
		t.Run(v, func(t *testing.T) {
			r, _ := Lookup(v)
			ts, err := r.Templates()
			if err != nil {
				t.Fatal(err)
			}
			keys := map[Key]bool{}
			secrets := map[string]bool{}
			crds := 0
			for _, tm := range ts {
				keys[tm.Key] = true
				if tm.Key.Kind == "Secret" {
					secrets[tm.Key.Name] = true
				}
				if tm.Key.Kind == "CustomResourceDefinition" {
					crds++
				}
				for _, tok := range tokenRE.FindAllString(string(tm.JSON), -1) {
					switch {
					case tok == TokenNamespace, tok == TokenImagePullPolicy, tok == TokenProductVersion:
					case strings.HasPrefix(tok, tokenImagePrefix):
					default:
						t.Errorf("%s: unknown token %s", tm.Key, tok)
					}
				}
			}
			schemas, err := r.Schemas()
			if err != nil {
				t.Fatal(err)
			}
			for _, tm := range ts {
				if tm.Key.Kind == "CustomResourceDefinition" && schemas[tm.Key.Name] == nil {
					t.Errorf("no schema for %s", tm.Key.Name)
				}
			}
			if len(schemas) != crds {
				t.Errorf("%d schemas for %d CRDs", len(schemas), crds)
			}
			for _, c := range r.Certificates {
				if !secrets[c.Secret] {
					t.Errorf("certificate %s: the release has no such Secret", c.Secret)
				}
				if c.Kind != CertCA && r.certificateOK(c.Issuer) != CertCA {
					t.Errorf("certificate %s: issuer %q is not a CA of the release", c.Secret, c.Issuer)
				}
			}
			for s := range secrets {
				if _, ok := r.Certificate(s); !ok {
					t.Errorf("Secret %s has no certificate spec", s)
				}
			}
			checkCondition := func(what string, c Condition) {
				if _, ok := r.FeatureGates[c.FeatureGate]; c.FeatureGate != "" && !ok {
					t.Errorf("%s: no feature gate %s in this release", what, c.FeatureGate)
				}
				if _, ok := Settings[c.Setting]; c.Setting != "" && !ok {
					t.Errorf("%s: unknown setting %q", what, c.Setting)
				}
				if c.FeatureGate == "" && !c.ImagePullSecrets && c.Setting == "" {
					t.Errorf("%s: a condition that always holds", what)
				}
			}
			for _, g := range r.GatedObjects {
				checkCondition(fmt.Sprintf("gated object %+v", g), g.Condition)
				// Monitoring objects are rendered in code, not from the
				// templates.
				if g.Kind != "" && g.Kind != "PrometheusRule" && !hasName(ts, g.Kind, g.Name) {
					t.Errorf("gated object %s/%s is not in the release", g.Kind, g.Name)
				}
			}
			for _, vr := range r.Variants {
				checkCondition(fmt.Sprintf("variant %+v", vr), vr.Condition)
				if vr.File == "" && vr.Objects == "" && vr.Transform == "" {
					t.Errorf("variant %+v changes nothing", vr)
				}
				cs, err := r.VariantPatches(vr)
				if err != nil {
					t.Fatalf("variant %s: %v", vr.File, err)
				}
				for _, c := range cs {
					if !keys[c.Key] {
						t.Errorf("variant %s: %s is not in the release", vr.File, c.Key)
					}
				}
				objs, err := r.VariantObjects(vr)
				if err != nil {
					t.Fatalf("variant %s: %v", vr.Objects, err)
				}
				for _, o := range objs {
					if keys[o.Key] {
						t.Errorf("variant %s adds %s, which the release has", vr.Objects, o.Key)
					}
				}
			}
			if len(r.FeatureGates) == 0 || r.KubeVirtAPI == "" || r.CommonInstancetypes == "" || r.RuleSet == "" {
				t.Errorf("incomplete facts: %+v", r)
			}
		})
	}
}

func (r *Release) certificateOK(secret string) CertKind {
	c, _ := r.Certificate(secret)
	return c.Kind
}

func hasName(ts []*Template, kind, name string) bool {
	for _, t := range ts {
		if t.Key.Kind == kind && t.Key.Name == name {
			return true
		}
	}
	return false
}

// TestApplyDeltaRefusesWhatItCannotApply: a delta naming an object the base
// lacks, or adding one it has, is an error, not a silent no-op.
func TestApplyDeltaRefusesWhatItCannotApply(t *testing.T) {
	base, err := ParseTemplates([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: x}\n"))
	if err != nil {
		t.Fatal(err)
	}
	other := Key{Kind: "ConfigMap", Namespace: "x", Name: "b"}
	for name, d := range map[string]*Delta{
		"remove missing": {Removed: []Key{other}},
		"change missing": {Changed: []Change{{Key: other, Merge: json.RawMessage(`{}`)}}},
		"add existing":   {Added: base},
		"rename":         {Changed: []Change{{Key: base[0].Key, Merge: json.RawMessage(`{"metadata":{"name":"c"}}`)}}},
	} {
		if _, err := ApplyDelta(base, d); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	got, err := ApplyDelta(base, &Delta{Changed: []Change{{Key: base[0].Key, Merge: json.RawMessage(`{"data":{"k":"v"}}`)}}})
	if err != nil || !strings.Contains(string(got[0].JSON), `"k":"v"`) {
		t.Fatalf("merge patch: %v %s", err, got[0].JSON)
	}
}

func TestGateEnabled(t *testing.T) {
	r := &Release{FeatureGates: map[string]Maturity{"a": Alpha, "b": Beta, "g": GA, "d": Discontinued}}
	for _, c := range []struct {
		gate              string
		enabled, disabled []string
		betaOn, want      bool
	}{
		{"g", nil, []string{"g"}, false, true},
		{"d", []string{"d"}, nil, false, false},
		{"a", nil, nil, true, false},
		{"a", []string{"a"}, nil, false, true},
		{"b", nil, nil, false, false},
		{"b", nil, nil, true, true},
		{"b", nil, []string{"b"}, true, false},
		{"b", []string{"b"}, []string{"b"}, true, true},
		{"unknown", []string{"unknown"}, nil, false, true},
	} {
		r.BetaGatesOnByDefault = c.betaOn
		if got := r.GateEnabled(c.gate, c.enabled, c.disabled); got != c.want {
			t.Errorf("%+v: %v", c, got)
		}
	}
}

func TestLess(t *testing.T) {
	if !Less("v1.9.0", "v1.10.0") || Less("v1.5.3", "v1.5.0") || !Less("v1.5.0", "v1.5.3") {
		t.Fatal("versions must compare numerically")
	}
}

// TestDefaultRuleSet: a release with a rules.yaml, or without a base, has
// its own rule set; one without a rules.yaml has its base's, down the
// chain; one whose release.yaml names a set keeps it.
func TestDefaultRuleSet(t *testing.T) {
	m := map[string]*Release{
		"v1": {Version: "v1"},
		"v2": {Version: "v2", Base: "v1", HasRules: true},
		"v3": {Version: "v3", Base: "v2"},
		"v4": {Version: "v4", Base: "v3"},
		"v5": {Version: "v5", Base: "v4", RuleSet: "v1"},
	}
	for _, r := range m {
		if err := defaultRuleSet(m, r, 0); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]string{"v1": "v1", "v2": "v2", "v3": "v2", "v4": "v2", "v5": "v1"}
	for v, r := range m {
		if r.RuleSet != want[v] {
			t.Errorf("%s: rule set %q, want %q", v, r.RuleSet, want[v])
		}
	}
	loop := map[string]*Release{"a": {Version: "a", Base: "b"}, "b": {Version: "b", Base: "a"}}
	if err := defaultRuleSet(loop, loop["a"], 0); err == nil {
		t.Error("a base chain that loops: accepted")
	}
	// The shipped data: every release with a rules.yaml has its own set.
	for _, v := range Versions() {
		r, _ := Lookup(v)
		if r.HasRules && r.RuleSet != v {
			t.Errorf("%s has a rules.yaml but rule set %s", v, r.RuleSet)
		}
	}
}
