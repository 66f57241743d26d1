package operator

import (
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

// TestNewRefusesBadPrometheusNamespaces: a --prometheus-namespaces entry
// that is neither a namespace name nor "*" stops the operator at start.
func TestNewRefusesBadPrometheusNamespaces(t *testing.T) {
	_, err := New(&rest.Config{Host: "https://127.0.0.1:1"}, Options{Namespace: "kubevirt", PrometheusNamespaces: []string{"monitoring", "Tenant A"}})
	if err == nil || !strings.Contains(err.Error(), "--prometheus-namespaces") || !strings.Contains(err.Error(), "Tenant A") {
		t.Fatalf("New = %v, want an error naming --prometheus-namespaces and the bad entry", err)
	}
}
