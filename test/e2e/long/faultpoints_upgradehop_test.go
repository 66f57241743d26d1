//go:build long

package long

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/apply"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/plan"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/testing/crds"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/tools/devcluster"
	"github.com/virtop-dev/virtop/internal/vocab"
	"github.com/virtop-dev/virtop/test/e2e/framework"
)

// The newest hop of the catalog, v1.8.4 -> v1.9.0.
const (
	hopFrom = "v1.8.4"
	hopTo   = "v1.9.0"
	// exportCRD drops v1alpha1 in v1.9.0: objects stored at it are
	// rewritten before the CRD update (internal/storagemigration).
	exportCRD = "virtualmachineexports.export.kubevirt.io"
	// exports fill three list pages of the migration (250 objects each),
	// so its progress is recorded mid-way and a crash can fall between
	// two records.
	exports = 600
)

// hopPoints are the crash points of the hop, in the order a rollout
// reaches them: inside the storage migration of the VMExports (after the
// second object is rewritten, before any progress is recorded; right
// after the progress of the first page of 250 is recorded on the CRD; in
// the middle of the second page, 100 objects after the process resumed
// from that record; then after status.storedVersions is trimmed and
// before the new CRD is applied), then right after
// virt-handler's DaemonSet is written at each intermediate step of the
// staged TLS rollout (step 1: the new certificates mounted beside the old
// one, no flag; step 2: --migration-cn-types on, the old certificate still
// mounted). The second TLS step may follow the record of the new
// deployment, so a rollout that looks finished is no sign it was missed.
var hopPoints = []crashPoint{
	{name: "storage-migration:rewritten#2"},
	{name: "storage-migration:progress-recorded"},
	{name: "storage-migration:rewritten#100"},
	{name: "storage-migration:trimmed"},
	{name: "handler-tls:rollout", afterRecord: true},
	{name: "handler-tls:enforce", afterRecord: true},
}

// TestKilledDuringNewestHop kills the operator with SIGKILL at the crash
// points of the v1.8.4 -> v1.9.0 upgrade that the older upgrade's points do
// not reach: during the storage migration v1.9.0's VMExport CRD needs (a
// crash between two records of its progress included), and
// during virt-handler's staged TLS rollout. The points are chained (each
// restart resumes from the state the previous crash left); after every
// crash nothing stray exists; after the last an unarmed restart converges,
// the VMExports are all there with their UIDs and stored at a version
// v1.9.0 serves, and virt-handler runs the rollout's final form.
//
// The state before the hop is prepared as clusters have it: VMExports
// stored at v1alpha1 (created while the CRD stored v1alpha1), and a
// virt-handler that has not validated its migration peers yet (no flag,
// the old client certificate mounted), as one not yet through the staged
// rollout is; a v1.8.4 that virtop installed afresh starts at the final
// form and would have nothing to roll.
func TestKilledDuringNewestHop(t *testing.T) {
	s := newSuite(t)
	s.env.FaultsBinary(t)
	ctx := context.Background()
	s.ensureUninstalled()
	// The suite's other tests start from v1.5.0, which a v1.9.0 cannot be
	// moved back to: leave nothing installed.
	t.Cleanup(s.ensureUninstalled)

	// VMExports stored at v1alpha1.
	ns := s.env.Namespace(t, "hop-user")
	from := renderStrategy(t, hopFrom)
	crd, ok := from.Find("CustomResourceDefinition", "", exportCRD).(*apiextv1.CustomResourceDefinition)
	if !ok {
		t.Fatalf("%s renders no CRD %s", hopFrom, exportCRD)
	}
	crd = crd.DeepCopy()
	for i := range crd.Spec.Versions {
		crd.Spec.Versions[i].Storage = crd.Spec.Versions[i].Name == "v1alpha1"
	}
	u, err := apply.Desired(crd)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("kubevirt-v1alpha1-export"), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	crds.WaitServed(t, s.c, framework.DefaultTimeout, crd)
	for i := range exports {
		e := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
			"source": map[string]any{"apiGroup": "", "kind": "PersistentVolumeClaim", "name": fmt.Sprintf("disk-%d", i)},
		}}}
		e.SetAPIVersion("export.kubevirt.io/v1alpha1")
		e.SetKind("VirtualMachineExport")
		e.SetNamespace(ns)
		e.SetName(fmt.Sprintf("export-%d", i))
		poll.Eventually(t, "create "+e.GetName(), framework.DefaultTimeout, func(ctx context.Context) (bool, error) {
			err := s.c.Create(ctx, e.DeepCopy())
			return err == nil || apierrors.IsAlreadyExists(err), err
		})
	}
	before := exportUIDs(t, s.c, ns)
	if len(before) != exports {
		t.Fatalf("VMExports before the install: %v", before)
	}

	s.ensureInstalled(hopFrom)
	if got := framework.StoredVersions(t, s.c, exportCRD); !slices.Contains(got, "v1alpha1") {
		t.Fatalf("%s: storedVersions %v under %s; the hop needs v1alpha1 in them", exportCRD, got, hopFrom)
	}
	unrollHandlerTLS(t, s)

	start := time.Now()
	kv := s.mustKubeVirt()
	w, err := wanted(ctx, s.c, kv)
	if err != nil {
		t.Fatal(err)
	}
	s.setVersion(hopTo)
	s.crashChain("hop "+hopFrom+" -> "+hopTo, hopPoints, hopTo, w, kv.Status.ObservedDeploymentID)
	// The rollout's last step follows the record of the deployment, which
	// the convergence check waits for: an operator goes on to it.
	op := s.operator().Start()
	took := poll.Eventually(t, "virt-handler at the TLS rollout's final form", rolloutTimeout, func(ctx context.Context) (bool, error) {
		ok, why := framework.HandlerTLSFinal(ctx, s.c)
		return ok, fmt.Errorf("%s", why)
	})
	op.Stop(10 * time.Second)
	t.Logf("MEASURE hop: virt-handler at the TLS rollout's final form %s after the operator's restart", took.Round(100*time.Millisecond))
	t.Logf("MEASURE %d crash points of the hop %s -> %s: %s", len(hopPoints), hopFrom, hopTo, time.Since(start).Round(time.Second))

	if got := exportUIDs(t, s.c, ns); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Errorf("VMExports after the hop:\nbefore %v\nafter  %v", before, got)
	}
	if got := framework.StoredVersions(t, s.c, exportCRD); slices.Contains(got, "v1alpha1") {
		t.Errorf("%s: storedVersions %v after the hop; v1.9.0 does not serve v1alpha1", exportCRD, got)
	}
	live := &apiextv1.CustomResourceDefinition{}
	if err := s.c.Get(ctx, client.ObjectKey{Name: exportCRD}, live); err != nil {
		t.Fatal(err)
	}
	if rec, ok := live.Annotations[vocab.StorageMigrationAnnotation]; ok {
		t.Errorf("%s: the migration's progress record outlived it: %s", exportCRD, rec)
	}
}

// renderStrategy renders version's strategy as the operator does.
func renderStrategy(t *testing.T, version string) *strategy.Strategy {
	t.Helper()
	cfg, err := config.FromKubeVirt(framework.NewKubeVirt(t, version), config.Settings{Namespace: devcluster.InstallNamespace})
	if err != nil {
		t.Fatal(err)
	}
	st, err := strategy.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func exportUIDs(t *testing.T, c client.Client, ns string) map[string]string {
	t.Helper()
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion("export.kubevirt.io/v1beta1")
	list.SetKind("VirtualMachineExportList")
	if err := c.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, o := range list.Items {
		out[o.GetName()] = string(o.GetUID())
	}
	return out
}

// unrollHandlerTLS puts the live virt-handler DaemonSet (no operator runs)
// back before the staged TLS rollout, as a virtop that installed the
// release without staging it left it: the plan's DaemonSet for the live
// KubeVirt resource without the staged step (no flag, the old client
// certificate mounted, as the release renders it), server-side applied by
// virtop's field manager, so the operator's next apply replaces it as its
// own. It waits until that form has rolled out.
func unrollHandlerTLS(t *testing.T, s *suite) {
	t.Helper()
	ctx := context.Background()
	kv := s.mustKubeVirt()
	cfg, err := config.FromKubeVirt(kv, config.Settings{Namespace: kv.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	st, err := strategy.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Build(st, cfg, plan.Capabilities{VirtAPIServing: true}, plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var ds *appsv1.DaemonSet
	for _, o := range p.Objects {
		if d, ok := o.(*appsv1.DaemonSet); ok && d.Name == vocab.VirtHandler {
			ds = d
		}
	}
	if ds == nil {
		t.Fatal("the plan holds no virt-handler DaemonSet")
	}
	u, err := apply.Desired(ds)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(vocab.FieldManager), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, "virt-handler rolled out before the TLS rollout", rolloutTimeout, func(ctx context.Context) (bool, error) {
		live := &appsv1.DaemonSet{}
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(ds), live); err != nil {
			return false, err
		}
		args := strings.Join(live.Spec.Template.Spec.Containers[0].Args, " ")
		flag := strings.Contains(args, plan.MigrationCNTypesFlag)
		old := slices.ContainsFunc(live.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == plan.OldHandlerClientCertVolume })
		st := live.Status
		rolled := st.ObservedGeneration >= live.Generation && st.UpdatedNumberScheduled == st.DesiredNumberScheduled && st.NumberAvailable == st.DesiredNumberScheduled
		return !flag && old && rolled, fmt.Errorf("flag %v, old certificate %v, generation %d observed %d, updated %d available %d of %d",
			flag, old, live.Generation, st.ObservedGeneration, st.UpdatedNumberScheduled, st.NumberAvailable, st.DesiredNumberScheduled)
	})
}
