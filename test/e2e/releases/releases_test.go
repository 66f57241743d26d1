package releases

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/testing/testreleases"
	"github.com/virtop-dev/virtop/internal/tools/devcluster"
	"github.com/virtop-dev/virtop/test/e2e/framework"
)

// TestEveryReleaseInstalls installs each release in turn to Available,
// checks that every Deployment and DaemonSet its strategy holds runs the
// release's images and is Ready, and uninstalls it. Under
// VIRTOP_TEST_RELEASES=default (make test) it covers the catalog's default
// release only; make test-all covers every release.
func TestEveryReleaseInstalls(t *testing.T) {
	env := framework.Require(t)
	if !env.OperatorBuilt() {
		t.Fatal("the virtop binary has no operator command")
	}
	c := env.Client(t)
	ctx := context.Background()
	env.Operator(t, framework.HostOperatorArgs(t)...).Start()
	for _, v := range testreleases.Select(t, release.Versions()) {
		t.Run(v, func(t *testing.T) {
			kv := framework.NewKubeVirt(t, v)
			want := workloadsOf(t, kv.DeepCopy())
			created := time.Now()
			if err := c.Create(ctx, kv); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { framework.DeleteKubeVirt(t, c, 3*time.Minute) })
			framework.WaitKubeVirt(t, c, v+" Available", 4*time.Minute, framework.RolledOutAt(v))
			t.Logf("MEASURE %s: KubeVirt created -> Available with %d fake nodes: %s", v, env.Nodes, time.Since(created).Round(100*time.Millisecond))
			for _, w := range want {
				switch w.kind {
				case "Deployment":
					env.WaitDeploymentAvailable(t, devcluster.InstallNamespace, w.name, framework.DefaultTimeout)
					d := &appsv1.Deployment{}
					if err := c.Get(ctx, client.ObjectKey{Namespace: devcluster.InstallNamespace, Name: w.name}, d); err != nil {
						t.Fatal(err)
					}
					checkImage(t, v, w.name, d.Spec.Template.Spec.Containers[0].Image, w.image)
				case "DaemonSet":
					env.WaitDaemonSetReady(t, devcluster.InstallNamespace, w.name, framework.DefaultTimeout)
					d := &appsv1.DaemonSet{}
					if err := c.Get(ctx, client.ObjectKey{Namespace: devcluster.InstallNamespace, Name: w.name}, d); err != nil {
						t.Fatal(err)
					}
					checkImage(t, v, w.name, d.Spec.Template.Spec.Containers[0].Image, w.image)
				}
			}
			t.Logf("%s: %d workloads ready: %v", v, len(want), want)
		})
	}
}

type workload struct{ kind, name, image string }

// workloadsOf renders the strategy of kv as the operator does (in process,
// for the install namespace) and lists its Deployments and DaemonSets with
// their main image.
func workloadsOf(t *testing.T, kv *kvv1.KubeVirt) []workload {
	t.Helper()
	cfg, err := config.FromKubeVirt(kv, config.Settings{Namespace: devcluster.InstallNamespace})
	if err != nil {
		t.Fatal(err)
	}
	s, err := strategy.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out []workload
	for _, o := range s.Objects {
		switch w := o.(type) {
		case *appsv1.Deployment:
			out = append(out, workload{"Deployment", w.Name, w.Spec.Template.Spec.Containers[0].Image})
		case *appsv1.DaemonSet:
			out = append(out, workload{"DaemonSet", w.Name, w.Spec.Template.Spec.Containers[0].Image})
		}
	}
	if len(out) < 3 {
		t.Fatalf("%s renders only %v", cfg.Version, out)
	}
	return out
}

func checkImage(t *testing.T, version, name, got, want string) {
	t.Helper()
	if got != want {
		t.Errorf("%s %s runs %q, want %q", version, name, got, want)
	}
}
