package cli

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/virtop-dev/virtop/internal/version"
)

func init() { register(newVersionCommand) }

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print virtop's version",
		Example: `  virtop version

  # the binary of the image
  skopeo copy oci-archive:dist/virtop-image.tar docker-daemon:virtop:dev && docker run --rm virtop:dev version`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			commit := version.Commit
			if commit == "" {
				commit = "unknown"
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "virtop %s (commit %s, %s)\n", version.Version, commit, runtime.Version())
			return err
		},
	}
}
