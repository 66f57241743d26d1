package upgrade

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/apply"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/ownership"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/testing/crds"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/tools/devcluster"
	"github.com/virtop-dev/virtop/internal/vocab"
	"github.com/virtop-dev/virtop/test/e2e/framework"
)

// chain is the walk, one minor version at a time.
var chain = []string{"v1.5.3", "v1.6.6", "v1.7.4", "v1.8.4", "v1.9.0"}

// hopTimeout bounds one hop: generous (durations are measured, not
// asserted).
const hopTimeout = 5 * time.Minute

// oldStoredCRDs are the namespaced instancetype and preference CRDs; v1.7
// drops their v1alpha1 and v1alpha2.
var oldStoredCRDs = []string{"virtualmachineinstancetypes.instancetype.kubevirt.io", "virtualmachinepreferences.instancetype.kubevirt.io"}

// strategyOf renders version's strategy as the operator does in process.
func strategyOf(t *testing.T, version string) *strategy.Strategy {
	t.Helper()
	kv := framework.NewKubeVirt(t, version)
	cfg, err := config.FromKubeVirt(kv, config.Settings{Namespace: devcluster.InstallNamespace})
	if err != nil {
		t.Fatal(err)
	}
	s, err := strategy.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// preV1CRD is how KubeVirt before v1.0 defined an instancetype CRD:
// v1.5.3's CRD with v1alpha2 as the storage version, so objects created
// under it are stored at v1alpha2 and status.storedVersions holds it.
func preV1CRD(t *testing.T, s *strategy.Strategy, name string) *apiextv1.CustomResourceDefinition {
	t.Helper()
	crd, ok := s.Find("CustomResourceDefinition", "", name).(*apiextv1.CustomResourceDefinition)
	if !ok {
		t.Fatalf("v1.5.3 renders no CRD %s", name)
	}
	crd = crd.DeepCopy()
	for i := range crd.Spec.Versions {
		crd.Spec.Versions[i].Storage = crd.Spec.Versions[i].Name == "v1alpha2"
	}
	return crd
}

func obj(apiVersion, kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// userObject is one object the walk must not lose.
type userObject struct{ apiVersion, kind, name string }

func create(t *testing.T, c client.Client, o *unstructured.Unstructured) {
	t.Helper()
	poll.Eventually(t, "create "+o.GetKind()+" "+o.GetName()+" through "+o.GetAPIVersion(), framework.DefaultTimeout, func(ctx context.Context) (bool, error) {
		err := c.Create(ctx, o.DeepCopy())
		return err == nil || apierrors.IsAlreadyExists(err), err
	})
}

// uids reads every user object (through the version every release
// serves) and returns its UID.
func uids(t *testing.T, c client.Client, ns string, objs []userObject) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, o := range objs {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(o.apiVersion)
		u.SetKind(o.kind)
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: o.name}, u); err != nil {
			t.Errorf("%s %s/%s: %v", o.kind, ns, o.name, err)
			continue
		}
		out[o.kind+"/"+o.name] = string(u.GetUID())
	}
	return out
}

// TestUpgradeChain installs v1.5.3 with user objects present and upgrades
// it one minor version at a time to v1.9.0. Throughout the hops Available
// never goes False and Degraded never goes True; no user object is lost
// (same UIDs); the instancetypes stored at v1alpha1/v1alpha2 are migrated
// before v1.7.4's CRDs drop those versions; from v1.7.4 on the staged
// virt-handler TLS rollout reaches its final form; at the end no object
// carrying virtop's managed-by label is one v1.9.0's strategy does not
// render.
func TestUpgradeChain(t *testing.T) {
	env := framework.Require(t)
	c := env.Client(t)
	ctx := context.Background()
	first := strategyOf(t, chain[0])
	ns := env.Namespace(t, "upgrade-user")

	// Objects stored at v1alpha1/v1alpha2, as a cluster that ran KubeVirt
	// before v1.0 has them.
	for _, name := range oldStoredCRDs {
		u, err := apply.Desired(preV1CRD(t, first, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("kubevirt-before-v1"), client.ForceOwnership); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range oldStoredCRDs {
		crds.WaitServed(t, c, framework.DefaultTimeout, preV1CRD(t, first, name))
	}
	var objs []userObject
	for i, version := range []string{"v1alpha1", "v1alpha2"} {
		name := fmt.Sprintf("stored-%s", version)
		create(t, c, obj("instancetype.kubevirt.io/"+version, "VirtualMachineInstancetype", ns, name,
			map[string]any{"cpu": map[string]any{"guest": int64(i + 1)}, "memory": map[string]any{"guest": "1Gi"}}))
		create(t, c, obj("instancetype.kubevirt.io/"+version, "VirtualMachinePreference", ns, name,
			map[string]any{"cpu": map[string]any{"preferredCPUTopology": "preferSockets"}}))
		objs = append(objs, userObject{"instancetype.kubevirt.io/v1beta1", "VirtualMachineInstancetype", name},
			userObject{"instancetype.kubevirt.io/v1beta1", "VirtualMachinePreference", name})
	}
	for _, name := range oldStoredCRDs {
		if got := framework.StoredVersions(t, c, name); !slices.Equal(got, []string{"v1alpha2"}) {
			t.Fatalf("%s: storedVersions %v before the install, want [v1alpha2]", name, got)
		}
	}

	env.Operator(t, framework.HostOperatorArgs(t)...).Start()
	if err := c.Create(ctx, framework.NewKubeVirt(t, chain[0])); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	framework.WaitKubeVirt(t, c, chain[0]+" Available", hopTimeout, framework.RolledOutAt(chain[0]))
	t.Logf("MEASURE install %s: %s", chain[0], time.Since(start).Round(100*time.Millisecond))
	for _, name := range oldStoredCRDs {
		if got := framework.StoredVersions(t, c, name); !slices.Contains(got, "v1alpha2") {
			t.Fatalf("%s: storedVersions %v under %s; the walk needs v1alpha2 in them", name, got, chain[0])
		}
	}

	// A VirtualMachine and a VirtualMachineInstance.
	create(t, c, obj("kubevirt.io/v1", "VirtualMachine", ns, "vm-1", map[string]any{
		"runStrategy":  "Halted",
		"instancetype": map[string]any{"kind": "VirtualMachineInstancetype", "name": "stored-v1alpha1"},
		"preference":   map[string]any{"kind": "VirtualMachinePreference", "name": "stored-v1alpha2"},
		"template":     map[string]any{"spec": map[string]any{"domain": map[string]any{"devices": map[string]any{}}}},
	}))
	create(t, c, obj("kubevirt.io/v1", "VirtualMachineInstance", ns, "vmi-1", map[string]any{
		"domain": map[string]any{"devices": map[string]any{}, "resources": map[string]any{"requests": map[string]any{"memory": "64Mi"}}},
	}))
	objs = append(objs, userObject{"kubevirt.io/v1", "VirtualMachine", "vm-1"}, userObject{"kubevirt.io/v1", "VirtualMachineInstance", "vmi-1"})
	before := uids(t, c, ns, objs)
	if len(before) != len(objs) {
		t.Fatalf("user objects: %v", before)
	}

	rec := env.RecordConditions(t)
	// Checked however the walk ends (also when a hop times out).
	t.Cleanup(func() { rec.CheckServedThroughout(t, "the walk") })
	for i := 1; i < len(chain); i++ {
		from, to := chain[i-1], chain[i]
		kv := &kvv1.KubeVirt{}
		if err := c.Get(ctx, framework.KubeVirtKey, kv); err != nil {
			t.Fatal(err)
		}
		orig := kv.DeepCopy()
		kv.Spec.ImageTag = to
		if err := c.Patch(ctx, kv, client.MergeFrom(orig)); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		framework.WaitKubeVirt(t, c, to+" Available", hopTimeout, framework.RolledOutAt(to))
		if to != "v1.5.3" && to != "v1.6.6" {
			poll.Eventually(t, to+": virt-handler's TLS rollout at its final form", hopTimeout, func() (bool, string) {
				return framework.HandlerTLSFinal(ctx, c)
			})
			// The rollout's last step is applied by a pass after Available:
			// wait for the resource to settle again.
			framework.WaitKubeVirt(t, c, to+" Available after the TLS rollout", hopTimeout, framework.RolledOutAt(to))
		}
		t.Logf("MEASURE hop %s -> %s: %s", from, to, time.Since(start).Round(100*time.Millisecond))
		if got := uids(t, c, ns, objs); fmt.Sprint(got) != fmt.Sprint(before) {
			t.Errorf("after %s -> %s: user objects\nbefore %v\nafter  %v", from, to, before, got)
		}
		if to == "v1.7.4" {
			for _, name := range oldStoredCRDs {
				if got := framework.StoredVersions(t, c, name); !slices.Equal(got, []string{"v1beta1"}) {
					t.Errorf("%s: storedVersions %v under v1.7.4, want [v1beta1]", name, got)
				}
			}
		}
	}

	// Nothing stray: every object labelled as virtop's is one v1.9.0's
	// strategy renders.
	last := strategyOf(t, chain[len(chain)-1])
	want := map[strategy.Key]bool{}
	for _, o := range last.Objects {
		want[strategy.KeyOf(o)] = true
	}
	kinds, err := ownership.Get()
	if err != nil {
		t.Fatal(err)
	}
	// Two kinds of labelled objects are not in the strategy by design: the
	// plan's PodDisruptionBudgets (<Deployment>-pdb, for a Deployment of
	// the strategy with more than one replica), and the strategy
	// ConfigMaps, of which the store keeps the current and the previous.
	kv := &kvv1.KubeVirt{}
	if err := c.Get(ctx, framework.KubeVirtKey, kv); err != nil {
		t.Fatal(err)
	}
	var strategyCMs []string
	byDesign := func(k strategy.Key) bool {
		switch {
		case k.Kind == "PodDisruptionBudget" && strings.HasSuffix(k.Name, "-pdb"):
			return want[strategy.Key{Group: "apps", Kind: "Deployment", Namespace: k.Namespace, Name: strings.TrimSuffix(k.Name, "-pdb")}]
		case k.Kind == "ConfigMap" && strings.HasPrefix(k.Name, "kubevirt-install-strategy-"):
			strategyCMs = append(strategyCMs, k.Name)
			return true
		}
		return false
	}
	var stray []string
	seen := 0
	for _, gvk := range kinds.Managed {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := c.List(ctx, list, client.MatchingLabels{vocab.ManagedByLabel: vocab.ManagedByValue}); err != nil {
			if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
				continue
			}
			t.Fatalf("list %s: %v", gvk, err)
		}
		for _, o := range list.Items {
			seen++
			k := strategy.Key{Group: gvk.Group, Kind: gvk.Kind, Namespace: o.GetNamespace(), Name: o.GetName()}
			if !want[k] && !byDesign(k) {
				stray = append(stray, k.String())
			}
		}
	}
	sort.Strings(stray)
	current := strategy.ConfigMapName(kv.Status.ObservedDeploymentID)
	if len(strategyCMs) > 2 || !slices.Contains(strategyCMs, current) {
		t.Errorf("strategy ConfigMaps %v after the walk; want the current one (%s) and at most the previous", strategyCMs, current)
	}
	t.Logf("%d managed objects live after the walk, %d rendered by %s", seen, len(want), chain[len(chain)-1])
	if len(stray) > 0 {
		t.Errorf("%d objects labelled as virtop's that %s does not render: %s", len(stray), chain[len(chain)-1], strings.Join(stray, ", "))
	}
}
