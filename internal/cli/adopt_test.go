package cli

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/virtop-dev/virtop/internal/tools/adoptpreview"
	"github.com/virtop-dev/virtop/internal/tools/handback"
	"github.com/virtop-dev/virtop/internal/tools/uninstall"
)

// TestClusterExit: the one mapping of the cluster commands' errors to exit
// status (adopt, handback, uninstall): a refusal 1, anything else 2, an
// ExitError as it is.
func TestClusterExit(t *testing.T) {
	code := func(err error) int {
		var e *ExitError
		if err == nil {
			return 0
		}
		if !errors.As(err, &e) {
			t.Fatalf("%v is not an ExitError", err)
		}
		return e.Code
	}
	for _, tc := range []struct {
		err     error
		refused []error
		want    int
	}{
		{nil, []error{adoptpreview.ErrRefused}, 0},
		{fmt.Errorf("%w: UpstreamOperatorRunning", adoptpreview.ErrRefused), []error{adoptpreview.ErrRefused}, 1},
		{fmt.Errorf("%w: lease held", handback.ErrRefused), []error{handback.ErrRefused}, 1},
		{fmt.Errorf("x: %w", uninstall.ErrTimeout), []error{uninstall.ErrRefused, uninstall.ErrTimeout}, 1},
		{errors.New("connection refused"), []error{adoptpreview.ErrRefused}, 2},
		{fmt.Errorf("%w: other", handback.ErrRefused), []error{adoptpreview.ErrRefused}, 2},
		{&ExitError{Code: 2, Err: errors.New("kubeconfig")}, []error{adoptpreview.ErrRefused}, 2},
	} {
		if got := code(clusterExit(tc.err, tc.refused...)); got != tc.want {
			t.Errorf("clusterExit(%v) = exit %d, want %d", tc.err, got, tc.want)
		}
	}
}

// TestAdoptNeedsDryRun: virtop adopt only previews; without --dry-run it is
// a usage error, and so is an unreachable cluster.
func TestAdoptNeedsDryRun(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Main([]string{"adopt", "--server", "https://127.0.0.1:1"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "--dry-run") {
		t.Errorf("adopt without --dry-run: exit %d, %q", code, errb.String())
	}
	errb.Reset()
	if code := Main([]string{"adopt", "--dry-run", "--server", "https://127.0.0.1:1", "--request-timeout", "2s"}, &out, &errb); code != 2 {
		t.Errorf("adopt --dry-run against nothing: exit %d, %q", code, errb.String())
	}
}
