package doctor

import (
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/utils/ptr"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
)

// Literal names, as upstream names them (upstream-facts §3.3, §5), so the
// fixtures do not depend on the code under test.
const (
	testNS        = "kubevirt"
	monNS         = "monitoring"
	metricsSvc    = "kubevirt-prometheus-metrics"
	smName        = "prometheus-kubevirt-rules"
	ruleName      = "prometheus-kubevirt-rules"
	monRBACName   = "kubevirt-monitoring"
	promSAName    = "prometheus-k8s"
	promLabel     = "prometheus.kubevirt.io"
	componentsLbl = "kubevirt.io"
)

var testNow = time.Date(2026, 10, 1, 12, 0, 0, 0, time.UTC)

var allComponents = []string{"virt-api", "virt-controller", "virt-handler", "virt-operator"}

func readyNode(name string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"},
		}},
	}
}

func componentPod(component, suffix, node string, ready bool) corev1.Pod {
	status := corev1.ConditionTrue
	if !ready {
		status = corev1.ConditionFalse
	}
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: component + "-" + suffix, Namespace: testNS,
			Labels: map[string]string{componentsLbl: component, promLabel: "true"},
		},
		Spec: corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			PodIP:      "10.0.0.1",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}},
		},
	}
}

func endpointSlice(pods []corev1.Pod) discoveryv1.EndpointSlice {
	s := discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: metricsSvc + "-abcde", Namespace: testNS,
			Labels: map[string]string{discoveryv1.LabelServiceName: metricsSvc},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("metrics"), Port: ptr.To(int32(8443))}},
	}
	for _, p := range pods {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{"10.0.0.1"},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Name: p.Name, Namespace: testNS},
		})
	}
	return s
}

// healthyFacts is a cluster where everything holds: one node, every
// component ready, kube-prometheus-like monitoring (Prometheus k8s in
// monitoring, open selectors, EndpointSlice discovery, a Role granting
// endpointslices).
func healthyFacts() *Facts {
	f := &Facts{
		Where:      Where{Context: "test-ctx", Server: "https://127.0.0.1:6443", Namespace: testNS},
		Now:        testNow,
		Reads:      map[string]error{},
		Namespace:  &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNS, Labels: map[string]string{"kubevirt.io": ""}}},
		Namespaces: map[string]*corev1.Namespace{},
		Nodes:      map[string]*corev1.Node{"node-1": readyNode("node-1")},
	}
	f.Namespaces[testNS] = f.Namespace
	f.Namespaces[monNS] = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: monNS, Labels: map[string]string{"kubernetes.io/metadata.name": monNS}}}
	for _, c := range allComponents {
		f.Pods = append(f.Pods, componentPod(c, "aaaaa", "node-1", true))
		if c == "virt-handler" {
			f.DaemonSets = append(f.DaemonSets, appsv1.DaemonSet{
				ObjectMeta: metav1.ObjectMeta{Name: c, Namespace: testNS},
				Status:     appsv1.DaemonSetStatus{DesiredNumberScheduled: 1, NumberReady: 1},
			})
			continue
		}
		f.Deployments = append(f.Deployments, appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: c, Namespace: testNS},
			Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(int32(1))},
		})
	}
	f.KubeVirts = []kvv1.KubeVirt{{
		ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: testNS},
		Status: kvv1.KubeVirtStatus{
			Phase:                   kvv1.KubeVirtPhaseDeployed,
			ObservedKubeVirtVersion: "v1.5.3",
			ObservedDeploymentID:    "id-1",
			Conditions: []kvv1.KubeVirtCondition{
				{Type: kvv1.KubeVirtConditionAvailable, Status: corev1.ConditionTrue},
				{Type: kvv1.KubeVirtConditionProgressing, Status: corev1.ConditionFalse},
				{Type: kvv1.KubeVirtConditionDegraded, Status: corev1.ConditionFalse},
			},
		},
	}}
	f.Workloads = Workloads{VMs: 3, VMsRunning: 2, VMIs: 2, VMIsRunning: 2, ByPhase: map[string]int{"Running": 2}, RunningByNode: map[string]int{"node-1": 2}}
	f.MetricsService = &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: metricsSvc, Namespace: testNS, Labels: map[string]string{promLabel: "true", "kubevirt.io": ""}},
		Spec: corev1.ServiceSpec{
			Selector:  map[string]string{promLabel: "true"},
			Ports:     []corev1.ServicePort{{Name: "metrics", Port: 443, TargetPort: intstr.FromString("metrics")}},
			ClusterIP: corev1.ClusterIPNone,
		},
	}
	f.EndpointSlices = []discoveryv1.EndpointSlice{endpointSlice(f.Pods)}
	f.ServiceMonitors = []monitoringv1.ServiceMonitor{serviceMonitor(monNS, map[string]string{promLabel: "true", "k8s-app": "kubevirt"})}
	f.PrometheusRules = []metav1.PartialObjectMetadata{{ObjectMeta: metav1.ObjectMeta{Name: ruleName, Namespace: testNS, Labels: map[string]string{promLabel: "true", "k8s-app": "kubevirt"}}}}
	f.Prometheuses = []monitoringv1.Prometheus{prometheus(monNS, "k8s", &metav1.LabelSelector{}, monitoringv1.EndpointSliceRole)}
	f.Roles = []rbacv1.Role{monitoringRole(true)}
	f.RoleBindings = []rbacv1.RoleBinding{monitoringRoleBinding(monNS, promSAName)}
	f.Strategies = []StrategyFacts{{Name: "kubevirt-install-strategy-abcde", ID: "id-1", Version: "v1.5.3", Kinds: map[string]int{"ServiceMonitor": 1, "PrometheusRule": 1, "Deployment": 4}}}
	f.APIServices = []apiregistrationv1.APIService{{
		ObjectMeta: metav1.ObjectMeta{Name: "v1.subresources.kubevirt.io"},
		Status: apiregistrationv1.APIServiceStatus{Conditions: []apiregistrationv1.APIServiceCondition{
			{Type: apiregistrationv1.Available, Status: apiregistrationv1.ConditionTrue},
		}},
	}}
	f.Resources = []Resource{
		{Group: "kubevirt.io", Version: "v1", Name: "virtualmachineinstances", SingularName: "virtualmachineinstance", Kind: "VirtualMachineInstance", ShortNames: []string{"vmi", "vmis"}},
		{Group: "kubevirt.io", Version: "v1", Name: "virtualmachines", SingularName: "virtualmachine", Kind: "VirtualMachine", ShortNames: []string{"vm", "vms"}},
		{Group: "kubevirt.io", Version: "v1", Name: "kubevirts", SingularName: "kubevirt", Kind: "KubeVirt", ShortNames: []string{"kv", "kvs"}},
		{Group: "", Version: "v1", Name: "events", SingularName: "event", Kind: "Event", ShortNames: []string{"ev"}},
		{Group: "events.k8s.io", Version: "v1", Name: "events", SingularName: "event", Kind: "Event", ShortNames: []string{"ev"}},
	}
	return f
}

func serviceMonitor(ns string, labels map[string]string) monitoringv1.ServiceMonitor {
	return monitoringv1.ServiceMonitor{
		ObjectMeta: metav1.ObjectMeta{Name: smName, Namespace: ns, Labels: labels},
		Spec: monitoringv1.ServiceMonitorSpec{
			Selector:          metav1.LabelSelector{MatchLabels: map[string]string{promLabel: "true"}},
			NamespaceSelector: monitoringv1.NamespaceSelector{MatchNames: []string{testNS}},
			Endpoints:         []monitoringv1.Endpoint{{Port: "metrics"}},
		},
	}
}

func prometheus(ns, name string, sel *metav1.LabelSelector, role monitoringv1.ServiceDiscoveryRole) monitoringv1.Prometheus {
	p := monitoringv1.Prometheus{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	p.Spec.ServiceAccountName = promSAName
	p.Spec.ServiceMonitorSelector = sel
	p.Spec.ServiceMonitorNamespaceSelector = &metav1.LabelSelector{}
	p.Spec.RuleSelector = &metav1.LabelSelector{}
	p.Spec.RuleNamespaceSelector = &metav1.LabelSelector{}
	p.Spec.ServiceDiscoveryRole = ptr.To(role)
	return p
}

func monitoringRole(withSlices bool) rbacv1.Role {
	rules := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"services", "endpoints", "pods"}, Verbs: []string{"get", "list", "watch"}}}
	if withSlices {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}})
	}
	return rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: monRBACName, Namespace: testNS}, Rules: rules}
}

func monitoringRoleBinding(saNS, sa string) rbacv1.RoleBinding {
	return rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: monRBACName, Namespace: testNS},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: monRBACName},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: saNS}},
	}
}

// virtopOperator makes the fixture's Deployment virt-operator run virtop's
// operator with args.
func virtopOperator(f *Facts, args ...string) {
	for i := range f.Deployments {
		if f.Deployments[i].Name == "virt-operator" {
			f.Deployments[i].Spec.Template.Spec.Containers = []corev1.Container{{
				Name: "virt-operator", Args: append([]string{"operator", "--namespace=$(POD_NAMESPACE)"}, args...),
			}}
		}
	}
}

// metricsReaderRole is virtop's ClusterRole virtop-metrics-reader.
func metricsReaderRole() rbacv1.ClusterRole {
	return rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "virtop-metrics-reader"},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}
}
