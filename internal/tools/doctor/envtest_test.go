package doctor

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/scheme"
	"github.com/virtop-dev/virtop/internal/strategy"
	crdwait "github.com/virtop-dev/virtop/internal/testing/crds"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
	"github.com/virtop-dev/virtop/internal/vocab"
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, testenv.Options{Monitoring: true, Scheme: scheme.New()}))
}

// staged is one staged cluster: an install namespace with the control
// plane's objects written directly (no operator), and a monitoring
// namespace with a Prometheus.
type staged struct {
	env   *testenv.Env
	ns    string
	monNS string
	node  string
	pods  []*corev1.Pod
}

var crdOnce sync.Once

// kubevirtCRDs installs the VirtualMachine and VirtualMachineInstance CRDs
// as virtop renders them, once per test binary.
func kubevirtCRDs(t *testing.T, env *testenv.Env) {
	t.Helper()
	crdOnce.Do(func() {
		ctx := context.Background()
		s := generate(t, "kubevirt")
		for _, o := range s.OfKind("CustomResourceDefinition") {
			crd := o.(*apiextensionsv1.CustomResourceDefinition)
			if crd.Name != "virtualmachines.kubevirt.io" && crd.Name != "virtualmachineinstances.kubevirt.io" {
				continue
			}
			crd = crd.DeepCopy()
			crd.Annotations, crd.Labels = nil, nil
			if err := env.Client.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("creating CRD %s: %v", crd.Name, err)
			}
			waitEstablished(t, env, crd)
		}
	})
}

// waitEstablished waits until crd's kind is served in discovery (which
// comes after Established), so that the tests can write it.
func waitEstablished(t *testing.T, env *testenv.Env, crd *apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	crdwait.WaitServed(t, env.Client, 60*time.Second, crd)
}

func generate(t *testing.T, ns string) *strategy.Strategy {
	t.Helper()
	kv := &kvv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: ns}}
	cfg, err := config.FromKubeVirt(kv, config.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := strategy.Generate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// stage writes a healthy control plane and monitoring chain.
func stage(t *testing.T) *staged {
	t.Helper()
	env := testenv.Get(t)
	kubevirtCRDs(t, env)
	ctx := context.Background()
	c := env.Client
	s := &staged{env: env, ns: env.Namespace(t), monNS: env.Namespace(t)}
	s.node = s.ns + "-node"

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: s.node}}
	must(t, c.Create(ctx, node))
	t.Cleanup(func() { _ = c.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: s.node}}) })
	s.setNodeReady(t, corev1.ConditionTrue)

	for _, comp := range allComponents {
		labels := map[string]string{componentsLbl: comp, promLabel: "true"}
		tmpl := corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: comp, Image: "quay.io/kubevirt/" + comp + ":v1.5.3"}}},
		}
		sel := &metav1.LabelSelector{MatchLabels: map[string]string{componentsLbl: comp}}
		if comp == "virt-handler" {
			ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: comp, Namespace: s.ns}, Spec: appsv1.DaemonSetSpec{Selector: sel, Template: tmpl}}
			must(t, c.Create(ctx, ds))
			must(t, testenv.MarkDaemonSetReady(ctx, c, client.ObjectKeyFromObject(ds), 1))
		} else {
			d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: comp, Namespace: s.ns}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(1)), Selector: sel, Template: tmpl}}
			must(t, c.Create(ctx, d))
			must(t, testenv.MarkDeploymentReady(ctx, c, client.ObjectKeyFromObject(d)))
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: comp + "-aaaaa", Namespace: s.ns, Labels: labels},
			Spec: corev1.PodSpec{NodeName: s.node, Containers: []corev1.Container{{
				Name: comp, Image: "quay.io/kubevirt/" + comp + ":v1.5.3",
				Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 8443}},
			}}},
		}
		must(t, c.Create(ctx, pod))
		s.pods = append(s.pods, pod)
		s.setPodReady(t, pod.Name, true)
	}

	kv := &kvv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: s.ns}}
	must(t, c.Create(ctx, kv))
	kv.Status = kvv1.KubeVirtStatus{
		Phase: kvv1.KubeVirtPhaseDeployed, ObservedKubeVirtVersion: "v1.5.3",
		Conditions: []kvv1.KubeVirtCondition{{Type: kvv1.KubeVirtConditionAvailable, Status: corev1.ConditionTrue, Reason: "AllComponentsReady"}},
	}
	must(t, c.Status().Update(ctx, kv))

	// Two VMIs, one running; one VM.
	for i, phase := range []string{"Running", "Scheduling"} {
		vmi := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
			"metadata": map[string]any{"name": []string{"vmi-a", "vmi-b"}[i], "namespace": s.ns},
			"spec":     map[string]any{"domain": map[string]any{"devices": map[string]any{}}},
			// KubeVirt's VMI CRD has no status subresource: status is
			// written with the object.
			"status": map[string]any{"phase": phase},
		}}
		must(t, c.Create(ctx, vmi))
	}

	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: metricsSvc, Namespace: s.ns, Labels: map[string]string{promLabel: "true", "kubevirt.io": ""}},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  map[string]string{promLabel: "true"},
			Ports:     []corev1.ServicePort{{Name: "metrics", Port: 443, TargetPort: intstr.FromString("metrics")}},
		},
	}
	must(t, c.Create(ctx, svc))
	var podList []corev1.Pod
	for _, p := range s.pods {
		podList = append(podList, *p)
	}
	es := endpointSlice(podList)
	es.Namespace = s.ns
	for i := range es.Endpoints {
		es.Endpoints[i].TargetRef.Namespace = s.ns
	}
	must(t, c.Create(ctx, &es))

	sm := serviceMonitor(s.monNS, map[string]string{promLabel: "true", "k8s-app": "kubevirt"})
	sm.Spec.NamespaceSelector.MatchNames = []string{s.ns}
	must(t, c.Create(ctx, &sm))
	pr := &monitoringv1.PrometheusRule{
		ObjectMeta: metav1.ObjectMeta{Name: ruleName, Namespace: s.ns, Labels: map[string]string{promLabel: "true", "k8s-app": "kubevirt"}},
		Spec: monitoringv1.PrometheusRuleSpec{Groups: []monitoringv1.RuleGroup{{Name: "alerts.rules", Rules: []monitoringv1.Rule{{
			Alert: "VirtAPIDown", Expr: intstr.FromString("kubevirt_virt_api_up == 0"),
		}}}}},
	}
	must(t, c.Create(ctx, pr))
	prom := prometheus(s.monNS, "k8s", &metav1.LabelSelector{}, monitoringv1.EndpointSliceRole)
	// Watch only this test's namespaces: the namespaces of earlier tests
	// stay Terminating with their objects (no controller-manager).
	own := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{s.ns, s.monNS},
	}}}
	prom.Spec.ServiceMonitorNamespaceSelector = own
	prom.Spec.RuleNamespaceSelector = own
	must(t, c.Create(ctx, &prom))
	role := monitoringRole(true)
	role.Namespace = s.ns
	must(t, c.Create(ctx, &role))
	rb := monitoringRoleBinding(s.monNS, promSAName)
	rb.Namespace = s.ns
	must(t, c.Create(ctx, &rb))

	s.ensureAPIService(t)
	return s
}

// ensureAPIService registers v1.subresources.kubevirt.io as a local
// APIService, which the aggregator marks Available without a backend (no
// virt-api serves in envtest). Shared by every test of the binary.
func (s *staged) ensureAPIService(t *testing.T) {
	t.Helper()
	as := &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: "v1.subresources.kubevirt.io"},
		Spec: apiregistrationv1.APIServiceSpec{
			Group: "subresources.kubevirt.io", Version: "v1",
			GroupPriorityMinimum: 1000, VersionPriority: 15,
		},
	}
	if err := s.env.Client.Create(context.Background(), as); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	poll.Eventually(t, "APIService "+as.Name+" available", 60*time.Second, func(ctx context.Context) (bool, error) {
		var got apiregistrationv1.APIService
		if err := s.env.Client.Get(ctx, client.ObjectKeyFromObject(as), &got); err != nil {
			return false, err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == apiregistrationv1.Available && c.Status == apiregistrationv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}

func (s *staged) setNodeReady(t *testing.T, status corev1.ConditionStatus) {
	t.Helper()
	ctx := context.Background()
	var n corev1.Node
	must(t, s.env.Client.Get(ctx, client.ObjectKey{Name: s.node}, &n))
	reason := "KubeletReady"
	if status != corev1.ConditionTrue {
		reason = "NodeStatusUnknown"
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, Reason: reason, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	must(t, s.env.Client.Status().Update(ctx, &n))
}

func (s *staged) setPodReady(t *testing.T, name string, ready bool) {
	t.Helper()
	ctx := context.Background()
	var p corev1.Pod
	must(t, s.env.Client.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: name}, &p))
	st := corev1.ConditionTrue
	if !ready {
		st = corev1.ConditionFalse
	}
	p.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, PodIP: "10.0.0.1",
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
			{Type: corev1.PodReady, Status: st, Reason: map[bool]string{true: "", false: "ContainersNotReady"}[ready]},
		},
		ContainerStatuses: []corev1.ContainerStatus{{Name: p.Spec.Containers[0].Name, Ready: ready, Image: p.Spec.Containers[0].Image, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}},
	}
	must(t, s.env.Client.Status().Update(ctx, &p))
}

func (s *staged) deletePods(t *testing.T, component string) {
	t.Helper()
	ctx := context.Background()
	must(t, s.env.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(s.ns), client.MatchingLabels{componentsLbl: component}, client.GracePeriodSeconds(0)))
	// Grace period 0: without kubelets the API server removes them at once.
}

func (s *staged) run(t *testing.T, cfg *rest.Config) *Report {
	t.Helper()
	if cfg == nil {
		cfg = s.env.Config
	}
	c, err := client.New(cfg, client.Options{Scheme: s.env.Scheme})
	must(t, err)
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	must(t, err)
	g := &Gatherer{Client: c, Discovery: dc, Where: Where{Context: "envtest", Server: cfg.Host, Namespace: s.ns}}
	f, err := g.Gather(context.Background())
	must(t, err)
	r := Run(f)
	var buf bytes.Buffer
	_ = r.WriteText(&buf)
	t.Log("\n" + buf.String())
	return r
}

func expect(t *testing.T, r *Report, verdict Verdict, reason ...string) {
	t.Helper()
	if r.Verdict != verdict {
		t.Fatalf("verdict %s (%s), want %s", r.Verdict, r.Reason, verdict)
	}
	for _, s := range reason {
		if !strings.Contains(r.Reason, s) {
			t.Errorf("reason %q lacks %q", r.Reason, s)
		}
	}
}

func expectCheck(t *testing.T, r *Report, name string, status Status, evidence ...string) {
	t.Helper()
	c := findCheck(t, r, name)
	if c.Status != status {
		t.Errorf("%s: %s (%s), want %s", name, c.Status, c.Evidence, status)
	}
	for _, s := range evidence {
		if !strings.Contains(c.Evidence, s) {
			t.Errorf("%s evidence %q lacks %q", name, c.Evidence, s)
		}
	}
}

func TestEnvHealthy(t *testing.T) {
	s := stage(t)
	r := s.run(t, nil)
	expect(t, r, Healthy)
	expectCheck(t, r, CheckWorkloads, OK, "VirtualMachineInstances (1 Running, 1 Scheduling)")
	expectCheck(t, r, CheckSMSelection, OK, s.monNS+"/k8s")
	expectCheck(t, r, CheckMonitoringRBAC, OK, "endpointslices.discovery.k8s.io")
	expectCheck(t, r, CheckAPIService, OK)
}

func TestEnvVirtAPIScaledToZero(t *testing.T) {
	s := stage(t)
	ctx := context.Background()
	var d appsv1.Deployment
	must(t, s.env.Client.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: "virt-api"}, &d))
	d.Spec.Replicas = ptr.To(int32(0))
	must(t, s.env.Client.Update(ctx, &d))
	s.deletePods(t, "virt-api")
	r := s.run(t, nil)
	expect(t, r, ControlPlaneDown, "controlplane/virt-api", "VMs keep running", "lifecycle operations")
	expectCheck(t, r, CheckVirtAPI, Fail, "Deployment virt-api wants 0")
	expectCheck(t, r, CheckWorkloads, OK, "Running VMs keep running")
}

func TestEnvVirtControllerUnready(t *testing.T) {
	s := stage(t)
	s.setPodReady(t, "virt-controller-aaaaa", false)
	r := s.run(t, nil)
	expect(t, r, ControlPlaneDown, "controlplane/virt-controller")
	expectCheck(t, r, CheckVirtController, Fail, "0 of 1 pods ready", "ContainersNotReady")
}

func TestEnvServiceMonitorMissing(t *testing.T) {
	s := stage(t)
	must(t, s.env.Client.Delete(context.Background(), &monitoringv1.ServiceMonitor{ObjectMeta: metav1.ObjectMeta{Name: smName, Namespace: s.monNS}}))
	r := s.run(t, nil)
	expect(t, r, MonitoringArtefact, LinkServiceMonitor)
	expectCheck(t, r, CheckServiceMonitor, Fail)
}

func TestEnvPrometheusSelectorNeverMatches(t *testing.T) {
	s := stage(t)
	ctx := context.Background()
	var p monitoringv1.Prometheus
	must(t, s.env.Client.Get(ctx, client.ObjectKey{Namespace: s.monNS, Name: "k8s"}, &p))
	p.Spec.ServiceMonitorSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"release": "kube-prometheus-stack"}}
	must(t, s.env.Client.Update(ctx, &p))
	r := s.run(t, nil)
	expect(t, r, MonitoringArtefact, LinkSelection)
	expectCheck(t, r, CheckSMSelection, Fail, "release=kube-prometheus-stack")
}

func TestEnvMetricsServiceWithoutEndpoints(t *testing.T) {
	s := stage(t)
	must(t, s.env.Client.DeleteAllOf(context.Background(), &discoveryv1.EndpointSlice{}, client.InNamespace(s.ns)))
	r := s.run(t, nil)
	expect(t, r, MonitoringArtefact, LinkEndpointSlices)
	expectCheck(t, r, CheckEndpointSlices, Fail, "has no EndpointSlices")
}

func TestEnvDenyAllNetworkPolicy(t *testing.T) {
	s := stage(t)
	np := denyAllPolicy()
	np.Namespace = s.ns
	must(t, s.env.Client.Create(context.Background(), &np))
	r := s.run(t, nil)
	expect(t, r, MonitoringArtefact, LinkNetworkPolicy)
	expectCheck(t, r, CheckNetworkPolicy, Fail, "deny-all denies all ingress")
}

func TestEnvNodeNotReady(t *testing.T) {
	s := stage(t)
	s.setNodeReady(t, corev1.ConditionUnknown)
	r := s.run(t, nil)
	expect(t, r, ControlPlaneDown, "controlplane/virt-api", "controlplane/nodes")
	expectCheck(t, r, CheckNodes, Fail, s.node+" is NotReady")
}

func TestEnvUpstreamStrategyWithoutMonitoring(t *testing.T) {
	s := stage(t)
	ctx := context.Background()
	// Upstream's operator found no monitoring ServiceAccount when it
	// rendered the strategy: no ServiceMonitor, PrometheusRule or
	// monitoring RBAC in it, so it never created them.
	must(t, s.env.Client.Delete(ctx, &monitoringv1.ServiceMonitor{ObjectMeta: metav1.ObjectMeta{Name: smName, Namespace: s.monNS}}))
	full := generate(t, s.ns)
	kept := &strategy.Strategy{Version: full.Version, Registry: full.Registry, ID: full.ID}
	for _, o := range full.Objects {
		switch strategy.Kind(o) {
		case "ServiceMonitor", "PrometheusRule":
			continue
		case "Role", "RoleBinding":
			if o.GetName() == monRBACName {
				continue
			}
		}
		kept.Objects = append(kept.Objects, o)
	}
	cm, err := kept.ConfigMap(s.ns)
	must(t, err)
	cm.Name = ""
	cm.GenerateName = "kubevirt-install-strategy-"
	delete(cm.Labels, vocab.ManagedByLabel)
	must(t, s.env.Client.Create(ctx, cm))

	r := s.run(t, nil)
	expect(t, r, MonitoringArtefact, LinkStrategy, LinkServiceMonitor)
	expectCheck(t, r, CheckStrategy, Fail, "upstream's", "has no ServiceMonitor or PrometheusRule", "kubevirt#9356")
}

func TestEnvDuplicateShortName(t *testing.T) {
	s := stage(t)
	ctx := context.Background()
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "virtualmachineimages.images.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "images.example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "virtualmachineimages", Singular: "virtualmachineimage", Kind: "VirtualMachineImage", ShortNames: []string{"vmi"}},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true, Schema: &apiextensionsv1.CustomResourceValidation{
				OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)},
			}}},
		},
	}
	must(t, s.env.Client.Create(ctx, crd))
	t.Cleanup(func() { _ = s.env.Client.Delete(context.Background(), crd) })
	waitEstablished(t, s.env, crd)
	var r *Report
	poll.Eventually(t, "the short-name check to warn", 60*time.Second, func() (bool, string) {
		r = s.run(t, nil)
		c := findCheck(t, r, CheckShortNames)
		return c.Status == Warn, fmt.Sprintf("%s: %s", c.Status, c.Evidence)
	})
	expect(t, r, Healthy)
	expectCheck(t, r, CheckShortNames, Warn, `"vmi" resolves to virtualmachineimages.images.example.com, virtualmachineinstances.kubevirt.io`)
}

// A user with no permissions: every read is forbidden, doctor names the
// skipped checks and cannot decide.
func TestEnvForbidden(t *testing.T) {
	s := stage(t)
	cfg := rest.CopyConfig(s.env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "doctor-nobody"}
	r := s.run(t, cfg)
	expect(t, r, Unknown, "not allowed to list pods")
	expectCheck(t, r, CheckVirtAPI, Skipped, "not allowed to list pods in "+s.ns)
	expectCheck(t, r, CheckMonitoringRBAC, Skipped, "not allowed to list prometheuses.monitoring.coreos.com")
	c := findCheck(t, r, CheckVirtAPI)
	if !strings.Contains(c.Hint, "auth can-i list pods -n "+s.ns) {
		t.Errorf("hint %q", c.Hint)
	}
}

// Read-only: a user allowed only get/list/watch on everything gets the
// full verdict.
func TestEnvReadOnlyUser(t *testing.T) {
	s := stage(t)
	ctx := context.Background()
	cr := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "doctor-read-" + s.ns},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}}},
	}
	must(t, s.env.Client.Create(ctx, cr))
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: cr.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: cr.Name},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: "doctor-reader-" + s.ns}},
	}
	must(t, s.env.Client.Create(ctx, crb))
	t.Cleanup(func() {
		_ = s.env.Client.Delete(context.Background(), crb)
		_ = s.env.Client.Delete(context.Background(), cr)
	})
	cfg := rest.CopyConfig(s.env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "doctor-reader-" + s.ns}
	var r *Report
	// RBAC caches need a moment to see the new binding.
	poll.Eventually(t, "a healthy verdict for a read-only user", 60*time.Second, func() (bool, string) {
		r = s.run(t, cfg)
		return r.Verdict == Healthy, fmt.Sprintf("verdict %s (%s)", r.Verdict, r.Reason)
	})
}

// TestEnvAPIServices: every APIService of KubeVirt's is read, also one
// besides v1.subresources.kubevirt.io (here: labelled as virtop's), and
// one registered but unavailable is named with the aggregator's reason;
// an APIService of someone else's is left out.
func TestEnvAPIServices(t *testing.T) {
	s := stage(t)
	ctx := context.Background()
	group := s.ns + ".doctor.test"
	mk := func(version string, labels map[string]string, svcNS string) *apiregistrationv1.APIService {
		as := &apiregistrationv1.APIService{
			ObjectMeta: metav1.ObjectMeta{Name: version + "." + group, Labels: labels},
			Spec: apiregistrationv1.APIServiceSpec{
				Group: group, Version: version, GroupPriorityMinimum: 1000, VersionPriority: 15,
				Service:               &apiregistrationv1.ServiceReference{Namespace: svcNS, Name: "virt-api", Port: ptr.To(int32(443))},
				InsecureSkipTLSVerify: true,
			},
		}
		must(t, s.env.Client.Create(ctx, as))
		t.Cleanup(func() { _ = s.env.Client.Delete(context.Background(), as) })
		return as
	}
	ours := mk("v1alpha3", map[string]string{vocab.ManagedByLabel: vocab.ManagedByValue}, "elsewhere-"+s.ns)
	mk("v1beta1", nil, "elsewhere-"+s.ns)
	var r *Report
	poll.Eventually(t, "the aggregator to mark "+ours.Name+" unavailable", 60*time.Second, func() (bool, string) {
		r = s.run(t, nil)
		c := findCheck(t, r, CheckAPIService)
		return c.Status == Fail, fmt.Sprintf("%s: %s", c.Status, c.Evidence)
	})
	expect(t, r, Degraded, CheckAPIService)
	expectCheck(t, r, CheckAPIService, Fail, "APIService "+ours.Name+" is unavailable (Available=False ServiceNotFound: ", "Available: v1.subresources.kubevirt.io.")
	if c := findCheck(t, r, CheckAPIService); strings.Contains(c.Evidence, "v1beta1."+group) || !strings.Contains(c.Hint, ours.Name) {
		t.Errorf("evidence %q names someone else's APIService, or hint %q not ours", c.Evidence, c.Hint)
	}
}
