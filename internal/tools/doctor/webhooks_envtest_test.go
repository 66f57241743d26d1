package doctor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/vocab"
)

// loopbackDialer plays the port-forward: each pod's port is a TLS server
// of the test on loopback. It records what was dialled.
type loopbackDialer struct {
	mu    sync.Mutex
	addrs map[string]string
	calls []string
	// block makes every dial wait for its context (a port-forward that
	// never opens).
	block bool
}

func (d *loopbackDialer) DialPod(ctx context.Context, ns, pod string, port int32) (net.Conn, error) {
	key := fmt.Sprintf("%s/%s:%d", ns, pod, port)
	d.mu.Lock()
	d.calls = append(d.calls, key)
	addr, ok := d.addrs[key]
	d.mu.Unlock()
	if d.block {
		<-ctx.Done()
		return nil, &PortForwardError{Namespace: ns, Pod: pod, Port: port, Err: ctx.Err()}
	}
	if !ok {
		return nil, &PodPortError{Namespace: ns, Pod: pod, Port: port, Message: "connect: connection refused"}
	}
	var nd net.Dialer
	return nd.DialContext(ctx, "tcp", addr)
}

// stagedHooks are the admission objects of one test: a virt-api Service
// whose EndpointSlice holds a not-ready pod, a ready pod on a real node and
// one on a simulated (kwok) node, a virt-exportproxy Service whose only
// pod is on the simulated node, and managed webhook configurations calling
// them.
type stagedHooks struct {
	ca, other *testCA
	kwokNode  string
}

func (s *staged) stageHooks(t *testing.T) *stagedHooks {
	t.Helper()
	ctx := context.Background()
	c := s.env.Client
	h := &stagedHooks{ca: newTestCA(t, "kubevirt.io@1"), other: newTestCA(t, "someone-else"), kwokNode: s.ns + "-kwok"}

	kwok := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: h.kwokNode, Annotations: map[string]string{kwokNodeAnnotation: "fake"}}}
	must(t, c.Create(ctx, kwok))
	t.Cleanup(func() { _ = c.Delete(context.Background(), kwok) })

	for _, name := range []string{"virt-api", "virt-exportproxy"} {
		must(t, c.Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.ns},
			Spec: corev1.ServiceSpec{
				Selector: map[string]string{componentsLbl: name},
				Ports:    []corev1.ServicePort{{Port: 443, TargetPort: intstr.FromInt32(8443)}},
			},
		}))
	}
	ep := func(pod, node string, ready bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{
			Addresses: []string{"10.0.0.9"}, NodeName: ptr.To(node),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Name: pod, Namespace: s.ns},
		}
	}
	slice := func(svc string, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: svc + "-x1", Namespace: s.ns, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(""), Port: ptr.To(int32(8443))}},
			Endpoints:   eps,
		}
	}
	// virt-api-0 sorts first but is not ready; virt-api-1 is on the
	// simulated node; virt-api-aaaaa (the staged pod) is the one to call.
	must(t, c.Create(ctx, slice("virt-api", ep("virt-api-0", s.node, false), ep("virt-api-1", h.kwokNode, true), ep("virt-api-aaaaa", s.node, true))))
	must(t, c.Create(ctx, slice("virt-exportproxy", ep("virt-exportproxy-aaaaa", h.kwokNode, true))))
	return h
}

// hook is a webhook calling Service svc of the test's namespace, matching
// nothing anyone creates (the API server of the other tests must never
// call it).
func (s *staged) hook(name, svc string, ca []byte, fp admissionregistrationv1.FailurePolicyType) (admissionregistrationv1.WebhookClientConfig, []admissionregistrationv1.RuleWithOperations, *admissionregistrationv1.FailurePolicyType, *metav1.LabelSelector) {
	cc := admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: s.ns, Name: svc, Path: ptr.To("/" + name)}, CABundle: ca}
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{"doctor.test.invalid"}, APIVersions: []string{"v1"}, Resources: []string{"nothings"}},
	}}
	return cc, rules, ptr.To(fp), &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": s.ns}}
}

func (s *staged) validating(t *testing.T, name string, managed bool, hooks ...admissionregistrationv1.ValidatingWebhook) {
	t.Helper()
	labels := map[string]string{}
	if managed {
		labels[vocab.ManagedByLabel] = "virtop"
	}
	o := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name + "-" + s.ns, Labels: labels}, Webhooks: hooks}
	must(t, s.env.Client.Create(context.Background(), o))
	t.Cleanup(func() { _ = s.env.Client.Delete(context.Background(), o) })
}

func (s *staged) vhook(name, svc string, ca []byte, fp admissionregistrationv1.FailurePolicyType) admissionregistrationv1.ValidatingWebhook {
	cc, rules, p, nsSel := s.hook(name, svc, ca, fp)
	return admissionregistrationv1.ValidatingWebhook{Name: name + ".doctor.test", ClientConfig: cc, Rules: rules, FailurePolicy: p, NamespaceSelector: nsSel,
		SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"}}
}

func (s *staged) mhook(name, svc string, ca []byte, fp admissionregistrationv1.FailurePolicyType) admissionregistrationv1.MutatingWebhook {
	cc, rules, p, nsSel := s.hook(name, svc, ca, fp)
	return admissionregistrationv1.MutatingWebhook{Name: name + ".doctor.test", ClientConfig: cc, Rules: rules, FailurePolicy: p, NamespaceSelector: nsSel,
		SideEffects: ptr.To(admissionregistrationv1.SideEffectClassNone), AdmissionReviewVersions: []string{"v1"}}
}

func (s *staged) gather(t *testing.T, d PodDialer, per, budget time.Duration) (*Facts, time.Duration) {
	t.Helper()
	c, err := client.New(s.env.Config, client.Options{Scheme: s.env.Scheme})
	must(t, err)
	dc, err := discovery.NewDiscoveryClientForConfig(s.env.Config)
	must(t, err)
	g := &Gatherer{Client: c, Discovery: dc, Where: Where{Context: "envtest", Server: s.env.Config.Host, Namespace: s.ns},
		PodDialer: d, WebhookTimeout: per, WebhookBudget: budget}
	start := time.Now()
	f, err := g.Gather(context.Background())
	must(t, err)
	return f, time.Since(start)
}

// TestEnvWebhookTLS gathers the webhooks of configurations virtop manages
// from a real API server: grouped by (Service, port, caBundle) across
// validating and mutating configurations, those of unmanaged
// configurations left out, each target called once at its ready pod on a
// real node (never the not-ready one, never one on a simulated node), and
// the one whose caBundle is another CA's named with its configuration,
// Service, pod and why.
func TestEnvWebhookTLS(t *testing.T) {
	s := stage(t)
	h := s.stageHooks(t)
	const fail, ignore = admissionregistrationv1.Fail, admissionregistrationv1.Ignore
	good, wrong := h.ca.pem, h.other.pem
	s.validating(t, "virt-api-validator", true,
		s.vhook("vm-validator", "virt-api", good, fail),
		s.vhook("vmi-validator", "virt-api", good, fail),
		s.vhook("migration-validator", "virt-api", wrong, fail),
		s.vhook("pool-validator", "virt-api", wrong, ignore),
	)
	mw := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "virt-api-mutator-" + s.ns, Labels: map[string]string{vocab.ManagedByLabel: vocab.ManagedByValue}},
		Webhooks: []admissionregistrationv1.MutatingWebhook{
			s.mhook("vm-mutator", "virt-api", good, fail),
			s.mhook("export-mutator", "virt-exportproxy", good, fail),
		},
	}
	must(t, s.env.Client.Create(context.Background(), mw))
	t.Cleanup(func() { _ = s.env.Client.Delete(context.Background(), mw) })
	// Not managed by virtop: not doctor's business.
	s.validating(t, "someone-elses", false, s.vhook("theirs", "virt-api", wrong, fail))

	srv := tlsServer(t, h.ca.valid(t, "virt-api."+s.ns+".svc"))
	d := &loopbackDialer{addrs: map[string]string{s.ns + "/virt-api-aaaaa:8443": srv}}
	f, _ := s.gather(t, d, 5*time.Second, 30*time.Second)

	var got []string
	for _, tg := range f.Webhooks {
		var names []string
		for _, w := range tg.Webhooks {
			names = append(names, w.Name)
		}
		got = append(got, fmt.Sprintf("%s:%d %s [%s] pod=%s:%d", tg.Service, tg.Port, tg.Outcome, strings.Join(names, " "), tg.Pod, tg.TargetPort))
	}
	want := []string{
		"virt-api:443 ok [vm-validator.doctor.test vmi-validator.doctor.test vm-mutator.doctor.test] pod=virt-api-aaaaa:8443",
		"virt-api:443 tls [migration-validator.doctor.test pool-validator.doctor.test] pod=virt-api-aaaaa:8443",
		"virt-exportproxy:443 simulated [export-mutator.doctor.test] pod=:0",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("targets:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if calls := strings.Join(d.calls, " "); calls != s.ns+"/virt-api-aaaaa:8443 "+s.ns+"/virt-api-aaaaa:8443" {
		t.Errorf("dialled %q, want virt-api-aaaaa:8443 once per virt-api target", calls)
	}

	r := Run(f)
	t.Logf("%s", findCheck(t, r, CheckWebhookTLS).Evidence)
	expect(t, r, Degraded, CheckWebhookTLS)
	expectCheck(t, r, CheckWebhookTLS, Fail,
		"Failing closed",
		"ValidatingWebhookConfiguration virt-api-validator-"+s.ns+" webhooks migration-validator.doctor.test, pool-validator.doctor.test (1 with failurePolicy Fail, 1 with failurePolicy Ignore) → Service "+s.ns+"/virt-api port 443 (pod virt-api-aaaaa on node "+s.node+", port 8443): the certificate presented (subject CN=virt-api."+s.ns+".svc, issuer CN=kubevirt.io@1) is not signed by the caBundle's CA CN=someone-else",
		"Skipped: MutatingWebhookConfiguration virt-api-mutator-"+s.ns+" webhook export-mutator.doctor.test (failurePolicy Fail) → Service "+s.ns+"/virt-exportproxy port 443: its ready endpoints are pods on simulated (kwok) nodes, where no pod serves: virt-exportproxy-aaaaa on "+h.kwokNode,
		"Verified: ValidatingWebhookConfiguration virt-api-validator-"+s.ns+" webhooks vm-validator.doctor.test, vmi-validator.doctor.test (failurePolicy Fail); MutatingWebhookConfiguration virt-api-mutator-"+s.ns+" webhook vm-mutator.doctor.test (failurePolicy Fail) → Service "+s.ns+"/virt-api port 443 (pod virt-api-aaaaa on node "+s.node+", port 8443): a certificate for virt-api."+s.ns+".svc that verifies against their caBundle",
	)
	if c := findCheck(t, r, CheckWebhookTLS); strings.Contains(c.Evidence, "theirs.doctor.test") {
		t.Errorf("an unmanaged configuration's webhook is checked: %s", c.Evidence)
	}
}

// TestEnvWebhookTLSBounded: port-forwards that never open cost at most
// the per-target bound each and the budget in all; what the budget did
// not reach is said not checked, not broken.
func TestEnvWebhookTLSBounded(t *testing.T) {
	s := stage(t)
	h := s.stageHooks(t)
	// Three Service ports of virt-api: three targets.
	var svc corev1.Service
	must(t, s.env.Client.Get(context.Background(), client.ObjectKey{Namespace: s.ns, Name: "virt-api"}, &svc))
	svc.Spec.Ports = []corev1.ServicePort{{Name: "a", Port: 443, TargetPort: intstr.FromInt32(8443)}, {Name: "b", Port: 444, TargetPort: intstr.FromInt32(8443)}, {Name: "c", Port: 445, TargetPort: intstr.FromInt32(8443)}}
	must(t, s.env.Client.Update(context.Background(), &svc))
	var es discoveryv1.EndpointSlice
	must(t, s.env.Client.Get(context.Background(), client.ObjectKey{Namespace: s.ns, Name: "virt-api-x1"}, &es))
	es.Ports = []discoveryv1.EndpointPort{{Name: ptr.To("a"), Port: ptr.To(int32(8443))}, {Name: ptr.To("b"), Port: ptr.To(int32(8443))}, {Name: ptr.To("c"), Port: ptr.To(int32(8443))}}
	must(t, s.env.Client.Update(context.Background(), &es))
	var hooks []admissionregistrationv1.ValidatingWebhook
	for i, port := range []int32{443, 444, 445} {
		w := s.vhook(fmt.Sprintf("hook-%d", i), "virt-api", h.ca.pem, admissionregistrationv1.Fail)
		w.ClientConfig.Service.Port = ptr.To(port)
		hooks = append(hooks, w)
	}
	s.validating(t, "virt-api-validator", true, hooks...)

	f, took := s.gather(t, &loopbackDialer{block: true}, 400*time.Millisecond, time.Second)
	var outcomes []string
	for _, tg := range f.Webhooks {
		outcomes = append(outcomes, tg.Outcome)
	}
	t.Logf("gathered in %s: %v", took, outcomes)
	if len(outcomes) != 3 || outcomes[0] != HookPortForward || outcomes[2] != HookOutOfTime {
		t.Errorf("outcomes %v: want the first port-forward timed out and the last out of time", outcomes)
	}
	r := Run(f)
	expectCheck(t, r, CheckWebhookTLS, Skipped, "Not verified: ", "doctor's time for the webhook checks ran out")
	expect(t, r, Healthy, "not verified: "+CheckWebhookTLS)
}

// TestEnvPortForwardDialer: the real dialer against a real API server
// whose pods have no kubelet: the port-forward is not opened, which is
// said as such (not verified, never broken); for a user who may not create
// pods/portforward it is said forbidden.
func TestEnvPortForwardDialer(t *testing.T) {
	s := stage(t)
	for _, tt := range []struct {
		user      string
		forbidden bool
	}{{"", false}, {"doctor-nobody", true}} {
		cfg := rest.CopyConfig(s.env.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: tt.user}
		d, err := NewPortForwardDialer(cfg)
		must(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		conn, err := d.DialPod(ctx, s.ns, "virt-api-aaaaa", 8443)
		cancel()
		if conn != nil {
			_ = conn.Close()
		}
		var pf *PortForwardError
		if !errors.As(err, &pf) {
			t.Fatalf("user %q: error %v (%T), want a *PortForwardError", tt.user, err, err)
		}
		t.Logf("user %q: %v", tt.user, err)
		if pf.Forbidden() != tt.forbidden || !strings.Contains(err.Error(), "could not port-forward to port 8443 of pod "+s.ns+"/virt-api-aaaaa") {
			t.Errorf("user %q: forbidden=%v, want %v: %v", tt.user, pf.Forbidden(), tt.forbidden, err)
		}
	}
}
