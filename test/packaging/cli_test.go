package packaging

import (
	"bytes"
	"strings"
	"testing"

	"github.com/virtop-dev/virtop/internal/cli"
)

// TestCLICompletion: shell completion works for bash, zsh and fish. (That
// every command's --help has examples is internal/cli's
// TestEveryCommandHasExamples.)
func TestCLICompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		var out, errb bytes.Buffer
		if code := cli.Main([]string{"completion", shell}, &out, &errb); code != 0 {
			t.Errorf("virtop completion %s: exit %d: %s", shell, code, errb.String())
			continue
		}
		if !strings.Contains(out.String(), "virtop") || out.Len() < 1000 {
			t.Errorf("virtop completion %s printed %d bytes", shell, out.Len())
		}
	}
}
