package doctor

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/testing/kvtest"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/tools/devcluster"
	"github.com/virtop-dev/virtop/internal/vocab"
	"github.com/virtop-dev/virtop/test/e2e/framework"
)

// Names the verdict gives the links of the metrics path (the doctor's
// documented wording, repeated here so that a change is a visible test
// change).
const (
	linkServiceMonitor = "ServiceMonitor prometheus-kubevirt-rules"
	linkSelection      = "ServiceMonitor not selected by any Prometheus"
	linkEndpointSlices = "EndpointSlices of kubevirt-prometheus-metrics (port metrics)"
	linkNetworkPolicy  = "NetworkPolicy blocking Prometheus from port metrics"
	linkStrategy       = "install strategy without monitoring objects"
	linkTarget         = `Prometheus scrape target (up{job="kubevirt-prometheus-metrics"})`
)

// TestDoctor installs KubeVirt once (host-process operator, Prometheus
// resource, monitoring objects applied) and runs the built `virtop doctor`
// against each fault of the runbook in turn. Every case starts from a
// cluster the doctor calls Healthy and restores what it broke when it ends,
// so the cases do not depend on their order (-run picks any of them).
func TestDoctor(t *testing.T) {
	s := install(t)
	t.Cleanup(func() { s.env.CheckComponents(t) })

	cases := []struct {
		name string
		run  func(*testing.T)
	}{
		{"healthy", s.testHealthy},
		{"virt-api scaled to zero with the operator stopped", s.testVirtAPIScaledToZero},
		{"virt-controller unready", s.testVirtControllerUnready},
		{"ServiceMonitor deleted with the operator stopped", s.testServiceMonitorDeleted},
		{"Prometheus selector that can never match", s.testSelectorNeverMatches},
		{"metrics Service without endpoints", s.testServiceWithoutEndpoints},
		{"deny-all NetworkPolicy", s.testDenyAllNetworkPolicy},
		{"node of the control plane NotReady", s.testNodeNotReady},
		{"upstream strategy without monitoring objects", s.testUpstreamStrategy},
		{"duplicate short name", s.testDuplicateShortName},
		{"API server unreachable", s.testUnreachable},
		{"prometheus-url healthy", s.testPrometheusHealthy},
		{"prometheus-url target absent while pods ready", s.testPrometheusTargetAbsent},
		{"Flux Kustomization BuildFailed owning the KubeVirt resource", s.testFluxBuildFailed},
		{"Argo CD Application Degraded", s.testArgoDegraded},
		{"Prometheus behind a TLS proxy with a bearer token", s.testPrometheusTokenCA},
		{"Prometheus through the API server's service proxy", s.testPrometheusServiceProxy},
		{"upgrade stuck at virt-controller", s.testStuckUpgrade},
		{"node under memory pressure", s.testNodeMemoryPressure},
		{"the VM count line", s.testVMCount},
	}
	// go test -shuffle shuffles top-level tests only; shuffle the cases
	// too, to show they do not depend on their order.
	if seed, ok := shuffleSeed(); ok {
		rand.New(rand.NewSource(seed)).Shuffle(len(cases), func(i, j int) { cases[i], cases[j] = cases[j], cases[i] })
		t.Logf("cases shuffled with seed %d (-shuffle=%d repeats the order)", seed, seed)
	}
	for _, c := range cases {
		t.Run(c.name, c.run)
	}
}

// shuffleSeed is the seed of -test.shuffle: a number as given, the time
// for "on" (logged), none for "off".
func shuffleSeed() (int64, bool) {
	f := flag.Lookup("test.shuffle")
	if f == nil {
		return 0, false
	}
	switch v := f.Value.String(); v {
	case "", "off":
		return 0, false
	case "on":
		return time.Now().UnixNano(), true
	default:
		n, err := strconv.ParseInt(v, 10, 64)
		return n, err == nil
	}
}

// doctorUntil runs the doctor until done holds (faults take a moment to
// show: pods go, EndpointSlices follow), failing with the last report.
func (s *installed) doctorUntil(t *testing.T, what string, done func(*run) bool, args ...string) *run {
	t.Helper()
	var last *run
	start := time.Now()
	runs := 0
	poll.Eventually(t, what, 3*time.Minute, func(ctx context.Context) (bool, error) {
		r, err := s.doctor(ctx, args...)
		if err != nil {
			return false, err
		}
		runs++
		last = r
		if done(r) {
			return true, nil
		}
		return false, fmt.Errorf("%s", r.summary())
	})
	s.logDoctor(t, last)
	t.Logf("MEASURE doctor saw %s after %s (%d runs)\n%s", what, time.Since(start).Round(100*time.Millisecond), runs, last.summary())
	return last
}

// verdictIs holds when the doctor's verdict is v and, if given, check
// name has status.
func verdictIs(v, name, status string) func(*run) bool {
	return func(r *run) bool {
		if r.report.Verdict != v {
			return false
		}
		if name == "" {
			return true
		}
		c, ok := r.check(name)
		return ok && c.Status == status
	}
}

// baseline waits until the doctor calls the installation Healthy: the
// precondition of every case.
func (s *installed) baseline(t *testing.T) *run {
	t.Helper()
	return s.doctorUntil(t, "verdict Healthy before the fault", verdictIs("Healthy", "", ""))
}

// expect checks the exit code, the verdict's reason and one check.
func expect(t *testing.T, r *run, code int, reason []string, name, status string, evidence ...string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit code %d, want %d (verdict %s)", r.code, code, r.report.Verdict)
	}
	for _, want := range reason {
		if !strings.Contains(r.report.Reason, want) {
			t.Errorf("reason %q does not name %q", r.report.Reason, want)
		}
	}
	c, ok := r.check(name)
	if !ok {
		t.Fatalf("no check %s in the report", name)
	}
	if c.Status != status {
		t.Errorf("check %s is %s (%s), want %s", name, c.Status, c.Evidence, status)
	}
	for _, want := range evidence {
		if !strings.Contains(c.Evidence, want) {
			t.Errorf("check %s: evidence %q lacks %q", name, c.Evidence, want)
		}
	}
	if (status == "fail" || status == "warn") && !strings.Contains(c.Hint, "kubectl") && !strings.Contains(c.Hint, "open ") {
		t.Errorf("check %s (%s) gives no next command: hint %q", name, status, c.Hint)
	}
}

func (s *installed) testHealthy(t *testing.T) {
	r := s.baseline(t)
	if r.code != 0 {
		t.Errorf("exit code %d for Healthy", r.code)
	}
	if r.report.Namespace != s.ns || r.report.Server != s.env.Clients.Config.Host || r.report.Context == "" {
		t.Errorf("the report does not say where it looked: context %q, server %q (want %s), namespace %q",
			r.report.Context, r.report.Server, s.env.Clients.Config.Host, r.report.Namespace)
	}
	for _, c := range r.report.Checks {
		switch {
		case c.Status == "ok", c.Status == "skipped":
		case c.Name == "kubevirt/warning-events" && c.Status == "warn":
			// Informative, and the faults of earlier cases leave events
			// for an hour.
		case c.Status == "warn", c.Status == "fail":
			t.Errorf("check %s is %s in a healthy installation: %s", c.Name, c.Status, c.Evidence)
		default:
			t.Errorf("check %s has status %q, not one of ok|warn|fail|skipped", c.Name, c.Status)
		}
		if strings.HasPrefix(c.Name, "prometheus/") {
			t.Errorf("check %s without --prometheus-url", c.Name)
		}
	}
	expect(t, r, 0, nil, "controlplane/virt-api", "ok", "pods ready")
	expect(t, r, 0, nil, "controlplane/virt-controller", "ok", "pods ready")
	// The operator runs beside the cluster: its Lease says so.
	expect(t, r, 0, nil, "controlplane/virt-operator", "ok", "Lease kubevirt/virt-operator is held by")
	expect(t, r, 0, nil, "controlplane/nodes", "ok", "every node hosting control-plane pods is Ready")
	// Withheld on purpose: nothing serves on kwok's nodes.
	expect(t, r, 0, nil, "install/apiservice", "ok", "withheld by virtop", "simulated (kwok) nodes")
	expect(t, r, 0, nil, "monitoring/servicemonitor", "ok", "targets the metrics Service on port metrics")
	expect(t, r, 0, nil, "monitoring/servicemonitor-selection", "ok", "selected by "+devcluster.MonitoringNamespace+"/"+devcluster.PrometheusName)
	expect(t, r, 0, nil, "monitoring/prometheusrule", "ok", "selected by "+devcluster.MonitoringNamespace+"/"+devcluster.PrometheusName)
	expect(t, r, 0, nil, "monitoring/rbac", "ok", "endpoints")
	expect(t, r, 0, nil, "monitoring/strategy", "ok", "virtop's", "holds the ServiceMonitor and PrometheusRule")

	expect(t, r, 0, nil, "controlplane/node-pressure", "ok", "no memory, disk or PID pressure")
	expect(t, r, 0, nil, "gitops/owner", "ok", "no GitOps owner")
	expect(t, r, 0, nil, "install/upgrade", "ok", "no update in progress")
	if !strings.Contains(r.report.Reason, "0 VMs running") || r.report.VMs.Line == "" {
		t.Errorf("the verdict has no VM line: %q", r.report.Reason)
	}

	// The text for people: where it looked, then the verdict.
	txt := s.doctorText(t)
	if !strings.HasPrefix(txt, "Kubeconfig:") || !strings.Contains(txt, "Namespace:  "+s.ns) || !strings.Contains(txt, "\nVerdict: Healthy\n") {
		t.Errorf("text report does not start with where it looked and the verdict:\n%s", txt)
	}
	s.expectHeader(t, r)
}

// doctorText runs the doctor's text output once.
func (s *installed) doctorText(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := s.exec(ctx, false, []string{"-o", "text"})
	if err != nil {
		t.Fatal(err)
	}
	return r.stdout
}

func (s *installed) testVirtAPIScaledToZero(t *testing.T) {
	s.baseline(t)
	s.stopOperator(t)
	s.scale(t, vocab.VirtAPI, 0)
	poll.Eventually(t, "virt-api pods gone", 2*time.Minute, func(ctx context.Context) (bool, error) {
		n := len(s.pods(t, vocab.VirtAPI))
		return n == 0, fmt.Errorf("%d virt-api pods left", n)
	})
	r := s.doctorUntil(t, "ControlPlaneDown naming virt-api", verdictIs("ControlPlaneDown", "controlplane/virt-api", "fail"))
	expect(t, r, 1, []string{"controlplane/virt-api", "lifecycle operations"}, "controlplane/virt-api", "fail", "0 of 0 pods ready", "Deployment virt-api wants 0")
	// The operator stopped and released its Lease: nothing reconciles.
	expect(t, r, 1, nil, "controlplane/virt-operator", "fail", "Lease kubevirt/virt-operator is released", "Nothing reconciles")
	expect(t, r, 1, nil, "workloads", "ok", "Running VMs keep running")
}

func (s *installed) testVirtControllerUnready(t *testing.T) {
	s.baseline(t)
	pods := s.pods(t, vocab.VirtController)
	if len(pods) == 0 {
		t.Fatal("no virt-controller pod")
	}
	t.Cleanup(func() { s.replacePods(t, pods) })
	for _, p := range pods {
		s.setPodUnready(t, p)
	}
	r := s.doctorUntil(t, "ControlPlaneDown naming virt-controller", verdictIs("ControlPlaneDown", "controlplane/virt-controller", "fail"))
	expect(t, r, 1, []string{"controlplane/virt-controller"}, "controlplane/virt-controller", "fail",
		fmt.Sprintf("0 of %d pods ready", len(pods)), "not ready (ContainersNotReady)")
	expect(t, r, 1, nil, "controlplane/virt-api", "ok")
}

func (s *installed) testServiceMonitorDeleted(t *testing.T) {
	s.baseline(t)
	ctx := context.Background()
	// Registered first, so it runs after stopOperator's cleanup has
	// started the operator again.
	t.Cleanup(func() {
		poll.Eventually(t, "the operator re-creating the ServiceMonitor", 3*time.Minute, func(ctx context.Context) (bool, error) {
			n := len(s.managed(t, &monitoringv1.ServiceMonitorList{}))
			return n > 0, fmt.Errorf("%d ServiceMonitors", n)
		})
	})
	s.stopOperator(t)
	sms := s.managed(t, &monitoringv1.ServiceMonitorList{})
	if len(sms) == 0 {
		t.Fatal("virtop applied no ServiceMonitor")
	}
	for _, sm := range sms {
		if err := s.c.Delete(ctx, sm); err != nil {
			t.Fatal(err)
		}
	}
	r := s.doctorUntil(t, "MonitoringArtefact naming the ServiceMonitor", verdictIs("MonitoringArtefact", "monitoring/servicemonitor", "fail"))
	expect(t, r, 1, []string{"virt-api and virt-controller are ready", linkServiceMonitor}, "monitoring/servicemonitor", "fail",
		"no ServiceMonitor targets Service kubevirt-prometheus-metrics in kubevirt")
}

func (s *installed) testSelectorNeverMatches(t *testing.T) {
	s.baseline(t)
	ctx := context.Background()
	key := types.NamespacedName{Namespace: devcluster.MonitoringNamespace, Name: devcluster.PrometheusName}
	p := &monitoringv1.Prometheus{}
	if err := s.c.Get(ctx, key, p); err != nil {
		t.Fatal(err)
	}
	orig := p.Spec.ServiceMonitorSelector.DeepCopy()
	t.Cleanup(func() {
		s.patchPrometheus(t, key, orig)
		s.waitMonitoringReady(t)
	})
	// release must both exist and not exist: no label set satisfies it,
	// so no placement of the ServiceMonitor can make it selected.
	s.patchPrometheus(t, key, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "release", Operator: metav1.LabelSelectorOpExists},
		{Key: "release", Operator: metav1.LabelSelectorOpDoesNotExist},
	}})
	r := s.doctorUntil(t, "MonitoringArtefact naming the selection", verdictIs("MonitoringArtefact", "monitoring/servicemonitor-selection", "fail"))
	expect(t, r, 1, []string{linkSelection}, "monitoring/servicemonitor-selection", "fail",
		"no Prometheus selects KubeVirt's ServiceMonitor", devcluster.MonitoringNamespace+"/"+devcluster.PrometheusName, "cannot match")
}

func (s *installed) testServiceWithoutEndpoints(t *testing.T) {
	s.baseline(t)
	ctx := context.Background()
	// The Service selects pods labelled prometheus.kubevirt.io=true: take
	// the label off every pod (their Deployments and DaemonSet keep them;
	// nothing relabels a running pod), and it has no endpoint left.
	var labelled []types.NamespacedName
	var pods corev1.PodList
	if err := s.c.List(ctx, &pods, client.InNamespace(s.ns), client.MatchingLabels{vocab.PrometheusLabel: "true"}); err != nil {
		t.Fatal(err)
	}
	for i := range pods.Items {
		labelled = append(labelled, client.ObjectKeyFromObject(&pods.Items[i]))
	}
	if len(labelled) == 0 {
		t.Fatal("no pod labelled prometheus.kubevirt.io=true")
	}
	t.Cleanup(func() {
		for _, k := range labelled {
			s.labelPod(t, k, `"true"`)
		}
	})
	for _, k := range labelled {
		s.labelPod(t, k, "null")
	}
	r := s.doctorUntil(t, "MonitoringArtefact naming the EndpointSlices", verdictIs("MonitoringArtefact", "monitoring/endpointslices", "fail"))
	expect(t, r, 1, []string{linkEndpointSlices}, "monitoring/endpointslices", "fail", "kubevirt-prometheus-metrics")
	expect(t, r, 1, nil, "monitoring/service", "ok")
}

func (s *installed) testDenyAllNetworkPolicy(t *testing.T) {
	s.baseline(t)
	ctx := context.Background()
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-all-ingress", Namespace: s.ns},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		},
	}
	if err := s.c.Create(ctx, np); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.deleteAndWait(t, np) })
	r := s.doctorUntil(t, "MonitoringArtefact naming the NetworkPolicy", verdictIs("MonitoringArtefact", "monitoring/networkpolicy", "fail"))
	expect(t, r, 1, []string{linkNetworkPolicy}, "monitoring/networkpolicy", "fail",
		"NetworkPolicy deny-all-ingress denies all ingress", "from Prometheus "+devcluster.MonitoringNamespace+"/"+devcluster.PrometheusName+" is blocked")
}

func (s *installed) testNodeNotReady(t *testing.T) {
	s.baseline(t)
	// The nodes hosting virt-api and virt-controller.
	hosts := map[string]bool{}
	for _, comp := range []string{vocab.VirtAPI, vocab.VirtController} {
		for _, p := range s.pods(t, comp) {
			hosts[p.Spec.NodeName] = true
		}
	}
	if len(hosts) == 0 {
		t.Fatal("no node hosts the control plane")
	}
	// kwok keeps every node Ready (its node-initialize stage re-readies a
	// node whose Ready is not True): stop kwok-controller, which is what
	// dead kubelets look like, and report the nodes NotReady as a kubelet
	// whose runtime is down does (the node lifecycle controller would say
	// Unknown, but only after the cluster's 200 s grace period).
	s.env.StopComponent(t, devcluster.ComponentKwokController)
	t.Cleanup(func() { s.restoreNodes(t, hosts) })
	for n := range hosts {
		s.setNodeNotReady(t, n)
	}
	r := s.doctorUntil(t, "ControlPlaneDown naming the nodes", verdictIs("ControlPlaneDown", "controlplane/nodes", "fail"))
	var ev []string
	for n := range hosts {
		ev = append(ev, n+" is NotReady (Ready=False KubeletNotReady")
	}
	expect(t, r, 1, []string{"controlplane/virt-api", "controlplane/nodes"}, "controlplane/nodes", "fail", ev...)
	expect(t, r, 1, nil, "controlplane/virt-api", "fail", "NotReady: its pods' status is stale")
}

func (s *installed) testUpstreamStrategy(t *testing.T) {
	s.baseline(t)
	ctx := context.Background()
	kv := &kvv1.KubeVirt{}
	if err := s.c.Get(ctx, framework.KubeVirtKey, kv); err != nil {
		t.Fatal(err)
	}
	// The operator stays stopped while the upstream ConfigMap exists: it
	// would load a strategy of the deployment ID from it.
	s.stopOperator(t)
	cm := s.upstreamStrategy(t, kv)
	if err := s.c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	t.Logf("created upstream-shaped strategy ConfigMap %s (ID %s, %s)", cm.Name, cm.Annotations[vocab.InstallStrategyIdentifierAnnotation], cm.Annotations[vocab.InstallStrategyVersionAnnotation])
	t.Cleanup(func() { s.deleteAndWait(t, cm) })

	// The objects exist anyway (virtop created them): a warning.
	r := s.doctorUntil(t, "the upstream strategy reported", verdictIs("Degraded", "monitoring/strategy", "warn"))
	expect(t, r, 1, []string{"monitoring/strategy"}, "monitoring/strategy", "warn", cm.Name+" (upstream's", "has no ServiceMonitor or PrometheusRule", "kubevirt#9356")

	// As on a cluster upstream installed from that strategy: no
	// ServiceMonitor, no PrometheusRule.
	var objs []client.Object
	objs = append(objs, s.managed(t, &monitoringv1.ServiceMonitorList{})...)
	objs = append(objs, s.managed(t, &monitoringv1.PrometheusRuleList{})...)
	for _, o := range objs {
		if err := s.c.Delete(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	r = s.doctorUntil(t, "MonitoringArtefact naming the strategy", verdictIs("MonitoringArtefact", "monitoring/strategy", "fail"))
	expect(t, r, 1, []string{linkStrategy, linkServiceMonitor}, "monitoring/strategy", "fail",
		cm.Name+" (upstream's, "+kv.Status.ObservedKubeVirtVersion+") has no ServiceMonitor or PrometheusRule", "kubevirt#9356")
	expect(t, r, 1, nil, "monitoring/prometheusrule", "fail", "exists in no namespace")
}

// upstreamStrategy is the strategy ConfigMap upstream's operator would have
// written for the running deployment ID had it found no monitoring
// ServiceAccount: upstream's name, labels and annotations (upstream-facts
// §1), the strategy's objects without the ServiceMonitor, the
// PrometheusRule and the monitoring Role/RoleBinding, and without virtop's
// annotations.
func (s *installed) upstreamStrategy(t *testing.T, kv *kvv1.KubeVirt) *corev1.ConfigMap {
	t.Helper()
	ctx := context.Background()
	id := kv.Status.ObservedDeploymentID
	own := &corev1.ConfigMap{}
	if err := s.c.Get(ctx, types.NamespacedName{Namespace: s.ns, Name: strategy.ConfigMapName(id)}, own); err != nil {
		t.Fatalf("virtop's strategy ConfigMap of deployment %s: %v", id, err)
	}
	full, err := strategy.FromConfigMap(own)
	if err != nil {
		t.Fatal(err)
	}
	kept := &strategy.Strategy{Version: full.Version, Registry: full.Registry, ID: full.ID}
	for _, o := range full.Objects {
		kind := strategy.Kind(o)
		if kind == "ServiceMonitor" || kind == "PrometheusRule" {
			continue
		}
		if (kind == "Role" || kind == "RoleBinding") && o.GetName() == "kubevirt-monitoring" {
			continue
		}
		o = o.DeepCopyObject().(client.Object)
		ann := o.GetAnnotations()
		for k := range ann {
			if strings.HasPrefix(k, vocab.VirtopKeyPrefix) {
				delete(ann, k)
			}
		}
		o.SetAnnotations(ann)
		lbl := o.GetLabels()
		delete(lbl, vocab.ManagedByLabel)
		o.SetLabels(lbl)
		kept.Objects = append(kept.Objects, o)
	}
	if len(kept.Objects) == len(full.Objects) {
		t.Fatal("virtop's strategy holds no monitoring objects to leave out")
	}
	cm, err := kept.ConfigMap(s.ns)
	if err != nil {
		t.Fatal(err)
	}
	cm.Name = ""
	cm.GenerateName = "kubevirt-install-strategy-"
	cm.Labels = map[string]string{vocab.InstallStrategyLabel: "", vocab.ManagedByLabel: vocab.UpstreamManagedByValue}
	return cm
}

func (s *installed) testDuplicateShortName(t *testing.T) {
	s.baseline(t)
	ctx := context.Background()
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, group := range []string{"velero.io", "postgresql.cnpg.io"} {
		crd := &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: "backups." + group},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: group, Scope: apiextensionsv1.NamespaceScoped,
				Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "backups", Singular: "backup", Kind: "Backup", ListKind: "BackupList"},
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true, Schema: &apiextensionsv1.CustomResourceValidation{
					OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)},
				}}},
			},
		}
		if err := s.c.Create(ctx, crd); err != nil {
			t.Fatal(err)
		}
		crds = append(crds, crd)
		t.Cleanup(func() { s.deleteAndWait(t, crd) })
	}
	r := s.doctorUntil(t, "the short name backup reported", verdictIs("Healthy", "names/short", "warn"))
	// Informative: a misleading name is no fault of the installation.
	expect(t, r, 0, nil, "names/short", "warn", `"backup" resolves to backups.postgresql.cnpg.io, backups.velero.io`, "fully qualified names")
}

func (s *installed) testUnreachable(t *testing.T) {
	// A kubeconfig of the suite's cluster whose server nothing listens on.
	cfg, err := clientcmd.LoadFromFile(s.env.Cluster.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	addr, err := devcluster.FreeLoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		c.Server = "https://" + addr
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := s.exec(ctx, true, []string{"-o", "json", "--kubeconfig", path})
	if err != nil {
		t.Fatal(err)
	}
	if r.code != 2 {
		t.Errorf("exit code %d for an unreachable API server, want 2; stdout %s; stderr %s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "cannot reach the API server") || !strings.Contains(r.stderr, addr) {
		t.Errorf("stderr does not say the API server at %s cannot be reached: %s", addr, r.stderr)
	}
}

// --- staging helpers ---

// stopOperator stops the operator (SIGTERM: it releases its Lease) and
// starts it again when the test ends, waiting until it has restored the
// control plane.
func (s *installed) stopOperator(t *testing.T) {
	t.Helper()
	s.op.Stop(30 * time.Second)
	t.Cleanup(func() {
		if !s.op.Running() {
			s.op.Start()
		}
		poll.Eventually(t, "the restarted operator holding its Lease", 3*time.Minute, func(ctx context.Context) (bool, error) {
			l := &coordinationv1.Lease{}
			if err := s.c.Get(ctx, types.NamespacedName{Namespace: s.ns, Name: "virt-operator"}, l); err != nil {
				return false, err
			}
			held := l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != ""
			return held, fmt.Errorf("holder %v", l.Spec.HolderIdentity)
		})
		framework.WaitKubeVirt(t, s.c, "Available after the operator restarted", 5*time.Minute, kvtest.RolledOut)
		for _, name := range []string{vocab.VirtAPI, vocab.VirtController} {
			poll.Eventually(t, name+" restored by the operator", 3*time.Minute, func(ctx context.Context) (bool, error) {
				d := &appsv1.Deployment{}
				if err := s.c.Get(ctx, types.NamespacedName{Namespace: s.ns, Name: name}, d); err != nil {
					return false, err
				}
				ok := d.Spec.Replicas != nil && *d.Spec.Replicas > 0 && framework.DeploymentAvailable(d)
				return ok, fmt.Errorf("replicas %v, available %d", d.Spec.Replicas, d.Status.AvailableReplicas)
			})
		}
	})
}

// scale sets a Deployment's replicas (the operator must be stopped, or it
// sets them back).
func (s *installed) scale(t *testing.T, name string, n int32) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: name}}
	if err := s.c.Patch(context.Background(), d, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}

// pods are the pods of a component (label kubevirt.io=<name>), terminating
// ones left out.
func (s *installed) pods(t *testing.T, component string) []corev1.Pod {
	t.Helper()
	var l corev1.PodList
	if err := s.c.List(context.Background(), &l, client.InNamespace(s.ns), client.MatchingLabels{"kubevirt.io": component}); err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// setPodUnready reports a pod's container unready, as the kubelet does
// when its readiness probe fails. kwok leaves it so: its stages only ready
// Pending pods.
func (s *installed) setPodUnready(t *testing.T, p corev1.Pod) {
	t.Helper()
	now := metav1.Now()
	patch := map[string]any{"status": map[string]any{
		"conditions": []map[string]any{
			{"type": "Ready", "status": "False", "reason": "ContainersNotReady", "message": "containers with unready status: [" + p.Spec.Containers[0].Name + "]", "lastTransitionTime": now},
			{"type": "ContainersReady", "status": "False", "reason": "ContainersNotReady", "lastTransitionTime": now},
		},
	}}
	if err := s.c.Status().Patch(context.Background(), &p, client.RawPatch(types.StrategicMergePatchType, mustJSON(t, patch))); err != nil {
		t.Fatal(err)
	}
}

// replacePods deletes pods so that their controllers create ready ones,
// and waits until the component is ready again.
func (s *installed) replacePods(t *testing.T, pods []corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	for i := range pods {
		if err := s.c.Delete(ctx, &pods[i]); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting pod %s: %v", pods[i].Name, err)
		}
	}
	s.waitComponentsReady(t)
}

func (s *installed) waitComponentsReady(t *testing.T) {
	t.Helper()
	for _, name := range []string{vocab.VirtAPI, vocab.VirtController} {
		s.env.WaitDeploymentAvailable(t, s.ns, name, 3*time.Minute)
	}
	s.env.WaitDaemonSetReady(t, s.ns, vocab.VirtHandler, 3*time.Minute)
}

// managed lists the objects of a monitoring kind virtop applied.
func (s *installed) managed(t *testing.T, list client.ObjectList) []client.Object {
	t.Helper()
	if err := s.c.List(context.Background(), list, client.MatchingLabels{vocab.ManagedByLabel: vocab.ManagedByValue}); err != nil {
		t.Fatal(err)
	}
	var out []client.Object
	switch l := list.(type) {
	case *monitoringv1.ServiceMonitorList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *monitoringv1.PrometheusRuleList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	default:
		t.Fatalf("managed: unsupported list %T", list)
	}
	return out
}

func (s *installed) patchPrometheus(t *testing.T, key types.NamespacedName, sel *metav1.LabelSelector) {
	t.Helper()
	// A merge patch would merge the selectors; replace the field.
	patch := []map[string]any{{"op": "replace", "path": "/spec/serviceMonitorSelector", "value": sel}}
	p := &monitoringv1.Prometheus{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	if err := s.c.Patch(context.Background(), p, client.RawPatch(types.JSONPatchType, mustJSON(t, patch))); err != nil {
		t.Fatal(err)
	}
}

func (s *installed) waitMonitoringReady(t *testing.T) {
	t.Helper()
	framework.WaitKubeVirt(t, s.c, "MonitoringReady", 3*time.Minute, func(kv *kvv1.KubeVirt) (bool, string) {
		c := kv.Status.Condition("MonitoringReady")
		return c.Status == corev1.ConditionTrue, fmt.Sprintf("MonitoringReady %s %s: %s", c.Status, c.Reason, c.Message)
	})
}

// labelPod sets (value "\"true\"") or removes (value "null") a pod's
// prometheus.kubevirt.io label.
func (s *installed) labelPod(t *testing.T, key types.NamespacedName, value string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, vocab.PrometheusLabel, value)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	if err := s.c.Patch(context.Background(), p, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("labelling pod %s: %v", key, err)
	}
}

// deleteAndWait deletes an object and waits until it is gone.
func (s *installed) deleteAndWait(t *testing.T, obj client.Object) {
	t.Helper()
	if err := s.c.Delete(context.Background(), obj); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting %s: %v", obj.GetName(), err)
		return
	}
	poll.Eventually(t, obj.GetName()+" gone", 2*time.Minute, func(ctx context.Context) (bool, error) {
		err := s.c.Get(ctx, client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object))
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("still there: %v", err)
	})
}

// setNodeNotReady reports a node NotReady as the kubelet does.
func (s *installed) setNodeNotReady(t *testing.T, name string) {
	t.Helper()
	now := metav1.Now()
	patch := map[string]any{"status": map[string]any{"conditions": []map[string]any{{
		"type": "Ready", "status": "False", "reason": "KubeletNotReady", "message": "container runtime is down",
		"lastHeartbeatTime": now, "lastTransitionTime": now,
	}}}}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := s.c.Status().Patch(context.Background(), n, client.RawPatch(types.StrategicMergePatchType, mustJSON(t, patch))); err != nil {
		t.Fatal(err)
	}
}

// restoreNodes starts kwok-controller again (it reports the nodes Ready)
// and replaces the KubeVirt pods of those nodes, which the node lifecycle
// controller may have marked unready and kwok does not ready again.
func (s *installed) restoreNodes(t *testing.T, hosts map[string]bool) {
	t.Helper()
	if _, ok := s.env.ComponentPID(t, devcluster.ComponentKwokController); !ok {
		// kwok manages a node only while it holds the node's Lease; the
		// stopped instance holds them all, and a new one would wait for
		// them to expire (200 s). They are dead: delete them.
		var leases coordinationv1.LeaseList
		if err := s.c.List(context.Background(), &leases, client.InNamespace(corev1.NamespaceNodeLease)); err != nil {
			t.Fatal(err)
		}
		for i := range leases.Items {
			if err := s.c.Delete(context.Background(), &leases.Items[i]); err != nil && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
		}
		s.env.StartComponent(t, devcluster.ComponentKwokController)
	}
	poll.Eventually(t, "the nodes Ready again", 2*time.Minute, func(ctx context.Context) (bool, error) {
		for n := range hosts {
			node := &corev1.Node{}
			if err := s.c.Get(ctx, types.NamespacedName{Name: n}, node); err != nil {
				return false, err
			}
			for _, c := range node.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
					return false, fmt.Errorf("%s: Ready=%s", n, c.Status)
				}
			}
		}
		return true, nil
	})
	var l corev1.PodList
	if err := s.c.List(context.Background(), &l, client.InNamespace(s.ns)); err != nil {
		t.Fatal(err)
	}
	var stale []corev1.Pod
	for _, p := range l.Items {
		if hosts[p.Spec.NodeName] && p.Labels["kubevirt.io"] != "" {
			stale = append(stale, p)
		}
	}
	s.replacePods(t, stale)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
