package doctor

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"

	"github.com/virtop-dev/virtop/internal/monitoring/placement"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// How doctor reached Prometheus (PromSource.Via).
const (
	// ViaURL: the URL given with --prometheus-url.
	ViaURL = "url"
	// ViaServiceProxy: the API server's service proxy, with the
	// kubeconfig's credentials (no port-forward).
	ViaServiceProxy = "service-proxy"
)

// Credentials sent to Prometheus (PromSource.Auth).
const (
	AuthNone        = "none"
	AuthBearer      = "bearer-token"
	AuthKubeconfig  = "kubeconfig"
	prometheusAuto  = "auto"
	prometheusNone  = "none"
	defaultPromWait = 30 * time.Second
)

// PromSource says which Prometheus doctor asked, how, and whether it
// answered. It never holds a credential.
type PromSource struct {
	// URL is the base URL of the HTTP API asked.
	URL string `json:"url"`
	// Via is ViaURL or ViaServiceProxy.
	Via string `json:"via"`
	// Auth is AuthNone, AuthBearer or AuthKubeconfig.
	Auth string `json:"auth"`
	// CAFile verified its certificate (--prometheus-ca).
	CAFile string `json:"caFile,omitempty"`
	// Resource is the Prometheus resource ("namespace/name") that
	// --prometheus auto found selecting KubeVirt's ServiceMonitor.
	Resource string `json:"resource,omitempty"`
	// Service is the Service ("namespace/name port") it was reached
	// through.
	Service string `json:"service,omitempty"`
	// Answered says the HTTP API answered; Version is its build.
	Answered bool   `json:"answered"`
	Version  string `json:"version,omitempty"`
	// Error is why it did not answer, or why no Prometheus was found.
	Error string `json:"error,omitempty"`
	// Tried are the candidates asked before, each with why it failed.
	Tried []string `json:"tried,omitempty"`
	// Trusted says, for --prometheus auto, whether the Prometheus is in a
	// namespace the operator trusts (its --prometheus-namespaces, or the
	// KubeVirt resource's spec.monitorNamespace); Trust says which those
	// are and why this one was chosen. Candidates in trusted namespaces
	// are asked first: a tenant's Prometheus may answer anything.
	Trusted *bool  `json:"trusted,omitempty"`
	Trust   string `json:"trust,omitempty"`
}

// PrometheusOptions say which Prometheus doctor asks.
type PrometheusOptions struct {
	// URL is --prometheus-url: the base URL of a Prometheus HTTP API (or
	// of a Thanos querier, an OAuth proxy, the API server's service
	// proxy).
	URL string
	// Token is a bearer token sent with every request; CAFile a PEM file
	// of the CAs that verify its TLS certificate.
	Token  string
	CAFile string
	// Auto finds the Prometheus that selects KubeVirt's ServiceMonitor and
	// asks it through the API server's service proxy.
	Auto bool
	// Timeout bounds the queries of one Prometheus (default 30 s).
	Timeout time.Duration
}

// ParsePrometheusMode checks the value of --prometheus: "auto" or
// "none" ("" is none).
func ParsePrometheusMode(s string) (auto bool, err error) {
	switch s {
	case prometheusAuto:
		return true, nil
	case "", prometheusNone:
		return false, nil
	}
	return false, fmt.Errorf("--prometheus must be auto or none, not %q", s)
}

// Validate reports options that contradict each other.
func (o PrometheusOptions) Validate() error {
	switch {
	case o.Auto && o.URL != "":
		return errors.New("--prometheus auto and --prometheus-url exclude each other: auto finds the URL")
	case o.Auto && (o.Token != "" || o.CAFile != ""):
		return errors.New("--prometheus auto asks through the API server with the kubeconfig's credentials: --prometheus-token and --prometheus-ca apply to --prometheus-url only")
	case o.URL == "" && (o.Token != "" || o.CAFile != ""):
		return errors.New("--prometheus-token and --prometheus-ca need --prometheus-url")
	}
	if o.URL != "" {
		u, err := url.Parse(o.URL)
		if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
			return fmt.Errorf("--prometheus-url %q is not an http(s) URL", o.URL)
		}
	}
	return nil
}

// Endpoint is one Prometheus HTTP API to ask.
type Endpoint struct {
	URL string
	// Transport carries the credentials; nil is http.DefaultTransport.
	Transport http.RoundTripper
	Source    PromSource
}

// IsServiceProxyURL says u is the API server's service proxy of the
// cluster at host (https://host/api/v1/namespaces/<ns>/services/<svc>/proxy...).
func IsServiceProxyURL(u, host string) bool {
	if host == "" {
		return false
	}
	base := strings.TrimSuffix(host, "/") + "/api/v1/namespaces/"
	if !strings.HasPrefix(u, base) {
		return false
	}
	rest := strings.Split(strings.TrimPrefix(u, base), "/")
	return len(rest) >= 4 && rest[1] == "services" && rest[3] == "proxy"
}

// urlEndpoint is the Endpoint of --prometheus-url: the kubeconfig's
// credentials when it is the API server's service proxy, else the given
// token and CA.
func urlEndpoint(o PrometheusOptions, cfg *rest.Config) (Endpoint, error) {
	ep := Endpoint{URL: o.URL, Source: PromSource{Via: ViaURL, Auth: AuthNone}}
	if cfg != nil && IsServiceProxyURL(o.URL, cfg.Host) {
		if o.Token != "" || o.CAFile != "" {
			return ep, errors.New("--prometheus-url is the API server's service proxy, reached with the kubeconfig's credentials: drop --prometheus-token and --prometheus-ca")
		}
		rt, err := rest.TransportFor(cfg)
		if err != nil {
			return ep, fmt.Errorf("the kubeconfig's transport: %w", err)
		}
		ep.Transport = rt
		ep.Source.Via, ep.Source.Auth = ViaServiceProxy, AuthKubeconfig
		return ep, nil
	}
	base := http.DefaultTransport.(*http.Transport).Clone()
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return ep, fmt.Errorf("--prometheus-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return ep, fmt.Errorf("--prometheus-ca %s holds no PEM certificate", o.CAFile)
		}
		base.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		ep.Source.CAFile = o.CAFile
	}
	ep.Transport = base
	if o.Token != "" {
		ep.Transport = bearer{token: o.Token, next: base}
		ep.Source.Auth = AuthBearer
	}
	return ep, nil
}

// bearer adds a bearer token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// getOnly turns the client library's form POSTs into GETs with the same
// query, so that doctor only reads (through the API server that is RBAC
// verb get on services/proxy, not create).
func getOnly(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return getter{next: next}
}

type getter struct{ next http.RoundTripper }

func (g getter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodPost || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		return g.next.RoundTrip(r)
	}
	var body []byte
	if r.Body != nil {
		var err error
		body, err = io.ReadAll(r.Body)
		_ = r.Body.Close()
		if err != nil {
			return nil, err
		}
	}
	get := r.Clone(r.Context())
	get.Method = http.MethodGet
	get.Body, get.GetBody, get.ContentLength = nil, nil, 0
	get.Header.Del("Content-Type")
	u := *r.URL
	q := u.RawQuery
	if q != "" && len(body) > 0 {
		q += "&"
	}
	u.RawQuery = q + string(body)
	get.URL = &u
	return g.next.RoundTrip(get)
}

// promCandidate is a Service through which a Prometheus that selects the
// ServiceMonitor may be asked.
type promCandidate struct {
	prom    *monitoringv1.Prometheus
	service *corev1.Service
	port    corev1.ServicePort
	rank    int
	// trusted: the Prometheus is in a namespace the operator trusts.
	trusted bool
}

// proxyPath is the candidate's base path on the API server:
// /api/v1/namespaces/<ns>/services/<scheme>:<name>:<port>/proxy/<routePrefix>.
func (c promCandidate) proxyPath() string {
	port := c.port.Name
	if port == "" {
		port = fmt.Sprint(c.port.Port)
	}
	prefix := strings.Trim(c.prom.Spec.WebRoutePrefix(), "/")
	p := fmt.Sprintf("/api/v1/namespaces/%s/services/%s:%s:%s/proxy/", c.service.Namespace, c.prom.Spec.PrometheusURIScheme(), c.service.Name, port)
	if prefix != "" {
		p += prefix + "/"
	}
	return p
}

func (c promCandidate) describe() string {
	port := c.port.Name
	if port == "" {
		port = fmt.Sprint(c.port.Port)
	}
	return fmt.Sprintf("%s/%s port %s", c.service.Namespace, c.service.Name, port)
}

// governingService is the Service prometheus-operator creates beside every
// Prometheus (selecting all of the namespace's Prometheus pods).
const governingService = "prometheus-operated"

// promPodLabels are the labels of a Prometheus's pods: those of its pods
// when they were read, else the ones prometheus-operator gives them.
func (f *Facts) promPodLabels(p *monitoringv1.Prometheus) []map[string]string {
	var out []map[string]string
	for i := range f.PrometheusPods {
		pod := &f.PrometheusPods[i]
		if pod.Namespace == p.Namespace && isPodOf(pod, p.Name) {
			out = append(out, pod.Labels)
		}
	}
	if len(out) == 0 {
		out = append(out, map[string]string{
			vocab.AppNameLabel:             "prometheus",
			vocab.AppInstanceLabel:         p.Name,
			vocab.ManagedByLabel:           "prometheus-operator",
			"operator.prometheus.io/name":  p.Name,
			"operator.prometheus.io/shard": "0",
			"prometheus":                   p.Name,
		})
	}
	return out
}

// prometheusCandidates are the Services to ask the Prometheuses that select
// KubeVirt's ServiceMonitor through, best first: those of Prometheuses in
// namespaces the operator trusts (trustsPrometheus) before any other, then
// a Service whose selector picks this Prometheus's pods by name, then one
// that picks Prometheus pods in general (prometheus-operated), then a
// selectorless prometheus-operated (its EndpointSlices written by hand).
func (f *Facts) prometheusCandidates() []promCandidate {
	selecting, _ := f.smSelecting()
	trust := f.promTrust()
	var out []promCandidate
	for _, p := range selecting {
		podLabels := f.promPodLabels(p)
		for i := range f.PrometheusServices {
			svc := &f.PrometheusServices[i]
			if svc.Namespace != p.Namespace {
				continue
			}
			rank := -1
			switch sel := svc.Spec.Selector; {
			case len(sel) > 0:
				matches := false
				for _, l := range podLabels {
					if labels.SelectorFromSet(sel).Matches(labels.Set(l)) {
						matches = true
					}
				}
				if !matches {
					continue
				}
				rank = 1
				for _, k := range []string{"operator.prometheus.io/name", "prometheus", vocab.AppInstanceLabel} {
					if sel[k] == p.Name {
						rank = 0
					}
				}
			case svc.Name == governingService:
				rank = 2
			default:
				continue
			}
			port, ok := webPort(svc)
			if !ok {
				continue
			}
			out = append(out, promCandidate{prom: p, service: svc, port: port, rank: rank, trusted: trust.trusts(p.Namespace)})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].trusted != out[j].trusted {
			return out[i].trusted
		}
		return out[i].rank < out[j].rank
	})
	return out
}

// promTrustSet is what the operator trusts of Prometheus namespaces, as
// doctor can tell: the operator's --prometheus-namespaces (read from the
// virt-operator Deployment's arguments, else its default), plus the
// KubeVirt resource's spec.monitorNamespace.
type promTrustSet struct {
	namespaces []string
	// from says where namespaces came from.
	from string
	// monitorNamespace is the KubeVirt resource's, "" if none.
	monitorNamespace string
}

func (t promTrustSet) trusts(ns string) bool {
	if ns == "" {
		return false
	}
	return ns == t.monitorNamespace || slices.Contains(t.namespaces, ns) || slices.Contains(t.namespaces, placement.AllNamespaces)
}

// describe names the trusted namespaces and where doctor learned them.
func (t promTrustSet) describe() string {
	s := fmt.Sprintf("%s %s", t.from, strings.Join(t.namespaces, ","))
	if t.monitorNamespace != "" {
		s += fmt.Sprintf(", and spec.monitorNamespace %s", t.monitorNamespace)
	}
	return s
}

// promTrust reads what the operator trusts.
func (f *Facts) promTrust() promTrustSet {
	t := promTrustSet{namespaces: placement.DefaultPrometheusNamespaces(), from: "the operator's default " + placement.PrometheusNamespacesFlag}
	if v, ok := f.operatorFlag(placement.PrometheusNamespacesFlag); ok {
		t.namespaces, t.from = nil, "the operator's "+placement.PrometheusNamespacesFlag
		for _, ns := range strings.Split(v, ",") {
			if ns = strings.TrimSpace(ns); ns != "" {
				t.namespaces = append(t.namespaces, ns)
			}
		}
	}
	for _, kv := range f.kubeVirtsIn(f.Where.Namespace) {
		if ns := kv.Spec.MonitorNamespace; ns != "" {
			t.monitorNamespace = ns
		}
	}
	return t
}

// operatorFlag is the value of a flag of virtop's operator, as the
// Deployment virt-operator passes it (--flag=value or --flag value).
func (f *Facts) operatorFlag(flag string) (string, bool) {
	d := f.deployment(vocab.VirtOperator)
	if d == nil {
		return "", false
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		args := append(append([]string(nil), c.Command...), c.Args...)
		for i, a := range args {
			if v, ok := strings.CutPrefix(a, flag+"="); ok {
				return v, true
			}
			if a == flag && i+1 < len(args) {
				return args[i+1], true
			}
		}
	}
	return "", false
}

// trustNote is the header's note on the chosen Prometheus's trust.
func (t promTrustSet) note(c promCandidate) string {
	if c.trusted {
		return fmt.Sprintf("chosen: %s is in a namespace the operator trusts (%s)", promName(c.prom), t.describe())
	}
	return fmt.Sprintf("%s is NOT in a namespace the operator trusts (%s): no Prometheus there selects KubeVirt's ServiceMonitor and answered, so this one was asked; "+
		"whoever runs it decides what it answers, so weigh its monitoring checks accordingly", promName(c.prom), t.describe())
}

// webPort picks the Service port of Prometheus's web server: named web,
// http-web or http, else 9090, else the only port.
func webPort(svc *corev1.Service) (corev1.ServicePort, bool) {
	for _, name := range []string{"web", "http-web", "http"} {
		for _, p := range svc.Spec.Ports {
			if p.Name == name {
				return p, true
			}
		}
	}
	for _, p := range svc.Spec.Ports {
		if p.Port == 9090 {
			return p, true
		}
	}
	if len(svc.Spec.Ports) == 1 {
		return svc.Spec.Ports[0], true
	}
	return corev1.ServicePort{}, false
}
