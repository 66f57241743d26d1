package install

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	eventsv1 "k8s.io/api/events/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/scheme"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/tools/devcluster"
	"github.com/virtop-dev/virtop/internal/tools/podless"
	"github.com/virtop-dev/virtop/internal/tools/toolpaths"
	"github.com/virtop-dev/virtop/internal/vocab"
	"github.com/virtop-dev/virtop/test/e2e/framework"
)

const (
	// releaseVersion is the VERSION the manifests are rendered for; on
	// kwok nothing pulls the image, the test checks the pin.
	releaseVersion = framework.ReleaseManifestsVersion
	operatorImage  = "ghcr.io/virtop-dev/virtop:" + releaseVersion
	installNS      = devcluster.InstallNamespace
	operatorSA     = "kubevirt-operator"
	operatorDeploy = "virt-operator"
	// waitLong bounds every wait of the install, upgrade and uninstall: a
	// loaded 2-core machine, so minutes (durations are logged, not asserted).
	waitLong = 4 * time.Minute
)

// operatorUser is who the operator's pods run as.
var operatorUser, operatorGroups = framework.ServiceAccountUser(installNS, operatorSA)

// TestReleaseManifestsInstall is the two-step install of the README on the
// local cluster, then the operator's whole life under the manifest's RBAC:
//
//  1. `make release-manifests` renders dist/virtop-operator.yaml and
//     dist/kubevirt-cr.yaml (into a temporary DIST);
//  2. `kubectl apply --server-side --validate=strict` of the operator
//     manifest, first on the suite's `virtop up` cluster as it is (no
//     conflict with what `up` installed: no --force-conflicts), then on a
//     cluster without any of virtop's objects; the Deployment
//     virt-operator becomes Available (kwok runs its pods as fakes);
//  3. the same apply again changes no object (resourceVersions);
//  4. `kubectl apply --server-side` of the KubeVirt resource;
//  5. the built operator, a host process (the in-cluster pods run nothing),
//     authenticates as the cluster's admin but impersonates the operator's
//     ServiceAccount, so it holds only what the applied roles grant, and
//     takes the Lease as the Deployment's replicas would; it installs
//     v1.5.0 to Available, upgrades to v1.5.3, and uninstalls when the
//     KubeVirt resource is deleted, leaving no object it manages.
//
// Any refused request (a forbidden error in the operator's log, the
// KubeVirt conditions or the install namespace's events) fails the test at
// once. The manifest's own objects (the Deployment virt-operator, the RBAC,
// the CRDs) are never written by the operator.
func TestReleaseManifestsInstall(t *testing.T) {
	env := framework.Require(t)
	c := env.Client(t)
	ctx := context.Background()
	kubectlBin, err := toolpaths.Kubectl.Require()
	if err != nil {
		t.Fatal(err)
	}
	testStart := time.Now()

	// 1. Render, as a release does (once per run under make test-e2e).
	dist, rendered := framework.ReleaseManifests(t, env)
	if rendered > 0 {
		t.Logf("MEASURE make release-manifests: %s", rendered.Round(100*time.Millisecond))
	}
	operatorYAML := filepath.Join(dist, "virtop-operator.yaml")
	crYAML := filepath.Join(dist, "kubevirt-cr.yaml")
	manifest := decodeFile(t, operatorYAML)
	digest, err := os.ReadFile(filepath.Join(dist, "virtop-image.digest"))
	if err != nil {
		t.Fatal(err)
	}
	checkManifest(t, manifest, operatorImage+"@"+strings.TrimSpace(string(digest)))

	// 2a. The suite's cluster is a `virtop up` cluster: it comes with the
	// base `virtop up` installs (virtop's CRDs, the namespace, the
	// PriorityClass, from the same files as the manifest). The manifest
	// applies on it server-side without --force-conflicts.
	k := kubectl{t: t, bin: kubectlBin, kubeconfig: env.Cluster.Kubeconfig(), cacheDir: t.TempDir()}
	out := k.run("apply", "--server-side", "--validate=strict", "-f", operatorYAML)
	t.Logf("the operator manifest applied on the `virtop up` base without --force-conflicts:\n%s", out)

	// 2b. A cluster as users have it: remove the base (and what 2a added
	// to it) so the manifest creates everything.
	removeSuiteBase(t, c)
	t0 := time.Now()
	k.run("apply", "--server-side", "--validate=strict", "-f", operatorYAML)
	t.Logf("MEASURE kubectl apply --server-side of the operator manifest (%d objects): %s", len(manifest), time.Since(t0).Round(100*time.Millisecond))
	took := env.WaitDeploymentAvailable(t, installNS, operatorDeploy, waitLong)
	t.Logf("MEASURE Deployment %s Available %s after the apply", operatorDeploy, took.Round(100*time.Millisecond))

	// Upstream's KubeVirt CRD, full schema: kubectl explain answers for
	// spec.configuration, as on an upstream install (the API server
	// publishes a new CRD's OpenAPI within seconds; poll for it).
	var explained string
	poll.Eventually(t, "kubectl explain kubevirt.spec.configuration.migrations", time.Minute, func(ctx context.Context) (bool, error) {
		out, err := k.try("explain", "kubevirt.spec.configuration.migrations")
		explained = out
		return err == nil && strings.Contains(out, "bandwidthPerMigration") && strings.Contains(out, "parallelMigrationsPerCluster"), fmt.Errorf("%v: %s", err, out)
	})
	t.Logf("kubectl explain kubevirt.spec.configuration.migrations:\n%s", explained)

	// 3. A second apply changes nothing.
	before := resourceVersions(t, c, manifest)
	out = k.run("apply", "--server-side", "--validate=strict", "-f", operatorYAML)
	after := resourceVersions(t, c, manifest)
	for key, rv := range before {
		if after[key] != rv {
			t.Errorf("%s changed on the second apply (resourceVersion %s -> %s)", key, rv, after[key])
		}
	}
	if n := strings.Count(out, "serverside-applied"); n != len(manifest) {
		t.Errorf("the second apply reported %d objects server-side applied, want %d:\n%s", n, len(manifest), out)
	}
	opDeploy := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: installNS, Name: operatorDeploy}, opDeploy); err != nil {
		t.Fatal(err)
	}

	// 4. The KubeVirt resource, as shipped.
	k.run("apply", "--server-side", "--validate=strict", "-f", crYAML)
	// Upstream's short name and printer columns.
	if out := k.run("get", "kv", "-n", installNS); !strings.Contains(out, "PHASE") || !strings.Contains(out, "AGE") {
		t.Errorf("kubectl get kv shows not upstream's columns (Age, Phase):\n%s", out)
	}
	kv := &kvv1.KubeVirt{}
	if err := c.Get(ctx, framework.KubeVirtKey, kv); err != nil {
		t.Fatalf("the KubeVirt resource of %s: %v", filepath.Base(crYAML), err)
	}
	// The local cluster's adjustments, as `virtop up` makes them: a
	// version to upgrade from, and KubeVirt's webhooks failurePolicy Ignore
	// (virt-api runs nothing here). Made before the operator starts, so it
	// installs v1.5.0 only.
	kv.Spec.ImageTag = "v1.5.0"
	if err := podless.Prepare(kv); err != nil {
		t.Fatal(err)
	}
	if err := c.Update(ctx, kv); err != nil {
		t.Fatal(err)
	}

	// 5. The operator as its ServiceAccount.
	asOperator := framework.KubeconfigAs(t, env.Cluster.Kubeconfig(), t.TempDir(), operatorUser, operatorGroups)
	checkImpersonation(t, asOperator)
	args := append([]string{"operator", "--kubeconfig", asOperator, "--namespace", installNS, "--leader-elect"}, framework.HostOperatorArgs(t)...)
	op := env.Virtop(t, args...).Start()
	refusals := &forbiddenScan{path: op.LogPath}
	// noRefusal fails the test at the first refused request.
	noRefusal := func(phase string, kv *kvv1.KubeVirt) {
		t.Helper()
		if lines := refusals.scan(t); len(lines) > 0 {
			t.Fatalf("%s: the operator was refused %d request(s) (RBAC of %s lacks a rule); first:\n%s",
				phase, len(lines), filepath.Base(operatorYAML), lines[0])
		}
		if kv != nil {
			for _, cond := range kv.Status.Conditions {
				if strings.Contains(strings.ToLower(cond.Message), "forbidden") {
					t.Fatalf("%s: condition %s=%s %s: %s", phase, cond.Type, cond.Status, cond.Reason, cond.Message)
				}
			}
		}
		var evs eventsv1.EventList
		if err := c.List(ctx, &evs, client.InNamespace(installNS)); err == nil {
			for _, e := range evs.Items {
				if strings.Contains(strings.ToLower(e.Note), "forbidden") {
					t.Fatalf("%s: event %s on %s %s: %s", phase, e.Reason, e.Regarding.Kind, e.Regarding.Name, e.Note)
				}
			}
		}
		if exited, codes := op.EverExited(); exited {
			t.Fatalf("%s: the operator exited (codes %v)", phase, codes)
		}
	}
	waitKubeVirt := func(phase string, ok func(*kvv1.KubeVirt) (bool, string)) time.Duration {
		t.Helper()
		return framework.WaitKubeVirt(t, c, phase, waitLong, func(kv *kvv1.KubeVirt) (bool, string) {
			noRefusal(phase, kv)
			return ok(kv)
		})
	}

	took = waitKubeVirt("install: v1.5.0 Available", framework.RolledOutAt("v1.5.0"))
	t.Logf("MEASURE install v1.5.0 as %s: Available after %s", operatorUser, took.Round(100*time.Millisecond))
	lease := &unstructured.Unstructured{}
	lease.SetAPIVersion("coordination.k8s.io/v1")
	lease.SetKind("Lease")
	if err := c.Get(ctx, client.ObjectKey{Namespace: installNS, Name: operatorDeploy}, lease); err != nil {
		t.Errorf("the operator ran with --leader-elect but Lease %s/%s: %v", installNS, operatorDeploy, err)
	}

	cur := &kvv1.KubeVirt{}
	if err := c.Get(ctx, framework.KubeVirtKey, cur); err != nil {
		t.Fatal(err)
	}
	orig := cur.DeepCopy()
	cur.Spec.ImageTag = "v1.5.3"
	if err := c.Patch(ctx, cur, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	took = waitKubeVirt("upgrade: v1.5.3 Available", framework.RolledOutAt("v1.5.3"))
	t.Logf("MEASURE upgrade v1.5.0 -> v1.5.3 as %s: Available after %s", operatorUser, took.Round(100*time.Millisecond))
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: installNS, Name: "virt-api"}, d); err != nil {
		t.Fatal(err)
	}
	if img := d.Spec.Template.Spec.Containers[0].Image; !strings.HasSuffix(img, ":v1.5.3") {
		t.Errorf("virt-api runs %s after the upgrade", img)
	}
	if len(framework.ManagedResourceVersions(t, c)) == 0 {
		t.Fatal("no object labelled as managed by virtop after the upgrade")
	}

	// Uninstall.
	t0 = time.Now()
	if err := c.Delete(ctx, cur); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, "uninstall: the KubeVirt resource and every managed object gone", waitLong, func(ctx context.Context) (bool, error) {
		noRefusal("uninstall", nil)
		if err := c.Get(ctx, framework.KubeVirtKey, &kvv1.KubeVirt{}); !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("the KubeVirt resource is still there (%v)", err)
		}
		if left := framework.ManagedResourceVersions(t, c); len(left) > 0 {
			return false, fmt.Errorf("%d managed objects left: %v", len(left), slices.Sorted(maps.Keys(left)))
		}
		return true, nil
	})
	t.Logf("MEASURE uninstall as %s: everything gone %s after the delete", operatorUser, time.Since(t0).Round(100*time.Millisecond))
	noRefusal("after uninstall", nil)
	if !op.Running() {
		t.Error("the operator is not running after the uninstall")
	}

	// The manifest's objects are the user's (or the GitOps tool's): the
	// operator never wrote them, and uninstalling KubeVirt left them.
	final := resourceVersions(t, c, manifest)
	for key, rv := range after {
		if strings.HasPrefix(key, "Deployment/") {
			continue // its status follows the fake pods
		}
		if final[key] != rv {
			t.Errorf("%s was written during install, upgrade or uninstall (resourceVersion %s -> %s)", key, rv, final[key])
		}
	}
	nowDeploy := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: installNS, Name: operatorDeploy}, nowDeploy); err != nil {
		t.Fatalf("the operator's Deployment after the uninstall: %v", err)
	}
	if nowDeploy.Generation != opDeploy.Generation {
		t.Errorf("Deployment %s: generation %d -> %d: its spec was changed", operatorDeploy, opDeploy.Generation, nowDeploy.Generation)
	}
	for _, obj := range manifest {
		live := get(t, c, obj)
		for _, mf := range live.GetManagedFields() {
			if mf.Manager == vocab.FieldManager {
				t.Errorf("%s %s has fields managed by %q (%s)", obj.GetKind(), obj.GetName(), mf.Manager, mf.Operation)
			}
		}
	}
	if !framework.DeploymentAvailable(nowDeploy) {
		t.Errorf("Deployment %s is no longer Available after the uninstall", operatorDeploy)
	}
	t.Logf("MEASURE whole install test (render, apply twice, install, upgrade, uninstall): %s", time.Since(testStart).Round(100*time.Millisecond))
}

// checkManifest checks what the rendered manifest must hold for the rest of
// the test to mean anything: the operator's Deployment with the pinned
// image, its ServiceAccount and roles.
func checkManifest(t *testing.T, objs []*unstructured.Unstructured, image string) {
	t.Helper()
	kinds := map[string]bool{}
	for _, o := range objs {
		kinds[o.GetKind()+"/"+o.GetName()] = true
		if o.GetKind() == "Deployment" && o.GetName() == operatorDeploy {
			cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			if len(cs) == 0 {
				t.Fatalf("Deployment %s has no containers", operatorDeploy)
			}
			if img, _, _ := unstructured.NestedString(cs[0].(map[string]any), "image"); img != image {
				t.Errorf("Deployment %s runs %q, want %q (make release-manifests pins the version and the digest)", operatorDeploy, img, image)
			}
		}
	}
	for _, want := range []string{"Namespace/" + installNS, "Deployment/" + operatorDeploy, "ServiceAccount/" + operatorSA,
		"ClusterRole/" + operatorSA, "ClusterRoleBinding/" + operatorSA, "CustomResourceDefinition/kubevirts.kubevirt.io"} {
		if !kinds[want] {
			t.Errorf("the operator manifest has no %s (has %v)", want, slices.Sorted(maps.Keys(kinds)))
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// removeSuiteBase deletes what the suite's cluster installs beside the
// manifest's objects (framework.Main: virtop's CRDs, the PriorityClass
// kubevirt-cluster-critical, the namespace kubevirt) and waits until they
// are gone.
func removeSuiteBase(t *testing.T, c client.Client) {
	t.Helper()
	var crds apiextensionsv1.CustomResourceDefinitionList
	if err := c.List(context.Background(), &crds); err != nil {
		t.Fatal(err)
	}
	var objs []client.Object
	for i := range crds.Items {
		crd := &crds.Items[i]
		if g := crd.Spec.Group; g != "kubevirt.io" && g != "virtop.dev" {
			continue
		}
		objs = append(objs, crd)
		// The CRDs were created moments ago. Deleting one whose storage is
		// still initializing leaves it Terminating: the API server's CRD
		// finalizer fails once ("storage is (re)initializing") and was
		// seen not to come back within minutes. Wait until the storage
		// serves a list from its watch cache (resourceVersion 0) first.
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion(crd.Spec.Group + "/" + crd.Spec.Versions[0].Name)
		list.SetKind(crd.Spec.Names.ListKind)
		poll.Eventually(t, "the storage of "+crd.Name+" ready", waitLong, func(ctx context.Context) (bool, error) {
			err := c.List(ctx, list, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: "0"}})
			return err == nil, err
		})
	}
	pc := &schedulingv1.PriorityClass{}
	pc.Name = "kubevirt-cluster-critical"
	ns := &unstructured.Unstructured{}
	ns.SetAPIVersion("v1")
	ns.SetKind("Namespace")
	ns.SetName(installNS)
	objs = append(objs, pc, ns)
	for _, o := range objs {
		if err := c.Delete(context.Background(), o); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("deleting %T %s: %v", o, o.GetName(), err)
		}
	}
	took := poll.Eventually(t, "the suite's CRDs, PriorityClass and namespace gone", 2*time.Minute, func(ctx context.Context) (bool, error) {
		for _, o := range objs {
			err := c.Get(ctx, client.ObjectKeyFromObject(o), o)
			if apierrors.IsNotFound(err) {
				continue
			}
			if crd, ok := o.(*apiextensionsv1.CustomResourceDefinition); ok && err == nil {
				nudge(t, c, crd)
				return false, fmt.Errorf("CRD %s still there, finalizers %v, conditions %+v", crd.Name, crd.Finalizers, crd.Status.Conditions)
			}
			return false, fmt.Errorf("%T %s still there (%v)", o, o.GetName(), err)
		}
		return true, nil
	})
	t.Logf("removed the suite's base (%d objects) in %s", len(objs), took.Round(100*time.Millisecond))
}

// nudge touches a CRD that has been Terminating for over 20 s (once every
// 20 s): the API server's CRD finalizer was seen to give up after one
// failure ("storage is (re)initializing") and to resume only on the CRD's
// next update event.
func nudge(t *testing.T, c client.Client, crd *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	if crd.DeletionTimestamp == nil || time.Since(crd.DeletionTimestamp.Time) < 20*time.Second {
		return
	}
	const key = "e2e.virtop.dev/nudged"
	if last, err := time.Parse(time.RFC3339, crd.Annotations[key]); err == nil && time.Since(last) < 20*time.Second {
		return
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, key, time.Now().UTC().Format(time.RFC3339))
	if err := c.Patch(context.Background(), crd, client.RawPatch(types.MergePatchType, patch)); err == nil {
		t.Logf("CRD %s Terminating since %s: touched it so its finalizer runs again", crd.Name, crd.DeletionTimestamp.Format(time.RFC3339))
	}
}

// kubectl runs the pinned kubectl against the cluster.
type kubectl struct {
	t                         *testing.T
	bin, kubeconfig, cacheDir string
}

func (k kubectl) run(args ...string) string {
	k.t.Helper()
	full := append([]string{"--kubeconfig", k.kubeconfig, "--cache-dir", k.cacheDir}, args...)
	cmd := exec.Command(k.bin, full...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		k.t.Fatalf("kubectl %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	k.t.Logf("kubectl %s:\n%s", strings.Join(args, " "), strings.TrimSpace(stdout.String()))
	return stdout.String()
}

// try runs kubectl and returns its combined output and error.
func (k kubectl) try(args ...string) (string, error) {
	full := append([]string{"--kubeconfig", k.kubeconfig, "--cache-dir", k.cacheDir}, args...)
	out, err := exec.Command(k.bin, full...).CombinedOutput()
	return string(out), err
}

// checkImpersonation proves the kubeconfig acts as the ServiceAccount: it
// may list KubeVirt resources (its ClusterRole) but not PriorityClasses
// (nothing grants that).
func checkImpersonation(t *testing.T, kubeconfig string) {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(rc, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.List(context.Background(), &kvv1.KubeVirtList{}); err != nil {
		t.Fatalf("listing KubeVirt resources as %s: %v", operatorUser, err)
	}
	if err := c.List(context.Background(), &schedulingv1.PriorityClassList{}); !apierrors.IsForbidden(err) {
		t.Fatalf("listing PriorityClasses as %s: %v, want forbidden (is impersonation in effect?)", operatorUser, err)
	}
}

// forbiddenScan reads a log file incrementally and keeps the lines that
// report a refused request.
type forbiddenScan struct {
	path   string
	offset int64
	lines  []string
}

func (f *forbiddenScan) scan(t *testing.T) []string {
	t.Helper()
	fh, err := os.Open(f.path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if _, err := fh.Seek(f.offset, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(fh)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			// A partial last line is read again next time.
			break
		}
		f.offset += int64(len(line))
		if refused(line) {
			f.lines = append(f.lines, strings.TrimSpace(line))
		}
	}
	return f.lines
}

// refused says whether a log line reports a request the API server refused
// for lack of permission.
func refused(line string) bool {
	return strings.Contains(strings.ToLower(line), "forbidden")
}

func decodeFile(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var out []*unstructured.Unstructured
	for {
		o := &unstructured.Unstructured{}
		if err := dec.Decode(&o.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("%s: %v", path, err)
		}
		if len(o.Object) > 0 {
			out = append(out, o)
		}
	}
}

func get(t *testing.T, c client.Client, o *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(o.GroupVersionKind())
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(o), live); err != nil {
		t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
	}
	return live
}

// resourceVersions maps "Kind/namespace/name" of each object to its live
// resourceVersion.
func resourceVersions(t *testing.T, c client.Client, objs []*unstructured.Unstructured) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, o := range objs {
		out[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = get(t, c, o).GetResourceVersion()
	}
	return out
}
