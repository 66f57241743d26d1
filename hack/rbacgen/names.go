package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/ownership"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/strategy"
)

// namedKind is a cluster-scoped kind of the install strategies whose get,
// create, patch and delete the ClusterRole grants by name only.
type namedKind struct {
	group, kind, resource string
}

// namedKinds are those kinds. list and watch of them stay unnamed (RBAC
// cannot name either); every other verb the operator uses on them names
// the object.
var namedKinds = []namedKind{
	{"rbac.authorization.k8s.io", "ClusterRole", "clusterroles"},
	{"rbac.authorization.k8s.io", "ClusterRoleBinding", "clusterrolebindings"},
	{"apiextensions.k8s.io", "CustomResourceDefinition", "customresourcedefinitions"},
	{"admissionregistration.k8s.io", "MutatingWebhookConfiguration", "mutatingwebhookconfigurations"},
	{"admissionregistration.k8s.io", "ValidatingWebhookConfiguration", "validatingwebhookconfigurations"},
	{"admissionregistration.k8s.io", "ValidatingAdmissionPolicy", "validatingadmissionpolicies"},
	{"admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding", "validatingadmissionpolicybindings"},
	{"apiregistration.k8s.io", "APIService", "apiservices"},
}

func namedKindOf(kind string) (namedKind, bool) {
	i := slices.IndexFunc(namedKinds, func(k namedKind) bool { return k.kind == kind })
	if i < 0 {
		return namedKind{}, false
	}
	return namedKinds[i], true
}

// clusterNames are the names the operator acts on, per resource of
// namedKinds.
type clusterNames struct {
	// rendered: every object of the kind that some configuration of some
	// catalog release renders, or that the plan adds (virtop-metrics-
	// reader): applied, read uncached (adoption, field managers), deleted.
	rendered map[string][]string
	// readCRDs are the CRDs of other projects the capability snapshot
	// reads in full, by name (one per API gate: resource.group), which no
	// strategy renders: read only.
	readCRDs []string
}

// renderedNames collects, for every catalog release: each object of its
// data whatever gates it (the templates hold gated objects too: the gate
// decides at render time), each object any of its variants adds, and the
// plan's render (what virtop adds: monitoring RBAC, the metrics reader)
// with the release's default configuration and with every feature gate a
// condition of the release names listed. The CRDs the capability
// snapshot reads in full (the API gates) are the read-only names.
func renderedNames() (clusterNames, error) {
	out := clusterNames{rendered: map[string][]string{}}
	add := func(kind, name string) {
		if k, ok := namedKindOf(kind); ok && !slices.Contains(out.rendered[k.resource], name) {
			out.rendered[k.resource] = append(out.rendered[k.resource], name)
		}
	}
	cat := release.Builtin()
	for _, v := range cat.Versions() {
		rel, ok := cat.Lookup(v)
		if !ok {
			return out, fmt.Errorf("release %s not in the catalog", v)
		}
		ts, err := rel.Templates()
		if err != nil {
			return out, fmt.Errorf("%s: %w", v, err)
		}
		for _, t := range ts {
			add(t.Key.Kind, t.Key.Name)
		}
		for _, variant := range rel.Variants {
			vs, err := rel.VariantObjects(variant)
			if err != nil {
				return out, fmt.Errorf("%s: %w", v, err)
			}
			for _, t := range vs {
				add(t.Key.Kind, t.Key.Name)
			}
		}
		for _, tune := range configurations(rel) {
			objs, err := ownership.Render(v, tune)
			if err != nil {
				return out, err
			}
			for _, o := range objs {
				add(strategy.Kind(o), o.GetName())
			}
		}
	}
	for _, r := range out.rendered {
		slices.Sort(r)
	}
	kinds, err := ownership.Get()
	if err != nil {
		return out, err
	}
	for _, g := range kinds.GatedAPIs {
		gv, resource, _ := g.IsAPI()
		group, _, _ := strings.Cut(gv, "/")
		name := resource + "." + group
		if !slices.Contains(out.rendered["customresourcedefinitions"], name) && !slices.Contains(out.readCRDs, name) {
			out.readCRDs = append(out.readCRDs, name)
		}
	}
	slices.Sort(out.readCRDs)
	return out, nil
}

// configurations are the KubeVirt resources a release is rendered with:
// its default (nil), and every feature gate its gated objects and variants
// name listed (the conditions that need a gate off are met by the
// default, whose gates are off unless GA or, from v1.9.0, Beta).
func configurations(rel *release.Release) []func(*kvv1.KubeVirt) {
	gates := map[string]bool{}
	for _, g := range rel.GatedObjects {
		if g.FeatureGate != "" && !g.WhileOff {
			gates[g.FeatureGate] = true
		}
	}
	for _, v := range rel.Variants {
		if v.FeatureGate != "" && !v.WhileOff {
			gates[v.FeatureGate] = true
		}
	}
	listed := slices.Sorted(maps.Keys(gates))
	return []func(*kvv1.KubeVirt){nil, func(kv *kvv1.KubeVirt) {
		dc := kv.Spec.Configuration.DeveloperConfiguration
		for _, g := range listed {
			if !slices.Contains(dc.FeatureGates, g) {
				dc.FeatureGates = append(dc.FeatureGates, g)
			}
		}
	}}
}
