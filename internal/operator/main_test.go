package operator

import (
	"os"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/virtop-dev/virtop/internal/scheme"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
)

// TestMain starts a real API server for the tests that run the operator
// (cachescope_test.go, metricsauth_test.go); the others need none.
func TestMain(m *testing.M) {
	log.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	os.Exit(testenv.Main(m, testenv.Options{Monitoring: true, Scheme: scheme.New()}))
}
