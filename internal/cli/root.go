// Package cli holds virtop's subcommands. Each command parses its flags and
// calls a package that does the work; nothing here holds logic worth testing
// on its own.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// ExitError carries a specific exit code (for example `virtop diff` exits 1
// when its operands differ).
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// NewRootCommand builds the command tree.
func NewRootCommand(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "virtop",
		Short: "Install and run the KubeVirt control plane, and keep its monitoring true",
		Example: `  # a local cluster with the operator, then what virtop installs
  virtop up --nodes 3
  virtop dump --version v1.5.3 --kind Deployment

  # shell completion (bash; also zsh, fish, powershell)
  source <(virtop completion bash)`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       versionLine(),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetOut(stdout)
	root.SetErr(stderr)
	for _, add := range subcommands {
		root.AddCommand(add())
	}
	completeVersionFlags(root)
	// cobra adds its completion command when the root executes; added now,
	// its --help gets examples like every other command's.
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			addCompletionExamples(c)
		}
	}
	return root
}

// completionExamples are the ways to load each shell's completion.
var completionExamples = map[string]string{
	"": `  # bash, this shell only; add the line to ~/.bashrc for every shell
  source <(virtop completion bash)

  # zsh, fish: see "virtop completion zsh --help", "virtop completion fish --help"`,
	"bash": `  # this shell only
  source <(virtop completion bash)

  # every new shell (Linux; bash-completion installed)
  virtop completion bash > /etc/bash_completion.d/virtop`,
	"zsh": `  # this shell only (compinit must have run)
  source <(virtop completion zsh)

  # every new shell
  virtop completion zsh > "${fpath[1]}/_virtop"`,
	"fish": `  # this shell only
  virtop completion fish | source

  # every new shell
  virtop completion fish > ~/.config/fish/completions/virtop.fish`,
	"powershell": `  # this session only
  virtop completion powershell | Out-String | Invoke-Expression`,
}

func addCompletionExamples(completion *cobra.Command) {
	completion.Example = completionExamples[""]
	for _, sh := range completion.Commands() {
		if ex, ok := completionExamples[sh.Name()]; ok {
			sh.Example = ex
		}
	}
}

// subcommands is filled by each command's file in an init function, so that
// commands can be added without editing this file.
var subcommands []func() *cobra.Command

func register(f func() *cobra.Command) { subcommands = append(subcommands, f) }

// Main runs virtop with args and returns the process exit code: 0 on success,
// the code of an ExitError, else 2 for errors (bad flags, unreadable input).
func Main(args []string, stdout, stderr io.Writer) int {
	root := NewRootCommand(stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		if ee.Err != nil {
			fmt.Fprintln(stderr, "Error:", ee.Err)
		}
		return ee.Code
	}
	fmt.Fprintln(stderr, "Error:", err)
	return 2
}

// addGoFlags adds flags that a library binds to a standard library flag
// set.
func addGoFlags(cmd *cobra.Command, bind func(*flag.FlagSet)) {
	fs := flag.NewFlagSet(cmd.Name(), flag.ContinueOnError)
	bind(fs)
	cmd.Flags().AddGoFlagSet(fs)
}
