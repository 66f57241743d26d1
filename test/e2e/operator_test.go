package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/components"
	"github.com/virtop-dev/virtop/internal/devcluster"
	"github.com/virtop-dev/virtop/internal/localcluster"
	"github.com/virtop-dev/virtop/internal/scheme"
	"github.com/virtop-dev/virtop/test/e2e/framework"
)

// operatorArgs are the flags a host-process operator needs beside the
// cluster's.
func operatorArgs(t *testing.T) []string {
	hook, err := devcluster.FreeLoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	return devcluster.HostOperatorFlags(hook)
}

func kubeClient(t *testing.T, env *framework.Env) client.Client {
	t.Helper()
	c, err := client.New(env.Clients.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func kvCondition(kv *kvv1.KubeVirt, typ kvv1.KubeVirtConditionType) kvv1.KubeVirtCondition {
	for _, c := range kv.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return kvv1.KubeVirtCondition{}
}

func waitKubeVirt(t *testing.T, c client.Client, what string, timeout time.Duration, ok func(*kvv1.KubeVirt) (bool, string)) time.Duration {
	t.Helper()
	key := client.ObjectKey{Namespace: devcluster.InstallNamespace, Name: "kubevirt"}
	return framework.Eventually(t, what, timeout, func(ctx context.Context) (bool, error) {
		kv := &kvv1.KubeVirt{}
		if err := c.Get(ctx, key, kv); err != nil {
			return false, err
		}
		done, why := ok(kv)
		if !done {
			return false, fmt.Errorf("%s", why)
		}
		return true, nil
	})
}

func available(kv *kvv1.KubeVirt) (bool, string) {
	a := kvCondition(kv, kvv1.KubeVirtConditionAvailable)
	p := kvCondition(kv, kvv1.KubeVirtConditionProgressing)
	return a.Status == corev1.ConditionTrue && p.Status == corev1.ConditionFalse,
		fmt.Sprintf("phase %s; Available %s: %s; Progressing %s: %s", kv.Status.Phase, a.Status, a.Message, p.Status, p.Message)
}

// managedResourceVersions lists every object virtop manages in the install
// namespace and cluster-wide kinds, by resourceVersion.
func managedResourceVersions(t *testing.T, c client.Client) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, gvk := range [][2]string{
		{"apps/v1", "DeploymentList"}, {"apps/v1", "DaemonSetList"}, {"v1", "ServiceList"}, {"v1", "ServiceAccountList"},
		{"v1", "SecretList"}, {"v1", "ConfigMapList"}, {"policy/v1", "PodDisruptionBudgetList"},
		{"rbac.authorization.k8s.io/v1", "RoleList"}, {"rbac.authorization.k8s.io/v1", "ClusterRoleList"},
		{"rbac.authorization.k8s.io/v1", "ClusterRoleBindingList"}, {"apiextensions.k8s.io/v1", "CustomResourceDefinitionList"},
		{"admissionregistration.k8s.io/v1", "ValidatingWebhookConfigurationList"},
		{"admissionregistration.k8s.io/v1", "MutatingWebhookConfigurationList"},
	} {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion(gvk[0])
		list.SetKind(gvk[1])
		if err := c.List(context.Background(), list, client.MatchingLabels{components.ManagedByLabel: components.ManagedByValue}); err != nil {
			t.Fatal(err)
		}
		for _, o := range list.Items {
			out[gvk[1]+"/"+o.GetNamespace()+"/"+o.GetName()] = o.GetResourceVersion()
		}
	}
	return out
}

// TestOperatorLifecycle runs the built operator as a host process on the
// local cluster: install to Available with every component really Ready
// on fake nodes, a steady minute without writes, kills during an upgrade,
// and an uninstall that leaves nothing behind.
func TestOperatorLifecycle(t *testing.T) {
	env := framework.Require(t)
	if !env.OperatorBuilt() {
		t.Fatal("the virtop binary has no operator command")
	}
	c := kubeClient(t, env)
	ctx := context.Background()
	args := operatorArgs(t)
	op := env.Operator(t, args...).Start()

	kv := &kvv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: devcluster.InstallNamespace}}
	kv.Spec.ImageTag = "v1.5.0"
	if err := localcluster.Prepare(kv); err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	if err := c.Create(ctx, kv); err != nil {
		t.Fatal(err)
	}
	waitKubeVirt(t, c, "Available", 3*time.Minute, available)
	t.Logf("MEASURE KubeVirt created -> Available with %d fake nodes: %s", env.Nodes, time.Since(created).Round(100*time.Millisecond))
	for _, name := range []string{"virt-api", "virt-controller"} {
		env.WaitDeploymentAvailable(t, devcluster.InstallNamespace, name, framework.DefaultTimeout)
	}
	env.WaitDaemonSetReady(t, devcluster.InstallNamespace, "virt-handler", framework.DefaultTimeout)

	t.Run("a steady minute writes nothing", func(t *testing.T) {
		before := managedResourceVersions(t, c)
		cur := &kvv1.KubeVirt{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(kv), cur); err != nil {
			t.Fatal(err)
		}
		time.Sleep(60 * time.Second)
		after := managedResourceVersions(t, c)
		for k, v := range before {
			if after[k] != v {
				t.Errorf("%s was written in steady state (%s -> %s)", k, v, after[k])
			}
		}
		now := &kvv1.KubeVirt{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(kv), now); err != nil {
			t.Fatal(err)
		}
		if now.ResourceVersion != cur.ResourceVersion {
			t.Errorf("the KubeVirt resource was written in steady state")
		}
	})

	t.Run("killed during an upgrade, it converges", func(t *testing.T) {
		cur := &kvv1.KubeVirt{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(kv), cur); err != nil {
			t.Fatal(err)
		}
		orig := cur.DeepCopy()
		cur.Spec.ImageTag = "v1.5.3"
		if err := c.Patch(ctx, cur, client.MergeFrom(orig)); err != nil {
			t.Fatal(err)
		}
		for _, after := range []time.Duration{300 * time.Millisecond, 2 * time.Second, 5 * time.Second} {
			time.Sleep(after)
			op.Kill()
			op = op.Restart(0)
		}
		waitKubeVirt(t, c, "v1.5.3 rolled out after kills", 3*time.Minute, func(kv *kvv1.KubeVirt) (bool, string) {
			ok, why := available(kv)
			return ok && kv.Status.ObservedKubeVirtVersion == "v1.5.3", fmt.Sprintf("observed %s; %s", kv.Status.ObservedKubeVirtVersion, why)
		})
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: devcluster.InstallNamespace, Name: "virt-api"}, d); err != nil {
			t.Fatal(err)
		}
		if img := d.Spec.Template.Spec.Containers[0].Image; !strings.HasSuffix(img, ":v1.5.3") {
			t.Errorf("virt-api runs %s after the upgrade", img)
		}
		if exited, codes := op.EverExited(); exited {
			t.Logf("exit codes of the killed operators: %v", codes)
		}
	})

	t.Run("uninstall leaves nothing virtop created", func(t *testing.T) {
		if err := c.Delete(ctx, kv); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, "the KubeVirt resource gone", 3*time.Minute, func(ctx context.Context) (bool, error) {
			err := c.Get(ctx, client.ObjectKeyFromObject(kv), &kvv1.KubeVirt{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return false, fmt.Errorf("still there: %v", err)
		})
		framework.Eventually(t, "managed objects gone", time.Minute, func(ctx context.Context) (bool, error) {
			left := managedResourceVersions(t, c)
			if len(left) == 0 {
				return true, nil
			}
			var names []string
			for k := range left {
				names = append(names, k)
			}
			return false, fmt.Errorf("%d left: %v", len(left), names)
		})
		if !op.Running() {
			t.Error("the operator exited during uninstall")
		}
	})
}
