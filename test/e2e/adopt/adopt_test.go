package adopt

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/adopt"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/ownership"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/stage"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/testing/testreleases"
	"github.com/virtop-dev/virtop/internal/tools/devcluster"
	"github.com/virtop-dev/virtop/internal/tools/toolpaths"
	"github.com/virtop-dev/virtop/internal/vocab"
	"github.com/virtop-dev/virtop/test/e2e/framework"
)

// waitLong bounds the adoption, the upgrade and the hand back (a loaded
// 2-core machine: minutes; durations are logged, not asserted).
const waitLong = 5 * time.Minute

// The installations upstream's operator made that virtop takes over: the
// oldest release of the catalog with the next upgrade after it, the
// release before the newest with the upgrade to the newest (adoption then
// an upgrade, the way most platforms will come), and the newest (the
// catalog's default: the only case under VIRTOP_TEST_RELEASES=default, as
// make test runs it).
var cases = []struct{ version, upgrade string }{
	{"v1.5.3", "v1.6.6"},
	{"v1.8.4", "v1.9.0"},
	{"v1.9.0", ""},
}

// TestAdoptUpgradeHandBack builds, for each case, what upstream's operator
// leaves on a cluster (from upstream's own strategy dump: every object
// with upstream's labels, annotations and field manager, its strategy
// ConfigMap, its operator Deployment, the KubeVirt status it writes) with
// a VirtualMachine and a VirtualMachineInstance in a user namespace; then
// takes it over as docs/migrate.md says: upstream's operator scaled to
// zero, virtop's release manifest applied over it, virtop's operator run as
// the manifest's ServiceAccount. It checks every object of virtop's
// strategy was adopted in place (same UID, virtop's label, none of
// upstream's field ownership left but the workloads' pod templates), no
// workload rolled, the others upstream created kept, the VM and VMI not
// written, Available never False; then the upgrade; then `virtop handback`
// leaves every object in place with upstream's label, no virtop bookkeeping,
// nothing rolled, and (without an upgrade) upstream's deployment ID back
// where upstream's operator reads it.
func TestAdoptUpgradeHandBack(t *testing.T) {
	env := framework.Require(t)
	c := env.Client(t)
	dir := upstreamDir(t, env.Repo)
	operatorYAML := renderManifest(t, env)
	k := kubectl{kubeconfig: env.Cluster.Kubeconfig(), cacheDir: t.TempDir()}
	var err error
	if k.bin, err = toolpaths.Kubectl.Require(); err != nil {
		t.Fatal(err)
	}
	var versions []string
	for _, tc := range cases {
		versions = append(versions, tc.version)
	}
	selected := testreleases.Select(t, versions)
	for _, tc := range cases {
		if !slices.Contains(selected, tc.version) {
			continue
		}
		if !t.Run(tc.version, func(t *testing.T) { adoptCase(t, env, c, k, dir, operatorYAML, tc.version, tc.upgrade) }) {
			break
		}
	}
}

func adoptCase(t *testing.T, env *framework.Env, c client.Client, k kubectl, dir, operatorYAML, version, upgrade string) {
	ctx := context.Background()
	caseStart := time.Now()
	kv := framework.NewKubeVirt(t, version)
	// As upstream's operator of the release names it.
	kv.Finalizers = []string{release.KubeVirtFinalizer(version)}
	if err := c.Create(ctx, kv); err != nil {
		t.Fatal(err)
	}
	inst := installByUpstream(t, c, dir, kv)
	t.Cleanup(func() { wipeAll(t, c, inst) })
	t.Logf("MEASURE %s: upstream's installation built (%d objects) in %s", version, len(inst.objects), time.Since(caseStart).Round(100*time.Millisecond))

	users := userObjects(t, env, c)
	rec := env.RecordConditions(t)
	t.Cleanup(func() { rec.CheckServedThroughout(t, "the takeover") })

	// 1. Upstream's operator stopped; virtop's manifest applied over it;
	// virtop's operator runs as the manifest's ServiceAccount.
	framework.ScaleOperator(t, c, 0)
	k.run(t, "apply", "--server-side", "--force-conflicts", "--validate=strict", "-f", operatorYAML)
	user, groups := framework.ServiceAccountUser(devcluster.InstallNamespace, "kubevirt-operator")
	asOperator := framework.KubeconfigAs(t, env.Cluster.Kubeconfig(), t.TempDir(), user, groups)
	op := env.Virtop(t, append([]string{"operator", "--kubeconfig", asOperator, "--namespace", devcluster.InstallNamespace, "--leader-elect"}, framework.HostOperatorArgs(t)...)...).Start()

	start := time.Now()
	framework.WaitKubeVirt(t, c, "adopted and Available", waitLong, func(kv *kvv1.KubeVirt) (bool, string) {
		ok, why := framework.RolledOutAt(version)(kv)
		adopted := kv.Annotations[vocab.AdoptedFromAnnotation] != ""
		return ok && adopted && kv.Status.ObservedDeploymentID != inst.id && kv.Status.ObservedDeploymentID == kv.Status.TargetDeploymentID,
			fmt.Sprintf("adoption recorded %v, observed deployment %s; %s; Synchronized: %s", adopted, kv.Status.ObservedDeploymentID, why,
				kv.Status.Condition(kvv1.KubeVirtConditionSynchronized).Message)
	})
	t.Logf("MEASURE %s: adopted and Available %s after virtop's operator started", version, time.Since(start).Round(100*time.Millisecond))
	cur := framework.GetKubeVirt(t, c)
	rec2, ok, err := adopt.Adopted(cur)
	if err != nil || !ok || rec2.DeploymentID != inst.id || rec2.Version != version {
		t.Errorf("adoption record %+v (%v, %v); want upstream's deployment %s at %s", rec2, ok, err, inst.id, version)
	}
	adopted, kept := checkAdopted(t, c, inst, strategyKeys(t, cur))
	t.Logf("%s: %d of upstream's %d objects adopted in place; %d kept as upstream's (not in virtop's plan): %s", version, adopted, len(inst.objects), len(kept), strings.Join(kept, ", "))
	// No rollout (docs/migrate.md, "What rolls": the pod templates stay
	// upstream's until the deployment changes), counted by revision: a
	// Deployment's revision and a DaemonSet's ControllerRevisions follow
	// its pod template alone.
	for name, n := range framework.Revisions(t, c) {
		if n > 1 {
			t.Errorf("%s: at revision %d after the adoption: the adoption rolled it", name, n)
		}
		t.Logf("%s: revision %d after the adoption (1 as upstream left it)", name, n)
	}
	users.check(t, c, "after the adoption")

	// 2. The upgrade.
	if upgrade != "" {
		moveTo(t, c, upgrade)
		start := time.Now()
		framework.WaitKubeVirt(t, c, upgrade+" Available", waitLong, func(kv *kvv1.KubeVirt) (bool, string) {
			ok, why := framework.RolledOutAt(upgrade)(kv)
			return ok && kv.Status.ObservedDeploymentID == kv.Status.TargetDeploymentID, why
		})
		t.Logf("MEASURE %s -> %s after the adoption: Available %s after the change", version, upgrade, time.Since(start).Round(100*time.Millisecond))
		checkNotRecreated(t, c, inst)
		users.check(t, c, "after the upgrade")
	}

	// 3. Hand back: virtop's operator stopped, `virtop handback`.
	op.Stop(30 * time.Second)
	framework.ScaleOperator(t, c, 0)
	before := podTemplates(t, c)
	var out string
	poll.Eventually(t, "virtop handback to succeed", 2*time.Minute, func(ctx context.Context) (bool, error) {
		p := env.Virtop(t, "handback", "--kubeconfig", env.Cluster.Kubeconfig(), "-n", devcluster.InstallNamespace).Start()
		code := p.Wait(time.Minute)
		out = p.Log()
		// 1 is a refusal (the lease of the operator just stopped may
		// still look held): try again.
		return code == 0, fmt.Errorf("exit %d: %s", code, lastLines(out, 3))
	})
	t.Logf("virtop handback:\n%s", lastLines(out, 8))
	checkHandedBack(t, c, inst, upgrade == "")
	for name, tmpl := range podTemplates(t, c) {
		if tmpl != before[name] {
			t.Errorf("the hand back changed %s's pod template (it would roll)", name)
		}
	}
	checkNotRecreated(t, c, inst)
	users.check(t, c, "after the hand back")
	t.Logf("MEASURE %s: the whole case took %s", version, time.Since(caseStart).Round(100*time.Millisecond))
}

// renderManifest renders the release's operator manifest
// (`make release-manifests`, one platform) and returns its path.
func renderManifest(t *testing.T, env *framework.Env) string {
	t.Helper()
	dist, took := framework.ReleaseManifests(t, env)
	if took > 0 {
		t.Logf("MEASURE make release-manifests: %s", took.Round(100*time.Millisecond))
	}
	return filepath.Join(dist, "virtop-operator.yaml")
}

// userObjects creates a VirtualMachine and a VirtualMachineInstance in a
// user namespace and returns how they are now.
func userObjects(t *testing.T, env *framework.Env, c client.Client) *users {
	t.Helper()
	ns := env.Namespace(t, "adopt-user")
	u := &users{rv: map[string]string{}, uid: map[string]types.UID{}}
	for _, o := range []*unstructured.Unstructured{
		obj("VirtualMachine", ns, "vm-1", map[string]any{"runStrategy": "Always",
			"template": map[string]any{"spec": map[string]any{"domain": map[string]any{"devices": map[string]any{}, "resources": map[string]any{"requests": map[string]any{"memory": "64Mi"}}}}}}),
		obj("VirtualMachineInstance", ns, "vm-1", map[string]any{
			"domain": map[string]any{"devices": map[string]any{}, "resources": map[string]any{"requests": map[string]any{"memory": "64Mi"}}}}),
	} {
		poll.Eventually(t, "create "+o.GetKind(), framework.DefaultTimeout, func(ctx context.Context) (bool, error) {
			err := c.Create(ctx, o)
			return err == nil, err
		})
		u.objs = append(u.objs, o)
		u.rv[o.GetKind()] = o.GetResourceVersion()
		u.uid[o.GetKind()] = o.GetUID()
	}
	// A running VMI, as virt-controller and virt-handler report it
	// (KubeVirt's VMI CRD has no status subresource).
	vmi := u.objs[1]
	if err := unstructured.SetNestedField(vmi.Object, "Running", "status", "phase"); err != nil {
		t.Fatal(err)
	}
	if err := c.Update(context.Background(), vmi); err != nil {
		t.Fatalf("the VMI's status: %v", err)
	}
	u.rv["VirtualMachineInstance"] = vmi.GetResourceVersion()
	return u
}

func obj(kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion("kubevirt.io/v1")
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// users are the VM and VMI the takeover must not write.
type users struct {
	objs []*unstructured.Unstructured
	rv   map[string]string
	uid  map[string]types.UID
}

func (u *users) check(t *testing.T, c client.Client, when string) {
	t.Helper()
	for _, o := range u.objs {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(o.GroupVersionKind())
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(o), live); err != nil {
			t.Errorf("%s: %s %s: %v", when, o.GetKind(), o.GetName(), err)
			continue
		}
		if live.GetUID() != u.uid[o.GetKind()] || live.GetResourceVersion() != u.rv[o.GetKind()] {
			t.Errorf("%s: %s %s was written (UID %s → %s, resourceVersion %s → %s)", when, o.GetKind(), o.GetName(),
				u.uid[o.GetKind()], live.GetUID(), u.rv[o.GetKind()], live.GetResourceVersion())
		}
	}
}

// strategyKeys are the objects of kv's strategy that carry no gate: those
// virtop's plan always holds, so it must have adopted them.
func strategyKeys(t *testing.T, kv *kvv1.KubeVirt) map[strategy.Key]bool {
	t.Helper()
	cfg, err := config.FromKubeVirt(kv, config.Settings{Namespace: kv.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	st, err := strategy.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	out := map[strategy.Key]bool{}
	for _, o := range st.Objects {
		out[strategy.KeyOf(o)] = len(stage.GatesOf(o)) == 0
	}
	return out
}

// checkAdopted checks every object upstream created is there with its UID;
// that each of virtop's strategy carries virtop's label and none of
// upstream's field ownership (required: the ungated ones), and that the
// others keep upstream's label. It returns how many were adopted and the
// others.
func checkAdopted(t *testing.T, c client.Client, inst *installation, inStrategy map[strategy.Key]bool) (adopted int, kept []string) {
	t.Helper()
	ctx := context.Background()
	for _, o := range inst.objects {
		live, err := o.get(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if live == nil {
			t.Errorf("%s: upstream's object is gone", o.key)
			continue
		}
		if live.GetUID() != o.uid {
			t.Errorf("%s was recreated (UID %s → %s)", o.key, o.uid, live.GetUID())
		}
		label := live.GetLabels()[vocab.ManagedByLabel]
		required, ours := inStrategy[o.key]
		switch {
		case ours && label == vocab.ManagedByValue:
			adopted++
			// Upstream's manager keeps a workload's pod template alone
			// (docs/migrate.md, "What rolls").
			for _, e := range live.GetManagedFields() {
				if e.Manager == vocab.UpstreamFieldManager && e.Subresource == "" && !templateOnly(e.FieldsV1) {
					t.Errorf("%s: adopted, but upstream's field manager still owns fields beyond a pod template", o.key)
				}
			}
		case ours && required:
			t.Errorf("%s: in virtop's strategy but not adopted (managed-by %q)", o.key, label)
		case label != vocab.UpstreamManagedByValue:
			t.Errorf("%s: not virtop's to adopt, but its managed-by label is %q", o.key, label)
		default:
			kept = append(kept, o.key.String())
		}
	}
	return adopted, kept
}

// checkNotRecreated checks no object upstream created was replaced: each
// one there has its UID (an upgrade may prune what the new release no
// longer renders).
func checkNotRecreated(t *testing.T, c client.Client, inst *installation) {
	t.Helper()
	for _, o := range inst.objects {
		live, err := o.get(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		if live != nil && live.GetUID() != o.uid {
			t.Errorf("%s was recreated (UID %s → %s)", o.key, o.uid, live.GetUID())
		}
	}
}

// checkHandedBack checks what upstream's operator keys on after a hand
// back: every object labelled managed-by virt-operator (none left as
// virtop's), no virtop.dev/ label or annotation on any, the KubeVirt
// resource without the adoption record and with its finalizer; at the
// adopted release (sameRelease) upstream's deployment ID in the status and
// in the objects' install-strategy-identifier annotation, as upstream
// left them.
func checkHandedBack(t *testing.T, c client.Client, inst *installation, sameRelease bool) {
	t.Helper()
	ctx := context.Background()
	kinds, err := ownership.Get()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, gvk := range kinds.Managed {
		for _, value := range []string{vocab.ManagedByValue, vocab.UpstreamManagedByValue} {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			if err := c.List(ctx, list, client.MatchingLabels{vocab.ManagedByLabel: value}); err != nil {
				if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
					continue
				}
				t.Fatal(err)
			}
			for _, o := range list.Items {
				key := gvk.Kind + " " + o.GetNamespace() + "/" + o.GetName()
				if value == vocab.ManagedByValue {
					t.Errorf("%s: still labelled as virtop's after the hand back", key)
					continue
				}
				n++
				for _, m := range []map[string]string{o.GetLabels(), o.GetAnnotations()} {
					for k := range m {
						if strings.HasPrefix(k, vocab.VirtopKeyPrefix) {
							t.Errorf("%s: virtop's %s left after the hand back", key, k)
						}
					}
				}
				_, strategyCM := o.GetLabels()[vocab.InstallStrategyLabel]
				if id, ok := o.GetAnnotations()[vocab.InstallStrategyIdentifierAnnotation]; sameRelease && ok && !strategyCM && id != inst.id {
					t.Errorf("%s: install-strategy-identifier %s after the hand back, want upstream's %s", key, id, inst.id)
				}
			}
		}
	}
	t.Logf("%d objects labelled managed-by %s after the hand back", n, vocab.UpstreamManagedByValue)
	kv := framework.GetKubeVirt(t, c)
	if a := kv.Annotations[vocab.AdoptedFromAnnotation]; a != "" {
		t.Errorf("the KubeVirt resource keeps the adoption record %q", a)
	}
	if !slices.ContainsFunc(kv.Finalizers, vocab.IsKubeVirtFinalizer) {
		t.Errorf("the KubeVirt resource lost its finalizer: %v", kv.Finalizers)
	}
	if sameRelease && (kv.Status.ObservedDeploymentID != inst.id || kv.Status.TargetDeploymentID != inst.id) {
		t.Errorf("status deployment IDs observed %s target %s after the hand back; want upstream's %s", kv.Status.ObservedDeploymentID, kv.Status.TargetDeploymentID, inst.id)
	}
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: devcluster.InstallNamespace, Name: inst.strategyCM}, cm); err != nil {
		t.Errorf("upstream's strategy ConfigMap %s: %v", inst.strategyCM, err)
	}
}

// podTemplates are the workloads' pod templates, as JSON, by name.
func podTemplates(t *testing.T, c client.Client) map[string]string {
	t.Helper()
	out := map[string]string{}
	deps, dss := framework.Workloads(t, c)
	for _, d := range deps {
		b, _ := json.Marshal(d.Spec.Template)
		out["Deployment "+d.Name] = string(b)
	}
	for _, d := range dss {
		b, _ := json.Marshal(d.Spec.Template)
		out["DaemonSet "+d.Name] = string(b)
	}
	return out
}

// moveTo sets spec.imageTag, with the webhook patches of that release.
func moveTo(t *testing.T, c client.Client, version string) {
	t.Helper()
	kv := framework.GetKubeVirt(t, c)
	orig := kv.DeepCopy()
	kv.Spec.ImageTag = version
	kv.Spec.CustomizeComponents = framework.NewKubeVirt(t, version).Spec.CustomizeComponents
	if err := c.Patch(context.Background(), kv, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
}

// wipeAll removes the case's installation and whatever virtop created for
// it, so the next case starts from the suite's base.
func wipeAll(t *testing.T, c client.Client, inst *installation) {
	t.Helper()
	kinds, err := ownership.Get()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var extra []created
	for _, gvk := range kinds.Managed {
		for _, value := range []string{vocab.ManagedByValue, vocab.UpstreamManagedByValue} {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			if err := c.List(ctx, list, client.MatchingLabels{vocab.ManagedByLabel: value}); err != nil {
				continue
			}
			for _, o := range list.Items {
				extra = append(extra, created{gvk: gvk, key: strategy.Key{Group: gvk.Group, Kind: gvk.Kind, Namespace: o.GetNamespace(), Name: o.GetName()}})
			}
		}
	}
	sort.Slice(extra, func(i, j int) bool { return extra[i].key.String() < extra[j].key.String() })
	wipe(t, c, &installation{objects: append(slices.Clone(inst.objects), extra...)})
}

// kubectl runs the pinned kubectl against the cluster.
type kubectl struct{ bin, kubeconfig, cacheDir string }

func (k kubectl) run(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(k.bin, append([]string{"--kubeconfig", k.kubeconfig, "--cache-dir", k.cacheDir}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl %s: %v\n%s\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// templateOnly reports whether managed fields hold spec.template alone.
func templateOnly(f *metav1.FieldsV1) bool {
	var m map[string]map[string]json.RawMessage
	if f == nil || json.Unmarshal(f.Raw, &m) != nil {
		return false
	}
	_, tmpl := m["f:spec"]["f:template"]
	return len(m) == 1 && len(m["f:spec"]) == 1 && tmpl
}
