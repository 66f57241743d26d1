// Package packaging tests what users install: the operator's RBAC (the
// operator run in process impersonating its ServiceAccount, through install,
// upgrade and uninstall), the KubeVirt status as GitOps tools read it
// (kstatus), and, with the build tag packaging (`make test-packaging`), the
// release manifests, the Helm chart and the OCI image.
package packaging

import (
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/klog/v2"

	"github.com/virtop-dev/virtop/internal/scheme"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
)

// forbidden records every log line of the process that reports a refused
// request, from controller-runtime (reconciler errors) and from client-go
// (informers that cannot list or watch).
var forbidden struct {
	sync.Mutex
	lines []string
}

func forbiddenLines() []string {
	forbidden.Lock()
	defer forbidden.Unlock()
	return append([]string(nil), forbidden.lines...)
}

func recordingLogger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		line := prefix + " " + args
		if strings.Contains(line, "forbidden") || strings.Contains(line, "Forbidden") {
			forbidden.Lock()
			forbidden.lines = append(forbidden.lines, line)
			forbidden.Unlock()
			if testing.Verbose() {
				os.Stderr.WriteString(line + "\n")
			}
		}
	}, funcr.Options{Verbosity: 1})
}

func TestMain(m *testing.M) {
	l := recordingLogger()
	klog.SetLogger(l)
	os.Exit(testenv.Main(m, testenv.Options{Monitoring: true, Scheme: scheme.New(), Logger: l}))
}
