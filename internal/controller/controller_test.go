package controller_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/operator"
	"github.com/virtop-dev/virtop/internal/scheme"
	"github.com/virtop-dev/virtop/internal/testing/kvtest"
	"github.com/virtop-dev/virtop/internal/testing/operatortest"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
	"github.com/virtop-dev/virtop/internal/vocab"
)

func TestMain(m *testing.M) {
	log.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	os.Exit(testenv.Main(m, testenv.Options{Monitoring: true, Scheme: scheme.New()}))
}

// managedVersions returns the resourceVersion of every object virtop
// manages in the namespace, and of its cluster-scoped ones.
// waitSettled waits until the KubeVirt resource is rolled out, every
// Deployment and DaemonSet of its namespace is ready as its status says,
// and the resource has not been written for 2 seconds: the operator has
// seen the workloads as they are.
func waitSettled(t *testing.T, c client.Client, key client.ObjectKey) {
	t.Helper()
	ctx := context.Background()
	lastRV, stableSince := "", time.Time{}
	poll.Eventually(t, "the installation settled (rolled out, workloads ready, status unchanged 2s)", 2*time.Minute, func() (bool, string) {
		kv := &kvv1.KubeVirt{}
		if err := c.Get(ctx, key, kv); err != nil {
			return false, err.Error()
		}
		if ok, why := kvtest.RolledOut(kv); !ok {
			return false, why
		}
		var dss appsv1.DaemonSetList
		if err := c.List(ctx, &dss, client.InNamespace(key.Namespace)); err != nil {
			return false, err.Error()
		}
		for _, d := range dss.Items {
			if d.Status.ObservedGeneration != d.Generation || d.Status.NumberReady == 0 {
				return false, "DaemonSet " + d.Name + " not ready"
			}
		}
		var ds appsv1.DeploymentList
		if err := c.List(ctx, &ds, client.InNamespace(key.Namespace)); err != nil {
			return false, err.Error()
		}
		for _, d := range ds.Items {
			if d.Status.ObservedGeneration != d.Generation || d.Status.ReadyReplicas == 0 {
				return false, "Deployment " + d.Name + " not ready"
			}
		}
		if kv.ResourceVersion != lastRV {
			lastRV, stableSince = kv.ResourceVersion, time.Now()
			return false, "the resource was just written"
		}
		return time.Since(stableSince) >= 2*time.Second, "unchanged for " + time.Since(stableSince).Round(100*time.Millisecond).String()
	})
}

func managedVersions(t *testing.T, c client.Client) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, kind := range []string{"DeploymentList", "DaemonSetList", "ServiceList", "ServiceAccountList", "SecretList", "ConfigMapList"} {
		group := ""
		if strings.HasPrefix(kind, "Deployment") || strings.HasPrefix(kind, "DaemonSet") {
			group = "apps"
		}
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion(strings.TrimPrefix(group+"/v1", "/"))
		list.SetKind(kind)
		if err := c.List(context.Background(), list, client.MatchingLabels{vocab.ManagedByLabel: vocab.ManagedByValue}); err != nil {
			t.Fatal(err)
		}
		for _, o := range list.Items {
			out[kind+"/"+o.GetNamespace()+"/"+o.GetName()] = o.GetResourceVersion()
		}
	}
	for _, gvk := range [][2]string{{"rbac.authorization.k8s.io/v1", "ClusterRoleList"}, {"apiextensions.k8s.io/v1", "CustomResourceDefinitionList"}, {"admissionregistration.k8s.io/v1", "ValidatingWebhookConfigurationList"}} {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion(gvk[0])
		list.SetKind(gvk[1])
		if err := c.List(context.Background(), list, client.MatchingLabels{vocab.ManagedByLabel: vocab.ManagedByValue}); err != nil {
			t.Fatal(err)
		}
		for _, o := range list.Items {
			out[gvk[1]+"/"+o.GetName()] = o.GetResourceVersion()
		}
	}
	return out
}

// TestInstallSteadyStateDriftAndSecond installs the control plane, checks
// that a steady state writes nothing, that out-of-band changes are
// restored, and that a second KubeVirt resource is refused.
func TestInstallSteadyStateDriftAndSecond(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	c := env.Client
	ctx := context.Background()
	testenv.FakeReadiness(t, c, ns)
	operatortest.Start(t, env.Config, operator.Options{Namespace: ns})
	// v1.5.3, where VMExport is an Alpha gate (Beta, on by default, from
	// v1.6; GA in v1.9), so that turning it off prunes virt-exportproxy.
	kv := kvtest.KubeVirt(t, ns, func(kv *kvv1.KubeVirt) {
		kv.Spec.ImageTag = "v1.5.3"
		kv.Spec.Configuration.DeveloperConfiguration = &kvv1.DeveloperConfiguration{FeatureGates: []string{"VMExport"}}
	})
	if err := c.Create(ctx, kv); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(kv)
	kv = kvtest.WaitRolledOut(t, c, key)
	if kv.Status.Phase != kvv1.KubeVirtPhaseDeployed {
		t.Errorf("phase %s, want Deployed", kv.Status.Phase)
	}
	// virt-api and virt-controller read the default architecture only
	// from here, as upstream's operator writes it.
	if kv.Status.DefaultArchitecture != runtime.GOARCH {
		t.Errorf("status.defaultArchitecture %q, want the operator's %q", kv.Status.DefaultArchitecture, runtime.GOARCH)
	}
	if kv.Status.ObservedDeploymentID == "" || kv.Status.ObservedDeploymentID != kv.Status.TargetDeploymentID {
		t.Errorf("observed ID %q, target %q", kv.Status.ObservedDeploymentID, kv.Status.TargetDeploymentID)
	}
	if kv.Status.ObservedGeneration == nil || *kv.Status.ObservedGeneration != kv.Generation {
		t.Errorf("observedGeneration %v, generation %d", kv.Status.ObservedGeneration, kv.Generation)
	}
	for _, name := range []string{"virt-api", "virt-controller", "virt-exportproxy"} {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &appsv1.Deployment{}); err != nil {
			t.Errorf("Deployment %s: %v", name, err)
		}
	}
	// APIServices wait for virt-api to really answer, which nothing does here.
	var apiservices unstructured.UnstructuredList
	apiservices.SetAPIVersion("apiregistration.k8s.io/v1")
	apiservices.SetKind("APIServiceList")
	if err := c.List(ctx, &apiservices, client.MatchingLabels{vocab.ManagedByLabel: vocab.ManagedByValue}); err != nil {
		t.Fatal(err)
	}
	if len(apiservices.Items) != 0 {
		t.Errorf("APIServices registered although virt-api does not answer: %d", len(apiservices.Items))
	}

	t.Run("steady state writes nothing", func(t *testing.T) {
		before := managedVersions(t, c)
		kvRV := kv.ResourceVersion
		time.Sleep(15 * time.Second)
		after := managedVersions(t, c)
		for k, v := range before {
			if after[k] != v {
				t.Errorf("%s changed in steady state: %s -> %s", k, v, after[k])
			}
		}
		cur := &kvv1.KubeVirt{}
		if err := c.Get(ctx, key, cur); err != nil {
			t.Fatal(err)
		}
		if cur.ResourceVersion != kvRV {
			t.Errorf("the KubeVirt resource was written in steady state (%s -> %s)\nbefore: %+v\nafter:  %+v", kvRV, cur.ResourceVersion, kv.Status, cur.Status)
		}
	})

	t.Run("deleted Deployment restored", func(t *testing.T) {
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "virt-controller"}, d); err != nil {
			t.Fatal(err)
		}
		uid := d.UID
		if err := c.Delete(ctx, d); err != nil {
			t.Fatal(err)
		}
		poll.Eventually(t, "virt-controller re-created", time.Minute, func() (bool, string) {
			err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "virt-controller"}, d)
			return err == nil && d.UID != uid, fmt.Sprint(err)
		})
	})

	t.Run("edited DaemonSet restored", func(t *testing.T) {
		ds := &appsv1.DaemonSet{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "virt-handler"}, ds); err != nil {
			t.Fatal(err)
		}
		want := ds.Spec.Template.Spec.Containers[0].Image
		orig := ds.DeepCopy()
		ds.Spec.Template.Spec.Containers[0].Image = "example.com/tampered:1"
		if err := c.Patch(ctx, ds, client.MergeFrom(orig)); err != nil {
			t.Fatal(err)
		}
		poll.Eventually(t, "virt-handler image restored", time.Minute, func() (bool, string) {
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "virt-handler"}, ds); err != nil {
				return false, err.Error()
			}
			got := ds.Spec.Template.Spec.Containers[0].Image
			return got == want, got
		})
	})

	t.Run("second KubeVirt refused", func(t *testing.T) {
		second := kvtest.KubeVirt(t, ns)
		second.Name = "second"
		if err := c.Create(ctx, second); err != nil {
			t.Fatal(err)
		}
		poll.Eventually(t, "Synchronized=False/ExistingDeployment on the second", time.Minute, func() (bool, string) {
			if err := c.Get(ctx, client.ObjectKeyFromObject(second), second); err != nil {
				return false, err.Error()
			}
			s := second.Status.Condition(kvv1.KubeVirtConditionSynchronized)
			return s.Status == corev1.ConditionFalse && s.Reason == "ExistingDeployment" && strings.Contains(s.Message, "kubevirt"),
				fmt.Sprintf("%+v", s)
		})
		if err := c.Delete(ctx, second); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	})

	t.Run("invalid patch named in a condition, control plane untouched", func(t *testing.T) {
		// The drift subtests above end when the object is restored, not
		// when the operator has seen it ready again: a bad edit landing in
		// between keeps the Available=False of that pass (an invalid spec
		// leaves the status as it was). Start from a settled state.
		waitSettled(t, c, key)
		before := managedVersions(t, c)
		cur := &kvv1.KubeVirt{}
		if err := c.Get(ctx, key, cur); err != nil {
			t.Fatal(err)
		}
		orig := cur.DeepCopy()
		cur.Spec.CustomizeComponents.Patches = append([]kvv1.CustomizeComponentsPatch{{
			ResourceName: "virt-api", ResourceType: "Deployment", Type: kvv1.JSONPatchType,
			Patch: `[{"op":"replace","path":"/spec/nothing/here","value":1}]`,
		}}, cur.Spec.CustomizeComponents.Patches...)
		if err := c.Patch(ctx, cur, client.MergeFrom(orig)); err != nil {
			t.Fatal(err)
		}
		poll.Eventually(t, "Stalled=True naming patches[0]", time.Minute, func() (bool, string) {
			if err := c.Get(ctx, key, cur); err != nil {
				return false, err.Error()
			}
			s := cur.Status.Condition(kvv1.KubeVirtConditionStalled)
			return s.Status == corev1.ConditionTrue && strings.Contains(s.Message, "patches[0]"), fmt.Sprintf("%+v", s)
		})
		if a := cur.Status.Condition(kvv1.KubeVirtConditionAvailable); a.Status != corev1.ConditionTrue {
			t.Errorf("Available %s after a bad edit; the running control plane was not touched", a.Status)
		}
		if cur.Status.ObservedGeneration == nil || *cur.Status.ObservedGeneration != cur.Generation {
			t.Errorf("observedGeneration %v should reach %d so GitOps tools report the failure", cur.Status.ObservedGeneration, cur.Generation)
		}
		after := managedVersions(t, c)
		for k, v := range before {
			if after[k] != v {
				t.Errorf("%s changed after a bad edit", k)
			}
		}
		// Fix it again.
		orig = cur.DeepCopy()
		cur.Spec.CustomizeComponents.Patches = cur.Spec.CustomizeComponents.Patches[1:]
		if err := c.Patch(ctx, cur, client.MergeFrom(orig)); err != nil {
			t.Fatal(err)
		}
		kvtest.WaitRolledOut(t, c, key)
	})

	t.Run("VMExport off prunes virt-exportproxy", func(t *testing.T) {
		cur := &kvv1.KubeVirt{}
		if err := c.Get(ctx, key, cur); err != nil {
			t.Fatal(err)
		}
		orig := cur.DeepCopy()
		cur.Spec.Configuration.DeveloperConfiguration.FeatureGates = nil
		if err := c.Patch(ctx, cur, client.MergeFrom(orig)); err != nil {
			t.Fatal(err)
		}
		poll.Eventually(t, "virt-exportproxy pruned", 2*time.Minute, func() (bool, string) {
			err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "virt-exportproxy"}, &appsv1.Deployment{})
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
		kvtest.WaitRolledOut(t, c, key)
		// One Pruned event per object deleted, each naming it: the
		// recorder folded them into the first's series before.
		poll.Eventually(t, "a Pruned event for each of virt-exportproxy's objects", time.Minute, func() (bool, string) {
			var list eventsv1.EventList
			if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
				return false, err.Error()
			}
			var notes []string
			for _, e := range list.Items {
				if e.Reason == "Pruned" {
					notes = append(notes, e.Note)
				}
			}
			all := strings.Join(notes, "\n")
			for _, want := range []string{"Deleted Deployment.apps/" + ns + "/virt-exportproxy,", "Deleted PodDisruptionBudget.policy/" + ns + "/virt-exportproxy-pdb,"} {
				if !strings.Contains(all, want) {
					return false, fmt.Sprintf("no event %q among %d: %s", want, len(notes), all)
				}
			}
			return true, ""
		})
	})
}

// TestUpgrade rolls v1.5.0 to v1.5.3: Available never goes False, Degraded
// never goes True, and the PrometheusRule follows the new version.
func TestUpgrade(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	c := env.Client
	ctx := context.Background()
	testenv.FakeReadiness(t, c, ns)
	operatortest.Start(t, env.Config, operator.Options{Namespace: ns})
	kv := kvtest.KubeVirt(t, ns, func(kv *kvv1.KubeVirt) { kv.Spec.ImageTag = "v1.5.0" })
	if err := c.Create(ctx, kv); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(kv)
	kv = kvtest.WaitRolledOut(t, c, key)
	if kv.Status.ObservedKubeVirtVersion != "v1.5.0" {
		t.Fatalf("observed version %q", kv.Status.ObservedKubeVirtVersion)
	}
	ruleBefore := &unstructured.Unstructured{}
	ruleBefore.SetAPIVersion("monitoring.coreos.com/v1")
	ruleBefore.SetKind("PrometheusRule")
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "prometheus-kubevirt-rules"}, ruleBefore); err != nil {
		t.Fatal(err)
	}

	orig := kv.DeepCopy()
	kv.Spec.ImageTag = "v1.5.3"
	if err := c.Patch(ctx, kv, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	sawUpdating := false
	poll.Eventually(t, "the update to v1.5.3", 3*time.Minute, func() (bool, string) {
		cur := &kvv1.KubeVirt{}
		if err := c.Get(ctx, key, cur); err != nil {
			return false, err.Error()
		}
		if a := cur.Status.Condition(kvv1.KubeVirtConditionAvailable); a.Status != corev1.ConditionTrue {
			t.Fatalf("Available went %s during the update: %s", a.Status, a.Message)
		}
		if d := cur.Status.Condition(kvv1.KubeVirtConditionDegraded); d.Status == corev1.ConditionTrue {
			t.Fatalf("Degraded went True during a healthy update: %s", d.Message)
		}
		if p := cur.Status.Condition(kvv1.KubeVirtConditionProgressing); p.Status == corev1.ConditionTrue && p.Reason == "UpdateInProgress" {
			sawUpdating = true
		}
		p := cur.Status.Condition(kvv1.KubeVirtConditionProgressing)
		return cur.Status.ObservedKubeVirtVersion == "v1.5.3" && p.Status == corev1.ConditionFalse,
			fmt.Sprintf("observed %s, Progressing %s %s", cur.Status.ObservedKubeVirtVersion, p.Status, p.Message)
	})
	if !sawUpdating {
		t.Log("the update finished between two polls; Progressing=UpdateInProgress was not observed")
	}
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "virt-api"}, d); err != nil {
		t.Fatal(err)
	}
	if img := d.Spec.Template.Spec.Containers[0].Image; !strings.HasSuffix(img, ":v1.5.3") {
		t.Errorf("virt-api image %s after the update", img)
	}
	ruleAfter := ruleBefore.DeepCopy()
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "prometheus-kubevirt-rules"}, ruleAfter); err != nil {
		t.Fatal(err)
	}
	if ruleAfter.GetAnnotations()[vocab.InstallStrategyVersionAnnotation] != "v1.5.3" {
		t.Errorf("PrometheusRule still carries version %s", ruleAfter.GetAnnotations()[vocab.InstallStrategyVersionAnnotation])
	}
	alerts := func(u *unstructured.Unstructured) map[string]bool {
		out := map[string]bool{}
		groups, _, _ := unstructured.NestedSlice(u.Object, "spec", "groups")
		for _, g := range groups {
			rules, _, _ := unstructured.NestedSlice(g.(map[string]interface{}), "rules")
			for _, r := range rules {
				if a, ok := r.(map[string]interface{})["alert"].(string); ok {
					out[a] = true
				}
			}
		}
		return out
	}
	before, after := alerts(ruleBefore), alerts(ruleAfter)
	if !before["VirtApiRESTErrorsHigh"] {
		t.Error("v1.5.0's rules lack VirtApiRESTErrorsHigh, which that release has")
	}
	if after["VirtApiRESTErrorsHigh"] {
		t.Error("v1.5.3's rules still hold VirtApiRESTErrorsHigh, which that release removed")
	}
	// The strategy ConfigMaps of both versions are kept (current and
	// previous), no more — also after later passes, once the observed
	// deployment ID is the current one: force some by deleting a Service.
	svc := &corev1.Service{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "kubevirt-prometheus-metrics"}, svc); err != nil {
		t.Fatal(err)
	}
	uid := svc.UID
	if err := c.Delete(ctx, svc); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, "the Service restored", time.Minute, func() (bool, string) {
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "kubevirt-prometheus-metrics"}, svc)
		return err == nil && svc.UID != uid, fmt.Sprint(err)
	})
	kvtest.WaitRolledOut(t, c, key)
	time.Sleep(3 * time.Second)
	var cms corev1.ConfigMapList
	if err := c.List(ctx, &cms, client.InNamespace(ns), client.HasLabels{vocab.InstallStrategyLabel}); err != nil {
		t.Fatal(err)
	}
	if len(cms.Items) != 2 {
		t.Errorf("%d strategy ConfigMaps after one upgrade and later passes, want 2 (current and previous)", len(cms.Items))
	}
}

// TestUninstall: deletion is refused while a VMI exists, completes once it
// is gone, and leaves nothing virtop created.
func TestUninstall(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	c := env.Client
	ctx := context.Background()
	testenv.FakeReadiness(t, c, ns)
	operatortest.Start(t, env.Config, operator.Options{Namespace: ns})
	kv := kvtest.KubeVirt(t, ns)
	if err := c.Create(ctx, kv); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(kv)
	kvtest.WaitRolledOut(t, c, key)

	vmi := newVMI(ns, "vmi-1")
	if err := c.Create(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, kv); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, "deletion blocked by the VMI", time.Minute, func() (bool, string) {
		cur := &kvv1.KubeVirt{}
		if err := c.Get(ctx, key, cur); err != nil {
			return false, err.Error()
		}
		s := cur.Status.Condition(kvv1.KubeVirtConditionSynchronized)
		return cur.Status.Phase == kvv1.KubeVirtPhaseDeleting && s.Reason == "DeletionBlocked" && strings.Contains(s.Message, "VirtualMachineInstance"),
			fmt.Sprintf("phase %s, %+v", cur.Status.Phase, s)
	})
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "virt-api"}, &appsv1.Deployment{}); err != nil {
		t.Errorf("virt-api is gone while uninstall is blocked: %v", err)
	}
	// While the deletion waits, the control plane is kept as without it:
	// a managed object deleted meanwhile is written again (the same pass
	// renews the certificates).
	svc := &corev1.Service{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "virt-api"}, svc); err != nil {
		t.Fatal(err)
	}
	oldUID := svc.UID
	if err := c.Delete(ctx, svc); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, "Service virt-api written again while the deletion is blocked", time.Minute, func() (bool, string) {
		cur := &corev1.Service{}
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "virt-api"}, cur)
		return err == nil && cur.UID != oldUID, fmt.Sprint(err)
	})
	if cur := (&kvv1.KubeVirt{}); c.Get(ctx, key, cur) == nil {
		if s := cur.Status.Condition(kvv1.KubeVirtConditionSynchronized); cur.Status.Phase != kvv1.KubeVirtPhaseDeleting || s.Reason != "DeletionBlocked" {
			t.Errorf("while kept, the resource says phase %s, Synchronized %s %s; want Deleting, DeletionBlocked", cur.Status.Phase, s.Status, s.Reason)
		}
	}
	if err := c.Delete(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	// Generous: a CRD deleted soon after it was written can stay
	// Terminating for minutes (operator-framework/operator-controller#1437).
	poll.Eventually(t, "the KubeVirt resource gone", 8*time.Minute, func() (bool, string) {
		err := c.Get(ctx, key, &kvv1.KubeVirt{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	left := managedVersions(t, c)
	for k := range left {
		if strings.HasPrefix(k, "CustomResourceDefinitionList/") {
			// Terminating CRDs may still be listed for a moment.
			continue
		}
		if parts := strings.Split(k, "/"); len(parts) == 3 && parts[1] != ns {
			continue // another test's install, in its own namespace
		}
		t.Errorf("%s remains after uninstall", k)
	}

	// The uninstall deleted KubeVirt's CRDs: the operator, still running,
	// must stop the informers it had for those kinds, not list and watch
	// removed APIs for the rest of its life.
	poll.Eventually(t, "the cluster-wide instancetype CRD gone", 2*time.Minute, func() (bool, string) {
		err := c.Get(ctx, client.ObjectKey{Name: "virtualmachineclusterinstancetypes.instancetype.kubevirt.io"}, &apiextv1.CustomResourceDefinition{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	time.Sleep(5 * time.Second)
	before := requestsTo(t, ".instancetype.kubevirt.io")
	time.Sleep(20 * time.Second)
	if n := requestsTo(t, ".instancetype.kubevirt.io") - before; n != 0 {
		t.Errorf("%g requests to the removed instancetype APIs in 20 idle seconds", n)
	}
}

// setImageTag moves the KubeVirt resource at key to tag (a merge patch)
// and returns it as patched.
func setImageTag(t *testing.T, c client.Client, key client.ObjectKey, tag string) *kvv1.KubeVirt {
	t.Helper()
	cur := &kvv1.KubeVirt{}
	if err := c.Get(context.Background(), key, cur); err != nil {
		t.Fatal(err)
	}
	orig := cur.DeepCopy()
	cur.Spec.ImageTag = tag
	if err := c.Patch(context.Background(), cur, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	return cur
}

// newVMI is a minimal VirtualMachineInstance (not created).
func newVMI(ns, name string, finalizers ...string) *unstructured.Unstructured {
	vmi := &unstructured.Unstructured{}
	vmi.SetAPIVersion("kubevirt.io/v1")
	vmi.SetKind("VirtualMachineInstance")
	vmi.SetNamespace(ns)
	vmi.SetName(name)
	vmi.SetFinalizers(finalizers)
	_ = unstructured.SetNestedField(vmi.Object, map[string]interface{}{"domain": map[string]interface{}{"devices": map[string]interface{}{}}}, "spec")
	return vmi
}
