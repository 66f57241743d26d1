package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestEveryCommandHasExamples walks the whole command tree (completion
// included; cobra's help command excepted) and checks that --help of each
// shows an Examples section, with lines that run virtop.
func TestEveryCommandHasExamples(t *testing.T) {
	root := NewRootCommand(&bytes.Buffer{}, &bytes.Buffer{})
	seen := 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Name() == "help" {
			return
		}
		seen++
		path := strings.Fields(c.CommandPath())[1:]
		var out, errb bytes.Buffer
		if code := Main(append(path, "--help"), &out, &errb); code != 0 {
			t.Errorf("%s --help: exit %d: %s", c.CommandPath(), code, errb.String())
		}
		help := out.String()
		_, examples, ok := strings.Cut(help, "\nExamples:\n")
		if !ok {
			t.Errorf("%s --help has no Examples section", c.CommandPath())
		} else if !strings.Contains(examples, "virtop") {
			t.Errorf("%s --help: no example runs virtop:\n%s", c.CommandPath(), examples)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	// root, the commands registered in this package and completion with
	// its four shells: fewer means the walk missed some.
	if want := 1 + len(subcommands) + 5; seen < want {
		t.Errorf("walked %d commands, want at least %d", seen, want)
	}
}

// TestQuietFlags: the commands that wait take --quiet/-q.
func TestQuietFlags(t *testing.T) {
	root := NewRootCommand(&bytes.Buffer{}, &bytes.Buffer{})
	for _, name := range []string{"up", "down"} {
		c, _, err := root.Find([]string{name})
		if err != nil {
			t.Fatal(err)
		}
		f := c.Flags().Lookup("quiet")
		if f == nil || f.Shorthand != "q" {
			t.Errorf("virtop %s has no --quiet/-q flag", name)
		}
	}
}
