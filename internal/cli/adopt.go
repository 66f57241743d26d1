package cli

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/virtop-dev/virtop/internal/tools/adoptpreview"
)

func init() { register(newAdoptCommand) }

func newAdoptCommand() *cobra.Command {
	var dryRun bool
	var output string
	var kube *clusterFlags
	cmd := &cobra.Command{
		Use:   "adopt --dry-run",
		Short: "Say what virtop's operator would do with an installation of upstream's virt-operator, writing nothing",
		Long: `Look at the KubeVirt installation of the namespace and say what virtop's
operator would do if it ran now (docs/migrate.md): whether it would take
over an installation made by upstream's virt-operator, or refuse, with the
reason it would set on the KubeVirt resource (Synchronized=False:
UpstreamOperatorRunning, AdoptionNotInCatalog, AdoptionWouldUpgrade) and
what to do about it; which objects it would take over in place, which it
would create, which of upstream's it would leave alone and why; and which
Deployments and DaemonSets would roll, with the fields of each pod
template that would change.

The decision and the plan are the operator's own (the same steps, on a
client that refuses writes); the command only reads. virtop's operator does
the adoption itself, so --dry-run is required. It assumes the operator of
the release manifest (its default version and settings).

Exit status: 0 the adoption would go ahead, 1 it would not (refused, the
resource is invalid, or there is nothing of upstream's to take over), 2
usage or connection error.`,
		Example: `  # before replacing upstream's operator with virtop's
  virtop adopt --dry-run --context prod -n kubevirt

  # the workloads that would roll, as JSON
  virtop adopt --dry-run -o json | jq '.rolls[] | {name, changes}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output, reportFormats); err != nil {
				return &ExitError{Code: 2, Err: err}
			}
			if !dryRun {
				return &ExitError{Code: 2, Err: errors.New("virtop's operator adopts by itself (docs/migrate.md); this command only previews it: pass --dry-run")}
			}
			cfg, err := kube.RESTConfig()
			if err != nil {
				return err
			}
			// A preview reads a few hundred objects, one by one as the
			// operator's steps do: doctor's rate.
			cfg = rest.CopyConfig(cfg)
			cfg.UserAgent = "virtop-adopt-dry-run"
			cfg.QPS, cfg.Burst = 20, 40
			c, err := clientFor(cfg)
			if err != nil {
				return err
			}
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return &ExitError{Code: 2, Err: fmt.Errorf("connect to %s: %w", cfg.Host, err)}
			}
			rep, err := adoptpreview.Run(contextOf(cmd), c, cs, adoptpreview.Options{Namespace: kube.Namespace()})
			if err != nil && !errors.Is(err, adoptpreview.ErrRefused) {
				return clusterExit(err, adoptpreview.ErrRefused)
			}
			out := cmd.OutOrStdout()
			if output == "json" {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if werr := enc.Encode(rep); werr != nil {
					return &ExitError{Code: 2, Err: werr}
				}
			} else {
				fmt.Fprint(out, rep.Text())
			}
			return clusterExit(err, adoptpreview.ErrRefused)
		},
	}
	kube = addClusterFlags(cmd)
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "say what would happen and write nothing (required)")
	addOutputFlag(cmd, &output, reportFormats)
	return cmd
}
