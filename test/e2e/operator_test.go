package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/testing/kvtest"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/tools/devcluster"
	"github.com/virtop-dev/virtop/test/e2e/framework"
)

// TestOperatorLifecycle runs the built operator as a host process on the
// local cluster: install to Available with every component really Ready
// on fake nodes, a steady minute without writes, kills during an upgrade,
// and an uninstall that leaves nothing behind.
func TestOperatorLifecycle(t *testing.T) {
	env := framework.Require(t)
	if !env.OperatorBuilt() {
		t.Fatal("the virtop binary has no operator command")
	}
	c := env.Client(t)
	ctx := context.Background()
	args := framework.HostOperatorArgs(t)
	op := env.Operator(t, args...).Start()

	kv := framework.NewKubeVirt(t, "v1.5.0")
	created := time.Now()
	if err := c.Create(ctx, kv); err != nil {
		t.Fatal(err)
	}
	framework.WaitKubeVirt(t, c, "Available", 3*time.Minute, kvtest.RolledOut)
	t.Logf("MEASURE KubeVirt created -> Available with %d fake nodes: %s", env.Nodes, time.Since(created).Round(100*time.Millisecond))
	for _, name := range []string{"virt-api", "virt-controller"} {
		env.WaitDeploymentAvailable(t, devcluster.InstallNamespace, name, framework.DefaultTimeout)
	}
	env.WaitDaemonSetReady(t, devcluster.InstallNamespace, "virt-handler", framework.DefaultTimeout)

	t.Run("a steady minute writes nothing", func(t *testing.T) {
		before := framework.ManagedResourceVersions(t, c)
		cur := &kvv1.KubeVirt{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(kv), cur); err != nil {
			t.Fatal(err)
		}
		time.Sleep(60 * time.Second)
		after := framework.ManagedResourceVersions(t, c)
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
		framework.WaitKubeVirt(t, c, "v1.5.3 rolled out after kills", 3*time.Minute, framework.RolledOutAt("v1.5.3"))
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
		poll.Eventually(t, "the KubeVirt resource gone", 3*time.Minute, func(ctx context.Context) (bool, error) {
			err := c.Get(ctx, client.ObjectKeyFromObject(kv), &kvv1.KubeVirt{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return false, fmt.Errorf("still there: %v", err)
		})
		poll.Eventually(t, "managed objects gone", time.Minute, func(ctx context.Context) (bool, error) {
			left := framework.ManagedResourceVersions(t, c)
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
