package controller

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/apply"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/strategystore"
	"github.com/virtop-dev/virtop/internal/testing/kvtest"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// holdFinalizer stands for another controller's finalizer on the KubeVirt
// resource, which keeps it after virtop's uninstall.
const holdFinalizer = "example.com/hold"

func finalizerReconciler(c client.Client, ns string) *Reconciler {
	applier := apply.New(c)
	return &Reconciler{Client: c, APIReader: c, Settings: config.Settings{Namespace: ns}, Catalog: release.Builtin(),
		Strategies: &strategystore.Store{Client: c, Applier: applier, Catalog: release.Builtin()},
		Applier:    applier, Capabilities: fixedCapabilities{}}
}

// TestFinalizerNamesPerRelease: virtop names the KubeVirt finalizer as
// upstream's operator of the release does (foregroundDeleteKubeVirt up to
// v1.8.4, kubevirt.io/foregroundDeleteKubeVirt from v1.9.0), replaces the
// other name rather than adding its own beside it, and removes either when
// its uninstall is done: an installation adopted from upstream's v1.9.0
// operator is deleted, not left Terminating.
func TestFinalizerNamesPerRelease(t *testing.T) {
	env := testenv.Get(t)
	c := env.Client
	ctx := context.Background()
	for _, tc := range []struct {
		name, version string
		before        []string // as the resource comes (upstream's operator, or virtop at another release)
		want          []string // after virtop's finalizer step
	}{
		{"adopted from upstream v1.9.0", "v1.9.0", []string{vocab.KubeVirtFinalizer}, []string{vocab.KubeVirtFinalizer}},
		{"adopted from upstream v1.8.4", "v1.8.4", []string{vocab.LegacyKubeVirtFinalizer}, []string{vocab.LegacyKubeVirtFinalizer}},
		{"upgraded to v1.9.0 from v1.8.4", "v1.9.0", []string{holdFinalizer, vocab.LegacyKubeVirtFinalizer}, []string{holdFinalizer, vocab.KubeVirtFinalizer}},
		{"fresh at v1.5.3", "v1.5.3", nil, []string{vocab.LegacyKubeVirtFinalizer}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.Namespace(t)
			r := finalizerReconciler(c, ns)
			kv := kvtest.KubeVirt(t, ns, func(kv *kvv1.KubeVirt) {
				kv.Finalizers = tc.before
				kv.Spec.ImageTag = tc.version
			})
			if err := c.Create(ctx, kv); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { releaseHold(t, c, kv) })
			s := newScope(kv)
			if !runStep(t, "configure", r.configure, s) || !runStep(t, "finalizer", r.ensureFinalizer, s) {
				t.Fatal("configure or finalizer ended the pass")
			}
			live := &kvv1.KubeVirt{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(kv), live); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(live.Finalizers, tc.want) {
				t.Errorf("finalizers at %s: %q, want %q", tc.version, live.Finalizers, tc.want)
			}
			// A pass that changes nothing writes nothing.
			rv := live.ResourceVersion
			s = newScope(live)
			if !runStep(t, "configure", r.configure, s) || !runStep(t, "finalizer", r.ensureFinalizer, s) || live.ResourceVersion != rv {
				t.Errorf("a second finalizer step wrote the resource (resourceVersion %s, was %s)", live.ResourceVersion, rv)
			}

			// Delete it: the uninstall runs until it is done (the cluster's
			// CRDs, shared with other tests, may take a few passes), and
			// the resource goes (or only the other controller's finalizer
			// holds it).
			if err := c.Delete(ctx, live); err != nil {
				t.Fatal(err)
			}
			after := &kvv1.KubeVirt{}
			var err error
			poll.Eventually(t, "the uninstall done", 2*time.Minute, func() (bool, string) {
				if _, rerr := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(kv)}); rerr != nil {
					return false, rerr.Error()
				}
				err = c.Get(ctx, client.ObjectKeyFromObject(kv), after)
				return apierrors.IsNotFound(err) || err == nil && after.Status.Phase == kvv1.KubeVirtPhaseDeleted, fmt.Sprintf("phase %q (%v)", after.Status.Phase, err)
			})
			switch {
			case slices.Contains(tc.before, holdFinalizer):
				if err != nil || !slices.Equal(after.Finalizers, []string{holdFinalizer}) || after.Status.Phase != kvv1.KubeVirtPhaseDeleted {
					t.Errorf("after the uninstall: finalizers %q phase %q (%v); want only %s left, phase Deleted", after.Finalizers, after.Status.Phase, err, holdFinalizer)
				}
			case err == nil:
				t.Errorf("the KubeVirt resource is left Terminating after the uninstall: finalizers %q, phase %q", after.Finalizers, after.Status.Phase)
			}
		})
	}
}

// releaseHold removes every finalizer of kv, so that the namespace goes.
func releaseHold(t *testing.T, c client.Client, kv *kvv1.KubeVirt) {
	t.Helper()
	live := &kvv1.KubeVirt{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(kv), live); err != nil {
		return
	}
	orig := live.DeepCopy()
	live.Finalizers = nil
	if err := c.Patch(context.Background(), live, client.MergeFrom(orig)); err != nil {
		t.Errorf("releasing %s: %v", kv.Name, err)
	}
}
