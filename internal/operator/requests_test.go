package operator

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestClassifyRequest(t *testing.T) {
	for _, tc := range []struct {
		method, url, verb, resource string
	}{
		{"GET", "/api/v1/nodes?watch=true&resourceVersion=5", "watch", "nodes"},
		{"GET", "/api/v1/nodes?limit=500", "list", "nodes"},
		{"GET", "/api/v1/namespaces/kubevirt/secrets/kubevirt-ca", "get", "secrets"},
		{"GET", "/api/v1/namespaces/kubevirt", "get", "namespaces"},
		{"GET", "/api/v1/namespaces", "list", "namespaces"},
		{"GET", "/apis/apps/v1/namespaces/kubevirt/deployments", "list", "deployments.apps"},
		{"PATCH", "/apis/apps/v1/namespaces/kubevirt/deployments/virt-api?fieldManager=virtop", "patch", "deployments.apps"},
		{"PUT", "/apis/kubevirt.io/v1/namespaces/kubevirt/kubevirts/kubevirt/status", "update", "kubevirts.kubevirt.io/status"},
		{"POST", "/api/v1/namespaces/kubevirt/events", "create", "events"},
		{"DELETE", "/apis/rbac.authorization.k8s.io/v1/clusterroles/kubevirt.io:admin", "delete", "clusterroles.rbac.authorization.k8s.io"},
		{"GET", "/apis/apps/v1", "get", "discovery"},
		{"GET", "/api", "get", "discovery"},
		{"GET", "/version", "get", "nonresource"},
	} {
		req := httptest.NewRequest(tc.method, tc.url, nil)
		verb, res := classifyRequest(req)
		if verb != tc.verb || res != tc.resource {
			t.Errorf("%s %s: got %s %s, want %s %s", tc.method, tc.url, verb, res, tc.verb, tc.resource)
		}
	}
}

type okTransport struct{}

func (okTransport) RoundTrip(*http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
}

func TestRequestCounterCounts(t *testing.T) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x"}, []string{"verb", "resource"})
	res := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "y"}, []string{"code", "method", "host", "resource", "verb"})
	rt := &requestCounter{next: okTransport{}, counter: c, results: res}
	for _, u := range []string{"/api/v1/nodes?watch=true", "/api/v1/nodes?watch=true", "/api/v1/nodes"} {
		if _, err := rt.RoundTrip(httptest.NewRequest("GET", u, nil)); err != nil {
			t.Fatal(err)
		}
	}
	if got := testutil.ToFloat64(c.WithLabelValues("watch", "nodes")); got != 2 {
		t.Errorf("watch nodes = %v, want 2", got)
	}
	if got := testutil.ToFloat64(c.WithLabelValues("list", "nodes")); got != 1 {
		t.Errorf("list nodes = %v, want 1", got)
	}
	// KubeVirt's REST counter, labelled as upstream's components label it.
	if got := testutil.ToFloat64(res.WithLabelValues("200", "GET", "example.com", "nodes", "WATCH")); got != 2 {
		t.Errorf("kubevirt_rest_client_requests_total 200 GET nodes WATCH = %v, want 2", got)
	}
	if got := testutil.ToFloat64(res.WithLabelValues("200", "GET", "example.com", "nodes", "LIST")); got != 1 {
		t.Errorf("kubevirt_rest_client_requests_total 200 GET nodes LIST = %v, want 1", got)
	}
	bad := &requestCounter{next: failTransport{}, counter: c, results: res}
	if _, err := bad.RoundTrip(httptest.NewRequest("PATCH", "/apis/apps/v1/namespaces/kubevirt/deployments/virt-api/status", nil)); err == nil {
		t.Fatal("failing transport returned no error")
	}
	if got := testutil.ToFloat64(res.WithLabelValues("<error>", "PATCH", "example.com", "deployments", "PATCH")); got != 1 {
		t.Errorf("failed PATCH deployments = %v, want 1", got)
	}
	if _, err := rt.RoundTrip(httptest.NewRequest("GET", "/version", nil)); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(res.WithLabelValues("200", "GET", "example.com", "none", "none")); got != 1 {
		t.Errorf("GET /version = %v, want 1 under resource and verb none", got)
	}
	// The operator's client transport is wrapped.
	if w := countRequests(okTransport{}).(*requestCounter); w.counter != apiRequests || w.results != restResults {
		t.Error("countRequests does not use virtop_api_requests_total and kubevirt_rest_client_requests_total")
	}
}

type failTransport struct{}

func (failTransport) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("connection refused")
}
