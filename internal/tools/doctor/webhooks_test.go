package doctor

import (
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/utils/ptr"
)

// virtAPITarget is virt-api's webhooks as upstream renders them: one
// Service port, one caBundle, validating and mutating webhooks.
func virtAPITarget(outcome, detail string, policies ...string) *WebhookTarget {
	t := &WebhookTarget{Namespace: testNS, Service: "virt-api", Port: 443, Pod: "virt-api-aaaaa", Node: "node-1", TargetPort: 8443, Outcome: outcome, Detail: detail}
	for i, p := range policies {
		t.Webhooks = append(t.Webhooks, WebhookRef{Kind: "ValidatingWebhookConfiguration", Configuration: "virt-api-validator", Name: []string{"virtualmachine-validator.kubevirt.io", "vmi-validator.kubevirt.io", "migration-validator.kubevirt.io", "vmpool-validator.kubevirt.io", "vmsnapshot-validator.kubevirt.io"}[i], FailurePolicy: p})
	}
	if outcome == HookOK {
		t.Cert = &ServingCert{Subject: "CN=virt-api.kubevirt.svc", Issuer: "CN=kubevirt.io@1", NotAfter: testNow.Add(24 * time.Hour)}
	}
	return t
}

const unknownCA = "the certificate presented (subject CN=virt-api.kubevirt.svc, issuer CN=someone-else) is not signed by the caBundle's CA CN=kubevirt.io@1: x509: certificate signed by unknown authority"

// TestWebhookTLSCheck: the check over what the gathering saw: a webhook
// failing closed is a failure naming it, its configuration, Service, pod
// and why; failing open a warning; what could not be verified is skipped
// and said, pods on simulated nodes are not reported broken.
func TestWebhookTLSCheck(t *testing.T) {
	fail, ignore := string(admissionregistrationv1.Fail), string(admissionregistrationv1.Ignore)
	tests := []struct {
		name     string
		targets  []*WebhookTarget
		byURL    []WebhookRef
		status   Status
		verdict  Verdict
		evidence []string
		hint     string
	}{
		{
			name:    "every target verifies",
			targets: []*WebhookTarget{virtAPITarget(HookOK, "", fail, fail, ignore)},
			byURL:   []WebhookRef{{Kind: "ValidatingWebhookConfiguration", Configuration: "virt-operator-validator", Name: "virt-operator-validator.kubevirt.io", URL: "https://10.0.0.2:8444/kubevirt-validate-delete"}},
			status:  OK, verdict: Healthy,
			evidence: []string{
				"3 webhooks call Services in kubevirt, as 1 (Service port, caBundle) pair.",
				"Verified: ValidatingWebhookConfiguration virt-api-validator webhooks virtualmachine-validator.kubevirt.io, vmi-validator.kubevirt.io, migration-validator.kubevirt.io (2 with failurePolicy Fail, 1 with failurePolicy Ignore) → Service kubevirt/virt-api port 443 (pod virt-api-aaaaa on node node-1, port 8443): a certificate for virt-api.kubevirt.svc that verifies against their caBundle, issuer CN=kubevirt.io@1",
				"Not checked: 1 webhook called by URL",
				"virt-operator-validator/virt-operator-validator.kubevirt.io",
			},
		},
		{
			name:    "failing closed: unknown authority",
			targets: []*WebhookTarget{virtAPITarget(HookOK, "", fail), virtAPITarget(HookTLS, unknownCA, fail)},
			status:  Fail, verdict: Degraded,
			evidence: []string{
				"Failing closed (failurePolicy Fail: the API server refuses every request they match): ValidatingWebhookConfiguration virt-api-validator webhook virtualmachine-validator.kubevirt.io (failurePolicy Fail) → Service kubevirt/virt-api port 443 (pod virt-api-aaaaa on node node-1, port 8443): " + unknownCA,
			},
			hint: `get validatingwebhookconfigurations.admissionregistration.k8s.io virt-api-validator -o jsonpath='{.webhooks[?(@.name=="virtualmachine-validator.kubevirt.io")].clientConfig}'`,
		},
		{
			name:    "failing open: a warning",
			targets: []*WebhookTarget{virtAPITarget(HookPodPort, "port 8443 of pod kubevirt/virt-api-aaaaa did not accept the connection: connection refused", ignore)},
			status:  Warn, verdict: Degraded,
			evidence: []string{"Failing open (failurePolicy Ignore: the API server admits the requests they match unchecked)", "did not accept the connection"},
			hint:     "logs virt-api-aaaaa",
		},
		{
			name:    "no ready endpoint, one webhook failing closed among several",
			targets: []*WebhookTarget{{Namespace: testNS, Service: "virt-api", Port: 443, Outcome: HookNoReady, Detail: "Service kubevirt/virt-api has no ready endpoint for port 443", Webhooks: virtAPITarget("", "", ignore, fail, ignore, ignore, ignore).Webhooks}},
			status:  Fail, verdict: Degraded,
			evidence: []string{"webhooks virtualmachine-validator.kubevirt.io, vmi-validator.kubevirt.io, migration-validator.kubevirt.io and 2 more (1 with failurePolicy Fail, 4 with failurePolicy Ignore) → Service kubevirt/virt-api port 443: Service kubevirt/virt-api has no ready endpoint"},
			hint:     "get endpointslices.discovery.k8s.io -l kubernetes.io/service-name=virt-api",
		},
		{
			name:    "port-forward not allowed: skipped, with the permission to ask for",
			targets: []*WebhookTarget{virtAPITarget(HookPortForward, "could not port-forward to port 8443 of pod kubevirt/virt-api-aaaaa through the API server: forbidden", fail)},
			status:  Skipped, verdict: Healthy,
			evidence: []string{"skipped: ", "Not verified: ", "could not port-forward"},
			hint:     "auth can-i create pods/portforward -n kubevirt",
		},
		{
			name:    "pods on simulated nodes are skipped, not broken",
			targets: []*WebhookTarget{{Namespace: testNS, Service: "virt-api", Port: 443, Outcome: HookSimulated, Detail: "its ready endpoints are pods on simulated (kwok) nodes, where no pod serves: virt-api-aaaaa on kwok-1", Webhooks: virtAPITarget("", "", fail).Webhooks}},
			status:  Skipped, verdict: Healthy,
			evidence: []string{"Skipped: ", "simulated (kwok) nodes"},
		},
		{
			name: "simulated beside verified: ok",
			targets: []*WebhookTarget{virtAPITarget(HookOK, "", fail),
				{Namespace: testNS, Service: "virt-exportproxy", Port: 443, Outcome: HookSimulated, Detail: "its ready endpoints are pods on simulated (kwok) nodes", Webhooks: virtAPITarget("", "", fail).Webhooks}},
			status: OK, verdict: Healthy,
			evidence: []string{"Skipped: ", "Verified: "},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := healthyFacts()
			f.Webhooks, f.URLWebhooks = tt.targets, tt.byURL
			for _, tg := range f.Webhooks {
				if tg.Outcome == HookPortForward && strings.Contains(tg.Detail, "forbidden") {
					tg.Forbidden, tg.Needs = true, "create pods/portforward"
				}
			}
			r := Run(f)
			c := findCheck(t, r, CheckWebhookTLS)
			t.Logf("%s: %s\nhint: %s", c.Status, c.Evidence, c.Hint)
			if c.Status != tt.status {
				t.Errorf("status %s, want %s", c.Status, tt.status)
			}
			for _, want := range tt.evidence {
				if !strings.Contains(c.Evidence, want) {
					t.Errorf("evidence lacks %q", want)
				}
			}
			if !strings.Contains(c.Hint, tt.hint) {
				t.Errorf("hint %q lacks %q", c.Hint, tt.hint)
			}
			if r.Verdict != tt.verdict {
				t.Errorf("verdict %s (%s), want %s", r.Verdict, r.Reason, tt.verdict)
			}
			if tt.status == Skipped && !strings.Contains(r.Reason, "not verified: "+CheckWebhookTLS) {
				t.Errorf("the verdict does not say the webhooks were not verified: %s", r.Reason)
			}
		})
	}
}

// TestWebhookTLSUnread: a user who may not list the webhook configurations
// gets the check skipped, naming the read.
func TestWebhookTLSUnread(t *testing.T) {
	f := healthyFacts()
	f.Reads[ReadMutatingHooks] = forbidden("mutatingwebhookconfigurations")
	c := findCheck(t, Run(f), CheckWebhookTLS)
	if c.Status != Skipped || !strings.Contains(c.Evidence, "not allowed to list "+ReadMutatingHooks) {
		t.Errorf("%s: %s", c.Status, c.Evidence)
	}
}

// TestGroupWebhooks: webhooks are checked once per (Service, port,
// caBundle), across configurations; a Service of another namespace is
// another installation's; a URL is set apart.
func TestGroupWebhooks(t *testing.T) {
	svc := func(ns, name string, port *int32) *admissionregistrationv1.ServiceReference {
		return &admissionregistrationv1.ServiceReference{Namespace: ns, Name: name, Port: port}
	}
	caA, caB := []byte("A"), []byte("B")
	hook := func(conf, name string, s *admissionregistrationv1.ServiceReference, ca []byte) hookConfig {
		return hookConfig{ref: WebhookRef{Kind: "ValidatingWebhookConfiguration", Configuration: conf, Name: name, FailurePolicy: "Fail"},
			cc: admissionregistrationv1.WebhookClientConfig{Service: s, CABundle: ca}}
	}
	hooks := []hookConfig{
		hook("virt-api-validator", "a", svc(testNS, "virt-api", nil), caA),
		hook("virt-api-validator", "b", svc(testNS, "virt-api", ptr.To(int32(443))), caA),
		hook("virt-api-validator", "c", svc(testNS, "virt-api", nil), caB),
		hook("virt-api-mutator", "d", svc(testNS, "virt-api", nil), caA),
		hook("virt-api-mutator", "e", svc(testNS, "virt-api", ptr.To(int32(8443))), caA),
		hook("virt-api-mutator", "f", svc("other", "virt-api", nil), caA),
		{ref: WebhookRef{Configuration: "virt-operator-validator", Name: "g"}, cc: admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://10.0.0.2:8444/x")}},
	}
	targets, byURL := groupWebhooks(hooks, testNS)
	var got []string
	for _, tg := range targets {
		var ns []string
		for _, w := range tg.Webhooks {
			ns = append(ns, w.Name)
		}
		got = append(got, fmt.Sprintf("%s:%d:%s=%s", tg.Service, tg.Port, tg.CABundle, strings.Join(ns, ",")))
	}
	want := []string{"virt-api:443:A=a,b,d", "virt-api:443:B=c", "virt-api:8443:A=e"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("targets %v, want %v", got, want)
	}
	if len(byURL) != 1 || byURL[0].URL != "https://10.0.0.2:8444/x" {
		t.Errorf("by URL: %+v", byURL)
	}
}
