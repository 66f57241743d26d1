package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/apply"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/inventory"
	"github.com/virtop-dev/virtop/internal/monitoring/placement"
	"github.com/virtop-dev/virtop/internal/plan"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/stage"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/strategystore"
	"github.com/virtop-dev/virtop/internal/testing/kvtest"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
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

// checkInventory: the pass recorded every object it applied, and the
// strategy ConfigMap, in the status; an installation with no inventory
// (made by an earlier virtop) gets one seeded from virtop's field manager,
// so what that virtop created is still pruned; once recorded, a copy
// labelled as virtop's and applied under its field manager is neither
// pruned nor, later, uninstalled (TestStepsAlone checks the uninstall).
func checkInventory(t *testing.T, r *Reconciler, s *scope) {
	t.Helper()
	ctx := context.Background()
	c := r.Client
	ns := s.kv.Namespace
	if err := r.patchStatus(ctx, s, s.facts()); err != nil {
		t.Fatal(err)
	}
	live := &kvv1.KubeVirt{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(s.kv), live); err != nil {
		t.Fatal(err)
	}
	inv := inventory.FromStatus(live.Status.Generations)
	for _, o := range s.applied.Applied {
		if !inv.Owns(o.GroupVersionKind().GroupKind(), o) {
			t.Errorf("%s %s/%s applied but not in the status's inventory", o.Kind, o.Namespace, o.Name)
		}
	}
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: strategy.ConfigMapName(s.cfg.ID)}, cm); err != nil || !inv.Owns(schema.GroupKind{Kind: "ConfigMap"}, cm) {
		t.Errorf("the strategy ConfigMap is not in the inventory (%v)", err)
	}
	gens, _ := json.Marshal(live.Status.Generations)
	t.Logf("inventory: %d objects, status.generations %d bytes of JSON", inv.Len(), len(gens))

	// Steady state: the same pass again writes no status.
	again := newScope(live)
	again.cfg, again.plan, again.caps, again.strategy = s.cfg, s.plan, s.caps, s.strategy
	if !runStep(t, "apply", r.apply, again) || !runStep(t, "prune", r.prune, again) {
		t.Fatal("a steady pass ended early")
	}
	if err := r.patchStatus(ctx, again, again.facts()); err != nil {
		t.Fatal(err)
	}
	after := &kvv1.KubeVirt{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(s.kv), after); err != nil || after.ResourceVersion != live.ResourceVersion {
		t.Errorf("a steady pass wrote the KubeVirt resource (resourceVersion %s -> %s, %v)", live.ResourceVersion, after.ResourceVersion, err)
	}

	// An installation made before the inventory: what that virtop
	// applied and the plan no longer holds is seeded, then pruned.
	leftover := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "left-by-an-older-virtop",
		Labels: map[string]string{vocab.ManagedByLabel: vocab.ManagedByValue, vocab.InstallNamespaceLabel: ns}}}
	stage.Set(leftover, stage.Certificates)
	if _, _, err := r.Applier.Apply(ctx, leftover); err != nil {
		t.Fatal(err)
	}
	legacy := live.DeepCopy()
	legacy.Status.Generations = inventory.Strip(legacy.Status.Generations)
	old := newScope(legacy)
	old.cfg, old.plan, old.caps = s.cfg, s.plan, s.caps
	if !runStep(t, "inventory", r.seedInventory, old) || old.inv.Len() < inv.Len() {
		t.Fatalf("seeded %d objects, want at least the %d recorded", old.inv.Len(), inv.Len())
	}
	if !runStep(t, "prune", r.prune, old) {
		t.Fatal("prune ended the pass")
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(leftover), &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("what an older virtop applied was not pruned after seeding: %v", err)
	}

	// Copies labelled as virtop's, applied under virtop's own field
	// manager by whoever may write ConfigMaps: in the install namespace,
	// and in a tenant's namespace under the dashboard's name.
	tenant := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns + "-tenant"}}
	if err := c.Create(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	for _, where := range []client.ObjectKey{{Namespace: ns, Name: "kubevirt-ca-forged"}, {Namespace: tenant.Name, Name: "virtop-kubevirt-control-plane-dashboard"}} {
		f := &unstructured.Unstructured{}
		f.SetAPIVersion("v1")
		f.SetKind("ConfigMap")
		f.SetNamespace(where.Namespace)
		f.SetName(where.Name)
		f.SetLabels(map[string]string{vocab.ManagedByLabel: vocab.ManagedByValue, vocab.InstallNamespaceLabel: ns})
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(f), client.FieldOwner(vocab.FieldManager), client.ForceOwnership); err != nil {
			t.Fatal(err)
		}
		forged = append(forged, where)
	}
	if !runStep(t, "prune", r.prune, s) {
		t.Fatal("prune ended the pass")
	}
	checkForged(t, c, "prune")
}

// forged are the copies checkInventory made.
var forged []client.ObjectKey

func checkForged(t *testing.T, c client.Client, after string) {
	t.Helper()
	for _, key := range forged {
		if err := c.Get(context.Background(), key, &corev1.ConfigMap{}); err != nil {
			t.Errorf("after %s: the labelled copy %s applied under virtop's field manager: %v", after, key, err)
		}
	}
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
	r := &Reconciler{Client: c, APIReader: c, Settings: config.Settings{Namespace: ns}, Catalog: release.Builtin(),
		Strategies: &strategystore.Store{Client: c, Applier: applier, Catalog: release.Builtin()},
		Applier:    applier, Capabilities: fixedCapabilities{}, Recorder: rec}
	kv := kvtest.KubeVirt(t, ns)
	if err := c.Create(ctx, kv); err != nil {
		t.Fatal(err)
	}
	s := newScope(kv)

	if !runStep(t, "configure", r.configure, s) || s.cfg == nil || kv.Status.TargetDeploymentID != s.cfg.ID {
		t.Fatalf("configure: cfg %v, target %q", s.cfg, kv.Status.TargetDeploymentID)
	}
	if !runStep(t, "strategy", r.resolveStrategy, s) || s.strategy.Strategy == nil {
		t.Fatalf("strategy: %+v", s.strategy)
	}
	cmKey := client.ObjectKey{Namespace: ns, Name: strategy.ConfigMapName(s.cfg.ID)}
	if err := c.Get(ctx, cmKey, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("strategy: the ConfigMap was written before the objects (or the read failed: %v); the apply step writes it", err)
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
	// The apply that waits on the first stage still stored the strategy.
	if err := c.Get(ctx, cmKey, &corev1.ConfigMap{}); err != nil {
		t.Errorf("apply: no strategy ConfigMap after the first stage: %v", err)
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
	checkInventory(t, r, s)

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
	d := newScope(live)
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
	d = newScope(live)
	if !runStep(t, "workloads", r.checkWorkloads, d) || d.blocked != "" {
		t.Fatalf("workloads with the VMI gone: blocked %q", d.blocked)
	}
	poll.Eventually(t, "the remove step done", 2*time.Minute, func() (bool, string) {
		more, err := r.remove(ctx, d)
		return err == nil && more, fmt.Sprint(err)
	})
	// No node carries virt-handler's heartbeat: nothing to clean
	// (nodecleanup_test.go has nodes that do).
	if !runStep(t, "nodes", r.cleanNodes, d) {
		t.Fatal("nodes: not done without a node to clean")
	}
	if !runStep(t, "strategies", r.removeStrategies, d) || !d.deleted {
		t.Fatal("strategies: not deleted")
	}
	checkForged(t, c, "the uninstall")
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
