package cli

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/virtop-dev/virtop/internal/devcluster"
)

func init() { register(newDownCommand) }

func newDownCommand() *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "down [--name NAME]",
		Short: "Stop the local cluster's operator and delete the cluster",
		Long: `Stop the operator started by ` + "`virtop up`" + ` (SIGTERM, then SIGKILL after 10 s),
delete the kwok cluster, make sure none of its processes is left, and remove
its state directory (the operator log is kept).`,
		Example: `  virtop down
  virtop down --name small`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := devcluster.New(name)
			if err != nil {
				return err
			}
			_, err = c.Delete(contextOf(cmd), cmd.OutOrStdout(), 10*time.Second)
			return err
		},
	}
	cmd.Flags().StringVar(&name, "name", devcluster.DefaultName, "name of the local cluster")
	return cmd
}
