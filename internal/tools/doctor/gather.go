package doctor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	strategystage "github.com/virtop-dev/virtop/internal/stage"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// Gatherer reads the facts. It holds a client.Reader, so it cannot write:
// every read is a get or a list. The one other request is the webhook
// checks' port-forward (PodDialer), which opens a stream to a pod's port
// for a TLS handshake and changes nothing.
type Gatherer struct {
	// Client reads objects; its scheme must know the core, apps,
	// discovery, networking, rbac, apiregistration, monitoring.coreos.com
	// and KubeVirt kinds (internal/scheme).
	Client client.Reader
	// Discovery lists the API resources (for the short-name check); nil
	// skips that check.
	Discovery discovery.DiscoveryInterface
	Where     Where
	// Config is the REST config of Client: its transport, with the
	// kubeconfig's credentials, reaches Prometheus through the API
	// server's service proxy. nil rules that out.
	Config *rest.Config
	// Prometheus says which Prometheus to ask, if any.
	Prometheus PrometheusOptions
	// Now is the clock (default time.Now).
	Now func() time.Time
	// PodDialer opens connections to pods for the webhook checks; nil is
	// a port-forward through the API server of Config.
	PodDialer PodDialer
	// WebhookTimeout bounds the port-forward and TLS handshake of one
	// webhook target (default 5 s); WebhookBudget bounds them all
	// (default 30 s).
	WebhookTimeout time.Duration
	WebhookBudget  time.Duration
}

// ErrUnreachable wraps a failure to reach the API server at all: doctor
// could not run.
var ErrUnreachable = errors.New("cannot reach the API server")

// Gather reads everything. Reads that fail are recorded in Facts.Reads;
// the error is returned only when the API server cannot be reached.
func (g *Gatherer) Gather(ctx context.Context) (*Facts, error) {
	now := time.Now
	if g.Now != nil {
		now = g.Now
	}
	f := &Facts{Where: g.Where, Now: now(), Reads: map[string]error{}, Nodes: map[string]*corev1.Node{}, Namespaces: map[string]*corev1.Namespace{}}
	ns := g.Where.Namespace
	c := g.Client

	// The install namespace first: it also tells whether the server
	// answers at all.
	var nsObj corev1.Namespace
	switch err := c.Get(ctx, client.ObjectKey{Name: ns}, &nsObj); {
	case err == nil:
		f.Namespace = &nsObj
		f.Namespaces[ns] = &nsObj
	case apierrors.IsNotFound(err):
	case isAPIError(err):
		// Not allowed to get it: assume it exists and let the namespaced
		// reads speak.
		f.Reads[ReadNamespace] = err
		f.Namespace = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	default:
		return nil, fmt.Errorf("%w %s: %v", ErrUnreachable, g.Where.Server, err)
	}

	var nsList corev1.NamespaceList
	if g.list(ctx, f, ReadNamespaces, &nsList) {
		for i := range nsList.Items {
			f.Namespaces[nsList.Items[i].Name] = &nsList.Items[i]
		}
	}

	if f.Namespace != nil {
		inNS := client.InNamespace(ns)
		var pods corev1.PodList
		if g.list(ctx, f, ReadPods, &pods, inNS) {
			f.Pods = pods.Items
		}
		var deps appsv1.DeploymentList
		if g.list(ctx, f, ReadDeployments, &deps, inNS) {
			f.Deployments = deps.Items
		}
		var dss appsv1.DaemonSetList
		if g.list(ctx, f, ReadDaemonSets, &dss, inNS) {
			f.DaemonSets = dss.Items
		}
		var evs corev1.EventList
		if g.list(ctx, f, ReadEvents, &evs, inNS) {
			f.Events = evs.Items
		}
		var lease coordinationv1.Lease
		switch err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: vocab.OperatorLeaseName}, &lease); {
		case err == nil:
			f.OperatorLease = &lease
		case apierrors.IsNotFound(err) && !isNoResource(err):
		default:
			f.Reads[ReadLease] = classify(err)
		}
		var svc corev1.Service
		switch err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: vocab.PrometheusServiceName}, &svc); {
		case err == nil:
			f.MetricsService = &svc
		case apierrors.IsNotFound(err):
		default:
			f.Reads[ReadService] = classify(err)
		}
		var eps discoveryv1.EndpointSliceList
		if g.list(ctx, f, ReadEndpointSlices, &eps, inNS, client.MatchingLabels{discoveryv1.LabelServiceName: vocab.PrometheusServiceName}) {
			f.EndpointSlices = eps.Items
		}
		var roles rbacv1.RoleList
		if g.list(ctx, f, ReadRoles, &roles, inNS) {
			f.Roles = roles.Items
		}
		var rbs rbacv1.RoleBindingList
		if g.list(ctx, f, ReadRoleBindings, &rbs, inNS) {
			f.RoleBindings = rbs.Items
		}
		var cms corev1.ConfigMapList
		if g.list(ctx, f, ReadConfigMaps, &cms, inNS, client.HasLabels{vocab.InstallStrategyLabel}) {
			for i := range cms.Items {
				f.Strategies = append(f.Strategies, strategyFacts(&cms.Items[i]))
			}
		}
		var nps networkingv1.NetworkPolicyList
		if g.list(ctx, f, ReadNetworkPolicies, &nps, inNS) {
			f.NetworkPolicies = nps.Items
		}
	}

	var nodes corev1.NodeList
	if g.list(ctx, f, ReadNodes, &nodes) {
		for i := range nodes.Items {
			f.Nodes[nodes.Items[i].Name] = &nodes.Items[i]
		}
	}
	var kvs kvv1.KubeVirtList
	if g.list(ctx, f, ReadKubeVirts, &kvs) {
		f.KubeVirts = kvs.Items
	}
	g.gatherNodePods(ctx, f)
	g.gatherWebhooks(ctx, f)
	g.gatherGitOps(ctx, f)
	g.gatherWorkloads(ctx, f)

	var sms monitoringv1.ServiceMonitorList
	if g.list(ctx, f, ReadServiceMonitors, &sms) {
		for _, sm := range sms.Items {
			f.ServiceMonitors = append(f.ServiceMonitors, sm)
		}
	}
	prs := &metav1.PartialObjectMetadataList{}
	prs.SetGroupVersionKind(monitoringv1.SchemeGroupVersion.WithKind("PrometheusRuleList"))
	if g.list(ctx, f, ReadPrometheusRules, prs) {
		f.PrometheusRules = prs.Items
	}
	var proms monitoringv1.PrometheusList
	if g.list(ctx, f, ReadPrometheuses, &proms) {
		seen := map[string]bool{}
		for _, p := range proms.Items {
			f.Prometheuses = append(f.Prometheuses, p)
			if seen[p.Namespace] {
				continue
			}
			seen[p.Namespace] = true
			var pods corev1.PodList
			err := c.List(ctx, &pods, client.InNamespace(p.Namespace), client.MatchingLabels{vocab.AppNameLabel: "prometheus"})
			if err != nil {
				f.Reads[ReadPrometheusPods] = classify(err)
				continue
			}
			f.PrometheusPods = append(f.PrometheusPods, pods.Items...)
		}
	}
	var crs rbacv1.ClusterRoleList
	if g.list(ctx, f, ReadClusterRoles, &crs) {
		f.ClusterRoles = crs.Items
	}
	var crbs rbacv1.ClusterRoleBindingList
	if g.list(ctx, f, ReadClusterRB, &crbs) {
		f.ClusterRoleBindings = crbs.Items
	}

	var ass apiregistrationv1.APIServiceList
	switch err := c.List(ctx, &ass); {
	case err == nil:
		for i := range ass.Items {
			if f.isKubeVirtAPIService(&ass.Items[i]) {
				f.APIServices = append(f.APIServices, ass.Items[i])
			}
		}
	default:
		// Not allowed to list them all: the one every installation has
		// may still be readable.
		var as apiregistrationv1.APIService
		switch gerr := c.Get(ctx, client.ObjectKey{Name: apiServiceName}, &as); {
		case gerr == nil:
			f.APIServices = append(f.APIServices, as)
		case apierrors.IsNotFound(gerr) && !isNoResource(gerr):
		default:
			f.Reads[ReadAPIService] = classify(err)
		}
	}

	if g.Discovery != nil {
		f.Resources, f.Reads[ReadDiscovery] = resources(g.Discovery)
		if f.Reads[ReadDiscovery] == nil {
			delete(f.Reads, ReadDiscovery)
		}
	} else {
		f.Reads[ReadDiscovery] = errors.New("no discovery client")
	}

	g.gatherPrometheus(ctx, f)
	return f, nil
}

// gatherPrometheus asks the Prometheus of --prometheus-url, or with
// --prometheus auto each Prometheus that selects KubeVirt's ServiceMonitor
// through the API server's service proxy, until one answers.
func (g *Gatherer) gatherPrometheus(ctx context.Context, f *Facts) {
	o := g.Prometheus
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = defaultPromWait
	}
	ns := g.Where.Namespace
	switch {
	case o.URL != "":
		ep, err := urlEndpoint(o, g.Config)
		if err != nil {
			f.Prometheus = &PromFacts{URL: o.URL, Err: err, Source: PromSource{URL: o.URL, Via: ViaURL, Error: err.Error()}}
			return
		}
		f.Prometheus = GatherPrometheus(ctx, ep, ns, timeout)
	case o.Auto:
		f.Prometheus = g.autoPrometheus(ctx, f, timeout)
	}
}

func (g *Gatherer) autoPrometheus(ctx context.Context, f *Facts, timeout time.Duration) *PromFacts {
	none := func(why string) *PromFacts {
		err := errors.New(why)
		return &PromFacts{Err: err, Source: PromSource{Via: ViaServiceProxy, Auth: AuthKubeconfig, Error: why}}
	}
	if g.Config == nil {
		return none("no REST config to reach the API server's service proxy with")
	}
	seen := map[string]bool{}
	for _, p := range f.Prometheuses {
		if seen[p.Namespace] {
			continue
		}
		seen[p.Namespace] = true
		var svcs corev1.ServiceList
		if err := g.Client.List(ctx, &svcs, client.InNamespace(p.Namespace)); err != nil {
			f.Reads[ReadPromServices] = classify(err)
			continue
		}
		f.PrometheusServices = append(f.PrometheusServices, svcs.Items...)
	}
	cands := f.prometheusCandidates()
	if len(cands) == 0 {
		selecting, _ := f.smSelecting()
		switch {
		case len(f.Prometheuses) == 0:
			return none("--prometheus auto: no Prometheus resource in any namespace")
		case len(selecting) == 0:
			return none("--prometheus auto: no Prometheus resource selects KubeVirt's ServiceMonitor (see monitoring/servicemonitor-selection)")
		case f.readErr(ReadPromServices) != nil:
			return none(fmt.Sprintf("--prometheus auto: cannot list the Services of the Prometheus namespaces: %v", f.readErr(ReadPromServices)))
		}
		return none(fmt.Sprintf("--prometheus auto: no Service in %s fronts Prometheus %s (none selects its pods, no %s)", selecting[0].Namespace, promName(selecting[0]), governingService))
	}
	rt, err := rest.TransportFor(g.Config)
	if err != nil {
		return none(fmt.Sprintf("the kubeconfig's transport: %v", err))
	}
	var tried []string
	var last *PromFacts
	trust := f.promTrust()
	for _, c := range cands {
		ep := Endpoint{
			URL:       strings.TrimSuffix(g.Config.Host, "/") + c.proxyPath(),
			Transport: rt,
			Source: PromSource{Via: ViaServiceProxy, Auth: AuthKubeconfig, Resource: promName(c.prom), Service: c.describe(),
				Trusted: ptr.To(c.trusted), Trust: trust.note(c)},
		}
		pf := GatherPrometheus(ctx, ep, f.Where.Namespace, timeout)
		pf.Source.Tried = tried
		if pf.Err == nil {
			return pf
		}
		tried = append(tried, fmt.Sprintf("%s through %s: %v", promName(c.prom), c.describe(), pf.Err))
		last = pf
	}
	last.Source.Tried = tried[:len(tried)-1]
	return last
}

// list runs one list, recording its failure; it reports success.
func (g *Gatherer) list(ctx context.Context, f *Facts, key string, obj client.ObjectList, opts ...client.ListOption) bool {
	if err := g.Client.List(ctx, obj, opts...); err != nil {
		f.Reads[key] = classify(err)
		return false
	}
	return true
}

func isAPIError(err error) bool {
	var st apierrors.APIStatus
	return errors.As(err, &st)
}

var (
	vmGVK  = schema.GroupVersionKind{Group: "kubevirt.io", Version: "v1", Kind: "VirtualMachineList"}
	vmiGVK = schema.GroupVersionKind{Group: "kubevirt.io", Version: "v1", Kind: "VirtualMachineInstanceList"}
)

// gatherWorkloads counts VMs and VMIs in all namespaces, page by page.
func (g *Gatherer) gatherWorkloads(ctx context.Context, f *Facts) {
	f.Workloads.ByPhase = map[string]int{}
	f.Workloads.RunningByNode = map[string]int{}
	each := func(key string, gvk schema.GroupVersionKind, fn func(u *unstructured.Unstructured)) {
		cont := ""
		for {
			l := &unstructured.UnstructuredList{}
			l.SetGroupVersionKind(gvk)
			if err := g.Client.List(ctx, l, client.Limit(500), client.Continue(cont)); err != nil {
				f.Reads[key] = classify(err)
				return
			}
			for i := range l.Items {
				fn(&l.Items[i])
			}
			cont = l.GetContinue()
			if cont == "" {
				return
			}
		}
	}
	each(ReadVMs, vmGVK, func(u *unstructured.Unstructured) {
		f.Workloads.VMs++
		ps, _, _ := unstructured.NestedString(u.Object, "status", "printableStatus")
		ready, _, _ := unstructured.NestedBool(u.Object, "status", "ready")
		if ps == "Running" || ready {
			f.Workloads.VMsRunning++
		}
	})
	each(ReadVMIs, vmiGVK, func(u *unstructured.Unstructured) {
		f.Workloads.VMIs++
		phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
		if phase == "" {
			phase = "Pending"
		}
		f.Workloads.ByPhase[phase]++
		if phase == "Running" {
			f.Workloads.VMIsRunning++
			node, _, _ := unstructured.NestedString(u.Object, "status", "nodeName")
			f.Workloads.RunningByNode[node]++
		}
	})
}

func strategyFacts(cm *corev1.ConfigMap) StrategyFacts {
	sf := StrategyFacts{
		Name:    cm.Name,
		ID:      cm.Annotations[vocab.InstallStrategyIdentifierAnnotation],
		Version: cm.Annotations[vocab.InstallStrategyVersionAnnotation],
		Virtop:  cm.Labels[vocab.ManagedByLabel] == vocab.ManagedByValue,
		Created: cm.CreationTimestamp.Time,
		Kinds:   map[string]int{},
	}
	s, err := strategy.FromConfigMap(cm)
	if err != nil {
		sf.Err = err
		return sf
	}
	for _, o := range s.Objects {
		kind := strategy.Kind(o)
		sf.Kinds[kind]++
		if kind == "APIService" && slices.Contains(strategystage.GatesOf(o), strategystage.VirtAPIServing) {
			sf.APIServicesAwaitingVirtAPI = append(sf.APIServicesAwaitingVirtAPI, o.GetName())
		}
	}
	return sf
}

// resources lists the served API resources (all versions; subresources
// left out). A partial failure (an aggregated API down) keeps what was
// listed and returns the error.
func resources(d discovery.DiscoveryInterface) ([]Resource, error) {
	_, lists, err := d.ServerGroupsAndResources()
	var out []Resource
	for _, l := range lists {
		gv, perr := schema.ParseGroupVersion(l.GroupVersion)
		if perr != nil {
			continue
		}
		for _, r := range l.APIResources {
			if containsSlash(r.Name) {
				continue
			}
			out = append(out, Resource{Group: gv.Group, Version: gv.Version, Name: r.Name, SingularName: r.SingularName, Kind: r.Kind, ShortNames: r.ShortNames})
		}
	}
	return out, err
}

func containsSlash(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			return true
		}
	}
	return false
}
