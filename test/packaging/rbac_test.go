package packaging

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/operator"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/testing/kvtest"
	"github.com/virtop-dev/virtop/internal/testing/operatortest"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
	"github.com/virtop-dev/virtop/internal/testing/testreleases"
	"github.com/virtop-dev/virtop/internal/tools/podless"
	"github.com/virtop-dev/virtop/internal/uninstall"
	"github.com/virtop-dev/virtop/internal/vocab"
)

const operatorSA = "kubevirt-operator"

// repoFile reads a file relative to the repository root.
func repoFile(t *testing.T, rel string) []byte {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func decodeInto(t *testing.T, rel string, into any) {
	t.Helper()
	if err := yaml.UnmarshalStrict(repoFile(t, rel), into); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
}

// installOperatorRBAC creates, as an administrator, the ServiceAccounts,
// roles and bindings of config/rbac for the operator of namespace ns and
// its strategy Job, as the release manifests do.
func installOperatorRBAC(t *testing.T, c client.Client, ns string) {
	t.Helper()
	ctx := context.Background()
	var sa corev1.ServiceAccount
	var cr rbacv1.ClusterRole
	var crb rbacv1.ClusterRoleBinding
	var role rbacv1.Role
	var rb rbacv1.RoleBinding
	decodeInto(t, "config/rbac/service_account.yaml", &sa)
	decodeInto(t, "config/rbac/cluster_role.yaml", &cr)
	decodeInto(t, "config/rbac/cluster_role_binding.yaml", &crb)
	decodeInto(t, "config/rbac/role.yaml", &role)
	decodeInto(t, "config/rbac/role_binding.yaml", &rb)
	sa.Namespace, role.Namespace, rb.Namespace = ns, ns, ns
	// The ClusterRole and its binding are cluster-wide: one per test run.
	for i := range crb.Subjects {
		crb.Subjects[i].Namespace = ns
	}
	for i := range rb.Subjects {
		rb.Subjects[i].Namespace = ns
	}
	var jobSA corev1.ServiceAccount
	var jobRole rbacv1.Role
	var jobRB rbacv1.RoleBinding
	decodeInto(t, "config/rbac/strategy_job_service_account.yaml", &jobSA)
	decodeInto(t, "config/rbac/strategy_job_role.yaml", &jobRole)
	decodeInto(t, "config/rbac/strategy_job_role_binding.yaml", &jobRB)
	jobSA.Namespace, jobRole.Namespace, jobRB.Namespace = ns, ns, ns
	for i := range jobRB.Subjects {
		jobRB.Subjects[i].Namespace = ns
	}
	for _, o := range []client.Object{&sa, &cr, &crb, &role, &rb, &jobSA, &jobRole, &jobRB} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
	t.Cleanup(func() {
		for _, o := range []client.Object{&cr, &crb} {
			_ = c.Delete(context.Background(), o)
		}
	})
}

// impersonating returns a client config acting as the operator's
// ServiceAccount, with the groups the API server gives a ServiceAccount
// token.
func impersonating(cfg *rest.Config, ns string) *rest.Config {
	return impersonatingSA(cfg, ns, operatorSA)
}

// impersonatingSA returns a client config acting as ServiceAccount sa of
// namespace ns.
func impersonatingSA(cfg *rest.Config, ns, sa string) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Impersonate = rest.ImpersonationConfig{
		UserName: serviceAccountUser(ns, sa),
		Groups:   serviceAccountGroups(ns),
	}
	return out
}

func serviceAccountUser(ns, sa string) string {
	return fmt.Sprintf("system:serviceaccount:%s:%s", ns, sa)
}

// serviceAccountGroups are the groups the API server gives a
// ServiceAccount token of namespace ns.
func serviceAccountGroups(ns string) []string {
	return []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
}

// kstatusOf computes the KubeVirt resource's status as kstatus (Flux, the
// cli-utils appliers) reads it.
func kstatusOf(t *testing.T, kv *kvv1.KubeVirt) *status.Result {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(kv)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion("kubevirt.io/v1")
	u.SetKind("KubeVirt")
	res, err := status.Compute(u)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// failOnForbidden fails the test when anything the operator did was
// refused: its status, its events or its log.
func failOnForbidden(t *testing.T, c client.Client, kv *kvv1.KubeVirt, phase string) {
	t.Helper()
	for _, cond := range kv.Status.Conditions {
		if strings.Contains(strings.ToLower(cond.Message), "forbidden") {
			t.Fatalf("%s: condition %s=%s %s: %s", phase, cond.Type, cond.Status, cond.Reason, cond.Message)
		}
	}
	var evs eventsv1.EventList
	if err := c.List(context.Background(), &evs, client.InNamespace(kv.Namespace)); err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		if strings.Contains(strings.ToLower(e.Note), "forbidden") {
			t.Fatalf("%s: event %s %s: %s", phase, e.Reason, e.Regarding.Name, e.Note)
		}
	}
	if lines := forbiddenLines(); len(lines) > 0 {
		t.Fatalf("%s: the operator was refused %d time(s); first: %s", phase, len(lines), lines[0])
	}
}

// TestLeastPrivilegeRBAC runs the operator as its ServiceAccount, holding
// only the roles of config/rbac, through an install of v1.5.0, an upgrade
// to v1.5.3 and an uninstall. Any refused request fails it. Along the way
// it checks what kstatus reads from the KubeVirt status: in progress until
// rolled out, current when Available.
func TestLeastPrivilegeRBAC(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	c := env.Client
	ctx := context.Background()
	installOperatorRBAC(t, c, ns)

	// The operator cannot do what its roles do not grant.
	asOperator, err := client.New(impersonating(env.Config, ns), client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := asOperator.List(ctx, &schedulingv1.PriorityClassList{}); !apierrors.IsForbidden(err) {
		t.Fatalf("listing PriorityClasses as the operator: %v, want forbidden (is impersonation in effect?)", err)
	}
	checkSecretsRefused(t, c, asOperator, ns)
	checkInstallNamespaceKinds(t, c, asOperator, ns)
	checkNamedClusterKinds(t, c, asOperator)

	testenv.FakeReadiness(t, c, ns)
	operatortest.Start(t, impersonating(env.Config, ns), operator.Options{Namespace: ns, LeaderElect: true, NodeCleanupTimeout: 5 * time.Second})

	kv := kvtest.KubeVirt(t, ns, func(kv *kvv1.KubeVirt) { kv.Spec.ImageTag = "v1.5.0" })
	if err := c.Create(ctx, kv); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(kv)

	// Install.
	var inProgressSeen, earlyCurrent bool
	poll.Eventually(t, "install: Available", 3*time.Minute, func() (bool, string) {
		cur := &kvv1.KubeVirt{}
		if err := c.Get(ctx, key, cur); err != nil {
			return false, err.Error()
		}
		failOnForbidden(t, c, cur, "install")
		a := cur.Status.Condition(kvv1.KubeVirtConditionAvailable)
		p := cur.Status.Condition(kvv1.KubeVirtConditionProgressing)
		done := a.Status == corev1.ConditionTrue && p.Status == corev1.ConditionFalse
		ks := kstatusOf(t, cur)
		if !done {
			switch ks.Status {
			case status.InProgressStatus:
				inProgressSeen = true
			case status.CurrentStatus:
				earlyCurrent = true
			}
		}
		if done {
			kv = cur
		}
		return done, fmt.Sprintf("phase %s, Available %s, Progressing %s: %s", cur.Status.Phase, a.Status, p.Status, p.Message)
	})
	if kv.Status.ObservedKubeVirtVersion != "v1.5.0" {
		t.Fatalf("observed version %q after install", kv.Status.ObservedKubeVirtVersion)
	}
	if ks := kstatusOf(t, kv); ks.Status != status.CurrentStatus {
		t.Errorf("kstatus of an Available KubeVirt: %s (%s), want Current", ks.Status, ks.Message)
	}
	t.Logf("install: kstatus InProgress seen before Available: %v; Current before Available: %v", inProgressSeen, earlyCurrent)
	// The monitoring objects went through the ClusterRole's rules by name.
	for _, kind := range []string{"ServiceMonitor", "PrometheusRule"} {
		l := &unstructured.UnstructuredList{}
		l.SetAPIVersion("monitoring.coreos.com/v1")
		l.SetKind(kind + "List")
		if err := c.List(ctx, l, client.MatchingLabels{vocab.ManagedByLabel: vocab.ManagedByValue}); err != nil {
			t.Fatal(err)
		}
		if len(l.Items) == 0 {
			t.Errorf("install: no %s applied as the operator", kind)
		}
	}
	installGap := earlyCurrent

	// Upgrade.
	orig := kv.DeepCopy()
	kv.Spec.ImageTag = "v1.5.3"
	if err := c.Patch(ctx, kv, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, "upgrade: v1.5.3 rolled out", 3*time.Minute, func() (bool, string) {
		cur := &kvv1.KubeVirt{}
		if err := c.Get(ctx, key, cur); err != nil {
			return false, err.Error()
		}
		failOnForbidden(t, c, cur, "upgrade")
		p := cur.Status.Condition(kvv1.KubeVirtConditionProgressing)
		done := cur.Status.ObservedKubeVirtVersion == "v1.5.3" && p.Status == corev1.ConditionFalse
		if ks := kstatusOf(t, cur); !done && ks.Status == status.CurrentStatus {
			t.Errorf("upgrade: kstatus Current before v1.5.3 is rolled out (observed %s, Progressing %s)", cur.Status.ObservedKubeVirtVersion, p.Status)
		}
		if done {
			kv = cur
		}
		return done, fmt.Sprintf("observed %s, Progressing %s %s", cur.Status.ObservedKubeVirtVersion, p.Status, p.Message)
	})
	if ks := kstatusOf(t, kv); ks.Status != status.CurrentStatus {
		t.Errorf("kstatus after the upgrade: %s (%s), want Current", ks.Status, ks.Message)
	}

	// The rest of the catalog, one minor version at a time, the last hop
	// with every feature gate that adds cluster-scoped objects listed:
	// every ClusterRole, binding, CRD, webhook, admission policy and
	// APIService a release renders goes through the ClusterRole's named
	// rules (make test-all; make test stops at v1.5.3).
	if testreleases.All(t) {
		kv = walkCatalog(t, c, kv, []string{"v1.6.6", "v1.7.4", "v1.8.4", "v1.9.0"})
	}

	// Uninstall, with a node virt-handler ran on: the operator's roles let
	// it run the node's cleanup Job, read its pods and virt-handler's, and
	// take the heartbeat off the node (envtest runs no Job: it is given up
	// after the 5 s bound).
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: ns + "-node", Annotations: map[string]string{uninstall.HeartbeatAnnotation: "2026-12-06T10:00:00Z"}}}
	if err := c.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), node) })
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	if err := c.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, kv); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, "uninstall: the KubeVirt resource gone", 3*time.Minute, func() (bool, string) {
		cur := &kvv1.KubeVirt{}
		err := c.Get(ctx, key, cur)
		if err == nil {
			failOnForbidden(t, c, cur, "uninstall")
			return false, fmt.Sprintf("phase %s", cur.Status.Phase)
		}
		return apierrors.IsNotFound(err), err.Error()
	})
	var deps appsv1.DeploymentList
	if err := c.List(ctx, &deps, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(deps.Items) > 0 {
		t.Errorf("%d Deployments remain after uninstall, first %s", len(deps.Items), deps.Items[0].Name)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(node), node); err != nil {
		t.Fatal(err)
	}
	if uninstall.NeedsCleanup(node) {
		t.Error("uninstall: the node still carries virt-handler's heartbeat")
	}
	poll.Eventually(t, "uninstall: the node's cleanup Job run and given up", time.Minute, func() (bool, string) {
		var list eventsv1.EventList
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		var notes []string
		for _, e := range list.Items {
			if e.Reason == "NodeNotCleaned" || e.Reason == "NodeCleaned" {
				notes = append(notes, e.Note)
			}
		}
		want := "Node " + node.Name + ": its cleanup Job " + uninstall.NodeCleanupJobName(node.Name) + " did not finish in 5s"
		return len(notes) == 1 && notes[0] == want, fmt.Sprintf("node events %q, want one %q", notes, want)
	})
	var jobs batchv1.JobList
	if err := c.List(ctx, &jobs, client.InNamespace(ns), client.MatchingLabels{vocab.AppComponentLabel: uninstall.NodeCleanupComponent}); err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs.Items {
		if j.DeletionTimestamp == nil {
			t.Errorf("uninstall: the node cleanup Job %s was not deleted", j.Name)
		}
	}
	if lines := forbiddenLines(); len(lines) > 0 {
		t.Fatalf("the operator was refused %d time(s); first: %s", len(lines), lines[0])
	}
	if installGap {
		t.Log("KNOWN GAP: during the first install kstatus reads Current before Available: the status has no " +
			"Reconciling condition and no observedGeneration until rolled out (see docs/gitops.md)")
	}
}

// walkCatalog upgrades kv hop by hop to each of versions, failing on any
// refused request; the last hop lists every feature gate the release's
// gated objects and variants name, so that their cluster-scoped objects
// (virt-launcher-pod-mutator, the Plugins admission policies) are applied
// under the ClusterRole's names too. It returns the KubeVirt resource
// after the last hop.
func walkCatalog(t *testing.T, c client.Client, kv *kvv1.KubeVirt, versions []string) *kvv1.KubeVirt {
	t.Helper()
	ctx := context.Background()
	key := client.ObjectKeyFromObject(kv)
	for i, v := range versions {
		cur := &kvv1.KubeVirt{}
		if err := c.Get(ctx, key, cur); err != nil {
			t.Fatal(err)
		}
		orig := cur.DeepCopy()
		cur.Spec.ImageTag = v
		if i == len(versions)-1 {
			rel, ok := release.Builtin().Lookup(v)
			if !ok {
				t.Fatalf("%s not in the catalog", v)
			}
			dc := cur.Spec.Configuration.DeveloperConfiguration
			if dc == nil {
				dc = &kvv1.DeveloperConfiguration{}
				cur.Spec.Configuration.DeveloperConfiguration = dc
			}
			for _, cond := range append(gatedConditions(rel.GatedObjects), variantConditions(rel.Variants)...) {
				if cond.FeatureGate != "" && !cond.WhileOff && !slices.Contains(dc.FeatureGates, cond.FeatureGate) {
					dc.FeatureGates = append(dc.FeatureGates, cond.FeatureGate)
				}
			}
			t.Logf("%s with feature gates %v", v, dc.FeatureGates)
		}
		// The webhooks of the new version without a backend: Ignore.
		cur.Spec.CustomizeComponents.Patches = nil
		if err := podless.Prepare(cur); err != nil {
			t.Fatal(err)
		}
		if err := c.Patch(ctx, cur, client.MergeFrom(orig)); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		poll.Eventually(t, "upgrade: "+v+" rolled out", 5*time.Minute, func() (bool, string) {
			got := &kvv1.KubeVirt{}
			if err := c.Get(ctx, key, got); err != nil {
				return false, err.Error()
			}
			failOnForbidden(t, c, got, "upgrade to "+v)
			a := got.Status.Condition(kvv1.KubeVirtConditionAvailable)
			p := got.Status.Condition(kvv1.KubeVirtConditionProgressing)
			done := got.Status.ObservedKubeVirtVersion == v && p.Status == corev1.ConditionFalse && a.Status == corev1.ConditionTrue
			if done {
				kv = got
			}
			return done, fmt.Sprintf("observed %s, Available %s, Progressing %s %s", got.Status.ObservedKubeVirtVersion, a.Status, p.Status, p.Message)
		})
		t.Logf("MEASURE upgrade to %s as the operator's ServiceAccount: rolled out after %s", v, time.Since(start).Round(100*time.Millisecond))
	}
	// The gated cluster-scoped objects were applied through the names.
	for _, o := range []client.Object{
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "virt-launcher-pod-mutator"}},
		&admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt-plugin-validation-policy"}},
		&admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt-plugin-validation-binding"}},
	} {
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			t.Errorf("%s: %T %s: %v", versions[len(versions)-1], o, o.GetName(), err)
		}
	}
	return kv
}

func gatedConditions(gs []release.GatedObject) []release.Condition {
	var out []release.Condition
	for _, g := range gs {
		out = append(out, g.Condition)
	}
	return out
}

func variantConditions(vs []release.Variant) []release.Condition {
	var out []release.Condition
	for _, v := range vs {
		out = append(out, v.Condition)
	}
	return out
}

// checkNamedClusterKinds: the operator may list and watch every
// ClusterRole, admission webhook configuration and CRD, but read, write
// and delete only those KubeVirt's releases render (by name): not a
// tenant's, not its own role.
func checkNamedClusterKinds(t *testing.T, admin, asOperator client.Client) {
	t.Helper()
	ctx := context.Background()
	tenantRole := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "tenant-reader-" + strings.ToLower(rand.String(5)),
		Labels: map[string]string{vocab.ManagedByLabel: vocab.ManagedByValue}}}
	if err := admin.Create(ctx, tenantRole); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), tenantRole) })
	if err := asOperator.List(ctx, &rbacv1.ClusterRoleList{}); err != nil {
		t.Errorf("listing ClusterRoles as the operator: %v", err)
	}
	if err := asOperator.List(ctx, &admissionregistrationv1.ValidatingWebhookConfigurationList{}); err != nil {
		t.Errorf("listing ValidatingWebhookConfigurations as the operator: %v", err)
	}
	// A rendered name is readable (absent yet: not found, not forbidden).
	if err := asOperator.Get(ctx, client.ObjectKey{Name: "kubevirt-controller"}, &rbacv1.ClusterRole{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("reading ClusterRole kubevirt-controller as the operator: %v, want it read or not found", err)
	}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`))
	for _, o := range []client.Object{
		tenantRole,
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "cluster-admin"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: vocab.OperatorRBACName}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: vocab.OperatorRBACName}},
		&apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "kubevirts.kubevirt.io"}},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "tenant-policy"}},
	} {
		kind := fmt.Sprintf("%T %s", o, o.GetName())
		// get on every CRD is KubeVirt's grant (kubevirt-apiserver,
		// kubevirt-controller, kubevirt-handler), which the operator must
		// hold: only writes are checked there.
		_, isCRD := o.(*apiextensionsv1.CustomResourceDefinition)
		if err := asOperator.Get(ctx, client.ObjectKeyFromObject(o), o.DeepCopyObject().(client.Object)); !isCRD && !apierrors.IsForbidden(err) {
			t.Errorf("reading %s as the operator: %v, want forbidden", kind, err)
		}
		if err := asOperator.Patch(ctx, o.DeepCopyObject().(client.Object), patch); !apierrors.IsForbidden(err) {
			t.Errorf("patching %s as the operator: %v, want forbidden", kind, err)
		}
		if err := asOperator.Delete(ctx, o.DeepCopyObject().(client.Object)); !apierrors.IsForbidden(err) {
			t.Errorf("deleting %s as the operator: %v, want forbidden", kind, err)
		}
	}
}

// checkInstallNamespaceKinds: the kinds every release renders in the
// install namespace only, and that no KubeVirt ClusterRole grants in every
// namespace (ServiceAccounts, Deployments, Roles; DaemonSets but for list,
// Jobs but for create, get and delete), are the Role's; ServiceMonitors are
// the ClusterRole's by name only: the operator can read,
// write and delete them there, not in a tenant's namespace, where its
// ClusterRole granted them before.
func checkInstallNamespaceKinds(t *testing.T, admin, asOperator client.Client, ns string) {
	t.Helper()
	ctx := context.Background()
	tenantNS := testenv.Get(t).Namespace(t)
	labels := map[string]string{vocab.ManagedByLabel: vocab.ManagedByValue}
	dep := func(ns string) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "tenant-app", Namespace: ns, Labels: labels},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.com/c:1"}}}}}}
	}
	tenantDep := dep(tenantNS)
	tenantSA := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "tenant-account", Namespace: tenantNS, Labels: labels}}
	tenantDS := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "tenant-agent", Namespace: tenantNS, Labels: labels},
		Spec: appsv1.DaemonSetSpec{Selector: tenantDep.Spec.Selector, Template: tenantDep.Spec.Template}}
	tenantRole := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "tenant-role", Namespace: tenantNS, Labels: labels}}
	for _, o := range []client.Object{tenantDep, tenantSA, tenantDS, tenantRole} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	refused := func(what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s as the operator: %v, want forbidden", what, err)
		}
	}
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"changed":"by-the-operator"}}}`))
	refused("listing Deployments in every namespace", asOperator.List(ctx, &appsv1.DeploymentList{}))
	refused("reading a Deployment in another namespace", asOperator.Get(ctx, client.ObjectKeyFromObject(tenantDep), &appsv1.Deployment{}))
	refused("patching a Deployment in another namespace", asOperator.Patch(ctx, tenantDep.DeepCopy(), patch))
	refused("deleting a Deployment in another namespace", asOperator.Delete(ctx, tenantDep.DeepCopy()))
	refused("creating a Deployment in another namespace", asOperator.Create(ctx, dep(tenantNS).DeepCopy()))
	refused("listing ServiceAccounts in every namespace", asOperator.List(ctx, &corev1.ServiceAccountList{}))
	refused("patching a ServiceAccount in another namespace", asOperator.Patch(ctx, tenantSA.DeepCopy(), patch))
	refused("deleting a ServiceAccount in another namespace", asOperator.Delete(ctx, tenantSA.DeepCopy()))
	refused("reading a DaemonSet in another namespace", asOperator.Get(ctx, client.ObjectKeyFromObject(tenantDS), &appsv1.DaemonSet{}))
	refused("patching a DaemonSet in another namespace", asOperator.Patch(ctx, tenantDS.DeepCopy(), patch))
	refused("deleting a DaemonSet in another namespace", asOperator.Delete(ctx, tenantDS.DeepCopy()))
	refused("listing Jobs in every namespace", asOperator.List(ctx, &batchv1.JobList{}))
	refused("listing Roles in every namespace", asOperator.List(ctx, &rbacv1.RoleList{}))
	refused("patching a Role in another namespace", asOperator.Patch(ctx, tenantRole.DeepCopy(), patch))
	refused("deleting a Role in another namespace", asOperator.Delete(ctx, tenantRole.DeepCopy()))
	// ServiceMonitors and PrometheusRules: listed anywhere, but read,
	// changed and deleted only under virtop's name.
	sm := &unstructured.Unstructured{}
	sm.SetAPIVersion("monitoring.coreos.com/v1")
	sm.SetKind("ServiceMonitor")
	sm.SetNamespace(tenantNS)
	sm.SetName("tenant-monitor")
	sm.SetLabels(labels)
	_ = unstructured.SetNestedField(sm.Object, map[string]interface{}{"selector": map[string]interface{}{"matchLabels": map[string]interface{}{"app": "x"}}, "endpoints": []interface{}{map[string]interface{}{"port": "metrics"}}}, "spec")
	if err := admin.Create(ctx, sm); err != nil {
		t.Fatal(err)
	}
	refused("reading a tenant's ServiceMonitor", asOperator.Get(ctx, client.ObjectKeyFromObject(sm), sm.DeepCopy()))
	refused("patching a tenant's ServiceMonitor", asOperator.Patch(ctx, sm.DeepCopy(), patch))
	refused("deleting a tenant's ServiceMonitor", asOperator.Delete(ctx, sm.DeepCopy()))
	// In the install namespace the Role grants them.
	mine := dep(ns)
	if err := asOperator.Create(ctx, mine); err != nil {
		t.Errorf("creating a Deployment in the install namespace as the operator: %v", err)
	} else if err := asOperator.Delete(ctx, mine); err != nil {
		t.Errorf("deleting a Deployment in the install namespace as the operator: %v", err)
	}
	for _, l := range []client.ObjectList{&appsv1.DeploymentList{}, &appsv1.DaemonSetList{}, &corev1.ServiceAccountList{}, &batchv1.JobList{}, &rbacv1.RoleList{}} {
		if err := asOperator.List(ctx, l, client.InNamespace(ns)); err != nil {
			t.Errorf("listing %T in the install namespace as the operator: %v", l, err)
		}
	}
}

// checkSecretsRefused: the operator reads and writes Secrets only in its
// install namespace, and there changes and deletes only KubeVirt's, by
// name. A tenant's Secret, elsewhere or in the install namespace (with
// virtop's label, even), is out of its reach.
func checkSecretsRefused(t *testing.T, admin, asOperator client.Client, ns string) {
	t.Helper()
	ctx := context.Background()
	tenantNS := testenv.Get(t).Namespace(t)
	labels := map[string]string{vocab.ManagedByLabel: vocab.ManagedByValue}
	elsewhere := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tenant-credentials", Namespace: tenantNS, Labels: labels}}
	inInstallNS := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tenant-credentials", Namespace: ns, Labels: labels}}
	for _, s := range []*corev1.Secret{elsewhere, inInstallNS} {
		s.StringData = map[string]string{"password": "hunter2"}
		if err := admin.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	refused := func(what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s as the operator: %v, want forbidden", what, err)
		}
	}
	refused("listing Secrets in every namespace", asOperator.List(ctx, &corev1.SecretList{}))
	refused("listing Secrets in another namespace", asOperator.List(ctx, &corev1.SecretList{}, client.InNamespace(tenantNS)))
	refused("reading a Secret in another namespace", asOperator.Get(ctx, client.ObjectKeyFromObject(elsewhere), &corev1.Secret{}))
	refused("deleting a Secret in another namespace", asOperator.Delete(ctx, elsewhere.DeepCopy()))
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"stringData":{"password":"changed"}}`))
	refused("patching a tenant's Secret in the install namespace", asOperator.Patch(ctx, inInstallNS.DeepCopy(), patch))
	refused("deleting a tenant's Secret in the install namespace", asOperator.Delete(ctx, inInstallNS.DeepCopy()))
}
