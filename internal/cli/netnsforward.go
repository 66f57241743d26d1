package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/virtop-dev/virtop/internal/tools/devcluster"
	"github.com/virtop-dev/virtop/internal/tools/netns"
)

func init() { register(newNetnsForwardCommand) }

// newNetnsForwardCommand is the forwarder `virtop up` starts inside the
// local cluster's network namespace (devcluster's seal.go): it serves the
// listener it is handed on file descriptor 3, which is bound to the
// machine's loopback, by dialling --to on the namespace's loopback. Hidden:
// only `virtop up` runs it.
func newNetnsForwardCommand() *cobra.Command {
	var to, state string
	cmd := &cobra.Command{
		Use:   devcluster.ForwardCommand + " --to HOST:PORT",
		Short: "Forward the listener on file descriptor 3 to HOST:PORT in this network namespace (run by virtop up)",
		Example: `  # what virtop up runs: the listener is bound to the machine's loopback and
  # handed over as file descriptor 3; the command runs inside the namespace
  nsenter --net=/run/netns/virtop-virtop-0123abcd -- \
    virtop netns-forward --to 127.0.0.1:31234 --cluster-state ~/.local/state/virtop/virtop`,
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ln, err := netns.ListenerFromFD()
			if err != nil {
				return err
			}
			logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
			logf("forwarding %s (cluster state %s) to %s", ln.Addr(), state, to)
			return netns.Forward(contextOf(cmd), ln, to, logf)
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "loopback address to dial for each connection (required)")
	// The state directory in the command line is how `virtop down` finds
	// the forwarder among the cluster's processes.
	cmd.Flags().StringVar(&state, "cluster-state", "", "the local cluster's state directory")
	_ = cmd.MarkFlagRequired("to")
	return cmd
}
