package cli

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/virtop-dev/virtop/internal/tools/uninstall"
)

func init() { register(newUninstallCommand) }

func newUninstallCommand() *cobra.Command {
	var timeout time.Duration
	var kube *clusterFlags
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Delete the KubeVirt resource and wait until the operator has removed the control plane",
		Long: `Delete every KubeVirt resource in the install namespace and wait until the
operator has removed the control plane and the resources are gone. The Helm
chart runs it as a pre-delete hook, so that the operator is removed only
after it has cleaned up (otherwise the KubeVirt resource stays stuck on its
finalizer). It deletes nothing else.

With workloads present (uninstallStrategy BlockUninstallIfWorkloadsExist,
the default) virtop's webhook refuses the deletion: uninstall exits 1 and
says why, and nothing is deleted.

Exit status: 0 gone (or there was none), 1 refused or not gone within
--timeout, 2 usage or connection error.`,
		Example: `  # before removing the operator by hand
  virtop uninstall -n kubevirt --timeout 10m
  kubectl delete -f dist/virtop-operator.yaml

  # another cluster of the kubeconfig
  virtop uninstall --context prod-east`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, _, err := kube.Client()
			if err != nil {
				return err
			}
			err = uninstall.Run(contextOf(cmd), c, cmd.OutOrStdout(), uninstall.Options{Namespace: kube.Namespace(), Timeout: timeout})
			return clusterExit(err, uninstall.ErrRefused, uninstall.ErrTimeout)
		},
	}
	kube = addClusterFlags(cmd)
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "how long to wait for the KubeVirt resources to be gone")
	return cmd
}
