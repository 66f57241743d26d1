package framework

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/tools/devcluster"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// Workloads are the install namespace's Deployments and DaemonSets but
// the operator's.
func Workloads(t testing.TB, c client.Client) ([]appsv1.Deployment, []appsv1.DaemonSet) {
	t.Helper()
	var deps appsv1.DeploymentList
	var dss appsv1.DaemonSetList
	if err := c.List(context.Background(), &deps, client.InNamespace(devcluster.InstallNamespace)); err != nil {
		t.Fatal(err)
	}
	if err := c.List(context.Background(), &dss, client.InNamespace(devcluster.InstallNamespace)); err != nil {
		t.Fatal(err)
	}
	deps.Items = slices.DeleteFunc(deps.Items, func(d appsv1.Deployment) bool { return d.Name == vocab.VirtOperator })
	return deps.Items, dss.Items
}

// Revisions are how many pod templates each workload has rolled out,
// by "Deployment <name>" or "DaemonSet <name>": a Deployment's
// deployment.kubernetes.io/revision, a DaemonSet's number of
// ControllerRevisions.
func Revisions(t testing.TB, c client.Client) map[string]int {
	t.Helper()
	out := map[string]int{}
	deps, dss := Workloads(t, c)
	for _, d := range deps {
		n, _ := strconv.Atoi(d.Annotations["deployment.kubernetes.io/revision"])
		out["Deployment "+d.Name] = n
	}
	var revs appsv1.ControllerRevisionList
	if err := c.List(context.Background(), &revs, client.InNamespace(devcluster.InstallNamespace)); err != nil {
		t.Fatal(err)
	}
	for _, d := range dss {
		n := 0
		for _, r := range revs.Items {
			if metav1.IsControlledBy(&r, &d) {
				n++
			}
		}
		out["DaemonSet "+d.Name] = n
	}
	return out
}

// ScaleOperator sets the Deployment virt-operator's replicas and waits
// until no pod of it is left (at 0).
func ScaleOperator(t testing.TB, c client.Client, replicas int32) {
	t.Helper()
	ctx := context.Background()
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: devcluster.InstallNamespace, Name: vocab.VirtOperator}, d); err != nil {
		t.Fatal(err)
	}
	orig := d.DeepCopy()
	d.Spec.Replicas = ptr.To(replicas)
	if err := c.Patch(ctx, d, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	if replicas > 0 {
		return
	}
	poll.Eventually(t, "the virt-operator pods gone", 2*time.Minute, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(devcluster.InstallNamespace), client.MatchingLabels{vocab.AppLabel: vocab.VirtOperator}); err != nil {
			return false, err
		}
		return len(pods.Items) == 0, fmt.Errorf("%d pods left", len(pods.Items))
	})
}
