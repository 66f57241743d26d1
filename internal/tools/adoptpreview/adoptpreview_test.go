package adoptpreview_test

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/operator"
	"github.com/virtop-dev/virtop/internal/scheme"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/testing/operatortest"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
	"github.com/virtop-dev/virtop/internal/tools/adoptpreview"
	"github.com/virtop-dev/virtop/internal/vocab"
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, testenv.Options{Scheme: scheme.New()}))
}

const upstreamID = "upstream-deployment-id"

// upstreamInstall creates in ns the namespaced objects of upstream's own
// strategy of a release as upstream's operator leaves them (its labels,
// annotations and deployment ID, created by its field manager), one of its
// generated-name strategy ConfigMaps, its operator Deployment (replicas
// 1), and a KubeVirt resource with the status upstream's operator writes.
// It returns every object created.
func upstreamInstall(t *testing.T, c client.Client, ns, version string) []client.Object {
	t.Helper()
	ctx := context.Background()
	dir := os.Getenv("VIRTOP_UPSTREAM_STRATEGIES")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "..", "shared", "upstream-strategies")
	}
	f, err := os.Open(filepath.Join(dir, version, "strategy.yaml.gz"))
	if err != nil {
		t.Skipf("no upstream reference strategies: %v (set VIRTOP_UPSTREAM_STRATEGIES to the directory)", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := strategy.ReadManifests(raw)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.FromKubeVirt(&kvv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Namespace: "kubevirt"}, Spec: kvv1.KubeVirtSpec{ImageTag: version}}, config.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	applied, err := strategy.AsAppliedByUpstream(objs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	stampID := func(a map[string]string) map[string]string {
		if a != nil && a[vocab.InstallStrategyIdentifierAnnotation] != "" {
			a[vocab.InstallStrategyIdentifierAnnotation] = upstreamID
		}
		return a
	}
	var out []client.Object
	for _, o := range applied {
		// Namespaced objects only: the package's tests share the
		// cluster-scoped ones, and a webhook or APIService without a
		// backend would break every namespace's deletion.
		if o.GetNamespace() == "" {
			continue
		}
		// Upstream's operator fills its certificate Secrets as it
		// creates them; the strategy holds them empty.
		if _, ok := o.(*corev1.Secret); ok {
			continue
		}
		o.SetNamespace(ns)
		o.SetAnnotations(stampID(o.GetAnnotations()))
		switch w := o.(type) {
		case *appsv1.Deployment:
			w.Spec.Template.Annotations = stampID(w.Spec.Template.Annotations)
		case *appsv1.DaemonSet:
			w.Spec.Template.Annotations = stampID(w.Spec.Template.Annotations)
		}
		if err := c.Create(ctx, o, client.FieldOwner(vocab.UpstreamFieldManager)); err != nil {
			t.Fatalf("create %s: %v", strategy.KeyOf(o), err)
		}
		out = append(out, o)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kubevirt-install-strategy-x7k2p",
		Labels:      map[string]string{vocab.ManagedByLabel: vocab.UpstreamManagedByValue, vocab.InstallStrategyLabel: ""},
		Annotations: map[string]string{vocab.InstallStrategyVersionAnnotation: version, vocab.InstallStrategyIdentifierAnnotation: upstreamID}}}
	op := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: vocab.VirtOperator,
		Labels: map[string]string{vocab.AppLabel: vocab.VirtOperator}}}
	op.Spec.Replicas = ptr.To[int32](1)
	op.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{vocab.AppLabel: vocab.VirtOperator}}
	op.Spec.Template.Labels = map[string]string{vocab.AppLabel: vocab.VirtOperator}
	op.Spec.Template.Spec.Containers = []corev1.Container{{Name: vocab.VirtOperator, Image: "quay.io/kubevirt/virt-operator:" + version}}
	for _, o := range []client.Object{cm, op} {
		if err := c.Create(ctx, o, client.FieldOwner(vocab.UpstreamFieldManager)); err != nil {
			t.Fatal(err)
		}
		out = append(out, o)
	}
	kv := &kvv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kubevirt", Finalizers: []string{vocab.LegacyKubeVirtFinalizer}}}
	kv.Spec.ImageTag = version
	if err := c.Create(ctx, kv); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	kv.Status = kvv1.KubeVirtStatus{
		Phase: kvv1.KubeVirtPhaseDeployed, OperatorVersion: version,
		ObservedKubeVirtVersion: version, ObservedKubeVirtRegistry: "quay.io/kubevirt", ObservedDeploymentID: upstreamID,
		TargetKubeVirtVersion: version, TargetKubeVirtRegistry: "quay.io/kubevirt", TargetDeploymentID: upstreamID,
		Conditions: []kvv1.KubeVirtCondition{
			{Type: kvv1.KubeVirtConditionAvailable, Status: corev1.ConditionTrue, Reason: kvv1.ReasonAllComponentsReady, LastTransitionTime: now, LastProbeTime: now},
		},
	}
	if err := c.Status().Update(ctx, kv); err != nil {
		t.Fatal(err)
	}
	return append(out, kv)
}

// requests counts the requests a client makes, by HTTP method.
type requests struct {
	mu     sync.Mutex
	byVerb map[string]int
	writes []string
}

func (r *requests) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		r.mu.Lock()
		r.byVerb[req.Method]++
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			r.writes = append(r.writes, req.Method+" "+req.URL.Path)
		}
		r.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// TestAdoptDryRun previews the adoption of upstream's v1.5.3 installation:
// refused while upstream's operator runs (reason UpstreamOperatorRunning
// and its remedy), accepted once it is scaled to zero; both times the
// objects it would take over and leave, and the workloads that would roll
// with their fields. It writes nothing: every request it makes is a GET,
// and no object's resourceVersion moves. Then virtop's operator really
// adopts, and each workload's pod template changes in exactly the fields
// the dry run named.
func TestAdoptDryRun(t *testing.T) {
	const version = "v1.5.3"
	env := testenv.Get(t)
	ns := env.Namespace(t)
	c := env.Client
	ctx := context.Background()
	objs := upstreamInstall(t, c, ns, version)

	count := &requests{byVerb: map[string]int{}}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(count.wrap)
	rc, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	versions := func() map[string]string {
		out := map[string]string{}
		for _, o := range objs {
			live := o.DeepCopyObject().(client.Object)
			if err := c.Get(ctx, client.ObjectKeyFromObject(o), live); err != nil {
				t.Fatal(err)
			}
			out[fmt.Sprintf("%T %s", o, client.ObjectKeyFromObject(o))] = live.GetResourceVersion()
		}
		return out
	}
	previewWith := func(want string, settings config.Settings) adoptpreview.Report {
		t.Helper()
		before := versions()
		start := time.Now()
		rep, err := adoptpreview.Run(ctx, rc, cs, adoptpreview.Options{Namespace: ns, Settings: settings})
		took := time.Since(start)
		if want == adoptpreview.Accepted && err != nil || want != adoptpreview.Accepted && !errors.Is(err, adoptpreview.ErrRefused) {
			t.Fatalf("preview: %v, want %s", err, want)
		}
		t.Logf("%s", rep.Text())
		if rep.Verdict != want {
			t.Errorf("verdict %s, want %s", rep.Verdict, want)
		}
		after := versions()
		for k, rv := range before {
			if after[k] != rv {
				t.Errorf("the dry run changed %s (resourceVersion %s → %s)", k, rv, after[k])
			}
		}
		count.mu.Lock()
		defer count.mu.Unlock()
		if len(count.writes) > 0 {
			t.Errorf("the dry run sent %d requests that are not reads: %v", len(count.writes), count.writes)
		}
		t.Logf("requests by method: %v (over %d objects), %s", count.byVerb, len(before), took.Round(time.Millisecond))
		count.byVerb, count.writes = map[string]int{}, nil
		return rep
	}
	preview := func(want string) adoptpreview.Report { t.Helper(); return previewWith(want, config.Settings{}) }
	check := func(rep adoptpreview.Report) {
		t.Helper()
		has := func(l []adoptpreview.Object, kind, name string) bool {
			for _, o := range l {
				if o.Kind == kind && o.Name == name {
					return true
				}
			}
			return false
		}
		for _, w := range []string{vocab.VirtAPI, vocab.VirtController} {
			if !has(rep.TakeOver, "Deployment", w) {
				t.Errorf("Deployment %s is not among the objects taken over: %v", w, rep.TakeOver)
			}
		}
		if !has(rep.TakeOver, "DaemonSet", vocab.VirtHandler) {
			t.Errorf("virt-handler is not among the objects taken over")
		}
		var left bool
		for _, l := range rep.Left {
			if l.Name == "kubevirt-install-strategy-x7k2p" && strings.Contains(l.Why, "not in virtop's plan") {
				left = true
			}
		}
		if !left {
			t.Errorf("upstream's strategy ConfigMap is not left to upstream with a reason: %v", rep.Left)
		}
		if rep.Upstream == nil || rep.Upstream.DeploymentID != upstreamID || rep.Target == nil || rep.Target.Version != version {
			t.Errorf("upstream %+v target %+v", rep.Upstream, rep.Target)
		}
		// At the release upstream runs nothing rolls: every workload keeps
		// the pod template upstream wrote, and the preview names the
		// fields virtop's render differs in (they roll with the next
		// change of the deployment); the identifier annotation is
		// upstream's deployment ID in every pod template, virtop's in its
		// render, so each names that at least.
		if len(rep.Rolls) != 0 || len(rep.Kept) != 3 {
			t.Errorf("rolls %v, kept %v, steady %v; want no roll and 3 kept", rep.Rolls, rep.Kept, rep.Steady)
		}
		for _, r := range rep.Kept {
			var id bool
			for _, ch := range r.Changes {
				if ch.Path == "spec.template.metadata.annotations[kubevirt.io/install-strategy-identifier]" && strings.Contains(ch.Live, upstreamID) {
					id = true
				}
				if ch.Path == "" || ch.Live == ch.Planned {
					t.Errorf("%s: empty change %+v", r.Name, ch)
				}
			}
			if !id {
				t.Errorf("%s is kept without the identifier annotation among its differences: %v", r.Name, r.Changes)
			}
		}
		b, err := json.Marshal(rep)
		if err != nil || !strings.Contains(string(b), `"rolls":[]`) || !strings.Contains(string(b), `"kept":[`) || !strings.Contains(string(b), `"left":[`) {
			t.Errorf("JSON %s %v", b, err)
		}
	}

	refused := preview(adoptpreview.Refused)
	if refused.Reason != kvv1.ReasonUpstreamOperatorRunning || !strings.Contains(refused.Message, "Deployment "+ns+"/"+vocab.VirtOperator) ||
		!strings.Contains(refused.Message, "Scale it to zero") {
		t.Errorf("refusal %s: %s", refused.Reason, refused.Message)
	}
	check(refused)

	// Upstream's operator stops: accepted.
	op := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: vocab.VirtOperator}, op); err != nil {
		t.Fatal(err)
	}
	op.Spec.Replicas = ptr.To[int32](0)
	if err := c.Update(ctx, op); err != nil {
		t.Fatal(err)
	}
	// spec.imageTag unset: virtop would install its default release, an
	// upgrade nobody asked for. (With the release manifest's default,
	// v1.9.0, the configure step refuses first: one minor version at a
	// time; an operator whose --default-version is v1.6.6 gets as far as
	// the adopt step.)
	kv := &kvv1.KubeVirt{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "kubevirt"}, kv); err != nil {
		t.Fatal(err)
	}
	setTag := func(tag string) {
		t.Helper()
		patch := client.MergeFrom(kv.DeepCopy())
		kv.Spec.ImageTag = tag
		if err := c.Patch(ctx, kv, patch); err != nil {
			t.Fatal(err)
		}
	}
	setTag("")
	if inv := preview(adoptpreview.Invalid); !strings.Contains(inv.Message, "one minor version at a time") {
		t.Errorf("with spec.imageTag unset and the default v1.9.0: %s", inv.Message)
	}
	upgrade := previewWith(adoptpreview.Refused, config.Settings{DefaultVersion: "v1.6.6"})
	if upgrade.Reason != kvv1.ReasonAdoptionWouldUpgrade || !strings.Contains(upgrade.Message, "set spec.imageTag to "+version) {
		t.Errorf("refusal %s: %s", upgrade.Reason, upgrade.Message)
	}
	setTag(version)

	accepted := preview(adoptpreview.Accepted)
	check(accepted)
	if accepted.Reason != adoptpreview.Accepted {
		t.Errorf("accepted with reason %s", accepted.Reason)
	}

	// What the operator really does: its first apply of each workload
	// changes exactly the pod-template fields the preview named as rolling
	// (none).
	type workload struct {
		obj    *unstructured.Unstructured
		before interface{}
	}
	var workloads []workload
	for _, o := range objs {
		u := &unstructured.Unstructured{}
		switch o.(type) {
		case *appsv1.Deployment:
			u.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
		case *appsv1.DaemonSet:
			u.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("DaemonSet"))
		default:
			continue
		}
		if o.GetName() == vocab.VirtOperator {
			continue
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), u); err != nil {
			t.Fatal(err)
		}
		before, _, _ := unstructured.NestedFieldCopy(u.Object, "spec", "template")
		workloads = append(workloads, workload{obj: u, before: before})
	}
	testenv.FakeReadiness(t, c, ns)
	operatortest.Start(t, env.Config, operator.Options{Namespace: ns})
	predicted := map[string][]string{}
	for _, r := range accepted.Rolls {
		for _, ch := range r.Changes {
			predicted[r.Name] = append(predicted[r.Name], ch.String())
		}
	}
	for _, w := range workloads {
		var after interface{}
		poll.Eventually(t, w.obj.GetName()+" applied by virtop", 3*time.Minute, func() (bool, string) {
			u := w.obj.DeepCopy()
			if err := c.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
				return false, err.Error()
			}
			after, _, _ = unstructured.NestedFieldCopy(u.Object, "spec", "template")
			return u.GetLabels()[vocab.ManagedByLabel] == vocab.ManagedByValue, fmt.Sprint(u.GetLabels())
		})
		var got []string
		for _, ch := range adoptpreview.TemplateDiff(w.before, after) {
			got = append(got, ch.String())
		}
		sort.Strings(got)
		want := predicted[w.obj.GetName()]
		sort.Strings(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: the operator changed\n  %s\nthe dry run said\n  %s", w.obj.GetName(), strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		} else {
			t.Logf("%s: the operator changed the %d fields the dry run named", w.obj.GetName(), len(got))
		}
	}
}
