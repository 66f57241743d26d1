package doctor

import (
	"bytes"
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// hostile is a string a tenant or a Prometheus can put in front of
// doctor: an OSC title change and an OSC 8 hyperlink ended by BEL, a CSI
// that clears the screen, the 8-bit CSI (U+009B), a carriage return that
// rewrites the line and a right-to-left override.
const hostile = "kv\x1b]0;owned\x07\x1b]8;;https://evil.example/\x07click\x1b]8;;\x07\x1b[2J\u009b31m\rok \u202egnp"

// TestTextEscapesClusterStrings: a rule group name from Prometheus and a
// condition message from the KubeVirt resource reach the text report with
// their control characters escaped: no ESC, BEL, C1 control, carriage
// return or bidi override reaches the terminal, and what they were stays
// readable.
func TestTextEscapesClusterStrings(t *testing.T) {
	fp := healthyProm()
	fp.group = hostile
	srv := httptest.NewServer(fp)
	defer srv.Close()
	f := healthyFacts()
	f.Where.PrometheusURL = srv.URL
	f.KubeVirts[0].Status.Conditions = []kvv1.KubeVirtCondition{
		{Type: kvv1.KubeVirtConditionAvailable, Status: corev1.ConditionFalse, Reason: "Hostile", Message: hostile},
		{Type: kvv1.KubeVirtConditionProgressing, Status: corev1.ConditionTrue, Reason: "Hostile", Message: hostile},
		{Type: kvv1.KubeVirtConditionDegraded, Status: corev1.ConditionTrue, Reason: "Hostile", Message: hostile},
	}
	f.Prometheus = GatherPrometheus(context.Background(), Endpoint{URL: srv.URL}, testNS, 10*time.Second)
	if f.Prometheus.Err != nil {
		t.Fatalf("gather: %v", f.Prometheus.Err)
	}
	f.Prometheus.Source.Version = hostile
	r := Run(f)
	var out bytes.Buffer
	if err := r.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	if !utf8.ValidString(text) {
		t.Errorf("the report is not valid UTF-8")
	}
	for _, r := range text {
		if r == '\n' {
			continue
		}
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == '\u202e' {
			t.Fatalf("the report carries control character %U:\n%q", r, text)
		}
	}
	// The escaped forms stay readable where the strings were printed.
	for _, want := range []string{`kv\x1b]0;owned\x07`, `\x1b[2J`, `\u009b31m`, `\rok `, `\u202egnp`} {
		if !strings.Contains(text, want) {
			t.Errorf("the report lacks %q:\n%s", want, text)
		}
	}
}

// TestAutoPrefersTrustedNamespaces: with --prometheus auto, a tenant's
// Prometheus that selects KubeVirt's ServiceMonitor (through a Service that
// names it, which ranks first among candidates) is asked only after the
// Prometheus of a namespace the operator trusts (--prometheus-namespaces,
// default monitoring and openshift-monitoring, or spec.monitorNamespace),
// and each candidate says whether it is trusted.
func TestAutoPrefersTrustedNamespaces(t *testing.T) {
	f := healthyFacts()
	web := corev1.ServicePort{Name: "web", Port: 9090}
	tenant := prometheus("tenant", "evil", &metav1.LabelSelector{}, monitoringv1.EndpointSliceRole)
	f.Namespaces["tenant"] = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant", Labels: map[string]string{"kubernetes.io/metadata.name": "tenant"}}}
	f.Prometheuses = append([]monitoringv1.Prometheus{tenant}, f.Prometheuses...)
	f.PrometheusServices = []corev1.Service{
		service("tenant", "prometheus-evil", map[string]string{"prometheus": "evil"}, web),
		service(monNS, "prometheus-operated", map[string]string{vocab.AppNameLabel: "prometheus"}, web),
	}
	got := f.prometheusCandidates()
	if len(got) != 2 {
		t.Fatalf("%d candidates, want 2", len(got))
	}
	if ns := got[0].service.Namespace; ns != monNS {
		t.Errorf("first candidate in namespace %s, want the trusted %s", ns, monNS)
	}

	// spec.monitorNamespace trusts the tenant's namespace too; the
	// operator's --prometheus-namespaces replaces the default.
	f.KubeVirts[0].Spec.MonitorNamespace = "tenant"
	if got := f.prometheusCandidates(); got[0].service.Namespace != "tenant" {
		t.Errorf("with spec.monitorNamespace: tenant, first candidate in %s", got[0].service.Namespace)
	}
	f.KubeVirts[0].Spec.MonitorNamespace = ""
	for i := range f.Deployments {
		if f.Deployments[i].Name == "virt-operator" {
			f.Deployments[i].Spec.Template.Spec.Containers = []corev1.Container{{Name: "virt-operator", Command: []string{"virtop"}, Args: []string{"operator", "--prometheus-namespaces=tenant"}}}
		}
	}
	if got := f.prometheusCandidates(); got[0].service.Namespace != "tenant" {
		t.Errorf("with --prometheus-namespaces=tenant, first candidate in %s", got[0].service.Namespace)
	}
}

// TestAutoNamesItsChoice: the header says which Prometheus --prometheus
// auto chose and whether the operator trusts its namespace.
func TestAutoNamesItsChoice(t *testing.T) {
	f := healthyFacts()
	trust := f.promTrust()
	for _, tc := range []struct {
		c    promCandidate
		want []string
	}{
		{promCandidate{prom: &f.Prometheuses[0], trusted: true},
			[]string{"chosen: monitoring/k8s is in a namespace the operator trusts (the operator's default --prometheus-namespaces monitoring,openshift-monitoring)"}},
		{promCandidate{prom: &monitoringv1.Prometheus{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "evil"}}},
			[]string{"tenant/evil is NOT in a namespace the operator trusts", "weigh its monitoring checks accordingly"}},
	} {
		r := &Report{Prometheus: &PromSource{Via: ViaServiceProxy, Resource: promName(tc.c.prom), Answered: true, Trusted: &tc.c.trusted, Trust: trust.note(tc.c)}}
		h := r.Header()
		for _, w := range tc.want {
			if !strings.Contains(h, w) {
				t.Errorf("header lacks %q:\n%s", w, h)
			}
		}
	}
}

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"plain kubectl get x -o jsonpath='{\"\\n\"}'": "plain kubectl get x -o jsonpath='{\"\\n\"}'",
		"a\x1b[31mb":       `a\x1b[31mb`,
		"tab\there\nline":  `tab\there\nline`,
		"bad\xffbyte":      `bad\xffbyte`,
		"c1\u0085\u009d":   `c1\u0085\u009d`,
		"ok \ufffd é 日本":   "ok \ufffd é 日本",
		"del\x7f":          `del\x7f`,
		"ls\u2028ps\u2029": `ls\u2028ps\u2029`,
		"iso\u2066x\u2069": `iso\u2066x\u2069`,
	} {
		if got := Printable(in); got != want {
			t.Errorf("Printable(%q) = %q, want %q", in, got, want)
		}
	}
}
