//go:build long

package long

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/plan"
	"github.com/virtop-dev/virtop/internal/stage"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/vocab"
	"github.com/virtop-dev/virtop/test/e2e/framework"
)

const (
	fromVersion = "v1.5.0"
	toVersion   = "v1.5.3"
	// rolloutTimeout bounds an install, upgrade or uninstall (generous:
	// the machine is loaded; durations are logged, not asserted).
	rolloutTimeout = 4 * time.Minute
)

// suite bundles what every case uses.
type suite struct {
	t   *testing.T
	env *framework.Env
	c   client.Client
}

func newSuite(t *testing.T) *suite {
	env := framework.Require(t)
	if !env.OperatorBuilt() {
		t.Fatal("the virtop binary has no operator command")
	}
	return &suite{t: t, env: env, c: env.Client(t)}
}

// operator is a host-process operator of the suite's binary (not started).
func (s *suite) operator(extra ...string) *framework.Process {
	s.t.Helper()
	return s.env.Operator(s.t, append(framework.HostOperatorArgs(s.t), extra...)...)
}

// faultyOperator is a host-process operator built with -tags faults (not
// started, no point armed).
func (s *suite) faultyOperator(extra ...string) *framework.Process {
	s.t.Helper()
	bin := s.env.FaultsBinary(s.t)
	p := s.operator(extra...)
	p.Bin = bin
	return p
}

// kubeVirt returns the suite's KubeVirt resource, nil when there is none.
func (s *suite) kubeVirt(ctx context.Context) (*kvv1.KubeVirt, error) {
	kv := &kvv1.KubeVirt{}
	err := s.c.Get(ctx, framework.KubeVirtKey, kv)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return kv, err
}

func (s *suite) mustKubeVirt() *kvv1.KubeVirt {
	s.t.Helper()
	kv, err := s.kubeVirt(context.Background())
	if err != nil {
		s.t.Fatal(err)
	}
	if kv == nil {
		s.t.Fatal("the KubeVirt resource is gone")
	}
	return kv
}

// setVersion creates the KubeVirt resource at version, or moves it there,
// with the webhook patches of that version (they go by index).
func (s *suite) setVersion(version string) {
	s.t.Helper()
	ctx := context.Background()
	fresh := framework.NewKubeVirt(s.t, version)
	kv, err := s.kubeVirt(ctx)
	if err != nil {
		s.t.Fatal(err)
	}
	if kv == nil {
		if err := s.c.Create(ctx, fresh); err != nil {
			s.t.Fatalf("creating the KubeVirt resource: %v", err)
		}
		return
	}
	orig := kv.DeepCopy()
	kv.Spec.ImageTag = version
	kv.Spec.CustomizeComponents = fresh.Spec.CustomizeComponents
	if err := s.c.Patch(ctx, kv, client.MergeFrom(orig)); err != nil {
		s.t.Fatalf("moving the KubeVirt resource to %s: %v", version, err)
	}
}

// ensureInstalled leaves the control plane installed and converged at
// version, with no operator running; it runs one of its own if needed.
func (s *suite) ensureInstalled(version string) {
	s.t.Helper()
	kv, err := s.kubeVirt(context.Background())
	if err != nil {
		s.t.Fatal(err)
	}
	if kv != nil && kv.DeletionTimestamp == nil && kv.Spec.ImageTag == version &&
		kv.Status.ObservedDeploymentID == kv.Status.TargetDeploymentID {
		if ok, _ := framework.RolledOutAt(version)(kv); ok {
			return
		}
	}
	start := time.Now()
	op := s.operator().Start()
	defer op.Stop(10 * time.Second)
	if kv != nil && kv.DeletionTimestamp != nil {
		s.waitKubeVirtGone()
	}
	s.setVersion(version)
	framework.WaitKubeVirt(s.t, s.c, "Available at "+version, rolloutTimeout, framework.RolledOutAt(version))
	s.t.Logf("MEASURE setup: installed or moved to %s in %s", version, time.Since(start).Round(100*time.Millisecond))
}

// ensureUninstalled removes the KubeVirt resource and everything virtop
// manages, with an operator of its own.
func (s *suite) ensureUninstalled() {
	s.t.Helper()
	kv, err := s.kubeVirt(context.Background())
	if err != nil {
		s.t.Fatal(err)
	}
	if kv == nil && len(s.managed()) == 0 {
		return
	}
	start := time.Now()
	op := s.operator().Start()
	defer op.Stop(10 * time.Second)
	framework.DeleteKubeVirt(s.t, s.c, rolloutTimeout)
	s.t.Logf("MEASURE setup: uninstalled in %s", time.Since(start).Round(100*time.Millisecond))
}

func (s *suite) waitKubeVirtGone() {
	s.t.Helper()
	poll.Eventually(s.t, "the KubeVirt resource gone", rolloutTimeout, func(ctx context.Context) (bool, error) {
		kv, err := s.kubeVirt(ctx)
		return err == nil && kv == nil, err
	})
}

// liveKinds are the list kinds whose objects labelled as managed by virtop
// are compared with the strategy: the framework's and the ones only some
// clusters serve (skipped when not served).
var liveKinds = append(slices.Clone(framework.ManagedKinds),
	[2]string{"apiregistration.k8s.io/v1", "APIServiceList"},
	[2]string{"admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyList"},
	[2]string{"admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBindingList"},
	[2]string{"monitoring.coreos.com/v1", "ServiceMonitorList"},
	[2]string{"monitoring.coreos.com/v1", "PrometheusRuleList"},
	[2]string{"instancetype.kubevirt.io/v1beta1", "VirtualMachineClusterInstancetypeList"},
	[2]string{"instancetype.kubevirt.io/v1beta1", "VirtualMachineClusterPreferenceList"},
)

// liveObject is one object labelled as managed by virtop.
type liveObject struct {
	key    string // "<Kind>List/<namespace>/<name>", as framework.ManagedResourceVersions
	kind   string
	ns     string
	name   string
	uid    string
	rv     string
	labels map[string]string
}

// managed lists every object labelled as managed by virtop, by key.
func (s *suite) managed() map[string]liveObject {
	s.t.Helper()
	out, err := listManaged(context.Background(), s.c)
	if err != nil {
		s.t.Fatal(err)
	}
	return out
}

func listManaged(ctx context.Context, c client.Client) (map[string]liveObject, error) {
	out := map[string]liveObject{}
	for _, gvk := range liveKinds {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion(gvk[0])
		list.SetKind(gvk[1])
		err := c.List(ctx, list, client.MatchingLabels{vocab.ManagedByLabel: vocab.ManagedByValue})
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", gvk[1], err)
		}
		for _, o := range list.Items {
			kind := strings.TrimSuffix(gvk[1], "List")
			k := gvk[1] + "/" + o.GetNamespace() + "/" + o.GetName()
			out[k] = liveObject{key: k, kind: kind, ns: o.GetNamespace(), name: o.GetName(), uid: string(o.GetUID()), rv: o.GetResourceVersion(), labels: o.GetLabels()}
		}
	}
	return out, nil
}

// want is what should exist for a KubeVirt resource, from its strategy
// planned against this cluster.
type want struct {
	id         string
	required   map[string]bool // keys as liveObject.key
	optional   map[string]bool // "<Kind>/<name>": gated objects, in any namespace
	strategyCM string
	stageSizes map[stage.Stage]int // ungated objects per stage
}

// wanted renders the strategy of kv as the operator does and plans it for
// this cluster (every node counts, as the operator's capability reader
// counts them) with every gate open; objects without a gate must exist,
// gated ones may.
func wanted(ctx context.Context, c client.Client, kv *kvv1.KubeVirt) (*want, error) {
	cfg, err := config.FromKubeVirt(kv, config.Settings{Namespace: kv.Namespace, RunbookURLTemplate: config.DefaultRunbookURLTemplate})
	if err != nil {
		return nil, err
	}
	st, err := strategy.Generate(cfg)
	if err != nil {
		return nil, err
	}
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return nil, err
	}
	apis := map[string]bool{}
	for _, o := range st.Objects {
		for _, g := range stage.GatesOf(o) {
			if gv, res, ok := g.IsAPI(); ok {
				apis[gv+"/"+res] = true
			}
		}
	}
	p, err := plan.Build(st, cfg, plan.Capabilities{APIs: apis, Nodes: len(nodes.Items), VirtAPIServing: true}, plan.Options{})
	if err != nil {
		return nil, err
	}
	w := &want{id: cfg.ID, required: map[string]bool{}, optional: map[string]bool{}, strategyCM: strategy.ConfigMapName(cfg.ID), stageSizes: map[stage.Stage]int{}}
	for _, o := range p.Objects {
		kind := o.GetObjectKind().GroupVersionKind().Kind
		if len(stage.GatesOf(o)) > 0 {
			w.optional[kind+"/"+o.GetName()] = true
			continue
		}
		w.required[kind+"List/"+o.GetNamespace()+"/"+o.GetName()] = true
		if sg, err := stage.Of(o); err == nil {
			w.stageSizes[sg]++
		}
	}
	for _, cg := range p.Closed {
		w.optional[cg.Object.Kind+"/"+cg.Object.Name] = true
	}
	return w, nil
}

// checkObjects compares the live managed objects with w: every required
// one present, and what checkStray checks. It returns every violation.
func checkObjects(live map[string]liveObject, w *want, installNS string, prevIDs ...string) []string {
	var bad []string
	for k := range w.required {
		if _, ok := live[k]; !ok {
			bad = append(bad, "missing "+k)
		}
	}
	if _, ok := live["ConfigMapList/"+installNS+"/"+w.strategyCM]; !ok {
		bad = append(bad, "missing the strategy ConfigMap "+installNS+"/"+w.strategyCM)
	}
	bad = append(bad, checkStray(live, installNS, []*want{w}, prevIDs...)...)
	sort.Strings(bad)
	return bad
}

// checkStray checks what may hold at any moment, even mid-rollout: nothing
// virtop manages that none of wants holds, no object twice (one kind and
// name in two namespaces, or one workload name as both a Deployment and a
// DaemonSet), and no strategy ConfigMap but those of wants and prevIDs.
func checkStray(live map[string]liveObject, installNS string, wants []*want, prevIDs ...string) []string {
	var bad []string
	allowedCM := map[string]bool{}
	for _, w := range wants {
		allowedCM[w.strategyCM] = true
	}
	for _, id := range prevIDs {
		if id != "" {
			allowedCM[strategy.ConfigMapName(id)] = true
		}
	}
	wanted := func(k string, o liveObject) bool {
		for _, w := range wants {
			if w.required[k] || w.optional[o.kind+"/"+o.name] {
				return true
			}
		}
		return false
	}
	byKindName := map[string][]string{}
	workloads := map[string][]string{}
	for k, o := range live {
		if _, isStrategy := o.labels[vocab.InstallStrategyLabel]; isStrategy && o.kind == "ConfigMap" {
			if o.ns != installNS || !allowedCM[o.name] {
				bad = append(bad, "stale strategy ConfigMap "+k)
			}
			continue
		}
		byKindName[o.kind+"/"+o.name] = append(byKindName[o.kind+"/"+o.name], k)
		if o.kind == "Deployment" || o.kind == "DaemonSet" {
			workloads[o.name] = append(workloads[o.name], k)
		}
		if !wanted(k, o) {
			bad = append(bad, "not wanted (virtop should have pruned it) "+k)
		}
	}
	for _, m := range []map[string][]string{byKindName, workloads} {
		for name, keys := range m {
			if len(keys) > 1 {
				sort.Strings(keys)
				bad = append(bad, fmt.Sprintf("%s present %d times: %v", name, len(keys), keys))
			}
		}
	}
	sort.Strings(bad)
	return bad
}

// converged waits until the KubeVirt resource is Available at version with
// its target rolled out, then until the managed objects are exactly what
// its strategy wants (prevIDs: strategy ConfigMaps that may remain), and
// returns how long it waited in all.
func (s *suite) converged(version string, prevIDs ...string) time.Duration {
	s.t.Helper()
	start := time.Now()
	framework.WaitKubeVirt(s.t, s.c, "Available at "+version, rolloutTimeout, func(kv *kvv1.KubeVirt) (bool, string) {
		ok, why := framework.RolledOutAt(version)(kv)
		return ok && kv.Status.ObservedDeploymentID == kv.Status.TargetDeploymentID, why
	})
	var w *want
	poll.Eventually(s.t, "the managed objects to be exactly the strategy's", time.Minute, func(ctx context.Context) (bool, error) {
		kv, err := s.kubeVirt(ctx)
		if err != nil || kv == nil {
			return false, fmt.Errorf("reading the KubeVirt resource: %v", err)
		}
		if w, err = wanted(ctx, s.c, kv); err != nil {
			return false, err
		}
		if w.id != kv.Status.TargetDeploymentID {
			return false, fmt.Errorf("the test renders deployment %s, the operator targets %s", w.id, kv.Status.TargetDeploymentID)
		}
		live, err := listManaged(ctx, s.c)
		if err != nil {
			return false, err
		}
		if bad := checkObjects(live, w, kv.Namespace, prevIDs...); len(bad) > 0 {
			return false, fmt.Errorf("%d problems: %s", len(bad), strings.Join(bad, "; "))
		}
		return true, nil
	})
	return time.Since(start)
}

// alive fails the test unless p runs and its only exits of its own were
// faultKills exits by signal (crash points the test armed).
func alive(t *testing.T, p *framework.Process, faultKills int) {
	t.Helper()
	if !p.Running() {
		t.Errorf("%s is not running (exits %v)", p.Name, p.Exits())
	}
	_, codes := p.EverExited()
	if len(codes) != faultKills {
		t.Errorf("%s exited on its own %d times (codes %v), want %d (the armed crash points)", p.Name, len(codes), codes, faultKills)
	}
	for _, c := range codes {
		if c != -1 {
			t.Errorf("%s exited with code %d, not by a signal", p.Name, c)
		}
	}
}

// kubeVirtEvents returns the events about the KubeVirt resource with
// reason, newest last, as "reason: note".
func (s *suite) kubeVirtEvents(ctx context.Context, reason string) ([]string, error) {
	list, err := s.env.Kube.EventsV1().Events(framework.KubeVirtKey.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "KubeVirt" && e.Regarding.Name == framework.KubeVirtKey.Name && e.Reason == reason {
			out = append(out, e.Reason+": "+e.Note)
		}
	}
	return out, nil
}

// startSettledOperator starts an operator with its metrics on a free
// address and waits until its first reconcile of the KubeVirt resource
// ended without error (controller_runtime_reconcile_total), so what the test does
// next meets an operator that has resolved and cached the strategy. It
// returns the process and its metrics endpoint.
func (s *suite) startSettledOperator() (*framework.Process, framework.Metrics) {
	s.t.Helper()
	metrics := s.env.MetricsEndpoint(s.t)
	op := s.operator(metrics.Args()...).Start()
	poll.Eventually(s.t, "the operator's first reconcile without error", 2*time.Minute, func(ctx context.Context) (bool, error) {
		n, err := scrapeReconciles(ctx, metrics)
		return err == nil && n >= 1, fmt.Errorf("reconciles without error: %g (%v)", n, err)
	})
	return op, metrics
}

// reconcileDone matches the reconciles that ended without error (a pass
// that asks to be requeued later counts as requeue_after, not success).
var reconcileDone = regexp.MustCompile(`^controller_runtime_reconcile_total\{[^}]*controller="kubevirt"[^}]*result="(success|requeue|requeue_after)"[^}]*\} ([0-9.e+]+)$`)

// scrapeReconciles reads how many reconciles of the kubevirt controller
// ended without error from the operator's metrics endpoint.
func scrapeReconciles(ctx context.Context, metrics framework.Metrics) (float64, error) {
	body, err := metrics.Get(ctx)
	if err != nil {
		return 0, err
	}
	total := 0.0
	for _, line := range strings.Split(string(body), "\n") {
		if m := reconcileDone.FindStringSubmatch(line); m != nil {
			n, err := strconv.ParseFloat(m[2], 64)
			if err != nil {
				return 0, err
			}
			total += n
		}
	}
	return total, nil
}
