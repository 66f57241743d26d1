package adopt

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	apiregv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/certs"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/plan"
	"github.com/virtop-dev/virtop/internal/scheme"
	"github.com/virtop-dev/virtop/internal/strategy"
	crdwait "github.com/virtop-dev/virtop/internal/testing/crds"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/tools/devcluster"
	"github.com/virtop-dev/virtop/internal/vocab"
	"github.com/virtop-dev/virtop/test/e2e/framework"
)

// upstreamDir is where upstream's own strategies are
// (../shared/upstream-strategies beside the checkout, or
// VIRTOP_UPSTREAM_STRATEGIES).
func upstreamDir(t *testing.T, repo string) string {
	t.Helper()
	dir := os.Getenv("VIRTOP_UPSTREAM_STRATEGIES")
	if dir == "" {
		dir = filepath.Join(repo, "..", "shared", "upstream-strategies")
	}
	if _, err := os.Stat(filepath.Join(dir, "v1.5.3", "strategy.yaml.gz")); err != nil {
		t.Skipf("no upstream reference strategies: %v (set VIRTOP_UPSTREAM_STRATEGIES to their directory)", err)
	}
	return dir
}

// installation is what upstream's operator left on the cluster.
type installation struct {
	version string
	// id is upstream's deployment ID (its deployment-config.json's id).
	id string
	// objects are every object created, in creation order.
	objects []created
	// strategyCM is upstream's strategy ConfigMap (a generated name).
	strategyCM string
}

// installByUpstream puts on the cluster what upstream's operator leaves
// after installing version for kv (spec already created): every object of
// upstream's own strategy for the release as upstream applies them (its
// labels and install-strategy annotations, pod-template labels, placement,
// the resource's customizeComponents patches, certificates issued, each
// created by upstream's field manager virt-operator), its strategy
// ConfigMap (generated name, gzip+base64, upstream's annotations), its
// operator Deployment virt-operator, and the KubeVirt status upstream
// writes (Deployed, its deployment ID, Available). Kinds the cluster does
// not serve (OpenShift's Route and SecurityContextConstraints) are left
// out, as upstream leaves them out on Kubernetes.
func installByUpstream(t *testing.T, c client.Client, dir string, kv *kvv1.KubeVirt) *installation {
	t.Helper()
	ctx := context.Background()
	version := kv.Spec.ImageTag
	raw, err := os.ReadFile(filepath.Join(dir, version, "strategy.yaml.gz"))
	if err != nil {
		t.Fatal(err)
	}
	dcRaw, err := os.ReadFile(filepath.Join(dir, version, "deployment-config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dc struct {
		ID       string `json:"id"`
		Registry string `json:"registry"`
	}
	if err := json.Unmarshal(dcRaw, &dc); err != nil || dc.ID == "" {
		t.Fatalf("%s/deployment-config.json: id %q, %v", version, dc.ID, err)
	}
	inst := &installation{version: version, id: dc.ID}

	objs, err := strategy.ReadManifests(raw)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.FromKubeVirt(kv, config.Settings{Namespace: kv.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	objs, err = strategy.AsAppliedByUpstream(objs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	objs, err = strategy.Customize(objs, cfg.Customize.Patches)
	if err != nil {
		t.Fatal(err)
	}
	objs, err = issueCertificates(objs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		stampUpstreamID(o, dc.ID)
		if ds, ok := o.(*appsv1.DaemonSet); ok {
			// A fresh install by upstream's operator puts virt-handler
			// at the staged TLS rollout's final form at once (releases
			// whose virt-handler validates its migration peers).
			plan.StageHandlerTLS(ds, nil)
		}
	}

	// CRDs first, then what their kinds hold, webhooks and APIServices
	// last (the API server would call them for the objects before).
	var crds, hooks, rest []client.Object
	for _, o := range objs {
		switch o.(type) {
		case *apiextv1.CustomResourceDefinition:
			crds = append(crds, o)
		case *admissionv1.ValidatingWebhookConfiguration, *admissionv1.MutatingWebhookConfiguration, *apiregv1.APIService:
			hooks = append(hooks, o)
		default:
			rest = append(rest, o)
		}
	}
	for _, o := range crds {
		inst.create(t, c, o)
	}
	for _, o := range crds {
		crdwait.WaitServed(t, c, framework.DefaultTimeout, o.(*apiextv1.CustomResourceDefinition))
	}
	for _, o := range append(rest, hooks...) {
		inst.create(t, c, o)
	}

	// Upstream's strategy ConfigMap, as its operator writes it.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Namespace:    kv.Namespace,
		GenerateName: vocab.InstallStrategyConfigMapPrefix,
		Labels:       map[string]string{vocab.InstallStrategyLabel: "", vocab.ManagedByLabel: vocab.UpstreamManagedByValue},
		Annotations: map[string]string{
			vocab.InstallStrategyVersionAnnotation:    version,
			vocab.InstallStrategyRegistryAnnotation:   dc.Registry,
			vocab.InstallStrategyIdentifierAnnotation: dc.ID,
		},
	}, Data: map[string]string{vocab.ManifestsKey: base64.StdEncoding.EncodeToString(raw)}}
	inst.create(t, c, cm)
	inst.strategyCM = cm.Name

	// Upstream's operator, running.
	op := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: kv.Namespace, Name: vocab.VirtOperator,
		Labels: map[string]string{vocab.AppLabel: vocab.VirtOperator}}}
	op.Spec.Replicas = ptr.To[int32](2)
	op.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{vocab.AppLabel: vocab.VirtOperator}}
	op.Spec.Template.Labels = map[string]string{vocab.AppLabel: vocab.VirtOperator, "name": vocab.VirtOperator}
	op.Spec.Template.Spec.ServiceAccountName = "kubevirt-operator"
	op.Spec.Template.Spec.Containers = []corev1.Container{{Name: vocab.VirtOperator, Image: dc.Registry + "/virt-operator:" + version}}
	if err := c.Create(ctx, op, client.FieldOwner("kubectl-client-side-apply")); err != nil {
		t.Fatalf("upstream's operator Deployment: %v", err)
	}

	// The status upstream's operator writes once the install is done.
	live := &kvv1.KubeVirt{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(kv), live); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	cond := func(typ kvv1.KubeVirtConditionType, st corev1.ConditionStatus, reason, msg string) kvv1.KubeVirtCondition {
		return kvv1.KubeVirtCondition{Type: typ, Status: st, Reason: reason, Message: msg, LastProbeTime: now, LastTransitionTime: now}
	}
	live.Status = kvv1.KubeVirtStatus{
		Phase:                    kvv1.KubeVirtPhaseDeployed,
		OperatorVersion:          version,
		ObservedKubeVirtVersion:  version,
		ObservedKubeVirtRegistry: dc.Registry,
		ObservedDeploymentID:     dc.ID,
		ObservedDeploymentConfig: string(dcRaw),
		TargetKubeVirtVersion:    version,
		TargetKubeVirtRegistry:   dc.Registry,
		TargetDeploymentID:       dc.ID,
		TargetDeploymentConfig:   string(dcRaw),
		Conditions: []kvv1.KubeVirtCondition{
			cond(kvv1.KubeVirtConditionAvailable, corev1.ConditionTrue, kvv1.ReasonAllComponentsReady, "All components are ready."),
			cond(kvv1.KubeVirtConditionProgressing, corev1.ConditionFalse, kvv1.ReasonAllComponentsReady, "All components are ready."),
			cond(kvv1.KubeVirtConditionDegraded, corev1.ConditionFalse, kvv1.ReasonAllComponentsReady, "All components are ready."),
			cond(kvv1.KubeVirtConditionCreated, corev1.ConditionTrue, kvv1.ReasonAllResourcesCreated, "All resources were created."),
		},
	}
	if err := c.Status().Update(ctx, live); err != nil {
		t.Fatalf("upstream's KubeVirt status: %v", err)
	}

	// Upstream's workloads run (kwok runs their pods as fakes).
	for _, o := range inst.objects {
		switch o.key.Kind {
		case "Deployment":
			framework.Require(t).WaitDeploymentAvailable(t, o.key.Namespace, o.key.Name, 2*time.Minute)
		case "DaemonSet":
			framework.Require(t).WaitDaemonSetReady(t, o.key.Namespace, o.key.Name, 2*time.Minute)
		}
	}
	return inst
}

// created is one object upstream's operator created.
type created struct {
	gvk schema.GroupVersionKind
	key strategy.Key
	uid types.UID
}

// get reads the live object (nil when it is gone).
func (o created) get(ctx context.Context, c client.Client) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(o.gvk)
	err := c.Get(ctx, client.ObjectKey{Namespace: o.key.Namespace, Name: o.key.Name}, u)
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return nil, nil
	}
	return u, err
}

// create creates o as upstream's operator does (an update-style write of
// its field manager) and keeps it; a kind the cluster does not serve is
// skipped.
func (inst *installation) create(t *testing.T, c client.Client, o client.Object) {
	t.Helper()
	gvk, err := apiutil.GVKForObject(o, scheme.Scheme)
	if err != nil {
		t.Fatal(err)
	}
	key := strategy.Key{Group: gvk.Group, Kind: gvk.Kind, Namespace: o.GetNamespace(), Name: o.GetName()}
	err = c.Create(context.Background(), o, client.FieldOwner(vocab.UpstreamFieldManager))
	switch {
	case meta.IsNoMatchError(err):
		t.Logf("left out %s: the cluster does not serve its kind", key)
		return
	case err != nil:
		t.Fatalf("creating upstream's %s: %v", key, err)
	}
	key.Name = o.GetName() // a generated name
	inst.objects = append(inst.objects, created{gvk: gvk, key: key, uid: o.GetUID()})
}

// issueCertificates fills the certificate Secrets, CA ConfigMaps and
// caBundles as upstream's operator does when it applies them. The
// certificates newer releases add are described to virtop's issuer by an
// annotation on virtop's own Secrets (vocab.CertificateAnnotation): it
// is lent to upstream's Secrets of the same name for the issue, then
// removed.
func issueCertificates(objs []client.Object, cfg *config.DeploymentConfig) ([]client.Object, error) {
	st, err := strategy.Generate(cfg)
	if err != nil {
		return nil, err
	}
	facts := map[string]string{}
	for _, o := range st.Objects {
		if sec, ok := o.(*corev1.Secret); ok && sec.Annotations[vocab.CertificateAnnotation] != "" {
			facts[sec.Name] = sec.Annotations[vocab.CertificateAnnotation]
		}
	}
	objs = dedupe(objs)
	for _, o := range objs {
		if sec, ok := o.(*corev1.Secret); ok && facts[sec.Name] != "" {
			if sec.Annotations == nil {
				sec.Annotations = map[string]string{}
			}
			sec.Annotations[vocab.CertificateAnnotation] = facts[sec.Name]
		}
	}
	filled, _, err := (&certs.Manager{}).Fill(objs, certs.Live{}, cfg.Certificates)
	if err != nil {
		return nil, err
	}
	for _, o := range filled {
		if sec, ok := o.(*corev1.Secret); ok {
			delete(sec.Annotations, vocab.CertificateAnnotation)
		}
	}
	return filled, nil
}

// dedupe drops the second copy of an object upstream's strategy lists
// twice (each CA ConfigMap).
func dedupe(objs []client.Object) []client.Object {
	seen := map[strategy.Key]bool{}
	out := objs[:0:0]
	for _, o := range objs {
		k := strategy.KeyOf(o)
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, o)
	}
	return out
}

// stampUpstreamID sets upstream's deployment ID where upstream's operator
// writes it: the install-strategy-identifier annotation of every object
// and pod template (and drops virtop's pinned-fields record, which the
// shared customizeComponents step adds).
func stampUpstreamID(o client.Object, id string) {
	set := func(m map[string]string) map[string]string {
		if m == nil {
			m = map[string]string{}
		}
		// What virtop's patching step records is virtop's, not upstream's.
		delete(m, vocab.PinnedFieldsAnnotation)
		if _, ok := m[vocab.InstallStrategyIdentifierAnnotation]; ok {
			m[vocab.InstallStrategyIdentifierAnnotation] = id
		}
		return m
	}
	o.SetAnnotations(set(o.GetAnnotations()))
	switch w := o.(type) {
	case *appsv1.Deployment:
		w.Spec.Template.Annotations = set(w.Spec.Template.Annotations)
	case *appsv1.DaemonSet:
		w.Spec.Template.Annotations = set(w.Spec.Template.Annotations)
	}
}

// wipe removes an installation and the KubeVirt resource so the next case
// starts from the suite's base: the resource (its finalizer dropped: no
// operator runs), every object of inst, the upstream operator Deployment;
// CRDs are waited for until gone (their objects go with them).
func wipe(t *testing.T, c client.Client, inst *installation) {
	t.Helper()
	ctx := context.Background()
	kv := &kvv1.KubeVirt{}
	if err := c.Get(ctx, framework.KubeVirtKey, kv); err == nil {
		orig := kv.DeepCopy()
		kv.Finalizers = nil
		if err := c.Patch(ctx, kv, client.MergeFrom(orig)); err != nil {
			t.Fatal(err)
		}
		if err := c.Delete(ctx, kv); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	del := append([]created{{gvk: appsv1.SchemeGroupVersion.WithKind("Deployment"), key: strategy.Key{Group: "apps", Kind: "Deployment", Namespace: devcluster.InstallNamespace, Name: vocab.VirtOperator}}}, inst.objects...)
	for _, o := range del {
		u, err := o.get(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if u == nil {
			continue
		}
		if err := c.Delete(ctx, u); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("deleting %s: %v", o.key, err)
		}
	}
	poll.Eventually(t, "the installation gone", 2*time.Minute, func(ctx context.Context) (bool, error) {
		for _, o := range del {
			u, err := o.get(ctx, c)
			if err != nil {
				return false, err
			}
			if u != nil {
				return false, fmt.Errorf("%s still there", o.key)
			}
		}
		return true, nil
	})
}
