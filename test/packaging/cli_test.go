package packaging

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/virtop-dev/virtop/internal/cli"
)

// TestCLIHelpAndCompletion: every subcommand shows examples in --help, and
// shell completion works for bash, zsh and fish.
func TestCLIHelpAndCompletion(t *testing.T) {
	root := cli.NewRootCommand(&bytes.Buffer{}, &bytes.Buffer{})
	root.InitDefaultCompletionCmd()
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" || sub.Name() == "completion" {
				continue
			}
			if strings.TrimSpace(sub.Example) == "" {
				t.Errorf("%q has no examples in --help", sub.CommandPath())
			}
			walk(sub)
		}
	}
	walk(root)
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
