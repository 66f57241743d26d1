package cli

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/virtop-dev/virtop/internal/tools/devcluster"
)

func init() { register(newPrometheusSyncCommand) }

// newPrometheusSyncCommand is the process `virtop up --prometheus` starts
// inside a local cluster's network namespace when it has a real node
// (devcluster's promstack.go): it does what a Prometheus pod's
// config-reloader and volumes do, and runs Prometheus. Hidden: only
// `virtop up` runs it.
func newPrometheusSyncCommand() *cobra.Command {
	var state, listen, bin string
	cmd := &cobra.Command{
		Use:   devcluster.PrometheusSyncCommand + " --cluster-state DIR --listen HOST:PORT",
		Short: "Run the local cluster's Prometheus on what prometheus-operator generates for it (run by virtop up)",
		Example: `  # what virtop up runs, inside the cluster's network namespace
  nsenter --net=/run/netns/virtop-virtop-0123abcd -- \
    virtop prometheus-sync --cluster-state ~/.local/state/virtop/virtop --listen 127.0.0.1:39090 --prometheus /usr/bin/prometheus`,
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := devcluster.NewAt(filepath.Base(state), filepath.Dir(state))
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(contextOf(cmd), os.Interrupt, syscall.SIGTERM)
			defer stop()
			fmt.Fprintf(os.Stderr, "prometheus-sync: cluster %s, Prometheus %s on %s\n", c.Name, bin, listen)
			return c.RunPrometheusSync(ctx, os.Stderr, bin, listen)
		},
	}
	// The state directory in the command line is how `virtop down` finds
	// the process among the cluster's.
	cmd.Flags().StringVar(&state, "cluster-state", "", "the local cluster's state directory (required)")
	cmd.Flags().StringVar(&listen, "listen", "", "Prometheus's listen address, on the namespace's loopback (required)")
	cmd.Flags().StringVar(&bin, "prometheus", "prometheus", "the prometheus binary")
	_ = cmd.MarkFlagRequired("cluster-state")
	_ = cmd.MarkFlagRequired("listen")
	return cmd
}
