//go:build long

package long

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/tools/devcluster"
	"github.com/virtop-dev/virtop/internal/vocab"
	"github.com/virtop-dev/virtop/test/e2e/framework"
)

// outage is how long the API server stays away.
const outage = 20 * time.Second

// The API server stops for 20 seconds during an install and again while
// idle: the operator does not exit and converges once it is back.
//
// The operator runs with leader election, as the Deployment does. On a
// loaded machine the API server takes up to 10 s to stop and half a minute
// to answer again, so a "20 s" outage keeps it away for up to a minute;
// with the first renew deadline (40 s) the leader exited ("leader election
// lost", exit code 2), which is why the deadline is now 75 s.
func TestAPIServerStopped(t *testing.T) {
	s := newSuite(t)
	s.ensureUninstalled()
	op := s.operator("--leader-elect").Start()

	// Cordoned nodes leave virt-api's pods Pending, so the install waits
	// at its virt-api barrier for as long as the test needs.
	s.cordon(true)
	t.Cleanup(func() { s.cordon(false) })
	s.setVersion(fromVersion)
	framework.WaitKubeVirt(t, s.c, "the install to wait on virt-api", rolloutTimeout, func(kv *kvv1.KubeVirt) (bool, string) {
		p := kv.Status.Condition(kvv1.KubeVirtConditionProgressing)
		a := kv.Status.Condition(kvv1.KubeVirtConditionAvailable)
		d := &appsv1.Deployment{}
		err := s.c.Get(context.Background(), types.NamespacedName{Namespace: devcluster.InstallNamespace, Name: vocab.VirtAPI}, d)
		return err == nil && p.Status == corev1.ConditionTrue && a.Status != corev1.ConditionTrue,
			fmt.Sprintf("Progressing %s, Available %s, virt-api Deployment: %v", p.Status, a.Status, err)
	})
	s.apiOutage(op, "during the install")
	s.cordon(false)
	took := s.converged(fromVersion)
	alive(t, op, 0)
	t.Logf("MEASURE API server back -> converged (install resumed): %s", took.Round(100*time.Millisecond))

	before := s.mustKubeVirt().Status.Condition(kvv1.KubeVirtConditionAvailable)
	s.apiOutage(op, "while idle")
	took = s.converged(fromVersion)
	alive(t, op, 0)
	after := s.mustKubeVirt().Status.Condition(kvv1.KubeVirtConditionAvailable)
	if !after.LastTransitionTime.Equal(&before.LastTransitionTime) {
		t.Errorf("Available flipped over the idle outage: last transition %s, before it %s", after.LastTransitionTime, before.LastTransitionTime)
	}
	t.Logf("MEASURE API server back (idle) -> converged: %s", took.Round(100*time.Millisecond))
}

// apiOutage stops the API server for the outage, checking it really does
// not answer and the operator stays up, and starts it again.
func (s *suite) apiOutage(op *framework.Process, label string) {
	t := s.t
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	s.env.StopAPIServer(t)
	stopped := time.Now()
	if s.env.APIAnswers(ctx) {
		t.Fatalf("%s: the API server still answers after it was stopped", label)
	}
	time.Sleep(outage)
	if s.env.APIAnswers(ctx) {
		t.Fatalf("%s: the API server answered during the outage", label)
	}
	if !op.Running() {
		t.Fatalf("%s: the operator exited while the API server was away (exits %v)", label, op.Exits())
	}
	s.env.StartAPIServer(t)
	t.Logf("MEASURE API server outage %s: stopping took %s, down %s, back after %s", label,
		stopped.Sub(start).Round(100*time.Millisecond), outage, time.Since(start).Round(100*time.Millisecond))
}

// cordon marks every node (un)schedulable.
func (s *suite) cordon(on bool) {
	s.t.Helper()
	ctx := context.Background()
	nodes, err := s.env.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	patch := []byte(fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, on))
	for _, n := range nodes.Items {
		if n.Spec.Unschedulable == on {
			continue
		}
		if _, err := s.env.Kube.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			s.t.Fatalf("cordon %s=%t: %v", n.Name, on, err)
		}
	}
}

// etcd restarts while the control plane is idle: the operator does not
// exit, the control plane stays Available, and once etcd is back the
// operator's steady state writes nothing.
func TestEtcdRestartedWhileIdle(t *testing.T) {
	s := newSuite(t)
	s.ensureInstalled(fromVersion)
	metrics := s.env.MetricsEndpoint(t)
	op := s.operator(metrics.Args()...).Start()
	s.converged(fromVersion)
	s.settle(metrics)
	availBefore := s.mustKubeVirt().Status.Condition(kvv1.KubeVirtConditionAvailable)

	atStop := framework.MustScrape(t, metrics)
	start := time.Now()
	s.env.StopEtcd(t)
	poll.Eventually(t, "the API server to report not ready without etcd", time.Minute, func(ctx context.Context) (bool, error) {
		return !s.env.APIReady(ctx), nil
	})
	time.Sleep(5 * time.Second)
	if !op.Running() {
		t.Fatalf("the operator exited while etcd was away (exits %v)", op.Exits())
	}
	s.env.StartEtcd(t)
	t.Logf("MEASURE etcd stopped and back in %s", time.Since(start).Round(100*time.Millisecond))

	s.converged(fromVersion)
	// The operator's informers relist after the restart; what that
	// triggers must write nothing, now and for the idle half-minute after.
	time.Sleep(10 * time.Second)
	atRecovered := framework.MustScrape(t, metrics)
	byVerb, byKey, writes := atRecovered.Delta(atStop)
	t.Logf("MEASURE requests from etcd's stop until 10 s after its return: %s", framework.FormatVerbs(byVerb))
	if writes != 0 {
		t.Errorf("the operator wrote %g times over the etcd restart of an idle control plane: %s", writes, framework.FormatKeys(byKey))
	}
	time.Sleep(30 * time.Second)
	atEnd := framework.MustScrape(t, metrics)
	byVerb, byKey, writes = atEnd.Delta(atRecovered)
	t.Logf("MEASURE requests in the idle 30 s after etcd's return: %s", framework.FormatVerbs(byVerb))
	if writes != 0 {
		t.Errorf("the operator wrote %g times in the idle 30 s after etcd's return: %s", writes, framework.FormatKeys(byKey))
	}
	availAfter := s.mustKubeVirt().Status.Condition(kvv1.KubeVirtConditionAvailable)
	if availAfter.Status != corev1.ConditionTrue || !availAfter.LastTransitionTime.Equal(&availBefore.LastTransitionTime) {
		t.Errorf("Available changed over the etcd restart: %s since %s, before %s since %s",
			availAfter.Status, availAfter.LastTransitionTime, availBefore.Status, availBefore.LastTransitionTime)
	}
	alive(t, op, 0)
}

// settle waits until the operator has gone 10 seconds without a write.
func (s *suite) settle(metrics framework.Metrics) {
	s.t.Helper()
	prev := framework.MustScrape(s.t, metrics)
	poll.Eventually(s.t, "the operator to stop writing", 2*time.Minute, func(ctx context.Context) (bool, error) {
		time.Sleep(10 * time.Second)
		cur, err := framework.ScrapeRequests(ctx, metrics)
		if err != nil {
			return false, err
		}
		_, byKey, writes := cur.Delta(prev)
		prev = cur
		return writes == 0, fmt.Errorf("still writing: %s", framework.FormatKeys(byKey))
	})
}
