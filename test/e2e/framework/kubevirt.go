package framework

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/scheme"
	"github.com/virtop-dev/virtop/internal/testing/kvtest"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/tools/devcluster"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// HostOperatorArgs are the flags a host-process operator needs beside the
// cluster's (a free loopback address for its webhook server).
func HostOperatorArgs(t testing.TB) []string {
	t.Helper()
	hook, err := devcluster.FreeLoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	return devcluster.HostOperatorFlags(hook)
}

// Client is a controller-runtime client of the suite's cluster with
// virtop's scheme.
func (e *Env) Client(t testing.TB) client.Client {
	t.Helper()
	c, err := client.New(e.Clients.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// KubeVirtKey is the KubeVirt resource the suite installs.
var KubeVirtKey = client.ObjectKey{Namespace: devcluster.InstallNamespace, Name: kvtest.Name}

// GetKubeVirt reads the suite's KubeVirt resource (KubeVirtKey), failing
// the test if it cannot.
func GetKubeVirt(t testing.TB, c client.Client) *kvv1.KubeVirt {
	t.Helper()
	kv := &kvv1.KubeVirt{}
	if err := c.Get(context.Background(), KubeVirtKey, kv); err != nil {
		t.Fatal(err)
	}
	return kv
}

// SetImageTag patches the suite's KubeVirt resource to imageTag: the
// upgrade (or downgrade) a user makes.
func SetImageTag(t testing.TB, c client.Client, imageTag string) {
	t.Helper()
	ctx := context.Background()
	kv := &kvv1.KubeVirt{}
	if err := c.Get(ctx, KubeVirtKey, kv); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(kv.DeepCopy())
	kv.Spec.ImageTag = imageTag
	if err := c.Patch(ctx, kv, patch); err != nil {
		t.Fatalf("patching KubeVirt's imageTag to %s: %v", imageTag, err)
	}
}

// Virtctl is the path of virtctl built from upstream's source at release
// (make node-images), failing t when it is not built.
func Virtctl(t testing.TB, release string) string {
	t.Helper()
	p := devcluster.VirtctlPath(release)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("virtctl %s is not built (make node-images KUBEVIRT_RELEASE=%s): %v", release, release, err)
	}
	return p
}

// ReleaseBeforeDefault is the upgrade every user of the default release
// makes (upstream supports one minor release forward at a time): from the
// catalog's release before the default one, to the default.
func ReleaseBeforeDefault(t testing.TB) (from, to string) {
	t.Helper()
	versions := release.Builtin().Versions()
	i := slices.Index(versions, release.Default)
	if i < 1 {
		t.Fatalf("the catalog %v has no release before its default %s", versions, release.Default)
	}
	return versions[i-1], release.Default
}

// UpAt installs KubeVirt version on the suite's cluster as virtop up does
// (the base, the sample resource placed by o), without starting an
// operator (the test runs its own), logging what up said.
func (e *Env) UpAt(t testing.TB, o devcluster.ClusterOptions, version string) {
	t.Helper()
	var out bytes.Buffer
	o.Nodes = e.Nodes
	err := e.Cluster.Up(context.Background(), &out, devcluster.UpOptions{ClusterOptions: o, Version: version})
	t.Logf("devcluster.Up:\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
}

// NewKubeVirt returns the suite's KubeVirt resource (KubeVirtKey) for
// imageTag, prepared for the local cluster (kvtest.KubeVirt), not yet
// created.
func NewKubeVirt(t testing.TB, imageTag string) *kvv1.KubeVirt {
	t.Helper()
	return kvtest.KubeVirt(t, KubeVirtKey.Namespace, func(kv *kvv1.KubeVirt) { kv.Spec.ImageTag = imageTag })
}

// WaitKubeVirt waits until ok holds for the suite's KubeVirt resource; ok's
// message is reported while it does not.
func WaitKubeVirt(t testing.TB, c client.Client, what string, timeout time.Duration, ok func(*kvv1.KubeVirt) (bool, string)) time.Duration {
	t.Helper()
	return poll.Eventually(t, what, orDefault(timeout), func(ctx context.Context) (bool, error) {
		kv := &kvv1.KubeVirt{}
		if err := c.Get(ctx, KubeVirtKey, kv); err != nil {
			return false, err
		}
		done, why := ok(kv)
		if !done {
			return false, fmt.Errorf("%s", why)
		}
		return true, nil
	})
}

// RolledOutAt holds when the KubeVirt resource is rolled out
// (kvtest.RolledOut) at version.
func RolledOutAt(version string) func(*kvv1.KubeVirt) (bool, string) {
	return func(kv *kvv1.KubeVirt) (bool, string) {
		ok, why := kvtest.RolledOut(kv)
		return ok && kv.Status.ObservedKubeVirtVersion == version,
			fmt.Sprintf("observed %q; %s", kv.Status.ObservedKubeVirtVersion, why)
	}
}

// ManagedKinds are the list kinds ManagedResourceVersions looks at.
var ManagedKinds = [][2]string{
	{"apps/v1", "DeploymentList"}, {"apps/v1", "DaemonSetList"}, {"v1", "ServiceList"}, {"v1", "ServiceAccountList"},
	{"v1", "SecretList"}, {"v1", "ConfigMapList"}, {"policy/v1", "PodDisruptionBudgetList"},
	{"rbac.authorization.k8s.io/v1", "RoleList"}, {"rbac.authorization.k8s.io/v1", "RoleBindingList"},
	{"rbac.authorization.k8s.io/v1", "ClusterRoleList"}, {"rbac.authorization.k8s.io/v1", "ClusterRoleBindingList"},
	{"apiextensions.k8s.io/v1", "CustomResourceDefinitionList"},
	{"admissionregistration.k8s.io/v1", "ValidatingWebhookConfigurationList"},
	{"admissionregistration.k8s.io/v1", "MutatingWebhookConfigurationList"},
}

// ManagedResourceVersions lists every object labelled as managed by virtop
// (of ManagedKinds), keyed "<List kind>/<namespace>/<name>", by
// resourceVersion.
func ManagedResourceVersions(t testing.TB, c client.Client) map[string]string {
	t.Helper()
	return ResourceVersionsManagedBy(t, c, vocab.ManagedByValue)
}

// ResourceVersionsManagedBy is ManagedResourceVersions of the objects
// whose app.kubernetes.io/managed-by label is managedBy (virtop's, or
// upstream's virt-operator).
func ResourceVersionsManagedBy(t testing.TB, c client.Client, managedBy string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, gvk := range ManagedKinds {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion(gvk[0])
		list.SetKind(gvk[1])
		if err := c.List(context.Background(), list, client.MatchingLabels{vocab.ManagedByLabel: managedBy}); err != nil {
			t.Fatal(err)
		}
		for _, o := range list.Items {
			out[gvk[1]+"/"+o.GetNamespace()+"/"+o.GetName()] = o.GetResourceVersion()
		}
	}
	return out
}

// QuietResourceVersions returns ManagedResourceVersions once it has not
// changed for quiet (at most timeout). After an API server outage the
// cluster's own controllers catch up for a while (kube-controller-manager's
// disruption controller rewrites the PodDisruptionBudgets' status, with
// back-off on its conflicts): a snapshot taken then records their writes as
// changes made later. A control plane that never goes quiet fails the test.
func QuietResourceVersions(t testing.TB, c client.Client, quiet, timeout time.Duration) map[string]string {
	t.Helper()
	return QuietResourceVersionsManagedBy(t, c, vocab.ManagedByValue, quiet, timeout)
}

// QuietResourceVersionsManagedBy is QuietResourceVersions of the objects
// managedBy labels (ResourceVersionsManagedBy).
func QuietResourceVersionsManagedBy(t testing.TB, c client.Client, managedBy string, quiet, timeout time.Duration) map[string]string {
	t.Helper()
	last := ResourceVersionsManagedBy(t, c, managedBy)
	since := time.Now()
	var written []string
	took := poll.Eventually(t, fmt.Sprintf("the objects managed by %s unwritten for %s", managedBy, quiet), timeout, func() (bool, string) {
		now := ResourceVersionsManagedBy(t, c, managedBy)
		if changed := changedKeys(last, now); len(changed) > 0 {
			last, since = now, time.Now()
			written = append(written, changed...)
			return false, "written: " + strings.Join(changed, ", ")
		}
		return time.Since(since) >= quiet, ""
	})
	t.Logf("the objects managed by %s quiet for %s after %s; written meanwhile: %v", managedBy, quiet, took.Round(100*time.Millisecond), written)
	return last
}

// changedKeys are the keys whose values differ between a and b, or that
// only one of them has, sorted.
func changedKeys(a, b map[string]string) []string {
	var out []string
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// DeleteKubeVirt deletes the suite's KubeVirt resource and waits until it
// and every object virtop manages are gone.
func DeleteKubeVirt(t testing.TB, c client.Client, timeout time.Duration) {
	t.Helper()
	kv := &kvv1.KubeVirt{}
	kv.Namespace, kv.Name = KubeVirtKey.Namespace, KubeVirtKey.Name
	if err := c.Delete(context.Background(), kv); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	poll.Eventually(t, "the KubeVirt resource gone", orDefault(timeout), func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, KubeVirtKey, &kvv1.KubeVirt{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("still there: %v", err)
	})
	poll.Eventually(t, "managed objects gone", timeout, func(ctx context.Context) (bool, error) {
		left := ManagedResourceVersions(t, c)
		if len(left) == 0 {
			return true, nil
		}
		names := make([]string, 0, len(left))
		for k := range left {
			names = append(names, k)
		}
		sort.Strings(names)
		return false, fmt.Errorf("%d left: %v", len(left), names)
	})
}
