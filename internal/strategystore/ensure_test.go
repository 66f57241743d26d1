package strategystore_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/scheme"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/strategystore"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
	"github.com/virtop-dev/virtop/internal/vocab"
)

func TestMain(m *testing.M) {
	log.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	code := testenv.Main(m, testenv.Options{Scheme: scheme.New()})
	cleanupBinary()
	os.Exit(code)
}

// createKubeVirt creates kv: the Runner records the signing key's
// fingerprint in its status.
func createKubeVirt(t *testing.T, c client.Client, kv *kvv1.KubeVirt) {
	t.Helper()
	if err := c.Create(context.Background(), kv); err != nil {
		t.Fatal(err)
	}
}

func getJob(t *testing.T, c client.Client, ns, name string) *batchv1.Job {
	t.Helper()
	job := &batchv1.Job{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, job); err != nil {
		t.Fatalf("Job %s: %v", name, err)
	}
	return job
}

// finishJob writes the status the Job controller writes when a Job ends.
func finishJob(ctx context.Context, c client.Client, key client.ObjectKey, succeeded bool, reason, message string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		job := &batchv1.Job{}
		if err := c.Get(ctx, key, job); err != nil {
			return err
		}
		now := metav1.Now()
		start := metav1.NewTime(now.Add(-5 * time.Second))
		job.Status.StartTime = &start
		job.Status.Active = 0
		if succeeded {
			job.Status.Succeeded = 1
			job.Status.CompletionTime = &now
			job.Status.Conditions = []batchv1.JobCondition{
				{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, Reason: "CompletionsReached", Message: "Reached expected number of succeeded pods", LastProbeTime: now, LastTransitionTime: now},
				{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, Reason: "CompletionsReached", Message: "Reached expected number of succeeded pods", LastProbeTime: now, LastTransitionTime: now},
			}
		} else {
			job.Status.Failed = 1
			job.Status.Conditions = []batchv1.JobCondition{
				{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: reason, Message: message, LastProbeTime: now, LastTransitionTime: now},
				{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: reason, Message: message, LastProbeTime: now, LastTransitionTime: now},
			}
		}
		return c.Status().Update(ctx, job)
	})
}

// collectGarbage plays the garbage collector for a Job deleted in the
// foreground: it removes the Job's finalizers so the deletion completes.
func collectGarbage(t *testing.T, c client.Client, job *batchv1.Job) {
	t.Helper()
	ctx := context.Background()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur := &batchv1.Job{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(job), cur); err != nil {
			return err
		}
		if cur.DeletionTimestamp == nil {
			t.Fatalf("Job %s is not being deleted", job.Name)
		}
		cur.Finalizers = nil
		return c.Update(ctx, cur)
	})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

func TestEnsureCreatesJobAndReplacesFailedOne(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	c := env.Client
	ctx := context.Background()
	kv, cfg := newConfig(t, ns, "v1.5.3", nil)
	createKubeVirt(t, c, kv)
	clk := clocktesting.NewFakePassiveClock(time.Now())
	r := strategystore.NewRunner(c, c, "example.com/virtop:test")
	r.Clock = clk
	name := strategystore.Name(cfg.ID)
	createJobAccount(t, c, ns)

	// A Job of an earlier deployment is obsolete.
	_, oldCfg := newConfig(t, ns, "v1.4.0", nil)
	old := strategystore.Job(oldCfg, "example.com/virtop:old")
	if err := c.Create(ctx, old); err != nil {
		t.Fatal(err)
	}

	state, err := r.Ensure(ctx, kv, cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := "Waiting for the install strategy of v1.5.3 from Job " + name
	if state.Pending != want || state.Failed != "" || state.RequeueAfter <= 0 {
		t.Errorf("first pass: %+v, want Pending %q", state, want)
	}
	job := getJob(t, c, ns, name)
	if got := job.Spec.Template.Spec.Containers[0].Image; got != "example.com/virtop:test" {
		t.Errorf("image %s", got)
	}
	if job.Annotations[vocab.InstallStrategyIdentifierAnnotation] != cfg.ID {
		t.Errorf("identifier annotation %q", job.Annotations[vocab.InstallStrategyIdentifierAnnotation])
	}
	if o := getJob(t, c, ns, old.Name); o.DeletionTimestamp == nil {
		t.Errorf("the obsolete Job %s of another deployment was not deleted", old.Name)
	}

	// A second pass changes nothing.
	if state, err = r.Ensure(ctx, kv, cfg); err != nil || state.Pending != want {
		t.Fatalf("second pass: %+v, %v", state, err)
	}
	if again := getJob(t, c, ns, name); again.UID != job.UID || again.ResourceVersion != job.ResourceVersion {
		t.Error("a second pass rewrote the Job")
	}

	// Its pod cannot be scheduled: the pending message says so.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-abcde", Namespace: ns,
			Labels: map[string]string{batchv1.ControllerUidLabel: string(job.UID), batchv1.JobNameLabel: name}},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: strategystore.ContainerName, Image: "example.com/virtop:test"}}},
	}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
		Message: "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.", LastTransitionTime: metav1.Now()}}
	pod.Status.Phase = corev1.PodPending
	if err := c.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	state, err = r.Ensure(ctx, kv, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(state.Pending, "cannot be scheduled (Unschedulable): 0/3 nodes are available") {
		t.Errorf("unschedulable pod not reported: %q", state.Pending)
	}

	// The Job fails on its deadline: reported with the reason and the
	// pod's trouble, and deleted for a retry.
	if err := finishJob(ctx, c, client.ObjectKeyFromObject(job), false, "DeadlineExceeded", "Job was active longer than specified deadline"); err != nil {
		t.Fatal(err)
	}
	state, err = r.Ensure(ctx, kv, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"Install strategy Job " + name + " for v1.5.3 failed: DeadlineExceeded", "longer than specified deadline", "cannot be scheduled"} {
		if !strings.Contains(state.Failed, s) {
			t.Errorf("failure %q lacks %q", state.Failed, s)
		}
	}
	if !strings.Contains(state.Pending, "Retrying") || state.RequeueAfter < 5*time.Second {
		t.Errorf("after the failure: %+v", state)
	}
	failed := getJob(t, c, ns, name)
	if failed.DeletionTimestamp == nil {
		t.Fatal("the failed Job was not deleted")
	}
	if state, _ = r.Ensure(ctx, kv, cfg); !strings.Contains(state.Pending, "to be deleted") || state.Failed == "" {
		t.Errorf("while the failed Job goes: %+v", state)
	}
	collectGarbage(t, c, failed)

	// No new Job before the back-off has passed.
	state, err = r.Ensure(ctx, kv, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(state.Pending, "Retrying the install strategy Job for v1.5.3 in 10s (1 attempt failed)") || state.Failed == "" || state.RequeueAfter != 10*time.Second {
		t.Errorf("during the back-off: %+v", state)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Errorf("a Job exists during the back-off: %v", err)
	}

	// After it, a new Job; the last failure stays reported until the
	// strategy loads.
	clk.SetTime(clk.Now().Add(11 * time.Second))
	state, err = r.Ensure(ctx, kv, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if state.Pending != want || !strings.Contains(state.Failed, "DeadlineExceeded") {
		t.Errorf("retry: %+v", state)
	}
	retried := getJob(t, c, ns, name)
	if retried.UID == job.UID {
		t.Error("the failed Job was not replaced")
	}

	// The retry fails too: the back-off doubles.
	if err := finishJob(ctx, c, client.ObjectKeyFromObject(retried), false, "BackoffLimitExceeded", "Job has reached the specified backoff limit"); err != nil {
		t.Fatal(err)
	}
	if state, err = r.Ensure(ctx, kv, cfg); err != nil {
		t.Fatal(err)
	}
	if state.RequeueAfter != 20*time.Second || !strings.Contains(state.Failed, "BackoffLimitExceeded") {
		t.Errorf("second failure: %+v", state)
	}
	collectGarbage(t, c, retried)
	clk.SetTime(clk.Now().Add(21 * time.Second))
	if _, err = r.Ensure(ctx, kv, cfg); err != nil {
		t.Fatal(err)
	}
	third := getJob(t, c, ns, name)

	// It succeeds and its ConfigMap is there: Done deletes the finished Job.
	if err := finishJob(ctx, c, client.ObjectKeyFromObject(third), true, "", ""); err != nil {
		t.Fatal(err)
	}
	if err := r.Done(ctx, kv, cfg); err != nil {
		t.Fatal(err)
	}
	if done := getJob(t, c, ns, name); done.DeletionTimestamp == nil {
		t.Error("Done left the finished Job")
	}
}

func TestEnsureSucceededWithoutConfigMap(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	c := env.Client
	ctx := context.Background()
	kv, cfg := newConfig(t, ns, "v1.5.3", nil)
	createKubeVirt(t, c, kv)
	clk := clocktesting.NewFakePassiveClock(time.Now())
	r := strategystore.NewRunner(c, c, "example.com/virtop:test")
	r.Clock = clk
	name := strategystore.Name(cfg.ID)

	if _, err := r.Ensure(ctx, kv, cfg); err != nil {
		t.Fatal(err)
	}
	job := getJob(t, c, ns, name)
	if err := finishJob(ctx, c, client.ObjectKeyFromObject(job), true, "", ""); err != nil {
		t.Fatal(err)
	}
	// Within the grace period: waiting for the ConfigMap.
	state, err := r.Ensure(ctx, kv, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(state.Pending, "succeeded; waiting for ConfigMap "+strategy.ConfigMapName(cfg.ID)) || state.Failed != "" {
		t.Errorf("within the grace period: %+v", state)
	}
	// The ConfigMap appears (the cache lags): still pending, briefly.
	st, err := strategy.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cm, err := st.ConfigMap(ns)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if state, _ = r.Ensure(ctx, kv, cfg); !strings.Contains(state.Pending, "Loading") || state.RequeueAfter > 5*time.Second {
		t.Errorf("with the ConfigMap: %+v", state)
	}
	// Without it after the grace period: a failure, and a retry.
	if err := c.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}
	clk.SetTime(clk.Now().Add(time.Minute))
	state, err = r.Ensure(ctx, kv, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(state.Failed, "succeeded but ConfigMap "+strategy.ConfigMapName(cfg.ID)+" did not appear") {
		t.Errorf("after the grace period: %+v", state)
	}
	if j := getJob(t, c, ns, name); j.DeletionTimestamp == nil {
		t.Error("the Job whose ConfigMap never appeared was not deleted")
	}
}

// TestJobPodPassesRestrictedPodSecurity creates the Job's pod in a
// namespace that enforces the restricted Pod Security level: the API
// server's PodSecurity admission refuses any pod that does not comply.
func TestJobPodPassesRestrictedPodSecurity(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	c := env.Client
	ctx := context.Background()
	nsObj := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: ns}, nsObj); err != nil {
		t.Fatal(err)
	}
	nsObj.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	nsObj.Labels["pod-security.kubernetes.io/enforce-version"] = "latest"
	if err := c.Update(ctx, nsObj); err != nil {
		t.Fatal(err)
	}
	_, cfg := newConfig(t, ns, "v1.5.3", nil)
	job := strategystore.Job(cfg, "example.com/virtop:test")
	if err := c.Create(ctx, job); err != nil {
		t.Fatalf("the Job is refused: %v", err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "dumper", Namespace: ns, Labels: job.Spec.Template.Labels},
		Spec:       *job.Spec.Template.Spec.DeepCopy(),
	}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatalf("the Job's pod does not pass restricted Pod Security: %v", err)
	}

	// The check bites: the same pod without its container security context
	// is refused.
	bad := pod.DeepCopy()
	bad.Name, bad.ResourceVersion = "insecure", ""
	bad.Spec.Containers[0].SecurityContext = nil
	if err := c.Create(ctx, bad); err == nil || !apierrors.IsForbidden(err) {
		t.Fatalf("a non-compliant pod was not refused: %v", err)
	}
}

// createJobAccount creates the Job's ServiceAccount, which the operator's
// manifests ship.
func createJobAccount(t *testing.T, c client.Client, ns string) {
	t.Helper()
	if err := c.Create(context.Background(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: vocab.StrategyJobServiceAccount}}); err != nil {
		t.Fatal(err)
	}
}

// TestEnsureNamesAMissingServiceAccount: an operator upgraded without the
// RBAC of its release has no ServiceAccount virtop-strategy-job; the Job
// controller then creates no pod, and the pending message says why at
// once instead of waiting for the Job's deadline. Once the account exists
// the message is the plain one.
func TestEnsureNamesAMissingServiceAccount(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	c := env.Client
	ctx := context.Background()
	kv, cfg := newConfig(t, ns, "v1.5.3", nil)
	createKubeVirt(t, c, kv)
	r := strategystore.NewRunner(c, c, "example.com/virtop:test")
	if _, err := r.Ensure(ctx, kv, cfg); err != nil {
		t.Fatal(err)
	}
	state, err := r.Ensure(ctx, kv, cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := "ServiceAccount " + ns + "/" + vocab.StrategyJobServiceAccount + " does not exist"
	if !strings.Contains(state.Pending, want) || !strings.Contains(state.Pending, "apply the RBAC of this virtop release") {
		t.Errorf("pending %q, want it to say %q", state.Pending, want)
	}
	createJobAccount(t, c, ns)
	if state, err = r.Ensure(ctx, kv, cfg); err != nil || strings.Contains(state.Pending, "ServiceAccount") {
		t.Errorf("with the account: %+v, %v", state, err)
	}
}
