package controller_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/operator"
	"github.com/virtop-dev/virtop/internal/testing/kvtest"
	"github.com/virtop-dev/virtop/internal/testing/operatortest"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
	"github.com/virtop-dev/virtop/internal/uninstall"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// TestUninstallCleansTheNodesVirtHandlerRanOn: once the control plane is
// gone, the uninstall runs a Job on each node that carries virt-handler's
// heartbeat, waits for virt-handler's pod there to go first, reports each
// node's outcome in an event and removes the heartbeat; a node that is not
// Ready, a Job that never finishes (envtest has no Job controller) and a
// virt-handler pod that never goes are said and given up, and the resource
// is finalized. A node virt-handler
// never ran on gets no Job.
func TestUninstallCleansTheNodesVirtHandlerRanOn(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	c := env.Client
	ctx := context.Background()
	testenv.FakeReadiness(t, c, ns)
	operatortest.Start(t, env.Config, operator.Options{Namespace: ns, NodeCleanupTimeout: 20 * time.Second})

	node := func(name string, heartbeat, ready bool) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name}}
		if heartbeat {
			n.Annotations = map[string]string{uninstall.HeartbeatAnnotation: "2026-12-06T10:00:00Z"}
		}
		if err := c.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), n) })
		if ready {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
			if err := c.Status().Update(ctx, n); err != nil {
				t.Fatal(err)
			}
		}
		return n
	}
	cleaned := node("cleaned", true, true) // its Job completes
	stuck := node("stuck", true, true)     // its Job never finishes
	notReady := node("notready", true, false)
	plain := node("plain", false, true)            // no virt-handler ever ran there
	terminating := node("terminating", true, true) // its virt-handler pod never goes

	// virt-handler's pod, still terminating on the cleaned node when the
	// control plane is gone.
	handler := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "virt-handler-x", Labels: map[string]string{vocab.AppLabel: vocab.VirtHandler}},
		Spec:       corev1.PodSpec{NodeName: cleaned.Name, Containers: []corev1.Container{{Name: "virt-handler", Image: "virt-handler"}}},
	}
	if err := c.Create(ctx, handler); err != nil {
		t.Fatal(err)
	}
	// One whose deletion a finalizer holds, as a kubelet that never
	// confirms it would.
	held := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "virt-handler-held", Labels: map[string]string{vocab.AppLabel: vocab.VirtHandler}, Finalizers: []string{"virtop.test/hold"}},
		Spec:       corev1.PodSpec{NodeName: terminating.Name, Containers: []corev1.Container{{Name: "virt-handler", Image: "virt-handler"}}},
	}
	if err := c.Create(ctx, held); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Patch(context.Background(), held, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
	})

	kv := kvtest.KubeVirt(t, ns)
	if err := c.Create(ctx, kv); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(kv)
	kv = kvtest.WaitRolledOut(t, c, key)
	handlerImage := ""
	if cfgJob := jobOf(t, ctx, c, ns, plain.Name); cfgJob != nil {
		t.Fatalf("a cleanup Job before the uninstall: %s", cfgJob.Name)
	}
	if err := c.Delete(ctx, kv); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, held, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}

	heartbeat := func(n *corev1.Node) (bool, error) {
		cur := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(n), cur); err != nil {
			return false, err
		}
		return uninstall.NeedsCleanup(cur), nil
	}
	poll.Eventually(t, "the node that is not Ready given up", 2*time.Minute, func() (bool, string) {
		has, err := heartbeat(notReady)
		return err == nil && !has, fmt.Sprintf("heartbeat still there (%v)", err)
	})
	poll.Eventually(t, "a Job for the stuck node", time.Minute, func() (bool, string) {
		return jobOf(t, ctx, c, ns, stuck.Name) != nil, "none"
	})
	if j := jobOf(t, ctx, c, ns, cleaned.Name); j != nil {
		t.Errorf("a cleanup Job on %s while virt-handler's pod is still there", cleaned.Name)
	}
	if err := c.Delete(ctx, handler, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	var job *batchv1.Job
	poll.Eventually(t, "a Job for the cleaned node once virt-handler's pod is gone", time.Minute, func() (bool, string) {
		job = jobOf(t, ctx, c, ns, cleaned.Name)
		return job != nil, "none"
	})
	handlerImage = job.Spec.Template.Spec.Containers[0].Image
	if want := kv.Status.ObservedKubeVirtRegistry + "/virt-handler:" + kv.Status.ObservedKubeVirtVersion; handlerImage != want {
		t.Errorf("the Job runs %s, want virt-handler's image %s", handlerImage, want)
	}
	if job.Spec.Template.Spec.NodeName != cleaned.Name {
		t.Errorf("the Job runs on %q", job.Spec.Template.Spec.NodeName)
	}

	// Play the Job controller and the kubelet for the cleaned node's Job.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: job.Name + "-abcde", Labels: map[string]string{batchv1.JobNameLabel: job.Name}},
		Spec:       job.Spec.Template.Spec,
	}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	pod.Status = corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{
		Name: uninstall.NodeCleanupContainer, Image: handlerImage,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", Message: "removed 6 files of KubeVirt's; nothing of KubeVirt's left\n", StartedAt: now, FinishedAt: now}},
	}}}
	if err := c.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	job.Status = batchv1.JobStatus{
		StartTime: &now, CompletionTime: &now, Succeeded: 1,
		Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now},
		},
	}
	if err := c.Status().Update(ctx, job); err != nil {
		t.Fatal(err)
	}

	poll.Eventually(t, "the KubeVirt resource finalized", 3*time.Minute, func() (bool, string) {
		err := c.Get(ctx, key, &kvv1.KubeVirt{})
		return apierrors.IsNotFound(err), fmt.Sprintf("%v", err)
	})
	if j := jobOf(t, ctx, c, ns, terminating.Name); j != nil {
		t.Errorf("a cleanup Job on %s, where virt-handler's pod never went", terminating.Name)
	}
	for _, n := range []*corev1.Node{cleaned, stuck, notReady, terminating} {
		if has, err := heartbeat(n); err != nil || has {
			t.Errorf("node %s still carries virt-handler's heartbeat (%v)", n.Name, err)
		}
	}
	if j := jobOf(t, ctx, c, ns, plain.Name); j != nil {
		t.Errorf("a cleanup Job on %s, where virt-handler never ran", plain.Name)
	}
	poll.Eventually(t, "the cleanup Jobs deleted", time.Minute, func() (bool, string) {
		var jobs batchv1.JobList
		if err := c.List(ctx, &jobs, client.InNamespace(ns), client.MatchingLabels{vocab.AppComponentLabel: uninstall.NodeCleanupComponent}); err != nil {
			return false, err.Error()
		}
		var left []string
		for _, j := range jobs.Items {
			if j.DeletionTimestamp == nil {
				left = append(left, j.Name)
			}
		}
		return len(left) == 0, fmt.Sprintf("left: %v", left)
	})

	want := []string{
		"Normal NodeCleaned Node " + cleaned.Name + ": removed 6 files of KubeVirt's; nothing of KubeVirt's left",
		"Warning NodeNotCleaned Node " + notReady.Name + ": the node is not Ready; virt-handler's files stay on it",
		"Warning NodeNotCleaned Node " + stuck.Name + ": its cleanup Job " + uninstall.NodeCleanupJobName(stuck.Name) + " did not finish in 20s",
		"Warning NodeNotCleaned Node " + terminating.Name + ": virt-handler's pod virt-handler-held is still terminating 20s after its grace period; its files stay on the node",
	}
	sort.Strings(want)
	// The recorder writes events in the background: the last may land
	// after the resource is gone.
	poll.Eventually(t, "an event for each node", time.Minute, func() (bool, string) {
		var list eventsv1.EventList
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		var said []string
		for _, e := range list.Items {
			if e.Regarding.Name == kv.Name && strings.HasPrefix(e.Reason, "Node") {
				said = append(said, e.Type+" "+e.Reason+" "+e.Note)
			}
		}
		sort.Strings(said)
		return strings.Join(said, "\n") == strings.Join(want, "\n"), fmt.Sprintf("events:\n%s\nwant:\n%s", strings.Join(said, "\n"), strings.Join(want, "\n"))
	})
}

// jobOf is the cleanup Job of a node, or nil.
func jobOf(t *testing.T, ctx context.Context, c client.Client, ns, node string) *batchv1.Job {
	t.Helper()
	job := &batchv1.Job{}
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: uninstall.NodeCleanupJobName(node)}, job)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return job
}
