package takeover

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/ownership"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/testing/testreleases"
	"github.com/virtop-dev/virtop/internal/tools/devcluster"
	"github.com/virtop-dev/virtop/internal/vocab"
	"github.com/virtop-dev/virtop/test/e2e/framework"
)

const (
	installNS = devcluster.InstallNamespace
	// waitLong bounds each install, adoption and hand back: real
	// containers start on a loaded 2-core machine (durations are logged,
	// not asserted).
	waitLong = 8 * time.Minute
	// quiet is how long nothing of upstream's may be written before the
	// hand back counts as finished: upstream's operator has taken the lease
	// and gone through its installation by then.
	quiet = 60 * time.Second
	// adoptWait bounds the adoption (it took about 2 minutes in the
	// issue's hand check).
	adoptWait = 5 * time.Minute
)

// TestTakeOverAndHandBack: for the catalog's default release and the one
// before it, upstream's own virt-operator (built from upstream's source, its manifests written by
// upstream's manifest-templator) installs KubeVirt on the real node from
// its release manifest, Available, with a VM running (its VMI on a fake
// node). Then, while a client creates and deletes valid VMs and tries an
// invalid one through the real virt-api in a loop: upstream's operator is
// stopped and virtop's release manifest applied (docs/migrate.md), virtop
// adopts, Available; virtop's operator is stopped, `virtop handback`,
// upstream's manifest applied again, upstream's operator runs and the
// installation is quiet. It asserts what the switch must keep: no valid
// create refused, every invalid one refused by upstream's validator,
// Available never False, every object of upstream's with its UID, the VM
// and VMI not written, no workload rolled, every certificate kept at
// adoption, and upstream's own pod templates when upstream runs again.
// Last, the KubeVirt resource is deleted under upstream's operator and
// the deletion must finish.
func TestTakeOverAndHandBack(t *testing.T) {
	// Ten minutes and more a release: make test-all's, beyond CI's budget
	// (test/e2e/adopt takes over on fake nodes in CI).
	if !testreleases.All(t) {
		t.Skipf("%s=default: the takeover on the real node runs in make test-all", testreleases.Env)
	}
	env := framework.Require(t)
	// The default release, then the one before it (the release most
	// installations upstream's operator runs today are at).
	releases := []string{release.Default}
	versions := release.Builtin().Versions()
	if i := slices.Index(versions, release.Default); i >= 1 {
		releases = append(releases, versions[i-1])
	}
	dist, took := framework.ReleaseManifests(t, env)
	if took > 0 {
		t.Logf("MEASURE make release-manifests: %s", took.Round(100*time.Millisecond))
	}
	c := env.Client(t)
	for _, rel := range releases {
		clean := true
		t.Run(rel, func(t *testing.T) {
			if _, err := devcluster.FindUpstreamManifests(rel); err != nil {
				t.Fatal(err)
			}
			defer func() { clean = wipe(t, env, c, rel, dist) }()
			takeOver(t, env, c, dist, rel)
		})
		if !clean {
			t.Fatalf("the cluster could not be emptied after %s: the next release is not tried", rel)
		}
	}
}

func takeOver(t *testing.T, env *framework.Env, c client.Client, dist, rel string) {
	ctx := context.Background()
	var out bytes.Buffer
	progress := func(err error) {
		t.Helper()
		t.Logf("\n%s", out.String())
		out.Reset()
		if err != nil {
			t.Fatal(err)
		}
	}

	// 1. Upstream installs, as its users do.
	start := time.Now()
	progress(env.Cluster.LoadReleaseImages(ctx, rel))
	progress(env.Cluster.StartUpstreamOperator(ctx, &out, rel))
	progress(env.Cluster.ApplyUpstreamKubeVirt(ctx, &out, rel))
	framework.WaitKubeVirt(t, c, "upstream's installation Available at "+rel, waitLong, func(kv *kvv1.KubeVirt) (bool, string) {
		ok, why := framework.RolledOutAt(rel)(kv)
		return ok && kv.Status.ObservedDeploymentID != "", why
	})
	if rel != release.Default {
		// docs/migrate.md, step 1: the release upstream runs pinned (virtop
		// refuses an adoption that would upgrade), while upstream's operator
		// still runs and acts on it.
		pinImageTag(t, c, rel)
		framework.WaitKubeVirt(t, c, "upstream's installation Available at "+rel+" pinned", waitLong, func(kv *kvv1.KubeVirt) (bool, string) {
			ok, why := framework.RolledOutAt(rel)(kv)
			return ok && kv.Status.ObservedDeploymentID == kv.Status.TargetDeploymentID && kv.Status.TargetKubeVirtVersion == rel, why
		})
		waitRolledOut(t, c)
		framework.QuietResourceVersionsManagedBy(t, c, vocab.UpstreamManagedByValue, quiet, waitLong)
	}
	upstreamID := framework.GetKubeVirt(t, c).Status.ObservedDeploymentID
	t.Logf("MEASURE upstream's operator %s: installed to Available in %s (deployment %s)", rel, time.Since(start).Round(100*time.Millisecond), upstreamID)
	env.PrepareFakeNodesForVMs(t)
	users := runVM(t, env)
	before := snap(t, c)
	t.Logf("upstream's installation: %d objects labelled managed-by %s, %d certificate Secrets, revisions %v",
		len(before.uids), vocab.UpstreamManagedByValue, len(before.certs), before.revisions)
	if len(before.uids) < 100 {
		t.Fatalf("upstream's installation has %d objects labelled managed-by %s; want the release's (more than 100)", len(before.uids), vocab.UpstreamManagedByValue)
	}

	rec := env.RecordConditions(t)
	load := env.StartVMLoad(framework.VMLoadOptions{Prefix: "takeover", Cycle: true})
	loadStopped := false
	defer func() {
		if !loadStopped {
			load.Stop()
		}
	}()

	// 2. Upstream's operator stopped, virtop's release manifest applied
	// (docs/migrate.md, step 2).
	start = time.Now()
	framework.ScaleOperator(t, c, 0)
	progress(env.Cluster.StartPodOperator(ctx, &out, devcluster.PodOperator{
		Manifest: filepath.Join(dist, "virtop-operator.yaml"),
		Image:    filepath.Join(dist, "virtop-image.tar"),
	}))
	// Not fatal: when the adoption does not go through, the switch back
	// (below) is still observed, as docs/migrate.md's way to abandon.
	isAdopted := waitKubeVirt(t, c, "adopted by virtop and Available", adoptWait, func(kv *kvv1.KubeVirt) (bool, string) {
		ok, why := framework.RolledOutAt(rel)(kv)
		adopted := kv.Annotations[vocab.AdoptedFromAnnotation] != ""
		return ok && adopted && kv.Status.ObservedDeploymentID != upstreamID && kv.Status.ObservedDeploymentID == kv.Status.TargetDeploymentID,
			fmt.Sprintf("adoption recorded %v, observed deployment %s; %s; Synchronized %s: %s; Degraded %s: %s", adopted, kv.Status.ObservedDeploymentID, why,
				kv.Status.Condition(kvv1.KubeVirtConditionSynchronized).Status, kv.Status.Condition(kvv1.KubeVirtConditionSynchronized).Message,
				kv.Status.Condition(kvv1.KubeVirtConditionDegraded).Status, kv.Status.Condition(kvv1.KubeVirtConditionDegraded).Message)
	})
	t.Logf("MEASURE %s: upstream's operator stopped to adopted by virtop and Available: %s (adopted: %v)", rel, time.Since(start).Round(100*time.Millisecond), isAdopted)
	// What virtop's writes set rolling has finished.
	waitRolledOut(t, c)
	adopted := snap(t, c)
	duringAdoption := len(load.Attempts())

	inPlace, kept := checkSameUIDs(t, before, adopted, "the adoption")
	t.Logf("the adoption: %d of upstream's %d objects taken over in place (now managed-by %s), %d left as upstream's", inPlace, len(before.uids), vocab.ManagedByValue, len(kept))
	if isAdopted {
		checkNoRollout(t, before.revisions, adopted.revisions, "the adoption")
		checkCertificatesKept(t, before.certs, adopted.certs, "the adoption")
	}
	users.check(t, "after the adoption")

	// 3. Hand back (docs/migrate.md): virtop's operator stopped, `virtop
	// handback`, upstream's manifest applied again. Without an adoption,
	// docs/migrate.md's abandon: virtop's operator stopped, upstream's
	// manifest applied again.
	start = time.Now()
	framework.ScaleOperator(t, c, 0)
	var hb string
	if isAdopted {
		poll.Eventually(t, "virtop handback to succeed", 2*time.Minute, func(ctx context.Context) (bool, error) {
			p := env.Virtop(t, "handback", "--kubeconfig", env.Cluster.Kubeconfig(), "-n", installNS).Start()
			code := p.Wait(time.Minute)
			hb = p.Log()
			// 1 is a refusal (the lease of the operator just stopped may
			// still look held): try again.
			return code == 0, fmt.Errorf("exit %d: %s", code, hb)
		})
		t.Logf("virtop handback:\n%s", hb)
	}
	progress(env.Cluster.StartUpstreamOperator(ctx, &out, rel))
	waitUpstreamLeads(t, env, c)
	if isAdopted {
		// The first run leaves the adoption record while upstream's
		// virt-operator-validator has no backend (docs/migrate.md); with
		// upstream's operator serving it, the second run removes it.
		if strings.Contains(hb, "run virtop handback again") {
			poll.Eventually(t, "virtop handback to finish", 2*time.Minute, func(ctx context.Context) (bool, error) {
				p := env.Virtop(t, "handback", "--kubeconfig", env.Cluster.Kubeconfig(), "-n", installNS).Start()
				code := p.Wait(time.Minute)
				hb = p.Log()
				return code == 0 && strings.Contains(hb, "the hand back is complete"), fmt.Errorf("exit %d: %s", code, hb)
			})
			t.Logf("virtop handback, second run:\n%s", hb)
		}
		if kv := framework.GetKubeVirt(t, c); kv.Annotations[vocab.AdoptedFromAnnotation] != "" {
			t.Errorf("the KubeVirt resource keeps virtop's adoption record after the hand back: %s", kv.Annotations[vocab.AdoptedFromAnnotation])
		}
	}
	framework.WaitKubeVirt(t, c, "Available under upstream's operator again", waitLong, func(kv *kvv1.KubeVirt) (bool, string) {
		ok, why := framework.RolledOutAt(rel)(kv)
		return ok && kv.Status.ObservedDeploymentID == kv.Status.TargetDeploymentID, why
	})
	waitRolledOut(t, c)
	framework.QuietResourceVersionsManagedBy(t, c, vocab.UpstreamManagedByValue, quiet, waitLong)
	t.Logf("MEASURE %s: virtop's operator stopped to upstream's running again, Available and quiet for %s: %s", rel, quiet, time.Since(start).Round(100*time.Millisecond))
	attempts := load.Stop()
	loadStopped = true
	back := snap(t, c)

	checkSameUIDs(t, before, back, "the hand back")
	checkNoRollout(t, adopted.revisions, back.revisions, "the hand back")
	checkNoRollout(t, before.revisions, back.revisions, "the takeover and the hand back")
	for name, tmpl := range before.templates {
		if back.templates[name] != tmpl {
			t.Errorf("%s: upstream's operator runs again with another pod template than it installed (upstream does not run its own strategy):\n%s",
				name, templateDiff(tmpl, back.templates[name]))
		}
	}
	if kv := framework.GetKubeVirt(t, c); kv.Status.ObservedDeploymentID != upstreamID {
		t.Errorf("upstream's operator runs deployment %s after the hand back; it installed %s", kv.Status.ObservedDeploymentID, upstreamID)
	}
	users.check(t, "after the hand back")

	// 4. The continuity.
	sum := framework.Summarize(attempts)
	adoptSum := framework.Summarize(attempts[:min(duringAdoption, len(attempts))])
	t.Logf("MEASURE %s: during the adoption: %s", rel, adoptSum)
	t.Logf("MEASURE %s: through the adoption and the hand back (%d requests): %s", rel, len(attempts), sum)
	if sum.Creates == 0 || sum.Invalid == 0 {
		t.Errorf("the client made %d valid creates and %d invalid attempts: it did not run", sum.Creates, sum.Invalid)
	}
	if bad := framework.Failures(attempts); len(bad) > 0 {
		lines := make([]string, 0, len(bad))
		for _, a := range bad {
			lines = append(lines, a.String())
		}
		if len(lines) > 20 {
			lines = append(lines[:20], fmt.Sprintf("… and %d more", len(lines)-20))
		}
		t.Errorf("%d of %d requests went wrong through the switch (a valid create refused, a delete failed, an invalid VM not refused by %s):\n%s",
			len(bad), len(attempts), framework.InvalidVMValidator, strings.Join(lines, "\n"))
	}
	rec.CheckServedThroughout(t, "the takeover and the hand back")

	// 5. The deletion under upstream's operator, as its users delete
	// KubeVirt: the VMs first (upstream's validator refuses the deletion
	// while workloads exist), then the KubeVirt resource, which must go:
	// upstream's operator removes the control plane, then its finalizer.
	if err := deleteVMs(ctx, env); err != nil {
		t.Fatalf("deleting the VMs before deleting KubeVirt: %v", err)
	}
	start = time.Now()
	kv := framework.GetKubeVirt(t, c)
	if err := c.Delete(ctx, kv); err != nil {
		t.Fatalf("deleting KubeVirt %s under upstream's operator: %v", kv.Name, err)
	}
	if err := within(waitLong, func() (bool, string) {
		cur := &kvv1.KubeVirt{}
		err := c.Get(ctx, framework.KubeVirtKey, cur)
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, fmt.Sprintf("still there: phase %s, finalizers %v, deleting since %v", cur.Status.Phase, cur.Finalizers, cur.DeletionTimestamp)
	}); err != nil {
		t.Errorf("KubeVirt deleted under upstream's operator after the hand back: the deletion did not finish: %v", err)
		return
	}
	t.Logf("MEASURE %s: KubeVirt deleted under upstream's operator after the hand back: gone (finalizer removed) in %s", rel, time.Since(start).Round(100*time.Millisecond))
}

// deleteVMs deletes every VM in the default namespace and waits until
// neither a VM nor a VMI is left. With the CRDs gone (upstream's
// operator removes them with KubeVirt) there is nothing to delete.
func deleteVMs(ctx context.Context, env *framework.Env) error {
	vms := env.Clients.Dynamic.Resource(framework.VMGVR).Namespace("default")
	if err := vms.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return within(3*time.Minute, func() (bool, string) {
		l, err := vms.List(ctx, metav1.ListOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return false, err.Error()
		}
		li, err := env.Clients.Dynamic.Resource(framework.VMIGVR).Namespace("default").List(ctx, metav1.ListOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return false, err.Error()
		}
		n := 0
		if l != nil {
			n += len(l.Items)
		}
		if li != nil {
			n += len(li.Items)
		}
		return n == 0, fmt.Sprintf("%d VMs and VMIs left", n)
	})
}

// users are the VM and VMI the switch must not write.
type users struct {
	look func(context.Context) (map[string]*unstructured.Unstructured, error)
	uid  map[string]types.UID
	rv   map[string]string
}

// runVM creates a VM with runStrategy Always, waits for its VMI and its
// virt-launcher pod on a fake node, then until neither is written for 30 s
// (virt-controller has done what it does for a VMI nothing runs), and
// returns them as they are.
func runVM(t *testing.T, env *framework.Env) *users {
	t.Helper()
	ctx := context.Background()
	vms := env.Clients.Dynamic.Resource(framework.VMGVR).Namespace("default")
	vmis := env.Clients.Dynamic.Resource(framework.VMIGVR).Namespace("default")
	if _, err := vms.Create(ctx, framework.VM("running", "Always", false), metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating a VM with runStrategy Always: %v", err)
	}
	poll.Eventually(t, "the VM's VMI and its virt-launcher pod on a fake node", 3*time.Minute, func(ctx context.Context) (bool, error) {
		if _, err := vmis.Get(ctx, "running", metav1.GetOptions{}); err != nil {
			return false, err
		}
		pods, err := env.Kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "kubevirt.io=virt-launcher,vm.kubevirt.io/name=running"})
		if err != nil {
			return false, err
		}
		if len(pods.Items) == 0 || pods.Items[0].Spec.NodeName == "" {
			return false, fmt.Errorf("no scheduled virt-launcher pod yet")
		}
		if n := pods.Items[0].Spec.NodeName; n == env.Cluster.RealNodeName() {
			return false, fmt.Errorf("the virt-launcher pod is on the real node")
		}
		return true, nil
	})
	look := func(ctx context.Context) (map[string]*unstructured.Unstructured, error) {
		vm, err := vms.Get(ctx, "running", metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		vmi, err := vmis.Get(ctx, "running", metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return map[string]*unstructured.Unstructured{"VirtualMachine": vm, "VirtualMachineInstance": vmi}, nil
	}
	u := &users{look: look, uid: map[string]types.UID{}, rv: map[string]string{}}
	since := time.Now()
	poll.Eventually(t, "the VM and VMI unwritten for 30s", 3*time.Minute, func(ctx context.Context) (bool, error) {
		objs, err := look(ctx)
		if err != nil {
			return false, err
		}
		for kind, o := range objs {
			if u.rv[kind] != o.GetResourceVersion() {
				u.uid[kind], u.rv[kind] = o.GetUID(), o.GetResourceVersion()
				since = time.Now()
			}
		}
		return time.Since(since) >= 30*time.Second, fmt.Errorf("written %s ago", time.Since(since).Round(time.Second))
	})
	objs, err := look(ctx)
	if err != nil {
		t.Fatal(err)
	}
	phase, _, _ := unstructured.NestedString(objs["VirtualMachineInstance"].Object, "status", "phase")
	t.Logf("VM running (UID %s), its VMI (UID %s) in phase %s", u.uid["VirtualMachine"], u.uid["VirtualMachineInstance"], phase)
	return u
}

// check fails t if the VM or the VMI was written or replaced.
func (u *users) check(t *testing.T, when string) {
	t.Helper()
	objs, err := u.look(context.Background())
	if err != nil {
		t.Errorf("%s: %v", when, err)
		return
	}
	for kind, o := range objs {
		if o.GetUID() != u.uid[kind] || o.GetResourceVersion() != u.rv[kind] {
			var who []string
			for _, m := range o.GetManagedFields() {
				who = append(who, fmt.Sprintf("%s %s %s at %s", m.Manager, m.Operation, m.Subresource, m.Time))
			}
			t.Errorf("%s: the %s was written (UID %s → %s, resourceVersion %s → %s); its managed fields: %s", when, kind,
				u.uid[kind], o.GetUID(), u.rv[kind], o.GetResourceVersion(), strings.Join(who, "; "))
		}
	}
}

// snapshot is what the switch must keep, as it is at one moment.
type snapshot struct {
	// uids are the UIDs of every object labelled managed-by upstream's
	// operator or virtop's (of the kinds either manages), by "Kind ns/name";
	// labels says by whom.
	uids   map[string]types.UID
	labels map[string]string
	// certs are the serial numbers of the certificates in the install
	// namespace's Secrets (tls.crt), by Secret name.
	certs map[string]string
	// revisions are framework.Revisions; templates the workloads' pod
	// templates as JSON, by the same names.
	revisions map[string]int
	templates map[string]string
}

func snap(t *testing.T, c client.Client) snapshot {
	t.Helper()
	ctx := context.Background()
	s := snapshot{uids: map[string]types.UID{}, labels: map[string]string{}, certs: map[string]string{}, templates: map[string]string{}}
	kinds, err := ownership.Get()
	if err != nil {
		t.Fatal(err)
	}
	for _, gvk := range kinds.Managed {
		for _, value := range []string{vocab.UpstreamManagedByValue, vocab.ManagedByValue} {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			if err := c.List(ctx, list, client.MatchingLabels{vocab.ManagedByLabel: value}); err != nil {
				if meta.IsNoMatchError(err) {
					continue
				}
				t.Fatal(err)
			}
			for _, o := range list.Items {
				key := gvk.Kind + " " + o.GetNamespace() + "/" + o.GetName()
				s.uids[key], s.labels[key] = o.GetUID(), value
			}
		}
	}
	var secrets corev1.SecretList
	if err := c.List(ctx, &secrets, client.InNamespace(installNS)); err != nil {
		t.Fatal(err)
	}
	for _, sec := range secrets.Items {
		if serial := framework.CertSerial(sec.Data["tls.crt"]); serial != "" {
			s.certs[sec.Name] = serial
		}
	}
	s.revisions = framework.Revisions(t, c)
	deps, dss := framework.Workloads(t, c)
	for _, d := range deps {
		b, _ := json.Marshal(d.Spec.Template)
		s.templates["Deployment "+d.Name] = string(b)
	}
	for _, d := range dss {
		b, _ := json.Marshal(d.Spec.Template)
		s.templates["DaemonSet "+d.Name] = string(b)
	}
	return s
}

// checkSameUIDs fails t for every object of upstream's (in before) gone or
// replaced in after; it returns how many are now virtop's and which are
// still upstream's.
func checkSameUIDs(t testing.TB, before, after snapshot, during string) (virtops int, upstreams []string) {
	t.Helper()
	keys := make([]string, 0, len(before.uids))
	for k := range before.uids {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		uid, ok := after.uids[k]
		switch {
		case !ok:
			t.Errorf("%s: upstream's object is gone (or unlabelled) after %s", k, during)
		case uid != before.uids[k]:
			t.Errorf("%s was recreated during %s (UID %s → %s)", k, during, before.uids[k], uid)
		case after.labels[k] == vocab.ManagedByValue:
			virtops++
		default:
			upstreams = append(upstreams, k)
		}
	}
	return virtops, upstreams
}

// checkNoRollout fails t for each workload whose revision moved.
func checkNoRollout(t testing.TB, before, after map[string]int, during string) {
	t.Helper()
	names := make([]string, 0, len(after))
	for n := range after {
		names = append(names, n)
	}
	sort.Strings(names)
	rolled := 0
	for _, n := range names {
		if after[n] != before[n] {
			rolled++
			t.Errorf("%s rolled during %s: revision %d → %d", n, during, before[n], after[n])
		}
	}
	t.Logf("revisions before and after %s: %v → %v (%d of %d workloads rolled)", during, before, after, rolled, len(names))
}

// checkCertificatesKept fails t for each certificate Secret whose
// certificate changed (re-issued) or that is gone.
func checkCertificatesKept(t testing.TB, before, after map[string]string, during string) {
	t.Helper()
	names := make([]string, 0, len(before))
	for n := range before {
		names = append(names, n)
	}
	sort.Strings(names)
	var reissued []string
	for _, n := range names {
		if after[n] != before[n] {
			reissued = append(reissued, n)
		}
	}
	if len(reissued) > 0 {
		t.Errorf("%d of %d certificates re-issued (or gone) during %s: %s", len(reissued), len(names), during, strings.Join(reissued, ", "))
	} else {
		t.Logf("all %d certificates kept through %s", len(names), during)
	}
}

// waitRolledOut waits until every workload has rolled out its current
// pod template: each Deployment's and DaemonSet's status observed its
// generation with every replica updated and available.
func waitRolledOut(t *testing.T, c client.Client) {
	t.Helper()
	poll.Eventually(t, "every workload rolled out", waitLong, func(ctx context.Context) (bool, error) {
		deps, dss := framework.Workloads(t, c)
		var busy []string
		for _, d := range deps {
			want := int32(1)
			if d.Spec.Replicas != nil {
				want = *d.Spec.Replicas
			}
			if d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas != want || d.Status.AvailableReplicas != want || d.Status.Replicas != want {
				busy = append(busy, fmt.Sprintf("Deployment %s (%d/%d updated, %d available, %d in all)", d.Name, d.Status.UpdatedReplicas, want, d.Status.AvailableReplicas, d.Status.Replicas))
			}
		}
		for _, d := range dss {
			s := d.Status
			if s.ObservedGeneration < d.Generation || s.UpdatedNumberScheduled != s.DesiredNumberScheduled || s.NumberAvailable != s.DesiredNumberScheduled {
				busy = append(busy, fmt.Sprintf("DaemonSet %s (%d/%d updated, %d available)", d.Name, s.UpdatedNumberScheduled, s.DesiredNumberScheduled, s.NumberAvailable))
			}
		}
		if len(busy) > 0 {
			return false, fmt.Errorf("%s", strings.Join(busy, "; "))
		}
		return true, nil
	})
}

// waitUpstreamLeads waits until upstream's operator holds the leader
// lease (both operators use the Lease virt-operator; upstream's identity
// is its pod's name): from then on it acts.
func waitUpstreamLeads(t *testing.T, env *framework.Env, c client.Client) {
	t.Helper()
	poll.Eventually(t, "upstream's operator leading", waitLong, func(ctx context.Context) (bool, error) {
		lease := &coordinationv1.Lease{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: installNS, Name: vocab.OperatorLeaseName}, lease); err != nil {
			return false, err
		}
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(installNS), client.MatchingLabels{vocab.AppLabel: vocab.VirtOperator}); err != nil {
			return false, err
		}
		holder := ""
		if lease.Spec.HolderIdentity != nil {
			holder = *lease.Spec.HolderIdentity
		}
		for _, p := range pods.Items {
			if p.Name == holder && slices.ContainsFunc(p.Spec.Containers, func(c corev1.Container) bool { return strings.Contains(c.Image, "/virt-operator:") }) {
				t.Logf("upstream's operator %s leads", holder)
				return true, nil
			}
		}
		return false, fmt.Errorf("lease held by %q, not by a pod of upstream's operator", holder)
	})
}

// waitKubeVirt is framework.WaitKubeVirt that fails t without stopping
// it: it reports whether ok held within timeout, and the last reason why
// not.
func waitKubeVirt(t *testing.T, c client.Client, what string, timeout time.Duration, ok func(*kvv1.KubeVirt) (bool, string)) bool {
	t.Helper()
	deadline := time.Now().Add(timeout)
	why := ""
	for {
		kv := &kvv1.KubeVirt{}
		if err := c.Get(context.Background(), framework.KubeVirtKey, kv); err != nil {
			why = err.Error()
		} else {
			var done bool
			if done, why = ok(kv); done {
				return true
			}
		}
		if time.Now().After(deadline) {
			t.Errorf("%s: not within %s: %s", what, timeout, why)
			return false
		}
		time.Sleep(time.Second)
	}
}

// pinImageTag sets spec.imageTag (docs/migrate.md, step 1).
func pinImageTag(t *testing.T, c client.Client, version string) {
	t.Helper()
	kv := framework.GetKubeVirt(t, c)
	orig := kv.DeepCopy()
	kv.Spec.ImageTag = version
	if err := c.Patch(context.Background(), kv, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
}

// templateDiff names the top-level fields of two pod templates (JSON)
// that differ, with both values.
func templateDiff(a, b string) string {
	var ma, mb map[string]any
	_ = json.Unmarshal([]byte(a), &ma)
	_ = json.Unmarshal([]byte(b), &mb)
	var out []string
	var walk func(path string, x, y any)
	walk = func(path string, x, y any) {
		xm, xok := x.(map[string]any)
		ym, yok := y.(map[string]any)
		if xok && yok {
			keys := map[string]bool{}
			for k := range xm {
				keys[k] = true
			}
			for k := range ym {
				keys[k] = true
			}
			sorted := make([]string, 0, len(keys))
			for k := range keys {
				sorted = append(sorted, k)
			}
			sort.Strings(sorted)
			for _, k := range sorted {
				walk(path+"."+k, xm[k], ym[k])
			}
			return
		}
		xb, _ := json.Marshal(x)
		yb, _ := json.Marshal(y)
		if !bytes.Equal(xb, yb) {
			out = append(out, fmt.Sprintf("  %s: %s → %s", path, xb, yb))
		}
	}
	walk("", ma, mb)
	return strings.Join(out, "\n")
}

// wipe empties the cluster of what the release's case installed, with no
// operator running (so nothing recreates what goes): the VMs, KubeVirt's
// webhooks and APIServices (a registered APIService without a backend
// would hang the namespace's deletion), the KubeVirt resource without its
// finalizer, both operators' manifests, every object either labelled as
// its own, and the install namespace. It reports whether that worked.
func wipe(t *testing.T, env *framework.Env, c client.Client, rel, dist string) bool {
	t.Helper()
	ctx := context.Background()
	ok := true
	fail := func(what string, err error) {
		if err != nil {
			t.Errorf("emptying the cluster after %s: %s: %v", rel, what, err)
			ok = false
		}
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: installNS, Name: vocab.VirtOperator}, &appsv1.Deployment{}); err == nil {
		framework.ScaleOperator(t, c, 0)
	}
	fail("deleting the VMs", deleteVMs(ctx, env))
	kinds, err := ownership.Get()
	if err != nil {
		t.Fatal(err)
	}
	// Webhooks and APIServices first, then the rest of either's.
	first := func(gvk schema.GroupVersionKind) bool {
		return gvk.Group == "admissionregistration.k8s.io" || gvk.Group == "apiregistration.k8s.io"
	}
	for _, pass := range []bool{true, false} {
		for _, gvk := range kinds.Managed {
			if first(gvk) != pass {
				continue
			}
			for _, value := range []string{vocab.UpstreamManagedByValue, vocab.ManagedByValue} {
				list := &unstructured.UnstructuredList{}
				list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
				if err := c.List(ctx, list, client.MatchingLabels{vocab.ManagedByLabel: value}); err != nil {
					continue
				}
				for i := range list.Items {
					if err := c.Delete(ctx, &list.Items[i]); err != nil && !apierrors.IsNotFound(err) {
						fail("deleting "+gvk.Kind+" "+list.Items[i].GetName(), err)
					}
				}
			}
		}
	}
	if kv := (&kvv1.KubeVirt{}); c.Get(ctx, framework.KubeVirtKey, kv) == nil {
		orig := kv.DeepCopy()
		kv.Finalizers = nil
		fail("the KubeVirt resource's finalizers", c.Patch(ctx, kv, client.MergeFrom(orig)))
		fail("deleting the KubeVirt resource", client.IgnoreNotFound(c.Delete(ctx, kv)))
	}
	m, err := devcluster.FindUpstreamManifests(rel)
	fail("upstream's manifests", err)
	for _, path := range []string{filepath.Join(dist, "virtop-operator.yaml"), m.Operator} {
		_, err := env.Cluster.DeleteManifest(ctx, path)
		fail("deleting "+path, err)
	}
	fail("deleting namespace "+installNS, client.IgnoreNotFound(c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: installNS}})))
	fail("namespace "+installNS+" going", within(5*time.Minute, func() (bool, string) {
		err := c.Get(ctx, client.ObjectKey{Name: installNS}, &corev1.Namespace{})
		return apierrors.IsNotFound(err), fmt.Sprintf("still there (%v)", err)
	}))
	return ok
}

// within waits until cond holds, at most timeout; the error says why not.
func within(timeout time.Duration, cond func() (bool, string)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s: %s", timeout, why)
		}
		time.Sleep(time.Second)
	}
}
