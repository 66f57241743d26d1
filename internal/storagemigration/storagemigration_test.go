package storagemigration_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/apply"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/scheme"
	"github.com/virtop-dev/virtop/internal/storagemigration"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/testing/crds"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
	"github.com/virtop-dev/virtop/internal/vocab"
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, testenv.Options{SkipVirtopCRDs: true, Scheme: scheme.New()}))
}

// The four instancetype and preference CRDs: two cluster-scoped, two
// namespaced.
var instancetypeCRDs = []string{
	"virtualmachineclusterinstancetypes.instancetype.kubevirt.io",
	"virtualmachineclusterpreferences.instancetype.kubevirt.io",
	"virtualmachineinstancetypes.instancetype.kubevirt.io",
	"virtualmachinepreferences.instancetype.kubevirt.io",
}

// crdOf is a release's CRD as virtop renders it.
func crdOf(t *testing.T, version, name string) *apiextv1.CustomResourceDefinition {
	t.Helper()
	kv := &kvv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: "kubevirt"}}
	kv.Spec.ImageTag = version
	cfg, err := config.FromKubeVirt(kv, config.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := strategy.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := s.Find("CustomResourceDefinition", "", name).(*apiextv1.CustomResourceDefinition)
	if !ok {
		t.Fatalf("%s renders no CRD %s", version, name)
	}
	return o.DeepCopy()
}

// beforeV1 is how KubeVirt releases before v1.0 defined the CRD: v1alpha2
// was the storage version (v1beta1 arrived in v0.56 and became storage in
// v1.0). It is v1.5.3's CRD with the storage flag on v1alpha2.
func beforeV1(t *testing.T, name string) *apiextv1.CustomResourceDefinition {
	crd := crdOf(t, "v1.5.3", name)
	for i := range crd.Spec.Versions {
		crd.Spec.Versions[i].Storage = crd.Spec.Versions[i].Name == "v1alpha2"
	}
	return crd
}

func applyCRD(ctx context.Context, c client.Client, crd *apiextv1.CustomResourceDefinition) error {
	u, err := apply.Desired(crd)
	if err != nil {
		return err
	}
	return c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("virtop"), client.ForceOwnership)
}

func mustApplyCRD(t *testing.T, c client.Client, crd *apiextv1.CustomResourceDefinition) {
	t.Helper()
	if err := applyCRD(context.Background(), c, crd); err != nil {
		t.Fatalf("apply CRD %s: %v", crd.Name, err)
	}
	poll.Eventually(t, "CRD "+crd.Name+" established at its versions", time.Minute, func(ctx context.Context) (bool, error) {
		live := &apiextv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: crd.Name}, live); err != nil {
			return false, err
		}
		for _, cond := range live.Status.Conditions {
			if cond.Type == apiextv1.Established && cond.Status == apiextv1.ConditionTrue && len(live.Spec.Versions) == len(crd.Spec.Versions) {
				return true, nil
			}
		}
		return false, fmt.Errorf("not established")
	})
	crds.WaitServed(t, c, time.Minute, crd)
}

func storedVersions(t *testing.T, c client.Client, name string) []string {
	t.Helper()
	live := &apiextv1.CustomResourceDefinition{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: name}, live); err != nil {
		t.Fatal(err)
	}
	return live.Status.StoredVersions
}

// object is an instancetype or preference with a CPU count (instancetypes)
// or a preferred CPU topology (preferences), created through version.
func object(crd *apiextv1.CustomResourceDefinition, version, ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(crd.Spec.Group + "/" + version)
	u.SetKind(crd.Spec.Names.Kind)
	u.SetName(name)
	if crd.Spec.Scope == apiextv1.NamespaceScoped {
		u.SetNamespace(ns)
	}
	if strings.Contains(crd.Spec.Names.Kind, "Instancetype") {
		u.Object["spec"] = map[string]any{"cpu": map[string]any{"guest": int64(2)}, "memory": map[string]any{"guest": "1Gi"}}
	} else {
		u.Object["spec"] = map[string]any{"cpu": map[string]any{"preferredCPUTopology": "preferSockets"}}
	}
	return u
}

type stored struct {
	uid  types.UID
	spec string
}

func snapshot(t *testing.T, c client.Client, crd *apiextv1.CustomResourceDefinition, version string) map[string]stored {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion(crd.Spec.Group + "/" + version)
	list.SetKind(crd.Spec.Names.Kind + "List")
	if err := c.List(context.Background(), list); err != nil {
		t.Fatal(err)
	}
	out := map[string]stored{}
	for _, o := range list.Items {
		out[o.GetNamespace()+"/"+o.GetName()] = stored{o.GetUID(), fmt.Sprint(o.Object["spec"])}
	}
	return out
}

// TestMigrationLetsV174InAfterObjectsStoredAtOldVersions walks the
// instancetype CRDs of a cluster that stored objects at v1alpha1 and
// v1alpha2 (created through those versions while v1alpha2 was the storage
// version, as before KubeVirt v1.0) through v1.5.3 and v1.6.6 to v1.7.4,
// which drops both versions: the API server refuses v1.7.4's CRDs until the
// objects are rewritten, then takes them, and every object is still there,
// unchanged.
func TestMigrationLetsV174InAfterObjectsStoredAtOldVersions(t *testing.T) {
	env := testenv.Get(t)
	c := env.Client
	ctx := context.Background()
	ns := env.Namespace(t)
	m := &storagemigration.Migrator{Client: c, Reader: c, PageSize: 3}
	before := map[string]map[string]stored{}
	for _, name := range instancetypeCRDs {
		old := beforeV1(t, name)
		mustApplyCRD(t, c, old)
		// Seven objects, so the lists of PageSize 3 take three pages.
		for i := range 7 {
			version := []string{"v1alpha1", "v1alpha2"}[i%2]
			if err := c.Create(ctx, object(old, version, ns, fmt.Sprintf("old-%d", i))); err != nil {
				t.Fatalf("%s: create through %s: %v", name, version, err)
			}
		}
		if got := storedVersions(t, c, name); !slices.Equal(got, []string{"v1alpha2"}) {
			t.Fatalf("%s: storedVersions %v, want [v1alpha2]", name, got)
		}
		mustApplyCRD(t, c, crdOf(t, "v1.5.3", name))
		mustApplyCRD(t, c, crdOf(t, "v1.6.6", name))
		if got := storedVersions(t, c, name); !slices.Equal(got, []string{"v1alpha2", "v1beta1"}) {
			t.Fatalf("%s: storedVersions after v1.5.3 and v1.6.6: %v", name, got)
		}
		before[name] = snapshot(t, c, old, "v1beta1")
	}

	for _, name := range instancetypeCRDs {
		next := crdOf(t, "v1.7.4", name)
		// Without the migration the API server refuses the new CRD: this
		// is the failure the package exists for.
		err := applyCRD(ctx, c, next)
		if err == nil || !strings.Contains(err.Error(), "storedVersions") {
			t.Fatalf("%s: v1.7.4's CRD over objects stored at v1alpha2: error %v, want the API server's refusal naming storedVersions", name, err)
		}
		if d := storagemigration.Dropped(liveCRD(t, c, name), next); !slices.Equal(d, []string{"v1alpha2"}) {
			t.Fatalf("%s: Dropped = %v", name, d)
		}
		res, err := m.Prepare(ctx, next)
		if err != nil {
			t.Fatalf("%s: Prepare: %v", name, err)
		}
		if res.Version != "v1beta1" || res.MovedStorage || res.Rewritten != 7 {
			t.Errorf("%s: %+v; want 7 objects rewritten at v1beta1, storage not moved", name, res)
		}
		if got := storedVersions(t, c, name); !slices.Equal(got, []string{"v1beta1"}) {
			t.Fatalf("%s: storedVersions %v after Prepare", name, got)
		}
		mustApplyCRD(t, c, next)
		if after := snapshot(t, c, next, "v1beta1"); !equalSnapshots(before[name], after) {
			t.Errorf("%s: objects changed by the migration:\nbefore %v\nafter  %v", name, before[name], after)
		}
		// Once in, nothing more to do, and no write.
		res, err = m.Prepare(ctx, next)
		if err != nil || len(res.Dropped) != 0 || res.Rewritten != 0 {
			t.Errorf("%s: second Prepare: %+v, %v", name, res, err)
		}
	}
}

func liveCRD(t *testing.T, c client.Client, name string) *apiextv1.CustomResourceDefinition {
	t.Helper()
	live := &apiextv1.CustomResourceDefinition{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: name}, live); err != nil {
		t.Fatal(err)
	}
	return live
}

func equalSnapshots(a, b map[string]stored) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// The synthetic CRD of the remaining cases: group migrate.virtop.dev,
// versions as given, every one with the same schema (as KubeVirt's CRDs).
func synthetic(plural string, versions []string, storage string) *apiextv1.CustomResourceDefinition {
	crd := &apiextv1.CustomResourceDefinition{}
	crd.SetGroupVersionKind(apiextv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	crd.Name = plural + ".migrate.virtop.dev"
	crd.Spec.Group = "migrate.virtop.dev"
	crd.Spec.Scope = apiextv1.ClusterScoped
	kind := strings.ToUpper(plural[:1]) + plural[1:len(plural)-1]
	crd.Spec.Names = apiextv1.CustomResourceDefinitionNames{Plural: plural, Singular: plural[:len(plural)-1], Kind: kind, ListKind: kind + "List"}
	schema := &apiextv1.CustomResourceValidation{OpenAPIV3Schema: &apiextv1.JSONSchemaProps{
		Type: "object", XPreserveUnknownFields: ptr.To(true),
	}}
	for _, v := range versions {
		crd.Spec.Versions = append(crd.Spec.Versions, apiextv1.CustomResourceDefinitionVersion{Name: v, Served: true, Storage: v == storage, Schema: schema})
	}
	return crd
}

func syntheticObject(crd *apiextv1.CustomResourceDefinition, version, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"size": int64(len(name))}}}
	u.SetAPIVersion(crd.Spec.Group + "/" + version)
	u.SetKind(crd.Spec.Names.Kind)
	u.SetName(name)
	return u
}

// TestMigrationMovesTheStorageVersion: a new CRD that drops the live
// storage version (a rollback from v1.9.0's exports, stored at v1, to
// v1.8.4's CRD without v1) gets its objects rewritten at its own storage
// version, which the live CRD has: the live CRD's storage moves there
// first.
func TestMigrationMovesTheStorageVersion(t *testing.T) {
	env := testenv.Get(t)
	c := env.Client
	ctx := context.Background()
	live := synthetic("movers", []string{"v1beta1", "v1"}, "v1")
	mustApplyCRD(t, c, live)
	for _, n := range []string{"a", "b", "c"} {
		if err := c.Create(ctx, syntheticObject(live, "v1", n)); err != nil {
			t.Fatal(err)
		}
	}
	desired := synthetic("movers", []string{"v1alpha1", "v1beta1"}, "v1beta1")
	if err := applyCRD(ctx, c, desired); err == nil {
		t.Fatal("the API server took a CRD without the version its objects are stored at")
	}
	res, err := (&storagemigration.Migrator{Client: c, Reader: c}).Prepare(ctx, desired)
	if err != nil {
		t.Fatal(err)
	}
	if !res.MovedStorage || res.Version != "v1beta1" || res.Rewritten != 3 {
		t.Errorf("%+v; want the storage moved to v1beta1 and 3 objects rewritten", res)
	}
	mustApplyCRD(t, c, desired)
	if got := storedVersions(t, c, desired.Name); !slices.Equal(got, []string{"v1beta1"}) {
		t.Errorf("storedVersions %v", got)
	}
}

// TestNoVersionInCommonBlocks: when the two CRDs share no version to hold
// the objects, nothing is touched and the error says so.
func TestNoVersionInCommonBlocks(t *testing.T) {
	env := testenv.Get(t)
	c := env.Client
	ctx := context.Background()
	live := synthetic("strangers", []string{"v1"}, "v1")
	mustApplyCRD(t, c, live)
	if err := c.Create(ctx, syntheticObject(live, "v1", "x")); err != nil {
		t.Fatal(err)
	}
	_, err := (&storagemigration.Migrator{Client: c, Reader: c}).Prepare(ctx, synthetic("strangers", []string{"v2"}, "v2"))
	if !storagemigration.IsBlocked(err) {
		t.Fatalf("error %v, want Blocked", err)
	}
	if got := storedVersions(t, c, live.Name); !slices.Equal(got, []string{"v1"}) {
		t.Errorf("storedVersions changed to %v", got)
	}
}

// TestObjectThatCannotBeRewrittenBlocks: an admission policy refuses
// updates of one object; the migration stops there with an error naming
// it, storedVersions untouched, so the new CRD is not applied and no
// object is lost. Once the policy goes, the migration completes.
func TestObjectThatCannotBeRewrittenBlocks(t *testing.T) {
	env := testenv.Get(t)
	c := env.Client
	ctx := context.Background()
	live := synthetic("lockeds", []string{"v1alpha1", "v1"}, "v1alpha1")
	mustApplyCRD(t, c, live)
	for _, n := range []string{"free", "locked"} {
		if err := c.Create(ctx, syntheticObject(live, "v1alpha1", n)); err != nil {
			t.Fatal(err)
		}
	}
	// v1 becomes the storage version: storedVersions [v1alpha1, v1].
	mustApplyCRD(t, c, synthetic("lockeds", []string{"v1alpha1", "v1"}, "v1"))
	policy := &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "lock-one"},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Update},
					Rule:       admissionv1.Rule{APIGroups: []string{"migrate.virtop.dev"}, APIVersions: []string{"*"}, Resources: []string{"lockeds"}},
				},
			}}},
			Validations: []admissionv1.Validation{{Expression: "object.metadata.name != 'locked'", Message: "locked is locked"}},
		},
	}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "lock-one"},
		Spec:       admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "lock-one", ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}},
	}
	for _, o := range []client.Object{policy, binding} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// Admission policies take effect asynchronously: wait until the
	// locked object's update is refused.
	poll.Eventually(t, "the policy refuses updates of locked", time.Minute, func(ctx context.Context) (bool, error) {
		o := &unstructured.Unstructured{}
		o.SetAPIVersion("migrate.virtop.dev/v1")
		o.SetKind("Locked")
		if err := c.Get(ctx, client.ObjectKey{Name: "locked"}, o); err != nil {
			return false, err
		}
		err := c.Update(ctx, o, client.DryRunAll)
		return apierrors.IsInvalid(err) || apierrors.IsForbidden(err), err
	})
	desired := synthetic("lockeds", []string{"v1"}, "v1")
	m := &storagemigration.Migrator{Client: c, Reader: c}
	_, err := m.Prepare(ctx, desired)
	var b *storagemigration.Blocked
	if !storagemigration.IsBlocked(err) || !asBlocked(err, &b) || b.Object != "locked" || !strings.Contains(b.Reason, "locked is locked") {
		t.Fatalf("error %v, want Blocked naming the object locked and the policy's message", err)
	}
	if got := storedVersions(t, c, live.Name); !slices.Equal(got, []string{"v1alpha1", "v1"}) {
		t.Errorf("storedVersions changed to %v while an object was not migrated", got)
	}
	if err := applyCRD(ctx, c, desired); err == nil {
		t.Fatal("the new CRD went in although an object may be stored at v1alpha1")
	}
	for _, n := range []string{"free", "locked"} {
		o := &unstructured.Unstructured{}
		o.SetAPIVersion("migrate.virtop.dev/v1")
		o.SetKind("Locked")
		if err := c.Get(ctx, client.ObjectKey{Name: n}, o); err != nil {
			t.Errorf("object %s: %v", n, err)
		}
	}
	if err := c.Delete(ctx, binding); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, "the migration to complete once the policy is gone", time.Minute, func(ctx context.Context) (bool, error) {
		_, err := m.Prepare(ctx, desired)
		return err == nil, err
	})
	mustApplyCRD(t, c, desired)
}

func asBlocked(err error, b **storagemigration.Blocked) bool {
	for err != nil {
		if x, ok := err.(*storagemigration.Blocked); ok {
			*b = x
			return true
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		err = u.Unwrap()
	}
	return false
}

// passClient plays the controller's pass bound on the migration: it lets
// a pass rewrite a fixed number of objects, then ends the pass's context
// (as the bound does, at the client's QPS, on a kind with many objects),
// and counts the rewrites of each object over every pass.
type passClient struct {
	client.Client
	mu       sync.Mutex
	rewrites map[string]int
	left     int
	end      context.CancelFunc
}

// pass starts a pass of n rewrites; its context ends after the nth.
func (c *passClient) pass(n int) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	c.mu.Lock()
	defer c.mu.Unlock()
	c.left, c.end = n, cancel
	return ctx
}

func (c *passClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := c.Client.Update(ctx, obj, opts...)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		c.rewrites[obj.GetName()]++
	}
	if c.left--; c.left == 0 {
		c.end()
	}
	return err
}

// TestMigrationResumesAcrossPasses: a kind with more objects than one pass
// can rewrite (30 objects, passes of 12 rewrites, a new Migrator each pass
// as after a restart) is migrated in three passes, every object rewritten
// once. Before the migration kept its progress, every pass started again
// from the first object: after four passes the first had been rewritten
// four times and the last never, and storedVersions was never trimmed.
func TestMigrationResumesAcrossPasses(t *testing.T) {
	env := testenv.Get(t)
	c := env.Client
	ctx := context.Background()
	live := synthetic("resumers", []string{"v1alpha1", "v1"}, "v1alpha1")
	mustApplyCRD(t, c, live)
	var names []string
	for i := range 30 {
		n := fmt.Sprintf("obj-%02d", i)
		names = append(names, n)
		if err := c.Create(ctx, syntheticObject(live, "v1alpha1", n)); err != nil {
			t.Fatal(err)
		}
	}
	// v1 becomes the storage version: storedVersions [v1alpha1, v1].
	mustApplyCRD(t, c, synthetic("resumers", []string{"v1alpha1", "v1"}, "v1"))
	desired := synthetic("resumers", []string{"v1"}, "v1")
	pc := &passClient{Client: c, rewrites: map[string]int{}}
	done := 0
	for pass := 1; pass <= 4 && done == 0; pass++ {
		pctx := pc.pass(12)
		res, err := (&storagemigration.Migrator{Client: pc, Reader: c, PageSize: 5}).Prepare(pctx, desired)
		t.Logf("pass %d: %+v, error %v", pass, res, err)
		if slices.Equal(storedVersions(t, c, desired.Name), []string{"v1"}) {
			done = pass
		}
	}
	var counts []string
	for _, n := range names {
		counts = append(counts, fmt.Sprintf("%s:%d", n, pc.rewrites[n]))
	}
	t.Logf("rewrites per object: %s", strings.Join(counts, " "))
	if done == 0 {
		t.Errorf("the migration of 30 objects did not finish in 4 passes of 12 rewrites; storedVersions %v", storedVersions(t, c, desired.Name))
	} else if done != 3 {
		t.Errorf("the migration finished in pass %d, want 3 (12 + 12 + 6 rewrites)", done)
	}
	for _, n := range names {
		if got := pc.rewrites[n]; got != 1 {
			t.Errorf("%s rewritten %d times, want once", n, got)
		}
	}
	if done != 0 {
		mustApplyCRD(t, c, desired)
	}
}

// TestProgressOf: a record holds only for the version and the CRD
// generation it names; anything else starts the migration afresh.
func TestProgressOf(t *testing.T) {
	crd := func(gen int64, record string) *apiextv1.CustomResourceDefinition {
		c := &apiextv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "xs.example.com", Generation: gen}}
		if record != "" {
			c.Annotations = map[string]string{vocab.StorageMigrationAnnotation: record}
		}
		return c
	}
	fresh := storagemigration.Progress{Version: "v1", Generation: 4}
	kept := storagemigration.Progress{Version: "v1", Generation: 4, After: "ns/b", Continue: "tok", Rewritten: 12}
	for _, tc := range []struct {
		name string
		crd  *apiextv1.CustomResourceDefinition
		want storagemigration.Progress
	}{
		{"none", crd(4, ""), fresh},
		{"kept", crd(4, `{"version":"v1","generation":4,"after":"ns/b","continue":"tok","rewritten":12}`), kept},
		{"another version", crd(4, `{"version":"v2","generation":4,"after":"ns/b","rewritten":12}`), fresh},
		{"the spec changed since", crd(5, `{"version":"v1","generation":4,"after":"ns/b","rewritten":12}`), storagemigration.Progress{Version: "v1", Generation: 5}},
		{"damaged", crd(4, `{"version":`), fresh},
		{"negative count", crd(4, `{"version":"v1","generation":4,"after":"ns/b","rewritten":-1}`), fresh},
	} {
		if got := storagemigration.ProgressOf(tc.crd, "v1"); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
