package doctor

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/virtop-dev/virtop/internal/vocab"
)

// guarded serves fakeProm only to requests with the bearer token, and
// records their methods.
type guarded struct {
	token string
	next  http.Handler
	mu    sync.Mutex
	meths map[string]int
}

func (g *guarded) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	g.meths[r.Method]++
	g.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer "+g.token {
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	if r.URL.Path == "/api/v1/status/buildinfo" {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"success","data":{"version":"2.42.0","revision":"x","branch":"HEAD","buildUser":"","buildDate":"","goVersion":"go1.20"}}`))
		return
	}
	g.next.ServeHTTP(w, r)
}

func TestPrometheusTokenAndCA(t *testing.T) {
	g := &guarded{token: "s3cret", next: healthyProm(), meths: map[string]int{}}
	srv := httptest.NewTLSServer(g)
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	ask := func(o PrometheusOptions) *PromFacts {
		t.Helper()
		if err := o.Validate(); err != nil {
			t.Fatal(err)
		}
		ep, err := urlEndpoint(o, nil)
		if err != nil {
			t.Fatal(err)
		}
		return GatherPrometheus(context.Background(), ep, testNS, 10*time.Second)
	}

	pf := ask(PrometheusOptions{URL: srv.URL, Token: "s3cret", CAFile: ca})
	if pf.Err != nil || !pf.Source.Answered || pf.Source.Auth != AuthBearer || pf.Source.CAFile != ca || pf.Source.Version != "2.42.0" {
		t.Fatalf("with token and CA: %v %+v", pf.Err, pf.Source)
	}
	f := healthyFacts()
	f.Prometheus = pf
	r := Run(f)
	if r.Verdict != Healthy || findCheck(t, r, CheckPromTarget).Status != OK {
		t.Errorf("verdict %s: %s", r.Verdict, r.Reason)
	}
	if !strings.Contains(text(t, r), "Prometheus: "+srv.URL+" answered (Prometheus 2.42.0), with a bearer token, its certificate verified with "+ca) {
		t.Errorf("header:\n%s", text(t, r))
	}
	// Every request was a read.
	g.mu.Lock()
	if g.meths[http.MethodPost] > 0 || g.meths[http.MethodGet] == 0 {
		t.Errorf("methods %v: doctor must only GET", g.meths)
	}
	g.mu.Unlock()

	// No token: the proxy refuses, doctor says so and checks nothing.
	pf = ask(PrometheusOptions{URL: srv.URL, CAFile: ca})
	if pf.Err == nil || !strings.Contains(pf.Err.Error(), "401") || pf.Source.Answered {
		t.Errorf("without token: %v %+v", pf.Err, pf.Source)
	}
	// No CA: the certificate is not trusted.
	pf = ask(PrometheusOptions{URL: srv.URL, Token: "s3cret"})
	if pf.Err == nil || !strings.Contains(pf.Err.Error(), "certificate") {
		t.Errorf("without CA: %v", pf.Err)
	}
}

func TestPrometheusOptions(t *testing.T) {
	bad := []PrometheusOptions{
		{Auto: true, URL: "http://p:9090"},
		{Auto: true, Token: "t"},
		{Token: "t"},
		{URL: "localhost:9090"},
	}
	for _, o := range bad {
		if o.Validate() == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	if _, err := ParsePrometheusMode("sometimes"); err == nil {
		t.Error("--prometheus sometimes accepted")
	}
	host := "https://127.0.0.1:6443"
	for u, want := range map[string]bool{
		host + "/api/v1/namespaces/monitoring/services/http:prometheus-operated:web/proxy/":       true,
		host + "/api/v1/namespaces/monitoring/services/prometheus-k8s:9090/proxy":                 true,
		host + "/api/v1/namespaces/monitoring/pods/prometheus-k8s-0/proxy/":                       false,
		"https://thanos.example/api/v1/namespaces/monitoring/services/http:prometheus:web/proxy/": false,
	} {
		if got := IsServiceProxyURL(u, host); got != want {
			t.Errorf("IsServiceProxyURL(%s) = %v", u, got)
		}
	}
	// The service proxy goes with the kubeconfig's credentials only.
	cfg := &rest.Config{Host: host, BearerToken: "kube"}
	proxy := host + "/api/v1/namespaces/monitoring/services/http:prometheus-operated:web/proxy/"
	if _, err := urlEndpoint(PrometheusOptions{URL: proxy, Token: "t"}, cfg); err == nil {
		t.Error("a token for the service proxy accepted")
	}
	ep, err := urlEndpoint(PrometheusOptions{URL: proxy}, cfg)
	if err != nil || ep.Source.Via != ViaServiceProxy || ep.Source.Auth != AuthKubeconfig {
		t.Errorf("service proxy URL: %v %+v", err, ep.Source)
	}
}

func service(ns, name string, sel map[string]string, ports ...corev1.ServicePort) corev1.Service {
	return corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{Selector: sel, Ports: ports}}
}

func TestPrometheusCandidates(t *testing.T) {
	f := healthyFacts()
	web := corev1.ServicePort{Name: "web", Port: 9090}
	f.PrometheusServices = []corev1.Service{
		service(monNS, "prometheus-operated", map[string]string{vocab.AppNameLabel: "prometheus"}, web),
		service(monNS, "prometheus-k8s", map[string]string{vocab.AppNameLabel: "prometheus", "prometheus": "k8s"}, corev1.ServicePort{Name: "reloader-web", Port: 8080}, web),
		service(monNS, "alertmanager-main", map[string]string{vocab.AppNameLabel: "alertmanager"}, corev1.ServicePort{Name: "web", Port: 9093}),
		service("elsewhere", "prometheus-operated", nil, web),
	}
	got := f.prometheusCandidates()
	var paths []string
	for _, c := range got {
		paths = append(paths, c.proxyPath())
	}
	want := []string{
		"/api/v1/namespaces/monitoring/services/http:prometheus-k8s:web/proxy/",
		"/api/v1/namespaces/monitoring/services/http:prometheus-operated:web/proxy/",
	}
	if strings.Join(paths, " ") != strings.Join(want, " ") {
		t.Errorf("candidates %v, want %v", paths, want)
	}

	// TLS and a route prefix; a selectorless governing Service.
	f.Prometheuses[0].Spec.Web = &monitoringv1.PrometheusWebSpec{WebConfigFileFields: monitoringv1.WebConfigFileFields{TLSConfig: &monitoringv1.WebTLSConfig{}}}
	f.Prometheuses[0].Spec.RoutePrefix = "/prom"
	f.PrometheusServices = []corev1.Service{service(monNS, "prometheus-operated", nil, corev1.ServicePort{Name: "http-web", Port: 9090})}
	got = f.prometheusCandidates()
	if len(got) != 1 || got[0].proxyPath() != "/api/v1/namespaces/monitoring/services/https:prometheus-operated:http-web/proxy/prom/" {
		t.Errorf("TLS, prefix: %+v", got)
	}

	// A Prometheus that does not select the ServiceMonitor is not asked.
	f.Prometheuses[0].Spec.ServiceMonitorSelector = nil
	if got = f.prometheusCandidates(); len(got) != 0 {
		t.Errorf("a Prometheus that selects nothing is a candidate: %+v", got)
	}
}
