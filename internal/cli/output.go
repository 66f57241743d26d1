package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// The two -o sets: commands that print Kubernetes objects take objectFormats
// (yaml first, the default), commands that print a report take
// reportFormats (text first, the default). Every command's -o is one of
// them (TestOutputFlags).
var (
	objectFormats = []string{"yaml", "json"}
	reportFormats = []string{"text", "json"}
)

// addOutputFlag adds -o/--output with the set's first format as default and
// completion of the set.
func addOutputFlag(cmd *cobra.Command, output *string, formats []string) {
	cmd.Flags().StringVarP(output, "output", "o", formats[0], "output format: "+strings.Join(formats, " or "))
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(formats, cobra.ShellCompDirectiveNoFileComp))
}

// checkOutput refuses a format outside the set (a usage error: exit 2).
func checkOutput(output string, formats []string) error {
	for _, f := range formats {
		if output == f {
			return nil
		}
	}
	return fmt.Errorf("-o must be %s, not %q", strings.Join(formats, " or "), output)
}
