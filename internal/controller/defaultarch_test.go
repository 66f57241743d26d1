package controller

import (
	"context"
	"runtime"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/testing/kvtest"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
)

// TestDefaultArchitecture: every pass records status.defaultArchitecture
// as upstream's operator does (virt-api and virt-controller read the
// default architecture only from there): the operator's own architecture,
// or spec.configuration.architectureConfiguration.defaultArchitecture when
// set; the other per-architecture settings are preserved, and a pass with
// nothing new writes nothing.
func TestDefaultArchitecture(t *testing.T) {
	env := testenv.Get(t)
	c := env.Client
	ctx := context.Background()
	ns := env.Namespace(t)
	r := finalizerReconciler(c, ns)
	kv := kvtest.KubeVirt(t, ns)
	if err := c.Create(ctx, kv); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(kv)
	// pass runs the configure step on the live resource and writes the
	// status as a pass ends; it returns the resource after the write.
	pass := func() *kvv1.KubeVirt {
		t.Helper()
		live := &kvv1.KubeVirt{}
		if err := c.Get(ctx, key, live); err != nil {
			t.Fatal(err)
		}
		s := newScope(live)
		runStep(t, "configure", r.configure, s)
		if err := r.patchStatus(ctx, s, s.facts()); err != nil {
			t.Fatal(err)
		}
		after := &kvv1.KubeVirt{}
		if err := c.Get(ctx, key, after); err != nil {
			t.Fatal(err)
		}
		return after
	}

	got := pass()
	if got.Status.DefaultArchitecture != runtime.GOARCH {
		t.Fatalf("status.defaultArchitecture %q, want the operator's %q", got.Status.DefaultArchitecture, runtime.GOARCH)
	}
	if again := pass(); again.ResourceVersion != got.ResourceVersion {
		t.Errorf("a pass with nothing new wrote the resource (resourceVersion %s, was %s): status %+v", again.ResourceVersion, got.ResourceVersion, again.Status)
	}

	// The user names the default, beside another per-architecture setting
	// virtop does not read.
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"configuration": map[string]any{
		"architectureConfiguration": map[string]any{
			"defaultArchitecture": "arm64",
			"arm64":               map[string]any{"machineType": "virt"},
		}}}}}
	u.SetGroupVersionKind(kvv1.GroupVersion.WithKind("KubeVirt"))
	u.SetNamespace(ns)
	u.SetName(kv.Name)
	if err := c.Patch(ctx, u, client.Merge); err != nil {
		t.Fatal(err)
	}
	got = pass()
	if got.Status.DefaultArchitecture != "arm64" {
		t.Errorf("with spec.configuration.architectureConfiguration.defaultArchitecture arm64: status.defaultArchitecture %q", got.Status.DefaultArchitecture)
	}
	if again := pass(); again.ResourceVersion != got.ResourceVersion {
		t.Errorf("a pass with nothing new wrote the resource (resourceVersion %s, was %s)", again.ResourceVersion, got.ResourceVersion)
	}
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(kvv1.GroupVersion.WithKind("KubeVirt"))
	if err := c.Get(ctx, key, live); err != nil {
		t.Fatal(err)
	}
	if mt, _, _ := unstructured.NestedString(live.Object, "spec", "configuration", "architectureConfiguration", "arm64", "machineType"); mt != "virt" {
		t.Errorf("spec.configuration.architectureConfiguration.arm64.machineType %q after the passes, want virt kept", mt)
	}
}
