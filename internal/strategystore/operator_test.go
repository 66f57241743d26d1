package strategystore_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/operator"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/strategystore"
	"github.com/virtop-dev/virtop/internal/testing/kvtest"
	"github.com/virtop-dev/virtop/internal/testing/operatortest"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// The virtop binary, built once for the tests that run it as a host
// process.
var (
	binaryOnce sync.Once
	binaryDir  string
	binaryPath string
	binaryErr  error
)

func virtopBinary(t *testing.T) string {
	t.Helper()
	binaryOnce.Do(func() {
		root, err := testenv.RepoRoot()
		if err != nil {
			binaryErr = err
			return
		}
		if binaryDir, binaryErr = os.MkdirTemp("", "virtop-strategyjob-"); binaryErr != nil {
			return
		}
		binaryPath = filepath.Join(binaryDir, "virtop")
		cmd := exec.Command("go", "build", "-o", binaryPath, "./cmd/virtop")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			binaryErr = fmt.Errorf("go build ./cmd/virtop: %v\n%s", err, out)
		}
	})
	if binaryErr != nil {
		t.Fatal(binaryErr)
	}
	return binaryPath
}

func cleanupBinary() {
	if binaryDir != "" {
		os.RemoveAll(binaryDir)
	}
}

// runJobAsHostProcess plays the Job's pod: virtop dump-install-strategy
// with the Job's environment and a kubeconfig for the test's API server.
func runJobAsHostProcess(t *testing.T, env *testenv.Env, job *batchv1.Job, bin string) (string, error) {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	ctr := job.Spec.Template.Spec.Containers[0]
	if len(ctr.Command) != 2 || ctr.Command[0] != "virtop" {
		t.Fatalf("the Job runs %v, not virtop SUBCOMMAND", ctr.Command)
	}
	cmd := exec.Command(bin, ctr.Command[1:]...)
	cmd.Env = []string{"KUBECONFIG=" + kubeconfig, "HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
	for _, e := range ctr.Env {
		v := e.Value
		if ref := e.ValueFrom; ref != nil {
			// As the kubelet resolves it.
			if ref.SecretKeyRef == nil {
				t.Fatalf("env %s comes from %v, which the test does not resolve", e.Name, ref)
			}
			sec := &corev1.Secret{}
			if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: job.Namespace, Name: ref.SecretKeyRef.Name}, sec); err != nil {
				t.Fatalf("env %s: %v", e.Name, err)
			}
			v = string(sec.Data[ref.SecretKeyRef.Key])
		}
		cmd.Env = append(cmd.Env, e.Name+"="+v)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// TestOperatorInstallsVersionOutsideItsCatalog: an operator limited to
// v1.5.0 installs v1.5.3 through the strategy Job, which a host process
// plays.
func TestOperatorInstallsVersionOutsideItsCatalog(t *testing.T) {
	env := testenv.Get(t)
	bin := virtopBinary(t)
	ns := env.Namespace(t)
	c := env.Client
	ctx := context.Background()
	testenv.FakeReadiness(t, c, ns)
	operatortest.Start(t, env.Config, operator.Options{Namespace: ns, CatalogVersions: []string{"v1.5.0"}, StrategyImage: "example.com/virtop:test"})

	kv := kvtest.KubeVirt(t, ns, func(kv *kvv1.KubeVirt) { kv.Spec.ImageTag = "v1.5.3" })
	if err := c.Create(ctx, kv); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(kv)

	// The Job appears, and the resource says it waits for it.
	var job *batchv1.Job
	poll.Eventually(t, "the strategy Job", time.Minute, func() (bool, string) {
		var jobs batchv1.JobList
		if err := c.List(ctx, &jobs, client.InNamespace(ns), client.HasLabels{vocab.InstallStrategyLabel}); err != nil {
			return false, err.Error()
		}
		if len(jobs.Items) != 1 {
			return false, fmt.Sprintf("%d Jobs", len(jobs.Items))
		}
		job = &jobs.Items[0]
		return true, ""
	})
	if !strings.HasPrefix(job.Name, strategystore.NamePrefix) || job.Spec.Template.Spec.Containers[0].Image != "example.com/virtop:test" {
		t.Errorf("Job %s runs %s", job.Name, job.Spec.Template.Spec.Containers[0].Image)
	}
	poll.Eventually(t, "StrategyPending on the KubeVirt resource", time.Minute, func() (bool, string) {
		if err := c.Get(ctx, key, kv); err != nil {
			return false, err.Error()
		}
		p := kv.Status.Condition(kvv1.KubeVirtConditionProgressing)
		return p.Reason == kvv1.ReasonStrategyPending && strings.Contains(p.Message, job.Name), fmt.Sprintf("Progressing %s %s: %s", p.Status, p.Reason, p.Message)
	})
	if id := job.Annotations[vocab.InstallStrategyIdentifierAnnotation]; id != kv.Status.TargetDeploymentID {
		t.Errorf("Job for deployment %s, target %s", id, kv.Status.TargetDeploymentID)
	}

	// The host process plays the pod; the test plays the Job controller.
	out, err := runJobAsHostProcess(t, env, job, bin)
	if err != nil {
		t.Fatalf("virtop dump-install-strategy: %v\n%s", err, out)
	}
	t.Logf("virtop dump-install-strategy:\n%s", out)
	if !strings.Contains(out, "Created ConfigMap "+ns+"/"+strategy.ConfigMapName(kv.Status.TargetDeploymentID)) {
		t.Errorf("the process did not say what it wrote:\n%s", out)
	}
	// The ConfigMap is signed with the key of the operator's Secret, which
	// goes with the KubeVirt resource.
	written := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: strategy.ConfigMapName(kv.Status.TargetDeploymentID)}, written); err != nil {
		t.Fatal(err)
	}
	sec := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: vocab.StrategySigningKeySecret}, sec); err != nil {
		t.Fatal(err)
	}
	if err := strategy.CheckSignature(written, sec.Data[vocab.StrategySigningKeyKey]); err != nil {
		t.Errorf("the Job's ConfigMap: %v", err)
	}
	if refs := sec.OwnerReferences; len(refs) != 1 || refs[0].UID != kv.UID {
		t.Errorf("signing key Secret owned by %v, want the KubeVirt resource %s", refs, kv.UID)
	}
	// A retried pod is harmless: the ConfigMap exists, and is left as it is.
	if out, err := runJobAsHostProcess(t, env, job, bin); err != nil {
		t.Fatalf("second run: %v\n%s", err, out)
	}
	if err := finishJob(ctx, c, client.ObjectKeyFromObject(job), true, "", ""); err != nil {
		t.Fatal(err)
	}

	// The install reaches Available with v1.5.3.
	poll.Eventually(t, "Available=True", 3*time.Minute, func() (bool, string) {
		if err := c.Get(ctx, key, kv); err != nil {
			return false, err.Error()
		}
		a, p := kv.Status.Condition(kvv1.KubeVirtConditionAvailable), kv.Status.Condition(kvv1.KubeVirtConditionProgressing)
		return a.Status == corev1.ConditionTrue && p.Status == corev1.ConditionFalse,
			fmt.Sprintf("phase %s, Available %s (%s), Progressing %s: %s", kv.Status.Phase, a.Status, a.Message, p.Status, p.Message)
	})
	if kv.Status.ObservedKubeVirtVersion != "v1.5.3" {
		t.Errorf("observed version %q", kv.Status.ObservedKubeVirtVersion)
	}
	if d := kv.Status.Condition(kvv1.KubeVirtConditionDegraded); d.Status != corev1.ConditionFalse {
		t.Errorf("Degraded %s: %s", d.Status, d.Message)
	}
	for _, name := range []string{"virt-api", "virt-controller"} {
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
			t.Fatalf("Deployment %s: %v", name, err)
		}
		if img := d.Spec.Template.Spec.Containers[0].Image; !strings.HasSuffix(img, ":v1.5.3") {
			t.Errorf("Deployment %s runs %s, want v1.5.3", name, img)
		}
		if v := d.Labels[vocab.AppVersionLabel]; v != "v1.5.3" {
			t.Errorf("Deployment %s labelled version %q", name, v)
		}
	}
	// The finished Job is deleted once the strategy loaded (in the
	// foreground; with no garbage collector here it keeps its finalizer).
	poll.Eventually(t, "the finished Job deleted", time.Minute, func() (bool, string) {
		cur := &batchv1.Job{}
		err := c.Get(ctx, client.ObjectKeyFromObject(job), cur)
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return cur.DeletionTimestamp != nil, "not deleted"
	})
}
