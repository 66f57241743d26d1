package strategystore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/operator"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/strategystore"
	"github.com/virtop-dev/virtop/internal/testing/kvtest"
	"github.com/virtop-dev/virtop/internal/testing/operatortest"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// TestPlantedSigningKeyRefused: someone who may create Secrets in the
// install namespace (KubeVirt's virt-controller may, in every namespace)
// creates Secret virtop-strategy-signing-key before the operator does, and
// a strategy ConfigMap signed with that key. The operator, installing a
// version outside its catalog, neither loads that strategy (it deletes the
// ConfigMap) nor runs a Job whose output the planted key would sign: the
// resource says StrategySigningKeyUntrusted, naming the Secret. Once the
// Secret is deleted the operator creates its own key, records its
// fingerprint in the status, and runs the Job.
func TestPlantedSigningKeyRefused(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	c := env.Client
	ctx := context.Background()
	plantedKey := []byte(strings.Repeat("f00dfeed", 8))
	planted := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: vocab.StrategySigningKeySecret,
			Labels: map[string]string{vocab.InstallStrategyLabel: "", vocab.ManagedByLabel: vocab.ManagedByValue}},
		Data: map[string][]byte{vocab.StrategySigningKeyKey: plantedKey},
	}
	if err := c.Create(ctx, planted); err != nil {
		t.Fatal(err)
	}
	testenv.FakeReadiness(t, c, ns)
	operatortest.Start(t, env.Config, operator.Options{Namespace: ns, CatalogVersions: []string{"v1.5.0"}, StrategyImage: "example.com/virtop:test"})

	kv := kvtest.KubeVirt(t, ns, func(kv *kvv1.KubeVirt) { kv.Spec.ImageTag = "v1.5.3" })
	if err := c.Create(ctx, kv); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(kv)
	poll.Eventually(t, "a target deployment", time.Minute, func() (bool, string) {
		if err := c.Get(ctx, key, kv); err != nil {
			return false, err.Error()
		}
		return kv.Status.TargetDeploymentConfig != "", "no status.targetDeploymentConfig"
	})

	// The strategy the planter would have virtop install, signed with the
	// planted key.
	cfg, err := config.Parse([]byte(kv.Status.TargetDeploymentConfig))
	if err != nil {
		t.Fatal(err)
	}
	st, err := strategy.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cm, err := st.ConfigMap(ns)
	if err != nil {
		t.Fatal(err)
	}
	if err := strategy.Sign(cm, plantedKey); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, cm); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}

	poll.Eventually(t, "StrategySigningKeyUntrusted, the planted strategy deleted, no Job", time.Minute, func() (bool, string) {
		if err := c.Get(ctx, key, kv); err != nil {
			return false, err.Error()
		}
		if kv.Status.ObservedKubeVirtVersion != "" {
			t.Fatalf("the operator installed %s from the strategy signed with the planted key", kv.Status.ObservedKubeVirtVersion)
		}
		d := kv.Status.Condition(kvv1.KubeVirtConditionDegraded)
		if d.Status != corev1.ConditionTrue || d.Reason != "StrategySigningKeyUntrusted" || !strings.Contains(d.Message, vocab.StrategySigningKeySecret) {
			return false, fmt.Sprintf("Degraded %s %s: %s", d.Status, d.Reason, d.Message)
		}
		err := c.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})
		if !apierrors.IsNotFound(err) {
			return false, fmt.Sprintf("the planted strategy ConfigMap: %v", err)
		}
		var jobs batchv1.JobList
		if err := c.List(ctx, &jobs, client.InNamespace(ns), client.HasLabels{vocab.InstallStrategyLabel}); err != nil {
			return false, err.Error()
		}
		return len(jobs.Items) == 0, fmt.Sprintf("%d Jobs", len(jobs.Items))
	})

	// Deleted, the planted key makes way for the operator's own.
	if err := c.Delete(ctx, planted); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, "the operator's own key, recorded, and the Job", time.Minute, func() (bool, string) {
		var jobs batchv1.JobList
		if err := c.List(ctx, &jobs, client.InNamespace(ns), client.HasLabels{vocab.InstallStrategyLabel}); err != nil {
			return false, err.Error()
		}
		return len(jobs.Items) == 1, fmt.Sprintf("%d Jobs", len(jobs.Items))
	})
	sec := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(planted), sec); err != nil {
		t.Fatal(err)
	}
	if string(sec.Data[vocab.StrategySigningKeyKey]) == string(plantedKey) {
		t.Fatal("the planted key is back")
	}
	if err := c.Get(ctx, key, kv); err != nil {
		t.Fatal(err)
	}
	var recorded string
	for _, g := range kv.Status.Generations {
		if g.Resource == "secrets" && g.Name == vocab.StrategySigningKeySecret {
			recorded = g.Hash
		}
	}
	if want := strategystore.KeyFingerprint(sec.Data[vocab.StrategySigningKeyKey]); recorded != want {
		t.Errorf("status.generations records %q for the key, want %q", recorded, want)
	}
}

// TestEnsureRecordsTheKeyFirst: the fingerprint is written into the
// KubeVirt status before the Secret exists, so a crash between the two
// leaves a record without a key (replaced by the next pass) and never a key
// without its record; a key without a matching record is refused at the
// Ensure level with its own reason, and no Job is created.
func TestEnsureRecordsTheKeyFirst(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	c := env.Client
	ctx := context.Background()
	createJobAccount(t, c, ns)
	kv, cfg := newConfig(t, ns, "v1.5.3", nil)
	createKubeVirt(t, c, kv)
	r := strategystore.NewRunner(c, c, "example.com/virtop:test")

	// A record left by a pass that crashed before creating the Secret.
	strategystore.RecordKey(kv, []byte("a key that was never created"))
	if err := c.Status().Update(ctx, kv); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Ensure(ctx, kv, cfg); err != nil {
		t.Fatal(err)
	}
	sec := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: vocab.StrategySigningKeySecret}, sec); err != nil {
		t.Fatal(err)
	}
	live := &kvv1.KubeVirt{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(kv), live); err != nil {
		t.Fatal(err)
	}
	want := strategystore.KeyFingerprint(sec.Data[vocab.StrategySigningKeyKey])
	var records []string
	for _, g := range live.Status.Generations {
		if g.Name == vocab.StrategySigningKeySecret {
			records = append(records, g.Hash)
		}
	}
	if len(records) != 1 || records[0] != want {
		t.Fatalf("status.generations records %v for the key, want [%s]", records, want)
	}
	if _, err := r.Ensure(ctx, live, cfg); err != nil {
		t.Fatalf("second pass, the key recorded: %v", err)
	}

	// The same Secret with no record (a KubeVirt resource that never saw
	// it): refused, no Job.
	fresh, _ := newConfig(t, ns, "v1.5.3", nil)
	if err := c.Get(ctx, client.ObjectKeyFromObject(kv), fresh); err != nil {
		t.Fatal(err)
	}
	fresh.Status.Generations = nil
	if err := c.Status().Update(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteAllOf(ctx, &batchv1.Job{}, client.InNamespace(ns), client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	var jobs batchv1.JobList
	st, err := r.Ensure(ctx, fresh, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if st.FailedReason != kvv1.ReasonStrategySigningKeyUntrusted || !strings.Contains(st.Failed, vocab.StrategySigningKeySecret) {
		t.Errorf("state %+v, want reason %s naming the Secret", st, kvv1.ReasonStrategySigningKeyUntrusted)
	}
	if err := c.List(ctx, &jobs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) != 0 {
		t.Errorf("%d Jobs created with an untrusted key", len(jobs.Items))
	}
}
