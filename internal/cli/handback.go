package cli

import (
	"github.com/spf13/cobra"

	"github.com/virtop-dev/virtop/internal/tools/handback"
)

func init() { register(newHandbackCommand) }

func newHandbackCommand() *cobra.Command {
	var dryRun bool
	var kube *clusterFlags
	cmd := &cobra.Command{
		Use:   "handback",
		Short: "Leave the KubeVirt installation for upstream's virt-operator to take back",
		Long: `Hand the KubeVirt installation of the namespace back to upstream's
virt-operator, the reverse of virtop's adoption (docs/migrate.md). Every
object virtop manages gets upstream's label app.kubernetes.io/managed-by:
virt-operator and loses virtop's own labels and annotations (virtop.dev/...);
the KubeVirt resource loses virtop's adoption record and, when it still runs
the release virtop adopted, gets upstream's deployment ID back in its status,
so upstream's operator finds its deployment as it left it. Only the objects
virtop's inventory holds (the KubeVirt status records each with its UID)
are handed back: another object labelled as virtop's is left alone, and an
installation with no inventory (made by an older virtop) is refused until
this version's operator has run once. Nothing is deleted, no pod template is changed (nothing rolls), and the finalizer stays
(upstream's operator uses the same one).

virtop's operator must be stopped first (it would take everything back): the
command refuses while its leader lease is held or a Deployment runs virtop's
image with replicas. Then install upstream's operator.

Upstream's webhook virt-operator-validator (failurePolicy Fail) guards every
update of the KubeVirt resource and has no backend while no operator runs: the
command then hands everything else back (the status is a subresource the
webhook does not guard), keeps the adoption record and says so. Install
upstream's operator (its pods serve the webhook before they lead) and run the
command again: it only removes the record.

Exit status: 0 handed back, 1 refused (nothing changed), 2 usage or
connection error.`,
		Example: `  kubectl -n kubevirt scale deployment/virt-operator --replicas=0
  virtop handback -n kubevirt --dry-run
  virtop handback -n kubevirt
  kubectl apply -f https://github.com/kubevirt/kubevirt/releases/download/v1.5.3/kubevirt-operator.yaml
  virtop handback -n kubevirt   # removes the adoption record, if the first run left it`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, _, err := kube.Client()
			if err != nil {
				return err
			}
			_, err = handback.Run(contextOf(cmd), c, cmd.OutOrStdout(), handback.Options{Namespace: kube.Namespace(), DryRun: dryRun})
			return clusterExit(err, handback.ErrRefused)
		},
	}
	kube = addClusterFlags(cmd)
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list what would change and write nothing")
	return cmd
}
