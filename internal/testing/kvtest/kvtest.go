// Package kvtest is the KubeVirt-level vocabulary of virtop's tests, shared
// by the envtest packages and the end-to-end framework: the KubeVirt
// resource a test creates, and what it waits for on that resource's status.
// It touches only the API server, through the client a test hands it; it
// does not run the operator (internal/testing/operatortest does), so the
// end-to-end binaries, whose operator runs as a process, can use it too.
package kvtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/tools/podless"
)

// Name is the name of the KubeVirt resource the tests create.
const Name = "kubevirt"

// WaitTimeout bounds WaitAvailable and WaitRolledOut: generous, so a
// loaded machine does not fail a test; how long it really takes is measured
// elsewhere.
const WaitTimeout = 3 * time.Minute

// KubeVirt returns the KubeVirt resource Name in namespace ns, changed by
// each mutate in turn and then prepared for a cluster where no pod serves
// KubeVirt's webhooks (podless.Prepare, which renders the strategy of the
// resource as mutated); it is not created.
func KubeVirt(t testing.TB, ns string, mutate ...func(*kvv1.KubeVirt)) *kvv1.KubeVirt {
	t.Helper()
	kv := &kvv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: Name, Namespace: ns}}
	for _, m := range mutate {
		if m != nil {
			m(kv)
		}
	}
	if err := podless.Prepare(kv); err != nil {
		t.Fatal(err)
	}
	return kv
}

// Config is the deployment config of the KubeVirt resource Name in
// namespace kubevirt at version (spec.imageTag), changed by each mutate in
// turn, as the operator of that namespace computes it: what a test of a
// renderer, a Job or a plan starts from.
func Config(t testing.TB, version string, mutate ...func(*kvv1.KubeVirt)) *config.DeploymentConfig {
	t.Helper()
	kv := &kvv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: Name, Namespace: "kubevirt"}}
	kv.Spec.ImageTag = version
	for _, m := range mutate {
		if m != nil {
			m(kv)
		}
	}
	cfg, err := config.FromKubeVirt(kv, config.Settings{Namespace: "kubevirt"})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Available reports whether kv is Available, and its state when it is
// not. Available means what the operator means by it and what
// `kubectl wait --for=condition=Available` waits for: the Available
// condition is True, the control plane serves. That includes an update in
// progress, during which the previous version keeps serving
// (Available=True, Progressing=True; docs/api.md). A test that needs the
// rollout finished waits for RolledOut instead.
func Available(kv *kvv1.KubeVirt) (bool, string) {
	a := kv.Status.Condition(kvv1.KubeVirtConditionAvailable)
	return a.Status == corev1.ConditionTrue, state(kv)
}

// RolledOut reports whether kv is Available and no longer Progressing: every
// component of the target is ready (reason AllComponentsReady), nothing is
// left to roll out.
func RolledOut(kv *kvv1.KubeVirt) (bool, string) {
	ok, why := Available(kv)
	p := kv.Status.Condition(kvv1.KubeVirtConditionProgressing)
	return ok && p.Status == corev1.ConditionFalse, why
}

func state(kv *kvv1.KubeVirt) string {
	a := kv.Status.Condition(kvv1.KubeVirtConditionAvailable)
	p := kv.Status.Condition(kvv1.KubeVirtConditionProgressing)
	return fmt.Sprintf("phase %s; Available %s: %s; Progressing %s: %s", kv.Status.Phase, a.Status, a.Message, p.Status, p.Message)
}

// Wait waits up to timeout until cond holds for the KubeVirt resource at
// key and returns the resource as last read; while cond does not hold, its
// state is what a timeout reports.
func Wait(t testing.TB, c client.Client, key client.ObjectKey, what string, timeout time.Duration, cond func(*kvv1.KubeVirt) (bool, string)) *kvv1.KubeVirt {
	t.Helper()
	kv := &kvv1.KubeVirt{}
	poll.Eventually(t, what, timeout, func() (bool, string) {
		got := &kvv1.KubeVirt{}
		if err := c.Get(context.Background(), key, got); err != nil {
			return false, err.Error()
		}
		kv = got
		return cond(got)
	})
	return kv
}

// WaitAvailable waits until the KubeVirt resource at key is Available (see
// Available for what that means) and returns it.
func WaitAvailable(t testing.TB, c client.Client, key client.ObjectKey) *kvv1.KubeVirt {
	t.Helper()
	return Wait(t, c, key, "Available=True", WaitTimeout, Available)
}

// WaitRolledOut waits until the KubeVirt resource at key is RolledOut
// (Available=True, Progressing=False) and returns it.
func WaitRolledOut(t testing.TB, c client.Client, key client.ObjectKey) *kvv1.KubeVirt {
	t.Helper()
	return Wait(t, c, key, "Available=True and Progressing=False", WaitTimeout, RolledOut)
}
