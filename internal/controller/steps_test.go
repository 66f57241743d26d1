package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/apply"
	"github.com/virtop-dev/virtop/internal/catalog"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/monitoring/placement"
	"github.com/virtop-dev/virtop/internal/plan"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/strategy/stage"
	"github.com/virtop-dev/virtop/internal/strategy/store"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
	"github.com/virtop-dev/virtop/internal/tools/podless"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// fixedCapabilities is a cluster as the capability reader would describe
// it: every API a gate names served, virt-api not answering, one node,
// monitoring placed in the install namespace.
type fixedCapabilities struct{}

func (fixedCapabilities) Snapshot(_ context.Context, cfg *config.DeploymentConfig) (plan.Capabilities, error) {
	s, err := strategy.Generate(cfg)
	if err != nil {
		return plan.Capabilities{}, err
	}
	apis := map[string]bool{}
	for _, o := range s.Objects {
		for _, g := range stage.GatesOf(o) {
			if gv, res, ok := g.IsAPI(); ok && strings.HasPrefix(gv, "monitoring.coreos.com/") {
				apis[gv+"/"+res] = true
			}
		}
	}
	return plan.Capabilities{APIs: apis, Nodes: 1, Monitoring: &placement.Input{InstallNamespace: cfg.Namespace,
		ServiceMonitorAPI: true, PrometheusRuleAPI: true, Namespaces: map[string]map[string]string{cfg.Namespace: {}}}}, nil
}

// runStep runs one step and fails the test on an error.
func runStep(t *testing.T, name string, run func(context.Context, *scope) (bool, error), s *scope) bool {
	t.Helper()
	more, err := run(context.Background(), s)
	if err != nil {
		t.Fatalf("step %s: %v", name, err)
	}
	return more
}

// TestStepsAlone runs the install steps one at a time against a real API
// server, checking what each records in the scope, then the uninstall
// steps: held by a workload, done once it is gone.
func TestStepsAlone(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	c := env.Client
	ctx := context.Background()
	rec := events.NewFakeRecorder(1000)
	applier := apply.New(c)
	r := &Reconciler{Client: c, APIReader: c, Settings: config.Settings{Namespace: ns}, Catalog: catalog.Builtin(),
		Strategies: &store.Store{Client: c, Applier: applier, Catalog: catalog.Builtin()},
		Applier:    applier, Capabilities: fixedCapabilities{}, Recorder: rec}
	kv := &kvv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: ns}}
	if err := podless.Prepare(kv); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, kv); err != nil {
		t.Fatal(err)
	}
	s := &scope{kv: kv, orig: kv.DeepCopy()}

	if !runStep(t, "configure", r.configure, s) || s.cfg == nil || kv.Status.TargetDeploymentID != s.cfg.ID {
		t.Fatalf("configure: cfg %v, target %q", s.cfg, kv.Status.TargetDeploymentID)
	}
	if !runStep(t, "strategy", r.resolveStrategy, s) || s.strategy.Strategy == nil {
		t.Fatalf("strategy: %+v", s.strategy)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: strategy.ConfigMapName(s.cfg.ID)}, &corev1.ConfigMap{}); err != nil {
		t.Errorf("strategy: no ConfigMap: %v", err)
	}
	if !runStep(t, "finalizer", r.ensureFinalizer, s) {
		t.Fatal("finalizer ended the pass")
	}
	live := &kvv1.KubeVirt{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(kv), live); err != nil || !controllerutil.ContainsFinalizer(live, vocab.KubeVirtFinalizer) {
		t.Fatalf("finalizer: live finalizers %v (%v)", live.Finalizers, err)
	}
	if !runStep(t, "plan", r.plan, s) || s.plan == nil || s.plan.Certificates == nil || s.plan.Monitoring == nil {
		t.Fatalf("plan: %+v", s.plan)
	}
	if !runStep(t, "migrate", r.migrateStorage, s) || s.migration.unfinished() {
		t.Fatalf("migrate on a fresh install: %+v", s.migration)
	}
	if !runStep(t, "renew", r.renewWhileMigrating, s) {
		t.Fatal("renew ended the pass with no migration under way")
	}
	if runStep(t, "apply", r.apply, s) || s.applied.Created || s.requeueAfter != time.Minute {
		t.Fatalf("apply with nothing ready: went on (created %v, requeue %s); want it to wait for virt-api", s.applied.Created, s.requeueAfter)
	}
	if f := s.facts(); f.Ready || f.WaitingOn == "" || f.ApplyErr != nil {
		t.Errorf("facts while rolling out: %+v", f)
	}

	testenv.FakeReadiness(t, c, ns)
	poll.Eventually(t, "the apply step going on", 2*time.Minute, func() (bool, string) {
		more, err := r.apply(ctx, s)
		return err == nil && more, fmt.Sprintf("%v, waiting on %s", err, s.applied.WaitingOn)
	})
	if !runStep(t, "prune", r.prune, s) || !runStep(t, "record", r.record, s) {
		t.Fatal("prune or record ended the pass")
	}
	if kv.Status.ObservedDeploymentID != s.cfg.ID || !s.facts().Settled() {
		t.Errorf("after record: observed %q, facts %+v; want settled", kv.Status.ObservedDeploymentID, s.facts())
	}

	// Uninstall: a VirtualMachineInstance holds it.
	if err := c.Delete(ctx, live); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(kv), live); err != nil || live.DeletionTimestamp == nil {
		t.Fatalf("the KubeVirt resource is not being deleted: %v", err)
	}
	vmi := &unstructured.Unstructured{}
	vmi.SetAPIVersion("kubevirt.io/v1")
	vmi.SetKind("VirtualMachineInstance")
	vmi.SetNamespace(ns)
	vmi.SetName("vmi-1")
	_ = unstructured.SetNestedField(vmi.Object, map[string]interface{}{"domain": map[string]interface{}{"devices": map[string]interface{}{}}}, "spec")
	if err := c.Create(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	d := &scope{kv: live, orig: live.DeepCopy()}
	poll.Eventually(t, "the workloads step holding the uninstall", time.Minute, func() (bool, string) {
		more, err := r.checkWorkloads(ctx, d)
		return err == nil && !more && strings.Contains(d.blocked, "VirtualMachineInstance"), fmt.Sprintf("%v, blocked %q", err, d.blocked)
	})
	if d.requeueAfter != 10*time.Second {
		t.Errorf("blocked uninstall requeues after %s, want 10s", d.requeueAfter)
	}
	if err := c.Delete(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	d = &scope{kv: live, orig: live.DeepCopy()}
	if !runStep(t, "workloads", r.checkWorkloads, d) || d.blocked != "" {
		t.Fatalf("workloads with the VMI gone: blocked %q", d.blocked)
	}
	poll.Eventually(t, "the remove step done", 2*time.Minute, func() (bool, string) {
		more, err := r.remove(ctx, d)
		return err == nil && more, fmt.Sprint(err)
	})
	if !runStep(t, "strategies", r.removeStrategies, d) || !d.deleted {
		t.Fatal("strategies: not deleted")
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: strategy.ConfigMapName(s.cfg.ID)}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("strategy ConfigMap left after the uninstall: %v", err)
	}
	if _, err := r.finish(ctx, d); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(kv), &kvv1.KubeVirt{}); !apierrors.IsNotFound(err) {
		t.Errorf("the KubeVirt resource is still there after the finished uninstall: %v", err)
	}
}
