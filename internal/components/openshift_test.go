package components

import (
	"encoding/json"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/strategy/stage"
)

// Facts from upstream KubeVirt v1.5.3 components/scc.go and routes.go and
// openshift/api's JSON field names; not taken from the renderer.

func openshiftFind(t *testing.T, objs []client.Object, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetObjectKind().GroupVersionKind().Kind == kind && o.GetName() == name {
			u, ok := o.(*unstructured.Unstructured)
			if !ok {
				t.Fatalf("%s %s is a %T, want unstructured", kind, name, o)
			}
			return u
		}
	}
	t.Fatalf("%s %s not rendered", kind, name)
	return nil
}

// bodyOf is the object without metadata, as JSON-decoded values, so it
// compares with literal expectations.
func bodyOf(t *testing.T, u *unstructured.Unstructured) map[string]any {
	t.Helper()
	b, err := json.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "metadata")
	return m
}

func TestOpenShiftObjects(t *testing.T) {
	type want struct {
		apiVersion, kind, namespace, name string
		stage                             stage.Stage
		gates                             []stage.Gate
	}
	handler := want{"security.openshift.io/v1", "SecurityContextConstraints", "", "kubevirt-handler", stage.RBAC,
		[]stage.Gate{"api:security.openshift.io/v1/securitycontextconstraints"}}
	controller := want{"security.openshift.io/v1", "SecurityContextConstraints", "", "kubevirt-controller", stage.RBAC,
		[]stage.Gate{"api:security.openshift.io/v1/securitycontextconstraints"}}
	route := want{"route.openshift.io/v1", "Route", "kubevirt", "virt-exportproxy", stage.VirtExportProxy,
		[]stage.Gate{"api:route.openshift.io/v1/routes"}}
	for _, tc := range []struct {
		gates []string
		want  []want
	}{
		// The Route follows the VMExport gate, like the virt-exportproxy
		// Deployment; the SCCs do not.
		{nil, []want{handler, controller}},
		{[]string{"VMExport"}, []want{handler, controller, route}},
	} {
		objs := renderFamily(t, "openshift", tc.gates...)
		if len(objs) != len(tc.want) {
			t.Fatalf("gates %v: %d objects, want %d", tc.gates, len(objs), len(tc.want))
		}
		for i, w := range tc.want {
			u, ok := objs[i].(*unstructured.Unstructured)
			if !ok {
				t.Fatalf("%s is a %T, want unstructured", w.name, objs[i])
			}
			if u.GetAPIVersion() != w.apiVersion || u.GetKind() != w.kind || u.GetNamespace() != w.namespace || u.GetName() != w.name {
				t.Errorf("object %d: %s %s %s/%s, want %s %s %s/%s", i, u.GetAPIVersion(), u.GetKind(), u.GetNamespace(), u.GetName(),
					w.apiVersion, w.kind, w.namespace, w.name)
			}
			if st, err := stage.Of(u); err != nil || st != w.stage {
				t.Errorf("%s: stage %q, %v; want %s", w.name, st, err, w.stage)
			}
			if got := stage.GatesOf(u); !reflect.DeepEqual(got, w.gates) {
				t.Errorf("%s: gates %v, want %v", w.name, got, w.gates)
			}
			if len(u.GetLabels()) != 0 {
				t.Errorf("%s: labels %v; upstream sets none", w.name, u.GetLabels())
			}
			if _, ok := u.Object["metadata"].(map[string]any)["creationTimestamp"]; ok {
				t.Errorf("%s carries creationTimestamp", w.name)
			}
		}
	}
}

func TestSecurityContextConstraints(t *testing.T) {
	objs := renderFamily(t, "openshift")
	tests := []struct {
		name string
		want map[string]any
	}{
		{"kubevirt-handler", map[string]any{
			"apiVersion":               "security.openshift.io/v1",
			"kind":                     "SecurityContextConstraints",
			"priority":                 nil,
			"allowPrivilegedContainer": true,
			"defaultAddCapabilities":   nil,
			"requiredDropCapabilities": nil,
			"allowedCapabilities":      nil,
			"allowHostDirVolumePlugin": true,
			"volumes":                  []any{"*"},
			"allowHostNetwork":         false,
			"allowHostPorts":           true,
			"allowHostPID":             true,
			"allowHostIPC":             true,
			"seLinuxContext":           map[string]any{"type": "RunAsAny"},
			"runAsUser":                map[string]any{"type": "RunAsAny"},
			"readOnlyRootFilesystem":   false,
			"users":                    []any{"system:serviceaccount:kubevirt:kubevirt-handler"},
		}},
		{"kubevirt-controller", map[string]any{
			"apiVersion":               "security.openshift.io/v1",
			"kind":                     "SecurityContextConstraints",
			"priority":                 nil,
			"allowPrivilegedContainer": false,
			"defaultAddCapabilities":   nil,
			"requiredDropCapabilities": nil,
			"allowedCapabilities":      []any{"SYS_NICE", "NET_BIND_SERVICE"},
			"allowHostDirVolumePlugin": true,
			"volumes":                  nil,
			"allowHostNetwork":         false,
			"allowHostPorts":           false,
			"allowHostPID":             false,
			"allowHostIPC":             false,
			"seLinuxContext":           map[string]any{"type": "RunAsAny"},
			"runAsUser":                map[string]any{"type": "RunAsAny"},
			"readOnlyRootFilesystem":   false,
			"users":                    []any{"system:serviceaccount:kubevirt:kubevirt-controller"},
			"seccompProfiles":          []any{"runtime/default", "unconfined", "localhost/kubevirt/kubevirt.json"},
		}},
	}
	for _, tc := range tests {
		u := openshiftFind(t, objs, "SecurityContextConstraints", tc.name)
		if got := bodyOf(t, u); !reflect.DeepEqual(got, tc.want) {
			gj, _ := json.MarshalIndent(got, "", "  ")
			wj, _ := json.MarshalIndent(tc.want, "", "  ")
			t.Errorf("%s:\n%s\nwant\n%s", tc.name, gj, wj)
		}
	}
}

// The SCC users follow the install namespace.
func TestSecurityContextConstraintsNamespace(t *testing.T) {
	c, r := familyTestConfig(t)
	c.Namespace = "virt-system"
	objs, err := renderOpenShift(c, r)
	if err != nil {
		t.Fatal(err)
	}
	for name, user := range map[string]string{
		"kubevirt-handler":    "system:serviceaccount:virt-system:kubevirt-handler",
		"kubevirt-controller": "system:serviceaccount:virt-system:kubevirt-controller",
	} {
		u := openshiftFind(t, objs, "SecurityContextConstraints", name)
		got, _, _ := unstructured.NestedStringSlice(u.Object, "users")
		if !reflect.DeepEqual(got, []string{user}) {
			t.Errorf("%s: users %v, want [%s]", name, got, user)
		}
		if u.GetNamespace() != "" {
			t.Errorf("%s is cluster scoped, has namespace %q", name, u.GetNamespace())
		}
	}
}

func TestExportProxyRoute(t *testing.T) {
	objs := renderFamily(t, "openshift", "VMExport")
	u := openshiftFind(t, objs, "Route", "virt-exportproxy")
	want := map[string]any{
		"apiVersion": "route.openshift.io/v1",
		"kind":       "Route",
		"spec": map[string]any{
			// No host: the router assigns one.
			"to": map[string]any{"kind": "Service", "name": "virt-exportproxy", "weight": nil},
			"tls": map[string]any{
				"termination":                   "reencrypt",
				"insecureEdgeTerminationPolicy": "Redirect",
			},
		},
	}
	if got := bodyOf(t, u); !reflect.DeepEqual(got, want) {
		t.Errorf("route body %v, want %v", got, want)
	}
	if u.GetNamespace() != "kubevirt" {
		t.Errorf("route namespace %q", u.GetNamespace())
	}
}
