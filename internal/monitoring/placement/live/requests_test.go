package live_test

import (
	"strings"
	"testing"

	"github.com/virtop-dev/virtop/internal/testing/operatortest"
)

// monitoringRequests sums the operator's requests (any verb) to the
// monitoring.coreos.com APIs so far.
func monitoringRequests(t testing.TB) float64 {
	return operatortest.Requests(t, func(_, resource string) bool {
		return strings.HasSuffix(resource, ".monitoring.coreos.com")
	})
}
