package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/virtop-dev/virtop/internal/tools/devcluster"
	"github.com/virtop-dev/virtop/internal/tools/progress"
)

func init() { register(newDownCommand) }

func newDownCommand() *cobra.Command {
	var (
		name  string
		quiet bool
	)
	cmd := &cobra.Command{
		Use:   "down [--name NAME]",
		Short: "Stop the local cluster's operator and delete the cluster",
		Long: `Stop the operator started by ` + "`virtop up`" + ` (SIGTERM, then SIGKILL after 10 s),
delete the kwok cluster, make sure none of its processes is left, and remove
its state directory (the operator log is kept).

While it waits (the operator stopping, kwokctl deleting the cluster, its
processes exiting), a progress report on stderr says for how long and the
latest step; --quiet turns it off.`,
		Example: `  virtop down
  virtop down --name small

  # no progress reports (scripts, CI logs)
  virtop down --quiet`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := devcluster.New(name)
			if err != nil {
				return err
			}
			rep := progress.Start(fmt.Sprintf("cluster %s to be deleted", name), progress.ForStderr(cmd.ErrOrStderr(), quiet))
			defer rep.Stop()
			_, err = c.Delete(contextOf(cmd), rep.Writer(cmd.OutOrStdout()), 10*time.Second)
			return err
		},
	}
	cmd.Flags().StringVar(&name, "name", devcluster.DefaultName, "name of the local cluster")
	_ = cmd.RegisterFlagCompletionFunc("name", completeClusterNames)
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress reports on stderr while waiting")
	return cmd
}
