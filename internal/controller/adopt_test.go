package controller_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/adopt"
	"github.com/virtop-dev/virtop/internal/certs"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/operator"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/testing/kvtest"
	"github.com/virtop-dev/virtop/internal/testing/operatortest"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// upstreamApplied reads upstream's own strategy of a release and returns
// its objects as upstream's operator applies them in namespace ns, and the
// deployment config they were rendered for.
func upstreamApplied(t *testing.T, ns, version string) ([]client.Object, *config.DeploymentConfig) {
	t.Helper()
	dir := os.Getenv("VIRTOP_UPSTREAM_STRATEGIES")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "shared", "upstream-strategies")
	}
	abs, _ := filepath.Abs(dir)
	f, err := os.Open(filepath.Join(abs, version, "strategy.yaml.gz"))
	if err != nil {
		t.Skipf("no upstream reference strategies: %v (set VIRTOP_UPSTREAM_STRATEGIES to the directory)", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := strategy.ReadManifests(raw)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.FromKubeVirt(&kvv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Namespace: ns}, Spec: kvv1.KubeVirtSpec{ImageTag: version}}, config.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	applied, err := strategy.AsAppliedByUpstream(objs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range applied {
		if o.GetNamespace() != "" {
			o.SetNamespace(ns)
		}
	}
	return applied, cfg
}

// upstreamWorkloads returns upstream's virt-api and virt-controller
// Deployments and virt-handler DaemonSet of a release as upstream's
// operator applies them, in namespace ns.
func upstreamWorkloads(t *testing.T, ns, version string) []client.Object {
	t.Helper()
	applied, _ := upstreamApplied(t, ns, version)
	var out []client.Object
	for _, o := range applied {
		switch o.(type) {
		case *appsv1.Deployment, *appsv1.DaemonSet:
			if n := o.GetName(); n == vocab.VirtAPI || n == vocab.VirtController || n == vocab.VirtHandler {
				out = append(out, o)
			}
		}
	}
	if len(out) != 3 {
		t.Fatalf("found %d of upstream's three workloads", len(out))
	}
	return out
}

// upstreamCertificates returns the certificate Secrets and CA ConfigMaps
// of a release as upstream's operator leaves them in namespace ns:
// upstream's objects (its labels, unlabelled as virtop's), filled with a
// CA and the leaf certificates it signed. Upstream's dumped strategy holds
// them empty (its operator fills them at run time), so the data is issued
// here, for the certificates of that release, with the default lifetimes
// recorded in kubevirt.io/duration in upstream's spelling.
func upstreamCertificates(t *testing.T, ns, version string) []client.Object {
	t.Helper()
	applied, cfg := upstreamApplied(t, ns, version)
	st, err := strategy.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	filled, _, err := (&certs.Manager{}).Fill(st.Objects, certs.Live{}, cfg.Certificates)
	if err != nil {
		t.Fatal(err)
	}
	data := map[string]client.Object{}
	for _, o := range filled {
		switch o.(type) {
		case *corev1.Secret, *corev1.ConfigMap:
			if _, ok := o.GetAnnotations()[vocab.CertificateAnnotation]; ok || o.GetName() == vocab.CASecretName || o.GetName() == vocab.ExportCASecretName {
				data[fmt.Sprintf("%T/%s", o, o.GetName())] = o
			}
		}
	}
	var out []client.Object
	for _, o := range applied {
		src, ok := data[fmt.Sprintf("%T/%s", o, o.GetName())]
		if !ok {
			continue
		}
		switch o := o.(type) {
		case *corev1.Secret:
			o.Data = src.(*corev1.Secret).Data
			delete(o.Data, vocab.PreviousCABundleKey)
			if o.Annotations == nil {
				o.Annotations = map[string]string{}
			}
			// Upstream records the lifetime as a *metav1.Duration's String.
			d, err := time.ParseDuration(src.GetAnnotations()[vocab.CertificateDurationAnnotation])
			if err != nil {
				t.Fatal(err)
			}
			o.Annotations[vocab.CertificateDurationAnnotation] = (&metav1.Duration{Duration: d}).String()
		case *corev1.ConfigMap:
			o.Data = src.(*corev1.ConfigMap).Data
		}
		out = append(out, o)
	}
	return out
}

// TestAdoptUpstreamInstallation builds what upstream's operator leaves
// (its workloads, created by its field manager with its labels, and a
// KubeVirt status of its own), checks that virtop refuses to take it over
// while upstream's operator runs and changes nothing, then that once it is
// scaled to zero virtop adopts every workload in place: same UIDs, virtop's
// label and field manager, none of upstream's field ownership left, the
// adoption recorded, Available never False; then, for v1.5.3, an upgrade to
// v1.6.6 right after the adoption keeps the objects and Available.
func TestAdoptUpstreamInstallation(t *testing.T) {
	// Only the oldest release: the CRDs are cluster-scoped and shared by
	// the package's tests, and a newer release's CRDs (v1.9.0, or the
	// upgrade to v1.6.6) record stored versions that the older releases
	// other tests apply cannot drop. {"v1.5.3", "v1.6.6"} and {"v1.9.0", ""}
	// pass when this test runs alone (-run TestAdoptUpstreamInstallation).
	cases := []struct{ version, upgrade string }{{"v1.5.3", ""}}
	if v := os.Getenv("VIRTOP_ADOPT_ALL"); v != "" {
		cases = []struct{ version, upgrade string }{{"v1.5.3", "v1.6.6"}, {"v1.9.0", ""}}
	}
	for _, tc := range cases {
		t.Run(tc.version, func(t *testing.T) { adoptUpstream(t, tc.version, tc.upgrade) })
	}
}

func adoptUpstream(t *testing.T, version, upgrade string) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	c := env.Client
	ctx := context.Background()

	operatorDep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: vocab.VirtOperator}}
	operatorDep.Spec.Replicas = ptr.To[int32](1)
	operatorDep.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{vocab.AppLabel: vocab.VirtOperator}}
	operatorDep.Spec.Template.Labels = map[string]string{vocab.AppLabel: vocab.VirtOperator}
	operatorDep.Spec.Template.Spec.Containers = []corev1.Container{{Name: vocab.VirtOperator, Image: "quay.io/kubevirt/virt-operator:" + version}}
	if err := c.Create(ctx, operatorDep); err != nil {
		t.Fatal(err)
	}
	workloads := upstreamWorkloads(t, ns, version)
	uids := map[string]types.UID{}
	for _, o := range workloads {
		if err := c.Create(ctx, o, client.FieldOwner(vocab.UpstreamFieldManager)); err != nil {
			t.Fatal(err)
		}
		uids[o.GetName()] = o.GetUID()
	}
	// Upstream's CAs and certificates, as its operator issued them.
	certObjs := upstreamCertificates(t, ns, version)
	certUIDs, certData := map[string]types.UID{}, map[string][]byte{}
	var upstreamCA []byte
	for _, o := range certObjs {
		if err := c.Create(ctx, o, client.FieldOwner(vocab.UpstreamFieldManager)); err != nil {
			t.Fatal(err)
		}
		certUIDs[fmt.Sprintf("%T/%s", o, o.GetName())] = o.GetUID()
		if sec, ok := o.(*corev1.Secret); ok {
			certData[sec.Name] = sec.Data[corev1.TLSCertKey]
			if sec.Name == vocab.CASecretName {
				upstreamCA = sec.Data[corev1.TLSCertKey]
			}
		}
	}
	if len(certData) < 8 || upstreamCA == nil {
		t.Fatalf("upstream's certificate Secrets: %d, kubevirt-ca among them: %v", len(certData), upstreamCA != nil)
	}
	testenv.FakeReadiness(t, c, ns)

	kv := kvtest.KubeVirt(t, ns, func(kv *kvv1.KubeVirt) {
		kv.Spec.ImageTag = version
		kv.Finalizers = []string{release.KubeVirtFinalizer(version)}
	})
	if err := c.Create(ctx, kv); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	kv.Status = kvv1.KubeVirtStatus{
		Phase:                    kvv1.KubeVirtPhaseDeployed,
		OperatorVersion:          version,
		ObservedKubeVirtVersion:  version,
		ObservedKubeVirtRegistry: "quay.io/kubevirt",
		ObservedDeploymentID:     "upstream-deployment-id",
		TargetKubeVirtVersion:    version,
		TargetKubeVirtRegistry:   "quay.io/kubevirt",
		TargetDeploymentID:       "upstream-deployment-id",
		Conditions: []kvv1.KubeVirtCondition{
			{Type: kvv1.KubeVirtConditionAvailable, Status: corev1.ConditionTrue, Reason: kvv1.ReasonAllComponentsReady, Message: "All components are ready.", LastTransitionTime: now, LastProbeTime: now},
			{Type: kvv1.KubeVirtConditionProgressing, Status: corev1.ConditionFalse, Reason: kvv1.ReasonAllComponentsReady, LastTransitionTime: now, LastProbeTime: now},
			{Type: kvv1.KubeVirtConditionDegraded, Status: corev1.ConditionFalse, Reason: kvv1.ReasonAllComponentsReady, LastTransitionTime: now, LastProbeTime: now},
		},
	}
	if err := c.Status().Update(ctx, kv); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(kv)

	// Record every Available status the resource shows from now on.
	var mu sync.Mutex
	var seen []corev1.ConditionStatus
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
			cur := &kvv1.KubeVirt{}
			if err := c.Get(ctx, key, cur); err == nil {
				mu.Lock()
				if st := cur.Status.Condition(kvv1.KubeVirtConditionAvailable).Status; len(seen) == 0 || seen[len(seen)-1] != st {
					seen = append(seen, st)
				}
				mu.Unlock()
			}
		}
	}()
	defer func() { close(done); wg.Wait() }()

	// What a refused adoption must leave as it is (the test's fake
	// readiness writes the status, so that is not compared).
	type metaOf struct {
		generation int64
		labels     string
		managers   string
	}
	snapshot := func(o client.Object) metaOf {
		live := o.DeepCopyObject().(client.Object)
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), live); err != nil {
			t.Fatal(err)
		}
		m := metaOf{generation: live.GetGeneration(), labels: fmt.Sprint(live.GetLabels(), live.GetAnnotations())}
		for _, e := range live.GetManagedFields() {
			if e.Subresource == "" {
				m.managers += e.Manager + "/" + string(e.Operation) + " "
			}
		}
		return m
	}
	before := map[string]metaOf{}
	templates := map[string]string{}
	for _, o := range workloads {
		before[o.GetName()] = snapshot(o)
		templates[o.GetName()] = podTemplate(t, c, o)
	}
	operatortest.Start(t, env.Config, operator.Options{Namespace: ns})

	// Upstream's operator runs: refused, nothing changed.
	cur := &kvv1.KubeVirt{}
	poll.Eventually(t, "the adoption refused", 2*time.Minute, func() (bool, string) {
		if err := c.Get(ctx, key, cur); err != nil {
			return false, err.Error()
		}
		s := cur.Status.Condition(kvv1.KubeVirtConditionSynchronized)
		return s.Reason == kvv1.ReasonUpstreamOperatorRunning, s.Reason + ": " + s.Message
	})
	t.Logf("refused: %s", cur.Status.Condition(kvv1.KubeVirtConditionSynchronized).Message)
	if cur.Status.ObservedDeploymentID != "upstream-deployment-id" || cur.Status.TargetDeploymentID != "upstream-deployment-id" || cur.Annotations[vocab.AdoptedFromAnnotation] != "" {
		t.Errorf("a refused adoption changed the resource: target %q observed %q annotations %v", cur.Status.TargetDeploymentID, cur.Status.ObservedDeploymentID, cur.Annotations)
	}
	for _, o := range workloads {
		if got := snapshot(o); got != before[o.GetName()] {
			t.Errorf("a refused adoption changed %s: %+v → %+v", o.GetName(), before[o.GetName()], got)
		}
	}

	// Scale upstream's operator to zero: virtop takes over.
	if err := c.Get(ctx, client.ObjectKeyFromObject(operatorDep), operatorDep); err != nil {
		t.Fatal(err)
	}
	operatorDep.Spec.Replicas = ptr.To[int32](0)
	if err := c.Update(ctx, operatorDep); err != nil {
		t.Fatal(err)
	}
	poll.Eventually(t, "adopted and Available", 3*time.Minute, func() (bool, string) {
		if err := c.Get(ctx, key, cur); err != nil {
			return false, err.Error()
		}
		a, p := cur.Status.Condition(kvv1.KubeVirtConditionAvailable), cur.Status.Condition(kvv1.KubeVirtConditionProgressing)
		return cur.Status.ObservedDeploymentID == cur.Status.TargetDeploymentID && cur.Status.ObservedDeploymentID != "upstream-deployment-id" &&
				a.Status == corev1.ConditionTrue && p.Status == corev1.ConditionFalse,
			"observed " + cur.Status.ObservedDeploymentID + ", Available " + string(a.Status) + " Progressing " + string(p.Status) + ": " + p.Message
	})
	rec, ok, err := adopt.Adopted(cur)
	if err != nil || !ok || rec.DeploymentID != "upstream-deployment-id" || rec.Version != version {
		t.Errorf("adoption record = %+v %v %v", rec, ok, err)
	}
	for _, o := range workloads {
		live := o.DeepCopyObject().(client.Object)
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), live); err != nil {
			t.Fatal(err)
		}
		if live.GetUID() != uids[o.GetName()] {
			t.Errorf("%s was recreated (UID %s → %s)", o.GetName(), uids[o.GetName()], live.GetUID())
		}
		if got := live.GetLabels()[vocab.ManagedByLabel]; got != vocab.ManagedByValue {
			t.Errorf("%s: managed-by %q, want %q", o.GetName(), got, vocab.ManagedByValue)
		}
		for _, e := range live.GetManagedFields() {
			// Upstream's manager keeps the pod template it wrote, nothing else.
			if e.Manager == vocab.UpstreamFieldManager && e.Subresource == "" && !templateOnly(t, e.FieldsV1) {
				t.Errorf("%s: upstream's field manager still owns fields beyond the pod template (%s)", o.GetName(), e.FieldsV1.String())
			}
		}
		// No rollout: the pod template stays exactly as upstream wrote it
		// (docs/migrate.md, "What rolls").
		if got := podTemplate(t, c, o); got != templates[o.GetName()] {
			t.Errorf("%s: the adoption rewrote the pod template (the workload rolls):\nbefore %s\nafter  %s", o.GetName(), templates[o.GetName()], got)
		}
		t.Logf("%s: generation %d after the adoption (1 as upstream left it; annotations count)", o.GetName(), live.GetGeneration())
	}
	checkCertificatesKept(t, c, ns, certObjs, certUIDs, certData, upstreamCA)
	if upgrade != "" {
		if err := c.Get(ctx, key, cur); err != nil {
			t.Fatal(err)
		}
		adopted := cur.Status.ObservedDeploymentID
		patch := client.MergeFrom(cur.DeepCopy())
		cur.Spec.ImageTag = upgrade
		if err := c.Patch(ctx, cur, patch); err != nil {
			t.Fatal(err)
		}
		poll.Eventually(t, "upgraded to "+upgrade, 3*time.Minute, func() (bool, string) {
			if err := c.Get(ctx, key, cur); err != nil {
				return false, err.Error()
			}
			a, p := cur.Status.Condition(kvv1.KubeVirtConditionAvailable), cur.Status.Condition(kvv1.KubeVirtConditionProgressing)
			return cur.Status.ObservedKubeVirtVersion == upgrade && cur.Status.ObservedDeploymentID != adopted && a.Status == corev1.ConditionTrue && p.Status == corev1.ConditionFalse,
				"observed " + cur.Status.ObservedKubeVirtVersion + ", Progressing " + string(p.Status) + ": " + p.Message
		})
		for _, o := range workloads {
			live := o.DeepCopyObject().(client.Object)
			if err := c.Get(ctx, client.ObjectKeyFromObject(o), live); err != nil {
				t.Fatal(err)
			}
			if live.GetUID() != uids[o.GetName()] {
				t.Errorf("%s was recreated by the upgrade", o.GetName())
			}
			// The upgrade renders virtop's template, which owns it whole.
			if podTemplate(t, c, o) == templates[o.GetName()] {
				t.Errorf("%s: the upgrade to %s left upstream's pod template", o.GetName(), upgrade)
			}
			for _, e := range live.GetManagedFields() {
				if e.Manager == vocab.UpstreamFieldManager && e.Subresource == "" {
					t.Errorf("%s: upstream's field manager still owns fields after the upgrade (%s)", o.GetName(), e.FieldsV1.String())
				}
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, st := range seen {
		if st == corev1.ConditionFalse {
			t.Errorf("Available was False during the adoption: %v", seen)
			break
		}
	}
	t.Logf("Available went through %v", seen)
}

// templateOnly reports whether managed fields hold spec.template alone.
func templateOnly(t *testing.T, f *metav1.FieldsV1) bool {
	t.Helper()
	var m map[string]map[string]json.RawMessage
	if f == nil || json.Unmarshal(f.Raw, &m) != nil {
		return false
	}
	_, tmpl := m["f:spec"]["f:template"]
	return len(m) == 1 && len(m["f:spec"]) == 1 && tmpl
}

// podTemplate is a workload's live spec.template as JSON.
func podTemplate(t *testing.T, c client.Client, o client.Object) string {
	t.Helper()
	live := o.DeepCopyObject().(client.Object)
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(o), live); err != nil {
		t.Fatal(err)
	}
	var tmpl corev1.PodTemplateSpec
	switch w := live.(type) {
	case *appsv1.Deployment:
		tmpl = w.Spec.Template
	case *appsv1.DaemonSet:
		tmpl = w.Spec.Template
	default:
		t.Fatalf("%T is no workload", live)
	}
	b, err := json.Marshal(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkCertificatesKept checks, after an adoption, that upstream's
// certificate Secrets and CA ConfigMaps were taken over in place (same
// UID, labelled as virtop's) and none re-issued (same tls.crt), and that
// the trust bundle and the caBundles virtop applied hold upstream's CA.
func checkCertificatesKept(t *testing.T, c client.Client, ns string, objs []client.Object, uids map[string]types.UID, data map[string][]byte, ca []byte) {
	t.Helper()
	ctx := context.Background()
	var reissued []string
	for _, o := range objs {
		live := o.DeepCopyObject().(client.Object)
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), live); err != nil {
			t.Fatal(err)
		}
		k := fmt.Sprintf("%T/%s", o, o.GetName())
		if live.GetUID() != uids[k] {
			t.Errorf("%s was recreated", k)
		}
		if got := live.GetLabels()[vocab.ManagedByLabel]; got != vocab.ManagedByValue {
			t.Errorf("%s: managed-by %q, want %q", k, got, vocab.ManagedByValue)
		}
		if sec, ok := live.(*corev1.Secret); ok && !bytes.Equal(sec.Data[corev1.TLSCertKey], data[sec.Name]) {
			reissued = append(reissued, sec.Name)
		}
	}
	if len(reissued) > 0 {
		t.Errorf("re-issued at adoption: %d of %d certificates: %v", len(reissued), len(data), reissued)
	}
	t.Logf("%d certificate Secrets kept of %d", len(data)-len(reissued), len(data))
	trusts := func(bundle []byte) bool { return bytes.Contains(bundle, bytes.TrimSpace(ca)) }
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: vocab.CASecretName}, cm); err != nil {
		t.Fatal(err)
	}
	if !trusts([]byte(cm.Data[vocab.CABundleKey])) {
		t.Errorf("ConfigMap %s does not hold upstream's CA", vocab.CASecretName)
	}
	var vwcs admissionv1.ValidatingWebhookConfigurationList
	if err := c.List(ctx, &vwcs, client.MatchingLabels{vocab.ManagedByLabel: vocab.ManagedByValue}); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, v := range vwcs.Items {
		for _, w := range v.Webhooks {
			if w.ClientConfig.Service == nil || w.ClientConfig.Service.Namespace != ns {
				continue
			}
			checked++
			if !trusts(w.ClientConfig.CABundle) {
				t.Errorf("webhook %s/%s: caBundle does not hold upstream's CA", v.Name, w.Name)
			}
		}
	}
	if checked == 0 {
		t.Error("no webhook of the installation to check the caBundle of")
	}
}
