package doctor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
)

// gitopsCRDs installs test/crds/gitops: Flux's Kustomization, HelmRelease
// and GitRepository as generated from Flux's API modules, and a minimal
// Argo CD Application.
func gitopsCRDs(t *testing.T, env *testenv.Env) {
	t.Helper()
	root, err := testenv.RepoRoot()
	must(t, err)
	files, err := filepath.Glob(filepath.Join(root, "test", "crds", "gitops", "*.yaml"))
	must(t, err)
	if len(files) != 4 {
		t.Fatalf("test/crds/gitops holds %d CRDs, want 4: %v", len(files), files)
	}
	for _, p := range files {
		raw, err := os.ReadFile(p)
		must(t, err)
		crd := &apiextensionsv1.CustomResourceDefinition{}
		must(t, yaml.Unmarshal(raw, crd))
		if err := env.Client.Create(context.Background(), crd); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating CRD %s from %s: %v", crd.Name, p, err)
		}
		waitEstablished(t, env, crd)
	}
}

func condition(typ, status, reason, msg string, at time.Time) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": reason, "message": msg, "lastTransitionTime": at.UTC().Format(time.RFC3339)}
}

// createWithStatus creates an object, then writes its status (through the
// status subresource when the CRD has one, with the object otherwise).
func createWithStatus(t *testing.T, c client.Client, u *unstructured.Unstructured, subresource bool) {
	t.Helper()
	ctx := context.Background()
	status := u.Object["status"]
	delete(u.Object, "status")
	// Retried: the API server serves a new CRD's kind a moment after it
	// is Established.
	poll.Eventually(t, "creating "+u.GetKind()+" "+u.GetName(), 60*time.Second, func(context.Context) (bool, error) {
		err := c.Create(ctx, u.DeepCopy())
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return false, err
		}
		return true, err
	})
	must(t, c.Get(ctx, client.ObjectKeyFromObject(u), u))
	u.Object["status"] = status
	if subresource {
		must(t, c.Status().Update(ctx, u))
		return
	}
	must(t, c.Update(ctx, u))
}

func (s *staged) label(t *testing.T, obj client.Object, labels, annotations map[string]string) {
	t.Helper()
	ctx := context.Background()
	must(t, s.env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj))
	l, a := obj.GetLabels(), obj.GetAnnotations()
	if l == nil {
		l = map[string]string{}
	}
	if a == nil {
		a = map[string]string{}
	}
	for k, v := range labels {
		l[k] = v
	}
	for k, v := range annotations {
		a[k] = v
	}
	obj.SetLabels(l)
	obj.SetAnnotations(a)
	must(t, s.env.Client.Update(ctx, obj))
}

// TestEnvGitOps stages the GitOps owners doctor reads: first labels whose
// owner API is not served (no owner, an informative warning), then Flux's
// CRDs from their published schema with a Kustomization that failed to
// build from a GitRepository that cannot fetch, a healthy HelmRelease, and
// an Argo CD Application that is Degraded.
func TestEnvGitOps(t *testing.T) {
	s := stage(t)
	ctx := context.Background()
	c := s.env.Client
	flux := s.env.Namespace(t)
	kv := &kvv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "kubevirt"}}
	s.label(t, kv, map[string]string{fluxKSName: "kubevirt", fluxKSNamespace: flux}, nil)

	if _, err := s.env.Client.RESTMapper().RESTMapping(schemaGK("kustomize.toolkit.fluxcd.io", "Kustomization")); err == nil {
		t.Log("Flux's CRDs are already installed: skipping the absent-API step")
	} else {
		r := s.run(t, nil)
		expect(t, r, Healthy)
		expectCheck(t, r, CheckGitOps, Warn, "Flux Kustomization "+flux+"/kubevirt applies KubeVirt "+s.ns+"/kubevirt", "the Kustomization API is not served")
	}

	gitopsCRDs(t, s.env)
	since := time.Now().Add(-15 * time.Minute)
	repo := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
		"metadata": map[string]any{"name": "fleet", "namespace": flux},
		"spec":     map[string]any{"url": "https://git.example.com/fleet.git", "interval": "1m", "ref": map[string]any{"branch": "main"}},
		"status": map[string]any{"conditions": []any{condition("Ready", "False", "GitOperationFailed",
			"failed to checkout and determine revision: unable to clone 'https://git.example.com/fleet.git': dial tcp: i/o timeout", since)}},
	}}
	ks := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
		"metadata": map[string]any{"name": "kubevirt", "namespace": flux},
		"spec": map[string]any{"interval": "10m", "path": "./clusters/prod/kubevirt", "prune": true,
			"sourceRef": map[string]any{"kind": "GitRepository", "name": "fleet"}},
		"status": map[string]any{
			"conditions": []any{condition("Ready", "False", "BuildFailed",
				"kustomize build failed: accumulating resources: accumulation err='accumulating resources from 'https://git.example.com/base?ref=v1': Get \"https://git.example.com/base\": dial tcp: i/o timeout'", since)},
			"lastAttemptedRevision": "main@sha1:0123456789abcdef",
		},
	}}
	createWithStatus(t, c, repo, true)
	createWithStatus(t, c, ks, true)

	r := s.run(t, nil)
	expect(t, r, Degraded, "Likely cause: Flux Kustomization "+flux+"/kubevirt, which applies KubeVirt "+s.ns+"/kubevirt, is not Ready", "BuildFailed")
	expectCheck(t, r, CheckGitOps, Fail, "BuildFailed: kustomize build failed: accumulating resources",
		"it builds from GitRepository "+flux+"/fleet path ./clusters/prod/kubevirt from https://git.example.com/fleet.git",
		"its source GitRepository "+flux+"/fleet is not Ready either (GitOperationFailed")
	if g := findCheck(t, r, CheckGitOps); !strings.Contains(g.Hint, "flux reconcile kustomization kubevirt -n "+flux+" --with-source") {
		t.Errorf("hint %q", g.Hint)
	}

	// The Kustomization recovers; a HelmRelease applies the operator's
	// namespace; an Argo CD Application in another namespace (named
	// <ns>_<name> by the tracking id) applies the operator's Deployment
	// and is Degraded.
	ks.Object["status"] = map[string]any{
		"conditions":          []any{condition("Ready", "True", "ReconciliationSucceeded", "Applied revision: main@sha1:0123456789abcdef", time.Now())},
		"lastAppliedRevision": "main@sha1:0123456789abcdef",
	}
	must(t, c.Status().Update(ctx, ks))
	hr := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
		"metadata": map[string]any{"name": "virtop", "namespace": flux},
		"spec": map[string]any{"interval": "10m", "chart": map[string]any{"spec": map[string]any{
			"chart": "virtop", "sourceRef": map[string]any{"kind": "HelmRepository", "name": "virtop"}}}},
		"status": map[string]any{"conditions": []any{condition("Ready", "True", "UpgradeSucceeded", "Helm upgrade succeeded", time.Now())}, "lastAttemptedRevision": "0.1.0"},
	}}
	createWithStatus(t, c, hr, true)
	s.label(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.ns}}, map[string]string{fluxHRName: "virtop", fluxHRNamespace: flux}, nil)

	argo := s.env.Namespace(t)
	app := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
		"metadata": map[string]any{"name": "virtop-operator", "namespace": argo},
		"spec": map[string]any{"project": "default",
			"source":      map[string]any{"repoURL": "https://git.example.com/fleet.git", "path": "virtop", "targetRevision": "main"},
			"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": s.ns}},
		"status": map[string]any{
			"health":         map[string]any{"status": "Degraded", "message": "Deployment virt-operator has exceeded its progress deadline"},
			"sync":           map[string]any{"status": "Synced", "revision": "0123456789abcdef"},
			"operationState": map[string]any{"phase": "Succeeded", "message": "successfully synced (all tasks run)", "finishedAt": time.Now().UTC().Format(time.RFC3339)},
		},
	}}
	createWithStatus(t, c, app, false)
	op := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "virt-operator"}}
	s.label(t, op, nil, map[string]string{argoTrackingID: argo + "_virtop-operator:apps/Deployment:" + s.ns + "/virt-operator"})

	r = s.run(t, nil)
	expect(t, r, Degraded, "Likely cause: Argo CD Application "+argo+"/virtop-operator, which applies Deployment "+s.ns+"/virt-operator, is Degraded")
	expectCheck(t, r, CheckGitOps, Fail,
		"Deployment virt-operator has exceeded its progress deadline",
		"its source: https://git.example.com/fleet.git path virtop at main",
		"Flux Kustomization "+flux+"/kubevirt applies KubeVirt "+s.ns+"/kubevirt: Ready, revision main@sha1:0123456789abcdef",
		"Flux HelmRelease "+flux+"/virtop applies Namespace "+s.ns+": Ready, revision 0.1.0; it builds from HelmRepository "+flux+"/virtop chart virtop")

	// Argo CD's instance label names the Application without a
	// namespace: doctor finds it by name in any namespace.
	s.label(t, op, map[string]string{argoInstanceLabel: "virtop-operator"}, map[string]string{argoTrackingID: ""})
	r = s.run(t, nil)
	expectCheck(t, r, CheckGitOps, Fail, "Argo CD Application "+argo+"/virtop-operator, which applies Deployment "+s.ns+"/virt-operator, is Degraded")
}

func schemaGK(group, kind string) schema.GroupKind { return schema.GroupKind{Group: group, Kind: kind} }
