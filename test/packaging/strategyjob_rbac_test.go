package packaging

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/cli"
	"github.com/virtop-dev/virtop/internal/operator"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/testing/kvtest"
	"github.com/virtop-dev/virtop/internal/testing/operatortest"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// TestStrategyJobRBAC: the operator, under the roles of config/rbac,
// installs a version outside its catalog through the dump-install-strategy
// Job. The Job's pod runs as a ServiceAccount of its own (config/rbac),
// which can do what `virtop dump-install-strategy` does, run here in
// process as that account (the test plays the kubelet and the pod), and
// nothing the operator can: read Secrets, write Deployments.
func TestStrategyJobRBAC(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	c := env.Client
	ctx := context.Background()
	installOperatorRBAC(t, c, ns)
	testenv.FakeReadiness(t, c, ns)
	operatortest.Start(t, impersonating(env.Config, ns), operator.Options{Namespace: ns, LeaderElect: true,
		CatalogVersions: []string{"v1.5.0"}, StrategyImage: "example.com/virtop:test"})

	kv := kvtest.KubeVirt(t, ns, func(kv *kvv1.KubeVirt) { kv.Spec.ImageTag = "v1.5.3" })
	if err := c.Create(ctx, kv); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(kv)

	var job *batchv1.Job
	poll.Eventually(t, "the strategy Job", 2*time.Minute, func() (bool, string) {
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

	// The pod's account is the Job's own, shipped in config/rbac.
	pod := job.Spec.Template.Spec
	sa := pod.ServiceAccountName
	if sa != vocab.StrategyJobServiceAccount {
		t.Errorf("the Job's pod runs as ServiceAccount %q, want %q", sa, vocab.StrategyJobServiceAccount)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: sa}, &corev1.ServiceAccount{}); err != nil {
		t.Errorf("ServiceAccount %s of the Job's pod: %v", sa, err)
	}
	if pod.AutomountServiceAccountToken != nil && !*pod.AutomountServiceAccountToken {
		t.Error("the Job's pod does not mount its token, yet it writes the ConfigMap with it")
	}

	// What the Job's account must not do.
	asJob, err := client.New(impersonatingSA(env.Config, ns, sa), client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	refused := func(what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s as the Job's ServiceAccount %s: %v, want forbidden", what, sa, err)
		}
	}
	refused("reading the signing key Secret", asJob.Get(ctx, client.ObjectKey{Namespace: ns, Name: vocab.StrategySigningKeySecret}, &corev1.Secret{}))
	refused("listing Secrets", asJob.List(ctx, &corev1.SecretList{}, client.InNamespace(ns)))
	refused("listing ConfigMaps", asJob.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(ns)))
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "intruder", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "intruder"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "intruder"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.com/intruder"}}},
			},
		},
	}
	// It creates its ConfigMap and changes none: kubevirt-ca (whose
	// bundle the operator once read back) and the strategy ConfigMaps
	// are out of its reach, by merge patch and by server-side apply.
	for _, name := range []string{vocab.CASecretName, strategy.ConfigMapName(job.Annotations[vocab.InstallStrategyIdentifierAnnotation])} {
		refused("patching ConfigMap "+name, asJob.Patch(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}},
			client.RawPatch("application/merge-patch+json", []byte(`{"data":{"planted":"x"}}`))))
		applied := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name, "namespace": ns}, "data": map[string]any{"planted": "x"}}}
		refused("applying ConfigMap "+name, asJob.Apply(ctx, client.ApplyConfigurationFromUnstructured(applied), client.FieldOwner("planter"), client.ForceOwnership))
		refused("updating ConfigMap "+name, asJob.Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}))
	}
	refused("creating a Deployment", asJob.Create(ctx, dep))
	refused("patching Deployment virt-api", asJob.Patch(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "virt-api", Namespace: ns}},
		client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"replicas":0}}`))))

	// What it must do: the pod's command, in process, as that account,
	// with the Job's environment (the Secret reference resolved as the
	// kubelet does).
	ctr := pod.Containers[0]
	if len(ctr.Command) != 2 || ctr.Command[0] != "virtop" {
		t.Fatalf("the Job runs %v, not virtop SUBCOMMAND", ctr.Command)
	}
	for _, e := range ctr.Env {
		v := e.Value
		if ref := e.ValueFrom; ref != nil {
			if ref.SecretKeyRef == nil {
				t.Fatalf("env %s comes from %v, which the test does not resolve", e.Name, ref)
			}
			sec := &corev1.Secret{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.SecretKeyRef.Name}, sec); err != nil {
				t.Fatalf("env %s: %v", e.Name, err)
			}
			v = string(sec.Data[ref.SecretKeyRef.Key])
		}
		t.Setenv(e.Name, v)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		t.Fatal(err)
	}
	args := append(ctr.Command[1:], "--kubeconfig", kubeconfig, "--as", serviceAccountUser(ns, sa))
	for _, g := range serviceAccountGroups(ns) {
		args = append(args, "--as-group", g)
	}
	var out, errOut bytes.Buffer
	if code := cli.Main(args, &out, &errOut); code != 0 {
		t.Fatalf("virtop %s as ServiceAccount %s: exit %d\n%s%s", strings.Join(ctr.Command[1:], " "), sa, code, out.String(), errOut.String())
	}
	t.Logf("virtop dump-install-strategy as %s:\n%s%s", sa, out.String(), errOut.String())
	// A retried pod finds its ConfigMap there already: success, and the
	// ConfigMap is left as it is.
	out.Reset()
	errOut.Reset()
	if code := cli.Main(args, &out, &errOut); code != 0 {
		t.Fatalf("second run as ServiceAccount %s: exit %d\n%s%s", sa, code, out.String(), errOut.String())
	}

	// The operator loads the signed strategy and installs it, refused
	// nothing on the way.
	poll.Eventually(t, "Available=True with v1.5.3", 3*time.Minute, func() (bool, string) {
		cur := &kvv1.KubeVirt{}
		if err := c.Get(ctx, key, cur); err != nil {
			return false, err.Error()
		}
		failOnForbidden(t, c, cur, "install through the Job")
		a, p := cur.Status.Condition(kvv1.KubeVirtConditionAvailable), cur.Status.Condition(kvv1.KubeVirtConditionProgressing)
		done := a.Status == corev1.ConditionTrue && p.Status == corev1.ConditionFalse && cur.Status.ObservedKubeVirtVersion == "v1.5.3"
		return done, fmt.Sprintf("phase %s, observed %s, Available %s, Progressing %s: %s", cur.Status.Phase, cur.Status.ObservedKubeVirtVersion, a.Status, p.Status, p.Message)
	})
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: strategy.ConfigMapName(job.Annotations[vocab.InstallStrategyIdentifierAnnotation])}, cm); err != nil {
		t.Fatalf("the strategy ConfigMap the Job wrote: %v", err)
	}

	// Leave nothing cluster-wide behind.
	if err := c.Delete(ctx, kv); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, "uninstall: the KubeVirt resource gone", 3*time.Minute, func() (bool, string) {
		err := c.Get(ctx, key, &kvv1.KubeVirt{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	if lines := forbiddenLines(); len(lines) > 0 {
		t.Fatalf("the operator was refused %d time(s); first: %s", len(lines), lines[0])
	}
}
