package operator

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// apiRequests counts the operator's requests to the API server, by verb
// and resource, on the client side: the figure of its load on the cluster
// (0 writes in a steady state).
var apiRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "virtop_api_requests_total",
	Help: "Requests virtop's operator sent to the API server, by verb (get, list, watch, create, update, patch, delete) and resource (resource.group[/subresource]).",
}, []string{"verb", "resource"})

// restResults is KubeVirt's client-side REST counter, which every KubeVirt
// component exports and VirtOperatorRESTErrorsBurst reads: requests by
// response code ("<error>" when none came back), HTTP method, host, plural
// resource ("none" outside the resource API) and upper-case verb, as
// upstream's components label it.
var restResults = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "kubevirt_rest_client_requests_total",
	Help: "Number of HTTP requests, partitioned by status code, method, and host.",
}, []string{"code", "method", "host", "resource", "verb"})

func init() { metrics.Registry.MustRegister(apiRequests, restResults) }

// Collectors are the operator package's metrics, for the test that holds
// the metric catalogue to what virtop exports.
func Collectors() []prometheus.Collector { return []prometheus.Collector{apiRequests, restResults} }

// countRequests wraps a client transport so each request increments
// virtop_api_requests_total and, with its result,
// kubevirt_rest_client_requests_total; use it with rest.Config.Wrap.
func countRequests(rt http.RoundTripper) http.RoundTripper {
	return &requestCounter{next: rt, counter: apiRequests, results: restResults}
}

type requestCounter struct {
	next    http.RoundTripper
	counter *prometheus.CounterVec
	results *prometheus.CounterVec
}

func (c *requestCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	verb, resource := classifyRequest(req)
	c.counter.WithLabelValues(verb, resource).Inc()
	resp, err := c.next.RoundTrip(req)
	code := "<error>"
	if err == nil {
		code = strconv.Itoa(resp.StatusCode)
	}
	host := req.URL.Host
	if host == "" {
		host = req.Host
	}
	c.results.WithLabelValues(code, req.Method, host, pluralResource(resource), restVerb(verb, resource)).Inc()
	return resp, err
}

// pluralResource is the plural name of a resource[.group][/subresource]
// as classifyRequest names it; "none" outside the resource API.
func pluralResource(resource string) string {
	if resource == "discovery" || resource == "nonresource" {
		return "none"
	}
	name, _, _ := strings.Cut(resource, "/")
	name, _, _ = strings.Cut(name, ".")
	return name
}

// restVerb is KubeVirt's verb label: virtop's verb upper-cased, "none"
// outside the resource API.
func restVerb(verb, resource string) string {
	if pluralResource(resource) == "none" {
		return "none"
	}
	return strings.ToUpper(verb)
}

// classifyRequest names the verb and resource of an API request the way the
// API server's audit does: a GET is a watch (?watch=true), a list (no
// name) or a get.
func classifyRequest(req *http.Request) (verb, resource string) {
	resource, named := parseResourcePath(req.URL.Path)
	switch req.Method {
	case http.MethodGet, http.MethodHead:
		switch w := req.URL.Query().Get("watch"); {
		case w == "true" || w == "1":
			verb = "watch"
		case !named && resource != "discovery" && resource != "nonresource":
			verb = "list"
		default:
			verb = "get"
		}
	case http.MethodPatch:
		verb = "patch"
	case http.MethodPut:
		verb = "update"
	case http.MethodPost:
		verb = "create"
	case http.MethodDelete:
		if named {
			verb = "delete"
		} else {
			verb = "deletecollection"
		}
	default:
		verb = strings.ToLower(req.Method)
	}
	return verb, resource
}

// parseResourcePath returns resource[.group][/subresource] of an API path
// and whether it names one object. Discovery paths (/api, /apis/g/v) give
// "discovery", other paths (/version, /healthz) "nonresource".
func parseResourcePath(path string) (resource string, named bool) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	var group string
	switch {
	case len(segs) >= 1 && segs[0] == "api":
		segs = segs[min(len(segs), 2):] // api, v1
	case len(segs) >= 1 && segs[0] == "apis":
		if len(segs) >= 2 {
			group = segs[1]
		}
		segs = segs[min(len(segs), 3):] // apis, group, version
	default:
		return "nonresource", false
	}
	if len(segs) == 0 || segs[0] == "" {
		return "discovery", false
	}
	if segs[0] == "namespaces" && len(segs) >= 3 {
		segs = segs[2:] // namespaces/<ns>/<resource>...
	}
	resource = segs[0]
	if group != "" {
		resource += "." + group
	}
	if len(segs) >= 3 {
		resource += "/" + segs[2]
	}
	return resource, len(segs) >= 2
}
