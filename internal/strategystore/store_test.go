package strategystore_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/apply"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/inventory"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/strategystore"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// newConfig is the deployment config of a KubeVirt resource named
// kubevirt in ns at version, mutate applied first.
func newConfig(t *testing.T, ns, version string, mutate func(*kvv1.KubeVirt)) (*kvv1.KubeVirt, *config.DeploymentConfig) {
	t.Helper()
	kv := &kvv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: ns}}
	kv.Spec.ImageTag = version
	if mutate != nil {
		mutate(kv)
	}
	cfg, err := config.FromKubeVirt(kv, config.Settings{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	return kv, cfg
}

// recordedEvents drains a fake recorder.
func recordedEvents(rec *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func hasEvent(evs []string, parts ...string) bool {
	return slices.ContainsFunc(evs, func(e string) bool {
		for _, p := range parts {
			if !strings.Contains(e, p) {
				return false
			}
		}
		return true
	})
}

// jobs plays the strategy Job runner: it counts the calls and returns a
// fixed state; Verify is the real Runner's, reading the key Secret from
// the API server.
type jobs struct {
	ensured, done int
	state         strategystore.State
	verifier      *strategystore.Runner
}

// Verify checks with the key of signingKey's Secret, which the test plays
// the operator creating: its fingerprint is recorded on a copy of kv.
func (j *jobs) Verify(ctx context.Context, kv *kvv1.KubeVirt, cm *corev1.ConfigMap) error {
	kv = kv.DeepCopy()
	strategystore.RecordKey(kv, testKey)
	return j.verifier.Verify(ctx, kv, cm)
}

// testKey is the signing key of signingKey's Secret.
var testKey = []byte(strings.Repeat("0123456789abcdef", 4))

// signingKey creates the install namespace's signing key Secret, as the
// Runner does before it creates a Job.
func signingKey(t *testing.T, c client.Client, ns string) {
	t.Helper()
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: vocab.StrategySigningKeySecret},
		Data:       map[string][]byte{vocab.StrategySigningKeyKey: testKey},
	}
	if err := c.Create(context.Background(), sec); err != nil {
		t.Fatal(err)
	}
}

// rendered is the strategy of cfg and its ConfigMap in ns, as the Job
// renders them (unsigned).
func rendered(t *testing.T, cfg *config.DeploymentConfig, ns string) (*strategy.Strategy, *corev1.ConfigMap) {
	t.Helper()
	st, err := strategy.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cm, err := st.ConfigMap(ns)
	if err != nil {
		t.Fatal(err)
	}
	return st, cm
}

// signed signs cm as the Job does.
func signed(t *testing.T, cm *corev1.ConfigMap) *corev1.ConfigMap {
	t.Helper()
	if err := strategy.Sign(cm, testKey); err != nil {
		t.Fatal(err)
	}
	return cm
}

func (j *jobs) Ensure(context.Context, *kvv1.KubeVirt, *config.DeploymentConfig) (strategystore.State, error) {
	j.ensured++
	return j.state, nil
}

func (j *jobs) Done(context.Context, *kvv1.KubeVirt, *config.DeploymentConfig) error {
	j.done++
	return nil
}

// TestResolveCatalogVersion: a catalog version renders in process once;
// Resolve writes nothing (the objects come first), Keep writes its
// ConfigMap, and writes it again (with an event saying what was found)
// when it is deleted or changed while the strategy is remembered.
func TestResolveCatalogVersion(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	rec := events.NewFakeRecorder(16)
	s := &strategystore.Store{Client: env.Client, Applier: apply.New(env.Client), Catalog: release.Builtin(), Recorder: rec}
	kv, cfg := newConfig(t, ns, release.Default, nil)

	res, err := s.Resolve(ctx, kv, cfg)
	if err != nil || res.Strategy == nil || res.Strategy.ID != cfg.ID {
		t.Fatalf("Resolve = %+v, %v; want the strategy of %s", res, err, cfg.ID)
	}
	key := client.ObjectKey{Namespace: ns, Name: strategy.ConfigMapName(cfg.ID)}
	cm := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, key, cm); !apierrors.IsNotFound(err) {
		t.Fatalf("Resolve wrote the strategy ConfigMap (or the read failed: %v); it is Keep's, after the apply", err)
	}
	ref, err := s.Keep(ctx, kv, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, key, cm); err != nil {
		t.Fatalf("Keep did not write the strategy ConfigMap: %v", err)
	}
	if ref == nil || ref.Name != cm.Name || ref.UID != cm.UID || ref.Kind != "ConfigMap" {
		t.Errorf("Keep returned %+v; want the identity of ConfigMap %s (UID %s) for the inventory", ref, cm.Name, cm.UID)
	}
	if back, err := strategy.FromConfigMap(cm); err != nil || back.ID != cfg.ID || len(back.Objects) != len(res.Strategy.Objects) {
		t.Fatalf("the ConfigMap does not hold the strategy: %v", err)
	}
	again, err := s.Resolve(ctx, kv, cfg)
	if err != nil || again.Strategy != res.Strategy {
		t.Errorf("a second Resolve rendered again (or failed: %v) instead of using the remembered strategy", err)
	}
	if _, err := s.Keep(ctx, kv, cfg); err != nil {
		t.Fatal(err)
	}
	if evs := recordedEvents(rec); len(evs) != 0 {
		t.Errorf("events while nothing was tampered with: %q", evs)
	}

	if err := env.Client.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Keep(ctx, kv, cfg); err != nil {
		t.Fatal(err)
	}
	restored := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, key, restored); err != nil || restored.Data[vocab.ManifestsKey] != cm.Data[vocab.ManifestsKey] {
		t.Fatalf("the deleted ConfigMap was not written again: %v", err)
	}
	if evs := recordedEvents(rec); !hasEvent(evs, "Warning", "StrategyRestored", "was deleted") {
		t.Errorf("events %q, want a StrategyRestored warning saying it was deleted", evs)
	}

	base := restored.DeepCopy()
	restored.Data[vocab.ManifestsKey] = "garbage"
	if err := env.Client.Patch(ctx, restored, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Keep(ctx, kv, cfg); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, key, restored); err != nil || restored.Data[vocab.ManifestsKey] != cm.Data[vocab.ManifestsKey] {
		t.Fatalf("the changed ConfigMap was not written again: %v", err)
	}
	if evs := recordedEvents(rec); !hasEvent(evs, "Warning", "StrategyRestored", "was changed") {
		t.Errorf("events %q, want a StrategyRestored warning saying it was changed", evs)
	}
}

// TestResolveInvalid: a config that does not render is the user's to fix:
// Invalid, no error, nothing written.
func TestResolveInvalid(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	s := &strategystore.Store{Client: env.Client, Applier: apply.New(env.Client), Catalog: release.Builtin()}
	kv, cfg := newConfig(t, ns, release.Default, func(kv *kvv1.KubeVirt) {
		kv.Spec.CustomizeComponents.Patches = []kvv1.CustomizeComponentsPatch{{ResourceName: "virt-api", ResourceType: "Deployment",
			Type: kvv1.MergePatchType, Patch: `{"spec":{"replicaz":3}}`}}
	})
	res, err := s.Resolve(ctx, kv, cfg)
	if err != nil || res.Strategy != nil || res.Invalid == nil || !strings.Contains(res.Invalid.Error(), "patches[0]") {
		t.Fatalf("Resolve = %+v, %v; want Invalid naming patches[0]", res, err)
	}
	if ref, err := s.Keep(ctx, kv, cfg); ref != nil || err != nil {
		t.Errorf("Keep of an invalid config = %+v, %v; want nothing written", ref, err)
	}
	var list corev1.ConfigMapList
	if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, cm := range list.Items {
		if _, ok := cm.Labels[vocab.InstallStrategyLabel]; ok {
			t.Errorf("strategy ConfigMap %s written for an invalid config", cm.Name)
		}
	}

	// Outside the catalog and no Job to render it: Invalid too.
	s = &strategystore.Store{Client: env.Client, Applier: apply.New(env.Client), Catalog: restricted(t, "v1.5.0")}
	kv, cfg = newConfig(t, ns, "v1.5.3", nil)
	res, err = s.Resolve(ctx, kv, cfg)
	if err != nil || res.Invalid == nil || !strings.Contains(res.Invalid.Error(), "--strategy-image") {
		t.Fatalf("Resolve outside the catalog without Jobs = %+v, %v; want Invalid naming --strategy-image", res, err)
	}
}

func restricted(t *testing.T, versions ...string) release.Catalog {
	t.Helper()
	c, err := release.Builtin().Restrict(versions)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestResolveFromTheJob: a version outside the catalog waits for the Job
// while its ConfigMap is missing, loads once the Job wrote it (and tells
// the Job it is done), and deletes a ConfigMap it cannot read or that
// holds another deployment's strategy, so the Job produces it again.
func TestResolveFromTheJob(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	rec := events.NewFakeRecorder(16)
	j := &jobs{state: strategystore.State{Pending: "the Job runs", RequeueAfter: 15 * time.Second},
		verifier: strategystore.NewRunner(env.Client, env.Client, "example.com/virtop:test")}
	newStore := func() *strategystore.Store {
		return &strategystore.Store{Client: env.Client, Applier: apply.New(env.Client), Catalog: restricted(t, "v1.5.0"), Jobs: j, Recorder: rec}
	}
	s := newStore()
	kv, cfg := newConfig(t, ns, "v1.5.3", nil)

	res, err := s.Resolve(ctx, kv, cfg)
	if err != nil || res.Strategy != nil || res.Pending != "the Job runs" || res.RequeueAfter != 15*time.Second || j.ensured != 1 {
		t.Fatalf("Resolve without a ConfigMap = %+v, %v (Ensure called %d times); want the Job's state", res, err, j.ensured)
	}

	// The Job writes the ConfigMap, signed with the operator's key.
	want, cm := rendered(t, cfg, ns)
	signingKey(t, env.Client, ns)
	if err := env.Client.Create(ctx, signed(t, cm.DeepCopy())); err != nil {
		t.Fatal(err)
	}
	res, err = s.Resolve(ctx, kv, cfg)
	if err != nil || res.Strategy == nil || res.Strategy.ID != cfg.ID || len(res.Strategy.Objects) != len(want.Objects) {
		t.Fatalf("Resolve with the Job's ConfigMap = %+v, %v; want its strategy", res, err)
	}
	if j.done != 1 || j.ensured != 1 {
		t.Errorf("Done called %d times, Ensure %d; want 1 and 1", j.done, j.ensured)
	}
	if again, _ := s.Resolve(ctx, kv, cfg); again.Strategy != res.Strategy || j.done != 1 {
		t.Errorf("a second Resolve read the ConfigMap again instead of using the remembered strategy")
	}
	// The Job's ConfigMap is the Job's: Keep neither writes nor records it.
	if ref, err := s.Keep(ctx, kv, cfg); ref != nil || err != nil {
		t.Errorf("Keep of the Job's strategy = %+v, %v; want nothing", ref, err)
	}

	// A signed ConfigMap that does not read as the deployment's strategy
	// is corrupt; one the Job did not sign (or that changed after) is
	// untrusted and never decoded. Either is deleted, an event says which,
	// and the Job runs again.
	pod := "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: miner\n  namespace: kube-system\nspec:\n  containers: [{name: c, image: evil}]\n"
	for _, c := range []struct {
		name, event string
		resign      bool
		mutate      func(*corev1.ConfigMap)
	}{
		{"unreadable", "StrategyCorrupt", true, func(cm *corev1.ConfigMap) { cm.Data[vocab.ManifestsKey] = "not gzip+base64" }},
		{"another deployment's", "StrategyCorrupt", true, func(cm *corev1.ConfigMap) {
			cm.Annotations[vocab.InstallStrategyIdentifierAnnotation] = "0123456789abcdef"
		}},
		{"a Pod in kube-system, signed", "StrategyCorrupt", true, func(cm *corev1.ConfigMap) {
			delete(cm.Annotations, vocab.InstallStrategyEncodingAnnotation)
			cm.Data[vocab.ManifestsKey] = pod
		}},
		{"unsigned, written by someone else", "StrategyUntrusted", false, func(cm *corev1.ConfigMap) {
			delete(cm.Annotations, vocab.StrategySignatureAnnotation)
			delete(cm.Annotations, vocab.InstallStrategyEncodingAnnotation)
			cm.Data[vocab.ManifestsKey] = pod
		}},
		{"changed after the Job signed it", "StrategyUntrusted", false, func(cm *corev1.ConfigMap) {
			cm.Annotations[vocab.InstallStrategyRegistryAnnotation] = "evil.example.com"
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			bad := signed(t, cm.DeepCopy())
			c.mutate(bad)
			if c.resign {
				signed(t, bad)
			}
			live := &corev1.ConfigMap{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cm), live); err == nil {
				bad.ResourceVersion = live.ResourceVersion
				if err := env.Client.Update(ctx, bad); err != nil {
					t.Fatal(err)
				}
			} else if !apierrors.IsNotFound(err) {
				t.Fatal(err)
			} else if err := env.Client.Create(ctx, bad); err != nil {
				t.Fatal(err)
			}
			recordedEvents(rec)
			ensured := j.ensured
			// A new process remembers nothing and finds the bad ConfigMap.
			res, err := newStore().Resolve(ctx, kv, cfg)
			if err != nil || res.Strategy != nil || res.Pending == "" || j.ensured != ensured+1 {
				t.Fatalf("Resolve of a bad ConfigMap = %+v, %v; want it pending on the Job again", res, err)
			}
			err = env.Client.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})
			if !apierrors.IsNotFound(err) {
				t.Errorf("the bad ConfigMap is still there (%v)", err)
			}
			if evs := recordedEvents(rec); !hasEvent(evs, "Warning", c.event, cm.Name) {
				t.Errorf("events %q, want a %s warning naming %s", evs, c.event, cm.Name)
			}
		})
	}

	// Without a key Secret no ConfigMap is trusted.
	if err := env.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: vocab.StrategySigningKeySecret}}); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, signed(t, cm.DeepCopy())); err != nil {
		t.Fatal(err)
	}
	recordedEvents(rec)
	if res, err := newStore().Resolve(ctx, kv, cfg); err != nil || res.Strategy != nil {
		t.Fatalf("Resolve without the key = %+v, %v; want it pending on the Job", res, err)
	}
	if evs := recordedEvents(rec); !hasEvent(evs, "StrategyUntrusted", "there is no signing key") {
		t.Errorf("events %q, want StrategyUntrusted saying there is no signing key", evs)
	}
}

// With no Job (no --strategy-image), a version outside the catalog is a
// configuration error, and a ConfigMap of its name is not read, however
// it looks.
func TestResolveWithoutJobsReadsNoConfigMap(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	kv, cfg := newConfig(t, ns, "v1.5.3", nil)
	_, cm := rendered(t, cfg, ns)
	if err := env.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	s := &strategystore.Store{Client: env.Client, Applier: apply.New(env.Client), Catalog: restricted(t, "v1.5.0")}
	res, err := s.Resolve(ctx, kv, cfg)
	if err != nil || res.Strategy != nil || res.Invalid == nil || !strings.Contains(res.Invalid.Error(), "--strategy-image") {
		t.Fatalf("Resolve = %+v, %v; want Invalid naming --strategy-image", res, err)
	}
}

// TestCollect keeps the current and the previous strategy ConfigMaps —
// the newest other one once the rollout is recorded — deletes older
// ones, deletes every one on uninstall, and leaves alone ConfigMaps
// virtop does not manage, and those labelled as virtop's (applied with
// its own field manager even) that its inventory does not hold.
func TestCollect(t *testing.T) {
	env := testenv.Get(t)
	ctx := context.Background()
	ns := env.Namespace(t)
	s := &strategystore.Store{Client: env.Client, Applier: apply.New(env.Client), Catalog: release.Builtin()}
	ids := []string{"aaaaaaaaaa01", "bbbbbbbbbb02", "cccccccccc03", "dddddddddd04"}
	inv := &inventory.Inventory{}
	for i, id := range ids {
		if i > 0 {
			// Creation timestamps have a resolution of a second.
			time.Sleep(1100 * time.Millisecond)
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: strategy.ConfigMapName(id),
			Labels: map[string]string{vocab.InstallStrategyLabel: "", vocab.ManagedByLabel: vocab.ManagedByValue}}}
		if err := env.Client.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		inv.Add(schema.GroupKind{Kind: "ConfigMap"}, cm)
	}
	// The newest: a copy with virtop's labels, applied under virtop's
	// field manager by someone who may write ConfigMaps there.
	time.Sleep(1100 * time.Millisecond)
	forged := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: strategy.ConfigMapName("ffffffffff06"),
		Labels: map[string]string{vocab.InstallStrategyLabel: "", vocab.ManagedByLabel: vocab.ManagedByValue}}}
	if u, err := apply.Desired(forged); err != nil {
		t.Fatal(err)
	} else if err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(vocab.FieldManager)); err != nil {
		t.Fatal(err)
	}
	foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: strategy.ConfigMapName("eeeeeeeeee05"),
		Labels: map[string]string{vocab.InstallStrategyLabel: ""}}}
	if err := env.Client.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	left := func() []string {
		var list corev1.ConfigMapList
		if err := env.Client.List(ctx, &list, client.InNamespace(ns), client.HasLabels{vocab.InstallStrategyLabel}); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, cm := range list.Items {
			out = append(out, cm.Name)
		}
		slices.Sort(out)
		return out
	}
	names := func(ids ...string) []string {
		var out []string
		for _, id := range ids {
			out = append(out, strategy.ConfigMapName(id))
		}
		slices.Sort(out)
		return out
	}
	for _, step := range []struct {
		what              string
		current, previous string
		want              []string
	}{
		// Rolled out: the newest other ConfigMap is the previous one.
		{"after a rollout", ids[1], ids[1], names(ids[1], ids[3], "eeeeeeeeee05", "ffffffffff06")},
		// Updating from ids[3]: the one before that goes.
		{"during an update", ids[0], ids[3], names(ids[3], "eeeeeeeeee05", "ffffffffff06")},
		{"uninstall", "", "", names("eeeeeeeeee05", "ffffffffff06")},
	} {
		if err := s.Collect(ctx, ns, step.current, step.previous, inv); err != nil {
			t.Fatal(err)
		}
		if got := left(); !slices.Equal(got, step.want) {
			t.Fatalf("%s: left %v, want %v", step.what, got, step.want)
		}
	}
	if inv.Len() != 0 {
		t.Errorf("after the uninstall the inventory still holds %+v", inv.Into(nil))
	}
}
