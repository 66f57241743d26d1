package doctor

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/utils/ptr"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/vocab"
)

func findCheck(t *testing.T, r *Report, name string) Check {
	t.Helper()
	for _, c := range r.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no check %s in %v", name, names(r.Checks))
	return Check{}
}

func names(cs []Check) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name+"="+string(c.Status))
	}
	return out
}

func forbidden(resource string) error {
	return apierrors.NewForbidden(schema.GroupResource{Resource: resource}, "", errors.New("RBAC: access denied"))
}

func removePods(f *Facts, component string) {
	var keep []corev1.Pod
	for _, p := range f.Pods {
		if p.Labels["kubevirt.io"] != component {
			keep = append(keep, p)
		}
	}
	f.Pods = keep
}

func setPodReady(f *Facts, component string, ready bool) {
	for i := range f.Pods {
		if f.Pods[i].Labels["kubevirt.io"] == component {
			s := corev1.ConditionTrue
			if !ready {
				s = corev1.ConditionFalse
			}
			f.Pods[i].Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: s, Reason: "ContainersNotReady"}}
		}
	}
}

// virtopStrategy makes the current strategy virtop's, holding the APIService
// gated on virt-api answering.
func virtopStrategy(f *Facts) {
	f.Strategies[0].Virtop = true
	f.Strategies[0].APIServicesAwaitingVirtAPI = []string{"v1.subresources.kubevirt.io", "v1alpha3.subresources.kubevirt.io"}
}

func operatorLease(holder string, renewed time.Time, seconds int32) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "virt-operator", Namespace: testNS},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(holder),
			LeaseDurationSeconds: ptr.To(seconds),
			RenewTime:            &metav1.MicroTime{Time: renewed},
		},
	}
}

func denyAllPolicy() networkingv1.NetworkPolicy {
	return networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-all", Namespace: testNS},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		},
	}
}

func allowMonitoringPolicy() networkingv1.NetworkPolicy {
	return networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "allow-prometheus", Namespace: testNS},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{promLabel: "true"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{
					NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": monNS}},
					PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{vocab.AppNameLabel: "prometheus"}},
				}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromInt32(8443))}},
			}},
		},
	}
}

func TestVerdicts(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(f *Facts)
		want   Verdict
		// reason and check evidence must contain these.
		reason     []string
		checkName  string
		checkState Status
		evidence   []string
	}{
		{name: "healthy", mutate: func(*Facts) {}, want: Healthy},
		{
			name: "virt-api scaled to zero", want: ControlPlaneDown,
			mutate: func(f *Facts) {
				removePods(f, "virt-api")
				f.deployment("virt-api").Spec.Replicas = ptr.To(int32(0))
			},
			reason:    []string{"controlplane/virt-api", "2 VMs keep running", "lifecycle operations"},
			checkName: "controlplane/virt-api", checkState: Fail, evidence: []string{"0 of 0 pods ready", "Deployment virt-api wants 0"},
		},
		{
			name: "workloads say running VMs keep running", want: ControlPlaneDown,
			mutate:    func(f *Facts) { removePods(f, "virt-api") },
			checkName: "workloads", checkState: OK, evidence: []string{"2 VirtualMachineInstances (2 Running", "Running VMs keep running"},
		},
		{
			name: "virt-controller unready", want: ControlPlaneDown,
			mutate:    func(f *Facts) { setPodReady(f, "virt-controller", false) },
			reason:    []string{"controlplane/virt-controller"},
			checkName: "controlplane/virt-controller", checkState: Fail, evidence: []string{"0 of 1 pods ready", "not ready (ContainersNotReady) on node node-1 (Ready)"},
		},
		{
			name: "virt-handler unready is Degraded", want: Degraded,
			mutate:    func(f *Facts) { setPodReady(f, "virt-handler", false) },
			reason:    []string{"controlplane/virt-handler"},
			checkName: "controlplane/virt-handler", checkState: Fail,
		},
		{
			name: "virt-operator absent is Degraded", want: Degraded,
			mutate:    func(f *Facts) { removePods(f, "virt-operator") },
			checkName: "controlplane/virt-operator", checkState: Fail, evidence: []string{"Nothing reconciles"},
		},
		{
			name: "ServiceMonitor missing", want: MonitoringArtefact,
			mutate:    func(f *Facts) { f.ServiceMonitors = nil },
			reason:    []string{"ServiceMonitor prometheus-kubevirt-rules"},
			checkName: "monitoring/servicemonitor", checkState: Fail, evidence: []string{"exists in no namespace"},
		},
		{
			name: "Prometheus selector never matches", want: MonitoringArtefact,
			mutate: func(f *Facts) {
				f.Prometheuses[0].Spec.ServiceMonitorSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"release": "kps"}}
			},
			reason:    []string{"ServiceMonitor not selected by any Prometheus"},
			checkName: "monitoring/servicemonitor-selection", checkState: Fail, evidence: []string{"monitoring/k8s", "release=kps"},
		},
		{
			name: "Prometheus selector invalid", want: MonitoringArtefact,
			mutate: func(f *Facts) {
				f.Prometheuses[0].Spec.ServiceMonitorSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpIn}}}
			},
			checkName: "monitoring/servicemonitor-selection", checkState: Fail, evidence: []string{"matches nothing"},
		},
		{
			name: "Prometheus namespace selector misses the ServiceMonitor namespace", want: MonitoringArtefact,
			mutate: func(f *Facts) {
				f.Prometheuses[0].Spec.ServiceMonitorNamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"openshift.io/cluster-monitoring": "true"}}
			},
			checkName: "monitoring/servicemonitor-selection", checkState: Fail, evidence: []string{"does not select namespace monitoring"},
		},
		{
			name: "unset selector selects nothing", want: MonitoringArtefact,
			mutate:    func(f *Facts) { f.Prometheuses[0].Spec.ServiceMonitorSelector = nil },
			checkName: "monitoring/servicemonitor-selection", checkState: Fail, evidence: []string{"unset"},
		},
		{
			name: "metrics Service without endpoints", want: MonitoringArtefact,
			mutate:    func(f *Facts) { f.EndpointSlices = nil },
			reason:    []string{"EndpointSlices of kubevirt-prometheus-metrics"},
			checkName: "monitoring/endpointslices", checkState: Fail, evidence: []string{"has no EndpointSlices", "4 ready pods"},
		},
		{
			name: "endpoint slice without the metrics port", want: MonitoringArtefact,
			mutate:    func(f *Facts) { f.EndpointSlices[0].Ports = []discoveryv1.EndpointPort{{Name: ptr.To("http")}} },
			checkName: "monitoring/endpointslices", checkState: Fail, evidence: []string{"none with port metrics"},
		},
		{
			name: "metrics Service missing", want: MonitoringArtefact,
			mutate:    func(f *Facts) { f.MetricsService = nil },
			reason:    []string{"Service kubevirt-prometheus-metrics"},
			checkName: "monitoring/service", checkState: Fail,
		},
		{
			name: "deny-all NetworkPolicy", want: MonitoringArtefact,
			mutate:    func(f *Facts) { f.NetworkPolicies = append(f.NetworkPolicies, denyAllPolicy()) },
			reason:    []string{"NetworkPolicy"},
			checkName: "monitoring/networkpolicy", checkState: Fail, evidence: []string{"deny-all denies all ingress", "is blocked for virt-api-aaaaa"},
		},
		{
			name: "deny-all plus an allow for Prometheus", want: Healthy,
			mutate: func(f *Facts) {
				f.NetworkPolicies = append(f.NetworkPolicies, denyAllPolicy(), allowMonitoringPolicy())
			},
			checkName: "monitoring/networkpolicy", checkState: OK, evidence: []string{"other policies admit Prometheus"},
		},
		{
			name: "allow on the wrong port", want: MonitoringArtefact,
			mutate: func(f *Facts) {
				p := allowMonitoringPolicy()
				p.Spec.Ingress[0].Ports = []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromInt32(9090))}}
				f.NetworkPolicies = append(f.NetworkPolicies, p)
			},
			checkName: "monitoring/networkpolicy", checkState: Fail, evidence: []string{"port metrics (8443) from Prometheus monitoring/k8s is blocked"},
		},
		{
			name: "node of the control plane NotReady", want: ControlPlaneDown,
			mutate: func(f *Facts) {
				f.Nodes["node-1"].Status.Conditions[0].Status = corev1.ConditionUnknown
				f.Nodes["node-1"].Status.Conditions[0].Reason = "NodeStatusUnknown"
			},
			reason:    []string{"controlplane/virt-api", "controlplane/nodes"},
			checkName: "controlplane/nodes", checkState: Fail, evidence: []string{"node-1 is NotReady", "Ready=Unknown NodeStatusUnknown", "virt-api-aaaaa"},
		},
		{
			name: "upstream strategy without monitoring objects while a Prometheus exists", want: MonitoringArtefact,
			mutate: func(f *Facts) {
				f.ServiceMonitors = nil
				f.Strategies = []StrategyFacts{{Name: "kubevirt-install-strategy-xyz", ID: "id-1", Version: "v1.5.3", Kinds: map[string]int{"Deployment": 4}}}
			},
			reason:    []string{"install strategy without monitoring objects", "ServiceMonitor prometheus-kubevirt-rules"},
			checkName: "monitoring/strategy", checkState: Fail, evidence: []string{"upstream's", "has no ServiceMonitor or PrometheusRule", "kubevirt#9356"},
		},
		{
			name: "stale strategy of another ID is ignored", want: Healthy,
			mutate: func(f *Facts) {
				f.Strategies = append(f.Strategies, StrategyFacts{Name: "kubevirt-install-strategy-old", ID: "id-0", Kinds: map[string]int{"Deployment": 4}})
			},
		},
		{
			name: "RBAC without endpointslices under EndpointSlice discovery", want: MonitoringArtefact,
			mutate:    func(f *Facts) { f.Roles = []rbacv1.Role{monitoringRole(false)} },
			reason:    []string{"Role/RoleBinding for the Prometheus ServiceAccount"},
			checkName: "monitoring/rbac", checkState: Fail, evidence: []string{"cannot list/watch endpointslices.discovery.k8s.io in kubevirt"},
		},
		{
			name: "RBAC without endpointslices under Endpoints discovery warns", want: Degraded,
			mutate: func(f *Facts) {
				f.Roles = []rbacv1.Role{monitoringRole(false)}
				f.Prometheuses[0].Spec.ServiceDiscoveryRole = ptr.To(monitoringv1.EndpointsRole)
			},
			checkName: "monitoring/rbac", checkState: Warn, evidence: []string{"PR #19041"},
		},
		{
			name: "virtop's operator authenticates its metrics and the Prometheus may not get /metrics", want: Degraded,
			mutate: func(f *Facts) {
				virtopOperator(f, "--metrics-bind-address=:8443")
				f.ClusterRoles = []rbacv1.ClusterRole{metricsReaderRole()}
			},
			checkName: "monitoring/rbac", checkState: Warn, evidence: []string{"may not get /metrics", "virtop-metrics-reader"},
		},
		{
			name: "virtop's operator authenticates its metrics and the Prometheus is bound to virtop-metrics-reader", want: Healthy,
			mutate: func(f *Facts) {
				virtopOperator(f, "--metrics-bind-address=:8443")
				f.ClusterRoles = []rbacv1.ClusterRole{metricsReaderRole()}
				f.ClusterRoleBindings = []rbacv1.ClusterRoleBinding{{
					ObjectMeta: metav1.ObjectMeta{Name: "virtop-metrics-reader"},
					RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "virtop-metrics-reader"},
					Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: monNS, Name: promSAName}},
				}}
			},
			checkName: "monitoring/rbac", checkState: OK,
		},
		{
			name: "virtop's operator with --metrics-auth=false needs no /metrics grant", want: Healthy,
			mutate: func(f *Facts) {
				virtopOperator(f, "--metrics-bind-address=:8443", "--metrics-auth=false")
				f.ClusterRoles = []rbacv1.ClusterRole{metricsReaderRole()}
			},
			checkName: "monitoring/rbac", checkState: OK,
		},
		{
			name: "RBAC bound to another ServiceAccount", want: MonitoringArtefact,
			mutate:    func(f *Facts) { f.RoleBindings = []rbacv1.RoleBinding{monitoringRoleBinding(monNS, "prometheus-kps")} },
			checkName: "monitoring/rbac", checkState: Fail,
		},
		{
			name: "PrometheusRule missing", want: MonitoringArtefact,
			mutate:    func(f *Facts) { f.PrometheusRules = nil },
			reason:    []string{"PrometheusRule prometheus-kubevirt-rules"},
			checkName: "monitoring/prometheusrule", checkState: Fail,
		},
		{
			name: "pods forbidden", want: Unknown,
			mutate: func(f *Facts) {
				f.Pods = nil
				f.Reads[ReadPods] = forbidden("pods")
			},
			reason:    []string{"cannot read the control plane", "not allowed to list pods"},
			checkName: "controlplane/virt-api", checkState: Skipped, evidence: []string{"not allowed to list pods in kubevirt"},
		},
		{
			name: "namespace missing", want: Unknown,
			mutate: func(f *Facts) {
				f.Namespace = nil
				f.Pods, f.Deployments, f.DaemonSets, f.KubeVirts = nil, nil, nil, nil
			},
			reason: []string{"no KubeVirt installation in namespace kubevirt"},
		},
		{
			name: "KubeVirt in another namespace", want: Unknown,
			mutate: func(f *Facts) {
				f.Pods, f.Deployments, f.DaemonSets = nil, nil, nil
				f.KubeVirts[0].Namespace = "openshift-cnv"
			},
			reason: []string{"openshift-cnv/kubevirt", "--namespace"},
		},
		{
			name: "APIService unavailable", want: Degraded,
			mutate: func(f *Facts) {
				f.APIServices[0].Status.Conditions[0] = apiregistrationv1.APIServiceCondition{Type: apiregistrationv1.Available, Status: apiregistrationv1.ConditionFalse, Reason: "FailedDiscoveryCheck", Message: "no response"}
			},
			checkName: "install/apiservice", checkState: Fail, evidence: []string{"deleting any namespace", "hangs"},
		},
		{
			name: "every KubeVirt APIService available", want: Healthy,
			mutate: func(f *Facts) {
				f.APIServices = append(f.APIServices, *f.APIServices[0].DeepCopy())
				f.APIServices[1].Name = "v1alpha3.subresources.kubevirt.io"
			},
			checkName: "install/apiservice", checkState: OK,
			evidence: []string{"APIServices v1.subresources.kubevirt.io, v1alpha3.subresources.kubevirt.io are available."},
		},
		{
			name: "one of two APIServices unavailable: named, with its reason and message", want: Degraded,
			mutate: func(f *Facts) {
				f.APIServices = append(f.APIServices, *f.APIServices[0].DeepCopy())
				f.APIServices[1].Name = "v1alpha3.subresources.kubevirt.io"
				f.APIServices[1].Status.Conditions[0] = apiregistrationv1.APIServiceCondition{Type: apiregistrationv1.Available, Status: apiregistrationv1.ConditionFalse,
					Reason: "FailedDiscoveryCheck", Message: "failing or missing response from https://10.96.0.5:443/apis/subresources.kubevirt.io/v1alpha3: bad status from https://10.96.0.5:443/apis/subresources.kubevirt.io/v1alpha3: 503"}
			},
			reason:    []string{"install/apiservice"},
			checkName: "install/apiservice", checkState: Fail,
			evidence: []string{
				"APIService v1alpha3.subresources.kubevirt.io is unavailable (Available=False FailedDiscoveryCheck: failing or missing response from https://10.96.0.5:443/apis/subresources.kubevirt.io/v1alpha3: bad status",
				"deleting any namespace", "Available: v1.subresources.kubevirt.io.",
			},
		},
		{
			name: "APIService absent, upstream's install", want: Degraded,
			mutate:    func(f *Facts) { f.APIServices = nil },
			checkName: "install/apiservice", checkState: Warn, evidence: []string{"is not registered", "virtctl console"},
		},
		{
			name: "APIService withheld by virtop: virt-api unreachable from the API server is Degraded", want: Degraded,
			mutate: func(f *Facts) {
				f.APIServices = nil
				virtopStrategy(f)
			},
			reason:    []string{"install/apiservice"},
			checkName: "install/apiservice", checkState: Warn,
			evidence: []string{"withheld by virtop", "ConfigMap kubevirt-install-strategy-abcde", "ready:virt-api", "Nothing hangs", "cannot reach virt-api"},
		},
		{
			name: "APIService withheld by virtop on simulated nodes is the design", want: Healthy,
			mutate: func(f *Facts) {
				f.APIServices = nil
				virtopStrategy(f)
				f.Nodes["node-1"].Annotations = map[string]string{"kwok.x-k8s.io/node": "fake"}
			},
			checkName: "install/apiservice", checkState: OK, evidence: []string{"withheld by virtop", "simulated (kwok) nodes (node-1)"},
		},
		{
			name: "APIService withheld, one virt-api pod on a real node", want: Degraded,
			mutate: func(f *Facts) {
				f.APIServices = nil
				virtopStrategy(f)
				f.Nodes["node-1"].Annotations = map[string]string{"kwok.x-k8s.io/node": "fake"}
				f.Nodes["node-2"] = readyNode("node-2")
				f.Pods = append(f.Pods, componentPod("virt-api", "bbbbb", "node-2", true))
			},
			checkName: "install/apiservice", checkState: Warn, evidence: []string{"withheld by virtop", "cannot reach virt-api"},
		},
		{
			name: "virt-operator without a pod but holding its Lease", want: Healthy,
			mutate: func(f *Facts) {
				removePods(f, "virt-operator")
				f.OperatorLease = operatorLease("host_1234", testNow.Add(-5*time.Second), 60)
			},
			checkName: "controlplane/virt-operator", checkState: OK, evidence: []string{"no virt-operator pod in kubevirt", "held by host_1234, renewed 5s ago"},
		},
		{
			name: "virt-operator without a pod, Lease released", want: Degraded,
			mutate: func(f *Facts) {
				removePods(f, "virt-operator")
				f.OperatorLease = operatorLease("", testNow.Add(-5*time.Second), 1)
			},
			checkName: "controlplane/virt-operator", checkState: Fail, evidence: []string{"Lease kubevirt/virt-operator is released", "Nothing reconciles"},
		},
		{
			name: "virt-operator without a pod, Lease expired", want: Degraded,
			mutate: func(f *Facts) {
				removePods(f, "virt-operator")
				f.OperatorLease = operatorLease("host_1234", testNow.Add(-2*time.Minute), 60)
			},
			checkName: "controlplane/virt-operator", checkState: Fail, evidence: []string{"expired: host_1234 last renewed it 2m0s ago"},
		},
		{
			name: "virt-operator pods unready while the Lease is renewed", want: Degraded,
			mutate: func(f *Facts) {
				setPodReady(f, "virt-operator", false)
				f.OperatorLease = operatorLease("virt-operator-aaaaa_x", testNow.Add(-time.Second), 60)
			},
			checkName: "controlplane/virt-operator", checkState: Warn, evidence: []string{"0 of 1 virt-operator pods ready", "held by virt-operator-aaaaa_x"},
		},
		{
			name: "strategy Job pod unschedulable", want: Degraded,
			mutate: func(f *Facts) {
				f.Pods = append(f.Pods, corev1.Pod{
					ObjectMeta: metav1.ObjectMeta{Name: "virt-install-strategy-job-abc-xyz", Namespace: testNS,
						OwnerReferences: []metav1.OwnerReference{{Kind: "Job", Name: "virt-install-strategy-job-abc", APIVersion: "batch/v1", UID: "u"}}},
					Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
						Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
						Message: "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.",
					}}},
				})
			},
			checkName: "install/strategy-job", checkState: Fail, evidence: []string{"cannot be scheduled", "node affinity"},
		},
		{
			name: "KubeVirt resource degraded", want: Degraded,
			mutate: func(f *Facts) {
				f.KubeVirts[0].Status.Conditions[2] = kvv1.KubeVirtCondition{Type: kvv1.KubeVirtConditionDegraded, Status: corev1.ConditionTrue, Reason: "Stalled", Message: "virt-handler not ready"}
			},
			checkName: "kubevirt/resource", checkState: Warn, evidence: []string{"Degraded=True Stalled: virt-handler not ready"},
		},
		{
			name: "duplicate short name is reported but not a problem", want: Healthy,
			mutate: func(f *Facts) {
				f.Resources = append(f.Resources, Resource{Group: "images.example.com", Version: "v1", Name: "virtualmachineimages", SingularName: "virtualmachineimage", Kind: "VirtualMachineImage", ShortNames: []string{"vmi"}})
			},
			checkName: "names/short", checkState: Warn, evidence: []string{`"vmi" resolves to virtualmachineimages.images.example.com, virtualmachineinstances.kubevirt.io`},
		},
		{
			name: "no monitoring stack: monitoring checks are informative", want: Healthy,
			mutate: func(f *Facts) {
				f.Prometheuses, f.ServiceMonitors, f.PrometheusRules = nil, nil, nil
				f.Reads[ReadPrometheuses] = ErrAbsent
				f.Reads[ReadServiceMonitors] = ErrAbsent
				f.Reads[ReadPrometheusRules] = ErrAbsent
				f.EndpointSlices = nil
			},
			checkName: "monitoring/prometheus", checkState: Skipped, evidence: []string{"monitoring.coreos.com"},
		},
		{
			name: "warning events are informative", want: Healthy,
			mutate: func(f *Facts) {
				f.Events = []corev1.Event{{
					ObjectMeta:     metav1.ObjectMeta{Name: "e1", Namespace: testNS},
					Type:           corev1.EventTypeWarning,
					Reason:         "BackOff",
					Message:        "Back-off restarting failed container",
					InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "virt-api-aaaaa"},
					LastTimestamp:  metav1.NewTime(testNow.Add(-5 * 60e9)),
					Count:          4,
				}}
			},
			checkName: "kubevirt/warning-events", checkState: Warn, evidence: []string{"BackOff Pod/virt-api-aaaaa: Back-off restarting failed container (x4)"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := healthyFacts()
			tc.mutate(f)
			r := Run(f)
			if r.Verdict != tc.want {
				var buf bytes.Buffer
				_ = r.WriteText(&buf)
				t.Fatalf("verdict %s, want %s\n%s", r.Verdict, tc.want, buf.String())
			}
			for _, s := range tc.reason {
				if !strings.Contains(r.Reason, s) {
					t.Errorf("reason %q lacks %q", r.Reason, s)
				}
			}
			if tc.checkName == "" {
				return
			}
			c := findCheck(t, r, tc.checkName)
			if c.Status != tc.checkState {
				t.Errorf("%s: status %s, want %s (%s)", c.Name, c.Status, tc.checkState, c.Evidence)
			}
			for _, s := range tc.evidence {
				if !strings.Contains(c.Evidence, s) {
					t.Errorf("%s evidence %q lacks %q", c.Name, c.Evidence, s)
				}
			}
			if (c.Status == Fail || c.Status == Warn) && c.Group != GroupInfo && c.Hint == "" {
				t.Errorf("%s: a problem without a next command", c.Name)
			}
		})
	}
}

// Every hint names the context and uses fully qualified names for
// non-core kinds.
func TestHintsNameContextAndFullNames(t *testing.T) {
	f := healthyFacts()
	f.ServiceMonitors = nil
	f.EndpointSlices = nil
	f.NetworkPolicies = []networkingv1.NetworkPolicy{denyAllPolicy()}
	removePods(f, "virt-handler")
	r := Run(f)
	for _, c := range r.Checks {
		if !strings.HasPrefix(c.Hint, "kubectl") {
			continue
		}
		if !strings.Contains(c.Hint, "--context test-ctx") {
			t.Errorf("%s: hint %q lacks --context", c.Name, c.Hint)
		}
		for _, short := range []string{" servicemonitors ", " endpointslices ", " networkpolicies ", " deployments ", " prometheuses ", " vmi ", " kv "} {
			if strings.Contains(c.Hint+" ", short) {
				t.Errorf("%s: hint %q uses a short or unqualified name%q", c.Name, c.Hint, short)
			}
		}
	}
}

func TestJSONSchema(t *testing.T) {
	f := healthyFacts()
	f.ServiceMonitors = nil
	r := Run(f)
	var buf bytes.Buffer
	if err := r.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"verdict", "context", "server", "namespace", "checks", "reason"} {
		if _, ok := got[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, buf.String())
		}
	}
	if got["verdict"] != "MonitoringArtefact" || got["context"] != "test-ctx" || got["namespace"] != testNS {
		t.Errorf("JSON header = %v %v %v", got["verdict"], got["context"], got["namespace"])
	}
	checks := got["checks"].([]any)
	first := checks[0].(map[string]any)
	keys := []string{}
	for k := range first {
		keys = append(keys, k)
	}
	if len(first) != 4 {
		t.Errorf("check keys %v, want exactly name, status, evidence, hint", keys)
	}
	for _, k := range []string{"name", "status", "evidence", "hint"} {
		if _, ok := first[k]; !ok {
			t.Errorf("check lacks %q", k)
		}
	}
	if r.ExitCode() != 1 {
		t.Errorf("exit code %d for %s", r.ExitCode(), r.Verdict)
	}
}

func TestTextOrder(t *testing.T) {
	f := healthyFacts()
	f.ServiceMonitors = nil
	var buf bytes.Buffer
	r := Run(f)
	if err := r.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	order := []string{"Context:    test-ctx", "API server: https://127.0.0.1:6443", "Namespace:  kubevirt", "Verdict: MonitoringArtefact", "Problems:", "FAIL monitoring/servicemonitor", "next: kubectl --context test-ctx get servicemonitors.monitoring.coreos.com", "Other checks:", "ok   controlplane/virt-api"}
	pos := 0
	for _, s := range order {
		i := strings.Index(out[pos:], s)
		if i < 0 {
			t.Fatalf("%q missing or out of order in\n%s", s, out)
		}
		pos += i
	}
}

func TestDecide(t *testing.T) {
	c := func(name string, g Group, s Status) Check {
		return Check{Name: name, Group: g, Status: s, Evidence: "e."}
	}
	tests := []struct {
		checks []Check
		want   Verdict
	}{
		{[]Check{c("a", GroupCritical, OK), c("m", GroupMonitoring, OK)}, Healthy},
		{[]Check{c("a", GroupCritical, Fail), c("m", GroupMonitoring, Fail)}, ControlPlaneDown},
		{[]Check{c("a", GroupCritical, OK), c("m", GroupMonitoring, Fail), c("h", GroupCluster, Warn)}, MonitoringArtefact},
		{[]Check{c("a", GroupCritical, OK), c("m", GroupMonitoring, Warn)}, Degraded},
		{[]Check{c("a", GroupCritical, Skipped)}, Unknown},
		{[]Check{c("a", GroupCritical, OK), c("i", GroupInfo, Fail)}, Healthy},
		{[]Check{c("a", GroupCritical, OK), c("x", GroupCluster, Skipped)}, Healthy},
	}
	for i, tc := range tests {
		if got, reason := Decide(tc.checks); got != tc.want {
			t.Errorf("%d: %s (%s), want %s", i, got, reason, tc.want)
		}
	}
}
