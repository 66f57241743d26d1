package doctor

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/vocab"
)

// KubeVirt's admission webhooks, checked the way the API server calls them:
// for each (Service, port, caBundle) that webhooks of a configuration
// managed by virtop (or upstream's virt-operator) call in the install
// namespace, doctor opens a port-forward through the API server to one
// ready endpoint of the Service and does a TLS handshake, verifying the
// chain against the caBundle for <service>.<namespace>.svc.

// Bounds of the webhook checks (Gatherer.WebhookTimeout, WebhookBudget).
const (
	defaultWebhookTimeout = 5 * time.Second
	defaultWebhookBudget  = 30 * time.Second
)

// What doctor saw of a webhook target (WebhookTarget.Outcome).
const (
	// HookOK: the pod presents a certificate that verifies.
	HookOK = "ok"
	// Broken: the API server's calls fail too.
	HookTLS       = "tls"
	HookPodPort   = "pod-port"
	HookNoService = "no-service"
	HookNoPort    = "no-port"
	HookNoReady   = "no-ready-endpoint"
	// Not verified: nothing was learned of the server.
	HookSimulated   = "simulated"
	HookNoPod       = "no-pod"
	HookUnread      = "unread"
	HookPortForward = "port-forward"
	HookNoDialer    = "no-dialer"
	HookOutOfTime   = "out-of-time"
)

// WebhookRef is one webhook of a configuration.
type WebhookRef struct {
	// Kind is ValidatingWebhookConfiguration or MutatingWebhookConfiguration.
	Kind          string
	Configuration string
	Name          string
	// FailurePolicy is Fail or Ignore (unset is Fail, the API's default).
	FailurePolicy string
	// URL is the webhook's clientConfig.url, when it has no Service.
	URL string
}

// WebhookTarget is what webhooks call: a Service port, verified with one
// caBundle, and what doctor saw when it called the Service's pod.
type WebhookTarget struct {
	Namespace, Service string
	Port               int32
	CABundle           []byte
	Webhooks           []WebhookRef

	// Pod (on Node) is the ready endpoint doctor reached, at TargetPort.
	Pod, Node  string
	TargetPort int32

	// Outcome is one of the Hook* outcomes; Detail says why when it is
	// not HookOK; TLSReason is the TLSError's reason for HookTLS.
	Outcome   string
	Detail    string
	TLSReason string
	// Forbidden: the port-forward, or a read, was not allowed; Needs is
	// the verb and resource it needed ("create pods/portforward").
	Forbidden bool
	Needs     string
	// Cert is what the pod presented, when it presented one.
	Cert *ServingCert
}

// ServerName is the name the API server verifies the Service's certificate
// for.
func (t *WebhookTarget) ServerName() string { return t.Service + "." + t.Namespace + ".svc" }

func (t *WebhookTarget) broken() bool {
	switch t.Outcome {
	case HookTLS, HookPodPort, HookNoService, HookNoPort, HookNoReady:
		return true
	}
	return false
}

// failClosed: a webhook of the target fails closed (failurePolicy Fail).
func (t *WebhookTarget) failClosed() bool {
	for _, w := range t.Webhooks {
		if w.FailurePolicy != string(admissionregistrationv1.Ignore) {
			return true
		}
	}
	return false
}

// managedSelector selects configurations virtop or upstream's operator
// manages.
func managedSelector() labels.Selector {
	r, err := labels.NewRequirement(vocab.ManagedByLabel, selection.In, []string{vocab.ManagedByValue, vocab.UpstreamManagedByValue})
	if err != nil {
		panic(err)
	}
	return labels.NewSelector().Add(*r)
}

// hookConfig is one webhook with its clientConfig, for grouping.
type hookConfig struct {
	ref WebhookRef
	cc  admissionregistrationv1.WebhookClientConfig
}

func policy(p *admissionregistrationv1.FailurePolicyType) string {
	if p == nil {
		return string(admissionregistrationv1.Fail)
	}
	return string(*p)
}

// groupWebhooks groups the webhooks that call a Service of namespace ns by
// (Service, port, caBundle), so each is checked once, in a stable order;
// webhooks called by URL are returned apart; those calling another
// namespace's Service belong to another installation and are left out.
func groupWebhooks(hooks []hookConfig, ns string) (targets []*WebhookTarget, byURL []WebhookRef) {
	index := map[string]*WebhookTarget{}
	for _, h := range hooks {
		svc := h.cc.Service
		if svc == nil {
			if h.cc.URL != nil {
				h.ref.URL = *h.cc.URL
			}
			byURL = append(byURL, h.ref)
			continue
		}
		if svc.Namespace != ns {
			continue
		}
		port := int32(443)
		if svc.Port != nil {
			port = *svc.Port
		}
		sum := sha256.Sum256(h.cc.CABundle)
		key := fmt.Sprintf("%s/%s:%d/%x", svc.Namespace, svc.Name, port, sum)
		t := index[key]
		if t == nil {
			t = &WebhookTarget{Namespace: svc.Namespace, Service: svc.Name, Port: port, CABundle: bytes.Clone(h.cc.CABundle)}
			index[key] = t
			targets = append(targets, t)
		}
		t.Webhooks = append(t.Webhooks, h.ref)
	}
	sort.SliceStable(targets, func(i, j int) bool {
		a, b := targets[i], targets[j]
		if a.Service != b.Service {
			return a.Service < b.Service
		}
		if a.Port != b.Port {
			return a.Port < b.Port
		}
		return a.Webhooks[0].Configuration < b.Webhooks[0].Configuration
	})
	return targets, byURL
}

// gatherWebhooks reads the managed webhook configurations, groups their
// webhooks and checks each target, within WebhookBudget.
func (g *Gatherer) gatherWebhooks(ctx context.Context, f *Facts) {
	var hooks []hookConfig
	sel := client.MatchingLabelsSelector{Selector: managedSelector()}
	var vw admissionregistrationv1.ValidatingWebhookConfigurationList
	if g.list(ctx, f, ReadValidatingHooks, &vw, sel) {
		sort.Slice(vw.Items, func(i, j int) bool { return vw.Items[i].Name < vw.Items[j].Name })
		for _, c := range vw.Items {
			for _, w := range c.Webhooks {
				hooks = append(hooks, hookConfig{ref: WebhookRef{Kind: "ValidatingWebhookConfiguration", Configuration: c.Name, Name: w.Name, FailurePolicy: policy(w.FailurePolicy)}, cc: w.ClientConfig})
			}
		}
	}
	var mw admissionregistrationv1.MutatingWebhookConfigurationList
	if g.list(ctx, f, ReadMutatingHooks, &mw, sel) {
		sort.Slice(mw.Items, func(i, j int) bool { return mw.Items[i].Name < mw.Items[j].Name })
		for _, c := range mw.Items {
			for _, w := range c.Webhooks {
				hooks = append(hooks, hookConfig{ref: WebhookRef{Kind: "MutatingWebhookConfiguration", Configuration: c.Name, Name: w.Name, FailurePolicy: policy(w.FailurePolicy)}, cc: w.ClientConfig})
			}
		}
	}
	f.Webhooks, f.URLWebhooks = groupWebhooks(hooks, g.Where.Namespace)
	if len(f.Webhooks) == 0 {
		return
	}

	dialer := g.PodDialer
	var dialErr error
	if dialer == nil {
		if g.Config == nil {
			dialErr = errors.New("no REST config to open a port-forward with")
		} else {
			dialer, dialErr = NewPortForwardDialer(g.Config)
		}
	}
	per, budget := g.WebhookTimeout, g.WebhookBudget
	if per <= 0 {
		per = defaultWebhookTimeout
	}
	if budget <= 0 {
		budget = defaultWebhookBudget
	}
	bctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	for _, t := range f.Webhooks {
		if bctx.Err() != nil {
			t.Outcome, t.Detail = HookOutOfTime, fmt.Sprintf("not checked: doctor's %s for the webhook checks ran out", budget)
			continue
		}
		if !g.resolveTarget(bctx, f, t) {
			continue
		}
		if dialer == nil {
			t.Outcome, t.Detail = HookNoDialer, dialErr.Error()
			continue
		}
		g.callTarget(bctx, per, dialer, t)
	}
}

// resolveTarget picks the ready endpoint of t's Service to call: a pod on a
// node that is not simulated, first by name. It reports whether there is
// one; otherwise t's outcome says why.
func (g *Gatherer) resolveTarget(ctx context.Context, f *Facts, t *WebhookTarget) bool {
	var svc corev1.Service
	switch err := g.Client.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: t.Service}, &svc); {
	case apierrors.IsNotFound(err):
		t.Outcome, t.Detail = HookNoService, fmt.Sprintf("Service %s/%s does not exist", t.Namespace, t.Service)
		return false
	case err != nil:
		t.Outcome, t.Detail, t.Forbidden, t.Needs = HookUnread, fmt.Sprintf("could not get Service %s/%s: %v", t.Namespace, t.Service, err), apierrors.IsForbidden(err), "get services"
		return false
	}
	var sp *corev1.ServicePort
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Port == t.Port {
			sp = &svc.Spec.Ports[i]
		}
	}
	if sp == nil {
		var ports []string
		for _, p := range svc.Spec.Ports {
			ports = append(ports, fmt.Sprint(p.Port))
		}
		t.Outcome, t.Detail = HookNoPort, fmt.Sprintf("Service %s/%s has no port %d (it has %s)", t.Namespace, t.Service, t.Port, orNone(strings.Join(ports, ", ")))
		return false
	}
	var eps discoveryv1.EndpointSliceList
	if err := g.Client.List(ctx, &eps, client.InNamespace(t.Namespace), client.MatchingLabels{discoveryv1.LabelServiceName: t.Service}); err != nil {
		t.Outcome, t.Detail, t.Forbidden, t.Needs = HookUnread, fmt.Sprintf("could not list the EndpointSlices of Service %s/%s: %v", t.Namespace, t.Service, err), apierrors.IsForbidden(err), "list "+ReadEndpointSlices
		return false
	}
	ep := pickEndpoint(f, eps.Items, sp.Name)
	switch {
	case ep.pod != "":
		t.Pod, t.Node, t.TargetPort = ep.pod, ep.node, ep.port
		return true
	case len(ep.simulated) > 0:
		t.Outcome, t.Detail = HookSimulated, fmt.Sprintf("its ready endpoints are pods on simulated (kwok) nodes, where no pod serves: %s", strings.Join(ep.simulated, ", "))
	case ep.podless > 0:
		t.Outcome, t.Detail = HookNoPod, fmt.Sprintf("its %d ready endpoints are not pods: doctor reaches a Service only through a pod's port-forward", ep.podless)
	default:
		t.Outcome, t.Detail = HookNoReady, fmt.Sprintf("Service %s/%s has no ready endpoint for port %d (%d %s, %d %s not ready)", t.Namespace, t.Service, t.Port,
			len(eps.Items), plural(len(eps.Items), "EndpointSlice", "EndpointSlices"), ep.notReady, plural(ep.notReady, "endpoint", "endpoints"))
	}
	return false
}

type endpointPick struct {
	pod, node string
	port      int32
	// simulated are the ready pods on simulated nodes ("pod on node").
	simulated []string
	podless   int
	notReady  int
}

// pickEndpoint chooses, among the EndpointSlices' ready endpoints that
// carry the Service port portName, the first pod by name on a node that is
// not simulated.
func pickEndpoint(f *Facts, slices []discoveryv1.EndpointSlice, portName string) endpointPick {
	type cand struct {
		pod, node string
		port      int32
	}
	var cands []cand
	var pick endpointPick
	for _, s := range slices {
		var port int32
		found := false
		for _, p := range s.Ports {
			name := ""
			if p.Name != nil {
				name = *p.Name
			}
			if name == portName && p.Port != nil {
				port, found = *p.Port, true
			}
		}
		if !found {
			continue
		}
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				pick.notReady++
				continue
			}
			if e.TargetRef == nil || e.TargetRef.Kind != "Pod" {
				pick.podless++
				continue
			}
			node := ""
			if e.NodeName != nil {
				node = *e.NodeName
			}
			if node == "" {
				for i := range f.Pods {
					if f.Pods[i].Name == e.TargetRef.Name && f.Pods[i].Namespace == s.Namespace {
						node = f.Pods[i].Spec.NodeName
					}
				}
			}
			cands = append(cands, cand{e.TargetRef.Name, node, port})
		}
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].pod < cands[j].pod })
	for _, c := range cands {
		if f.simulated(c.node) {
			pick.simulated = append(pick.simulated, c.pod+" on "+c.node)
			continue
		}
		if pick.pod == "" {
			pick.pod, pick.node, pick.port = c.pod, c.node, c.port
		}
	}
	return pick
}

// callTarget opens a connection to the target's pod and verifies what it
// presents, within per (and the budget of ctx).
func (g *Gatherer) callTarget(ctx context.Context, per time.Duration, dialer PodDialer, t *WebhookTarget) {
	cctx, cancel := context.WithTimeout(ctx, per)
	defer cancel()
	outOfTime := func() bool {
		if ctx.Err() != nil {
			t.Outcome, t.Detail = HookOutOfTime, "not checked: doctor's time for the webhook checks ran out"
			return true
		}
		return false
	}
	conn, err := dialer.DialPod(cctx, t.Namespace, t.Pod, t.TargetPort)
	if err != nil {
		if outOfTime() {
			return
		}
		var pp *PodPortError
		var pf *PortForwardError
		switch {
		case errors.As(err, &pp):
			t.Outcome, t.Detail = HookPodPort, pp.Error()
		case errors.As(err, &pf):
			t.Outcome, t.Detail, t.Forbidden, t.Needs = HookPortForward, pf.Error(), pf.Forbidden(), "create pods/portforward"
		default:
			t.Outcome, t.Detail = HookPortForward, fmt.Sprintf("could not reach port %d of pod %s/%s: %v", t.TargetPort, t.Namespace, t.Pod, err)
		}
		return
	}
	cert, err := VerifyServingTLS(cctx, conn, t.CABundle, t.ServerName(), time.Now())
	t.Cert = cert
	if err == nil {
		t.Outcome = HookOK
		return
	}
	if outOfTime() {
		return
	}
	var te *TLSError
	var pp *PodPortError
	switch {
	case errors.As(err, &pp):
		t.Outcome, t.Detail = HookPodPort, pp.Error()
	case errors.As(err, &te):
		t.Outcome, t.Detail, t.TLSReason = HookTLS, te.Message, te.Reason
		if te.Reason == TLSHandshake && cctx.Err() != nil {
			t.Detail = fmt.Sprintf("no TLS handshake within %s: %s", per, te.Message)
		}
	default:
		t.Outcome, t.Detail = HookTLS, err.Error()
	}
}

// describeHooks names a target's webhooks, configuration by configuration
// (at most three names each), with their failure policies.
func describeHooks(hooks []WebhookRef) string {
	type conf struct {
		kind, name string
		hooks      []string
		policies   map[string]int
	}
	var order []*conf
	byName := map[string]*conf{}
	for _, h := range hooks {
		k := h.Kind + "/" + h.Configuration
		c := byName[k]
		if c == nil {
			c = &conf{kind: h.Kind, name: h.Configuration, policies: map[string]int{}}
			byName[k] = c
			order = append(order, c)
		}
		c.hooks = append(c.hooks, h.Name)
		c.policies[h.FailurePolicy]++
	}
	var parts []string
	for _, c := range order {
		names := c.hooks
		more := ""
		if len(names) > 3 {
			more = fmt.Sprintf(" and %d more", len(names)-3)
			names = names[:3]
		}
		word := "webhook"
		if len(c.hooks) > 1 {
			word = "webhooks"
		}
		var pol []string
		for _, p := range []string{string(admissionregistrationv1.Fail), string(admissionregistrationv1.Ignore)} {
			if n := c.policies[p]; n > 0 {
				if n == len(c.hooks) {
					pol = append(pol, "failurePolicy "+p)
				} else {
					pol = append(pol, fmt.Sprintf("%d with failurePolicy %s", n, p))
				}
			}
		}
		parts = append(parts, fmt.Sprintf("%s %s %s %s%s (%s)", c.kind, c.name, word, strings.Join(names, ", "), more, strings.Join(pol, ", ")))
	}
	return strings.Join(parts, "; ")
}

// where says which Service port, and which pod, a target is.
func (t *WebhookTarget) where() string {
	s := fmt.Sprintf("Service %s/%s port %d", t.Namespace, t.Service, t.Port)
	if t.Pod != "" {
		s += fmt.Sprintf(" (pod %s", t.Pod)
		if t.Node != "" {
			s += " on node " + t.Node
		}
		s += fmt.Sprintf(", port %d)", t.TargetPort)
	}
	return s
}

func checkWebhookTLS(f *Facts) Check {
	c := Check{Name: CheckWebhookTLS, Group: GroupCluster}
	ns := f.Where.Namespace
	for _, key := range []string{ReadValidatingHooks, ReadMutatingHooks} {
		if f.readErr(key) != nil {
			return f.skipped(c, key, "list", "")
		}
	}
	urlNote := ""
	if n := len(f.URLWebhooks); n > 0 {
		var names []string
		for _, w := range f.URLWebhooks {
			names = append(names, w.Configuration+"/"+w.Name)
		}
		urlNote = fmt.Sprintf(" Not checked: %d %s called by URL, not through a Service (%s): doctor reaches the cluster only through the API server.", n, plural(n, "webhook", "webhooks"), strings.Join(names, ", "))
	}
	if len(f.Webhooks) == 0 {
		c.Status = OK
		c.Evidence = fmt.Sprintf("no webhook of a configuration managed by %s or %s calls a Service in %s.%s", vocab.ManagedByValue, vocab.UpstreamManagedByValue, ns, urlNote)
		return c
	}
	var failed, ignored, unverified, simulated, ok []string
	var firstBroken, firstUnverified, firstForbidden *WebhookTarget
	hooks := 0
	for _, t := range f.Webhooks {
		hooks += len(t.Webhooks)
		line := fmt.Sprintf("%s → %s: %s", describeHooks(t.Webhooks), t.where(), t.Detail)
		switch {
		case t.Outcome == HookOK:
			exp := ""
			if t.Cert != nil {
				exp = fmt.Sprintf(", issuer %s, valid until %s", dn(t.Cert.Issuer), t.Cert.NotAfter.UTC().Format(time.RFC3339))
			}
			ok = append(ok, fmt.Sprintf("%s → %s: a certificate for %s that verifies against their caBundle%s", describeHooks(t.Webhooks), t.where(), t.ServerName(), exp))
		case t.broken() && t.failClosed():
			failed = append(failed, line)
			if firstBroken == nil {
				firstBroken = t
			}
		case t.broken():
			ignored = append(ignored, line)
			if firstBroken == nil {
				firstBroken = t
			}
		case t.Outcome == HookSimulated:
			simulated = append(simulated, line)
		default:
			unverified = append(unverified, line)
			if t.Forbidden && firstForbidden == nil {
				firstForbidden = t
			}
			if firstUnverified == nil {
				firstUnverified = t
			}
		}
	}
	var parts []string
	if len(failed) > 0 {
		parts = append(parts, fmt.Sprintf("Failing closed (failurePolicy Fail: the API server refuses every request they match): %s.", strings.Join(failed, "; ")))
	}
	if len(ignored) > 0 {
		parts = append(parts, fmt.Sprintf("Failing open (failurePolicy Ignore: the API server admits the requests they match unchecked): %s.", strings.Join(ignored, "; ")))
	}
	if len(unverified) > 0 {
		parts = append(parts, fmt.Sprintf("Not verified: %s.", strings.Join(unverified, "; ")))
	}
	if len(simulated) > 0 {
		parts = append(parts, fmt.Sprintf("Skipped: %s.", strings.Join(simulated, "; ")))
	}
	if len(ok) > 0 {
		parts = append(parts, fmt.Sprintf("Verified: %s.", strings.Join(ok, "; ")))
	}
	c.Evidence = fmt.Sprintf("%d %s %s Services in %s, as %d %s. %s%s", hooks, plural(hooks, "webhook", "webhooks"), map[bool]string{true: "calls", false: "call"}[hooks == 1], ns,
		len(f.Webhooks), plural(len(f.Webhooks), "(Service port, caBundle) pair", "(Service port, caBundle) pairs"), strings.Join(parts, " "), urlNote)
	switch {
	case len(failed) > 0:
		c.Status = Fail
		c.Hint = f.webhookHint(firstBroken)
	case len(ignored) > 0:
		c.Status = Warn
		c.Hint = f.webhookHint(firstBroken)
	case len(unverified) > 0 || len(ok) == 0:
		c.Status = Skipped
		c.Evidence = "skipped: " + c.Evidence
		switch {
		case firstForbidden != nil:
			c.Hint = f.kubectl("auth can-i %s -n %s", firstForbidden.Needs, firstForbidden.Namespace)
		case firstUnverified != nil && firstUnverified.Pod != "":
			c.Hint = f.kubectl("-n %s describe pods %s", firstUnverified.Namespace, firstUnverified.Pod)
		}
	default:
		c.Status = OK
	}
	return c
}

// webhookHint is the next command for a broken target.
func (f *Facts) webhookHint(t *WebhookTarget) string {
	switch t.Outcome {
	case HookTLS:
		w := t.Webhooks[0]
		return f.kubectl("get %ss.admissionregistration.k8s.io %s -o jsonpath='{.webhooks[?(@.name==\"%s\")].clientConfig}'", strings.ToLower(w.Kind), w.Configuration, w.Name)
	case HookPodPort:
		return f.kubectl("-n %s logs %s --tail=50", t.Namespace, t.Pod)
	case HookNoService, HookNoPort:
		return f.kubectl("-n %s get services %s -o yaml", t.Namespace, t.Service)
	default:
		return f.kubectl("-n %s get endpointslices.discovery.k8s.io -l %s=%s -o wide", t.Namespace, discoveryv1.LabelServiceName, t.Service)
	}
}
