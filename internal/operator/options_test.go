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

// TestNewRefusesUnknownCatalogVersion: a --catalog-versions entry the
// catalog lacks stops the operator at start with an error that names the
// flag, the version and the versions the catalog has.
func TestNewRefusesUnknownCatalogVersion(t *testing.T) {
	_, err := New(&rest.Config{Host: "https://127.0.0.1:1"}, Options{Namespace: "kubevirt", CatalogVersions: []string{"v1.9.0", "v9.9.9"}})
	if err == nil || !strings.HasPrefix(err.Error(), "--catalog-versions: ") || !strings.Contains(err.Error(), "v9.9.9") || !strings.Contains(err.Error(), "v1.9.0") {
		t.Fatalf("New = %v, want an error naming --catalog-versions, the unknown version and the catalog's", err)
	}
}
