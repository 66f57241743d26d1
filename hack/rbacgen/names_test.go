package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/ownership"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/strategy"
)

// committedClusterRole is config/rbac/cluster_role.yaml as committed (not
// as generate would write it now: a release added to the catalog without
// `make rbac` must fail the tests below). VIRTOP_RBACGEN_CLUSTER_ROLE
// reads another file instead (to show the tests failing on a broken role).
func committedClusterRole(t *testing.T) []rbacv1.PolicyRule {
	t.Helper()
	p := filepath.Join("..", "..", "config", "rbac", "cluster_role.yaml")
	if alt := os.Getenv("VIRTOP_RBACGEN_CLUSTER_ROLE"); alt != "" {
		p = alt
	}
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var cr rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(data, &cr); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return cr.Rules
}

func grants(rules []rbacv1.PolicyRule, a atom) bool {
	return slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool { return covers(r, a) })
}

// builtinScope is whether the Kubernetes resources (and those of other
// projects) the ClusterRole names are cluster-scoped; KubeVirt's come from
// the catalog's CRDs. A resource in neither fails the test: classify it.
var builtinScope = map[string]bool{
	"/nodes": true, "/namespaces": true, "/persistentvolumes": true,
	"/configmaps": false, "/secrets": false, "/serviceaccounts": false, "/services": false, "/endpoints": false,
	"/pods": false, "/events": false, "/persistentvolumeclaims": false, "/limitranges": false, "/resourcequotas": false,
	"rbac.authorization.k8s.io/clusterroles": true, "rbac.authorization.k8s.io/clusterrolebindings": true,
	"rbac.authorization.k8s.io/roles": false, "rbac.authorization.k8s.io/rolebindings": false,
	"apiextensions.k8s.io/customresourcedefinitions":                 true,
	"admissionregistration.k8s.io/mutatingwebhookconfigurations":     true,
	"admissionregistration.k8s.io/validatingwebhookconfigurations":   true,
	"admissionregistration.k8s.io/validatingadmissionpolicies":       true,
	"admissionregistration.k8s.io/validatingadmissionpolicybindings": true,
	"apiregistration.k8s.io/apiservices":                             true,
	"authentication.k8s.io/tokenreviews":                             true,
	"authorization.k8s.io/subjectaccessreviews":                      true,
	"apps/controllerrevisions":                                       false, "apps/daemonsets": false, "apps/deployments": false,
	"batch/jobs": false, "policy/poddisruptionbudgets": false,
	"storage.k8s.io/storageclasses":                    true,
	"snapshot.storage.k8s.io/volumesnapshotclasses":    true,
	"snapshot.storage.k8s.io/volumesnapshots":          false,
	"resource.k8s.io/resourceslices":                   true,
	"resource.k8s.io/resourceclaims":                   false,
	"k8s.cni.cncf.io/network-attachment-definitions":   false,
	"security.openshift.io/securitycontextconstraints": true,
	"route.openshift.io/routes":                        false,
	"monitoring.coreos.com/prometheuses":               false,
	"monitoring.coreos.com/prometheusrules":            false,
	"monitoring.coreos.com/servicemonitors":            false,
	"virtop.dev/kubevirtmonitorings":                   false,
	// CDI's: CDI, CDIConfig, StorageProfile, VolumeImportSource... are
	// cluster-scoped; the wildcard is KubeVirt's grant (kubevirt-controller).
	"cdi.kubevirt.io/*": true,
	// kubevirt.io's wildcard (kubevirt-controller): KubeVirt and its
	// workloads are namespaced.
	"kubevirt.io/*":         false,
	"kubevirt.io/kubevirts": false,
	// virt-api's aggregated API (KubeVirt's grants): the VM and VMI
	// subresources are namespaced, version and guestfs are not.
	"subresources.kubevirt.io/virtualmachines":         false,
	"subresources.kubevirt.io/virtualmachineinstances": false,
	"subresources.kubevirt.io/expand-vm-spec":          false,
	"subresources.kubevirt.io/version":                 true,
	"subresources.kubevirt.io/guestfs":                 true,
}

// unnamedExceptions are the verbs the ClusterRole grants on every object
// of a cluster-scoped kind, beside those KubeVirt's ClusterRoles grant
// (which the operator must hold to create them: derived below), each with
// why it cannot be named.
var unnamedExceptions = map[string]map[string]string{
	"/namespaces": {"get": "monitoring resolution reads the namespace of whichever trusted Prometheus is found: any namespace name"},
	"instancetype.kubevirt.io/virtualmachineclusterinstancetypes": {"update": "storage migration writes back every object of the kind, users' included"},
	"instancetype.kubevirt.io/virtualmachineclusterpreferences":   {"update": "storage migration writes back every object of the kind, users' included"},
}

// TestClusterRoleNamesClusterScopedObjects: no rule of the ClusterRole
// grants get, patch, delete or update (or every verb) on every object of a
// cluster-scoped kind, except where KubeVirt's own ClusterRoles grant the
// same (the escalation check makes the operator hold it) or
// unnamedExceptions says why not.
func TestClusterRoleNamesClusterScopedObjects(t *testing.T) {
	rules := committedClusterRole(t)
	scope := map[string]bool{}
	for k, v := range builtinScope {
		scope[k] = v
	}
	// What KubeVirt's roles grant cluster-wide, every configuration of
	// every release.
	var granted []rbacv1.PolicyRule
	for _, v := range release.Builtin().Versions() {
		rel, _ := release.Builtin().Lookup(v)
		for _, tune := range configurations(rel) {
			objs, err := ownership.Render(v, tune)
			if err != nil {
				t.Fatal(err)
			}
			c, _ := ownership.GrantedRules(objs)
			granted = append(granted, c...)
		}
		objs, err := render(v)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if crd, ok := o.(*apiextensionsv1.CustomResourceDefinition); ok {
				scope[crd.Spec.Group+"/"+crd.Spec.Names.Plural] = crd.Spec.Scope == apiextensionsv1.ClusterScoped
			}
		}
	}
	for _, r := range rules {
		if len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
			continue
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				base, _, _ := strings.Cut(res, "/")
				key := g + "/" + base
				cluster, known := scope[key]
				if !known {
					t.Errorf("the ClusterRole grants %v on %s, whose scope this test does not know: add it to builtinScope", r.Verbs, key)
					continue
				}
				if !cluster {
					continue
				}
				for _, verb := range r.Verbs {
					if !slices.Contains([]string{"get", "patch", "delete", "update", "*"}, verb) {
						continue
					}
					if unnamedExceptions[key][verb] != "" {
						continue
					}
					if grants(granted, atom{group: g, resource: res, verb: verb}) {
						continue // KubeVirt's ClusterRoles grant it too
					}
					t.Errorf("the ClusterRole grants %s on every %s (cluster-scoped), by no name: name the objects (hack/rbacgen) or list the exception with its reason", verb, g+"/"+res)
				}
			}
		}
	}
}

// TestClusterRoleCoversEveryRenderedName: every object of namedKinds that
// a catalog release can render (its data, gated objects included, the
// objects its variants add, and the plan's render with its default
// configuration and with every gate its conditions name listed, in two
// install namespaces) may be read, applied and deleted under the committed
// ClusterRole; every KubeVirt CRD's status may be migrated; every CRD the
// capability snapshot reads may be read. And no other object of those
// kinds may be written: not cluster-admin, not the operator's own role.
func TestClusterRoleCoversEveryRenderedName(t *testing.T) {
	rules := committedClusterRole(t)
	want := map[string]map[string]bool{} // resource -> names
	add := func(kind, name string) {
		if k, ok := namedKindOf(kind); ok {
			if want[k.resource] == nil {
				want[k.resource] = map[string]bool{}
			}
			want[k.resource][name] = true
		}
	}
	for _, v := range release.Builtin().Versions() {
		rel, _ := release.Builtin().Lookup(v)
		ts, err := rel.Templates()
		if err != nil {
			t.Fatal(err)
		}
		for _, tmpl := range ts {
			add(tmpl.Key.Kind, tmpl.Key.Name)
		}
		for _, variant := range rel.Variants {
			vs, err := rel.VariantObjects(variant)
			if err != nil {
				t.Fatal(err)
			}
			for _, tmpl := range vs {
				add(tmpl.Key.Kind, tmpl.Key.Name)
			}
		}
		for _, tune := range configurations(rel) {
			objs, err := ownership.Render(v, tune)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range objs {
				add(strategy.Kind(o), o.GetName())
			}
		}
		// Another install namespace: no cluster-scoped name may depend on
		// it.
		objs, err := ownership.Render(v, func(kv *kvv1.KubeVirt) { kv.Namespace = "tenant-kubevirt" })
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			add(strategy.Kind(o), o.GetName())
		}
	}
	if len(want) != len(namedKinds) {
		t.Errorf("the catalog renders %d of the %d named kinds: is every kind of namedKinds still rendered?", len(want), len(namedKinds))
	}
	for _, k := range namedKinds {
		for name := range want[k.resource] {
			for _, verb := range namedVerbs {
				if !grants(rules, atom{group: k.group, resource: k.resource, name: name, verb: verb}) {
					t.Errorf("%s %s is rendered by the catalog, but the ClusterRole does not grant %s on it: run `make rbac`", k.kind, name, verb)
				}
			}
		}
		for _, verb := range []string{"list", "watch"} {
			if !grants(rules, atom{group: k.group, resource: k.resource, verb: verb}) {
				t.Errorf("the ClusterRole does not grant %s on %s", verb, k.resource)
			}
		}
	}
	for name := range want["customresourcedefinitions"] {
		for _, verb := range []string{"get", "patch"} {
			if !grants(rules, atom{group: "apiextensions.k8s.io", resource: "customresourcedefinitions/status", name: name, verb: verb}) {
				t.Errorf("CRD %s is rendered, but the ClusterRole does not grant %s on its status (storage migration)", name, verb)
			}
		}
	}
	kinds, err := ownership.Get()
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range kinds.GatedAPIs {
		gv, resource, _ := g.IsAPI()
		group, _, _ := strings.Cut(gv, "/")
		if !grants(rules, atom{group: "apiextensions.k8s.io", resource: "customresourcedefinitions", name: resource + "." + group, verb: "get"}) {
			t.Errorf("the capability snapshot reads CRD %s.%s, but the ClusterRole does not grant get on it", resource, group)
		}
	}
	// Objects no release renders: never written.
	for _, o := range []struct{ resource, name string }{
		{"clusterroles", "cluster-admin"}, {"clusterroles", "kubevirt-operator"}, {"clusterroles", "kubevirt.io:operator"},
		{"clusterrolebindings", "cluster-admin"}, {"clusterrolebindings", "kubevirt-operator"},
		{"customresourcedefinitions", "kubevirts.kubevirt.io"}, {"customresourcedefinitions", "kubevirtmonitorings.virtop.dev"},
		{"customresourcedefinitions", "prometheuses.monitoring.coreos.com"},
		{"validatingwebhookconfigurations", "tenant-policy"}, {"mutatingwebhookconfigurations", "istio-sidecar-injector"},
		{"validatingadmissionpolicies", "tenant-policy"}, {"validatingadmissionpolicybindings", "tenant-policy"},
		{"apiservices", "v1beta1.metrics.k8s.io"},
	} {
		k, _ := namedKindOf(map[string]string{"clusterroles": "ClusterRole", "clusterrolebindings": "ClusterRoleBinding",
			"customresourcedefinitions": "CustomResourceDefinition", "validatingwebhookconfigurations": "ValidatingWebhookConfiguration",
			"mutatingwebhookconfigurations": "MutatingWebhookConfiguration", "validatingadmissionpolicies": "ValidatingAdmissionPolicy",
			"validatingadmissionpolicybindings": "ValidatingAdmissionPolicyBinding", "apiservices": "APIService"}[o.resource])
		if want[o.resource][o.name] {
			t.Fatalf("%s %s is rendered: pick another name for the test", o.resource, o.name)
		}
		for _, verb := range []string{"create", "patch", "update", "delete"} {
			if grants(rules, atom{group: k.group, resource: o.resource, name: o.name, verb: verb}) {
				t.Errorf("the ClusterRole grants %s on %s %s, which no release renders", verb, k.kind, o.name)
			}
		}
	}
}
