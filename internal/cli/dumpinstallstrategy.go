package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/scheme"
	"github.com/virtop-dev/virtop/internal/strategystore"
	"github.com/virtop-dev/virtop/internal/tools/progress"
	"github.com/virtop-dev/virtop/internal/vocab"
)

func init() { register(newDumpInstallStrategyCommand) }

// dumpInstallStrategyTimeout bounds the writes; the Job's own deadline is
// longer, so a hung API call fails the pod and the Job retries.
const dumpInstallStrategyTimeout = 2 * time.Minute

func newDumpInstallStrategyCommand() *cobra.Command {
	var kube *clusterFlags
	cmd := &cobra.Command{
		Use:   "dump-install-strategy",
		Short: "Render the install strategy named by $" + strategystore.EnvDeploymentConfig + " and write its ConfigMap (what the strategy Job runs)",
		Long: `Render the install strategy of the deployment config in $` + strategystore.EnvDeploymentConfig + `
(JSON, as the operator writes it into the strategy Job) with this binary's
catalog, sign it with the key in $` + vocab.EnvStrategySigningKey + ` (the operator's
Secret ` + vocab.StrategySigningKeySecret + `; the operator loads no ConfigMap whose
signature does not check), and create it as the strategy ConfigMap in the config's namespace.
The Job's account may only create ConfigMaps, never change one: when the ConfigMap
exists already (a retried pod), that is success, and the operator checks its
signature as it would check any other (one it does not trust is deleted and the
Job runs again).

The cluster comes from the standard loading rules and kubectl's connection
flags: --kubeconfig, $KUBECONFIG or ~/.kube/config, else the pod's service
account. -n, when given, must be the config's namespace.

Exit status: 0 when the ConfigMap is written; 2 for an error a retry cannot
fix (missing or invalid config, a version outside this binary's catalog);
1 for other errors (the cluster could not be reached or refused the write).

While the API server has not answered the write for a few seconds, a line on
stderr every 10 s says so (the Job's log shows what it waits for).`,
		Example: `  # what the strategy Job does, played on the host against a local cluster
  VIRTOP_DEPLOYMENT_CONFIG="$(kubectl -n kubevirt get kubevirt kubevirt -o jsonpath='{.status.targetDeploymentConfig}')" \
    VIRTOP_STRATEGY_SIGNING_KEY="$(kubectl -n kubevirt get secret virtop-strategy-signing-key -o jsonpath='{.data.key}' | base64 -d)" \
    KUBECONFIG=~/.local/state/virtop/virtop/kubeconfig virtop dump-install-strategy`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), dumpInstallStrategyTimeout)
			defer cancel()
			return dumpInstallStrategy(ctx, os.Getenv(strategystore.EnvDeploymentConfig), os.Getenv(vocab.EnvStrategySigningKey), kube, cmd.ErrOrStderr())
		},
	}
	kube = addClusterFlags(cmd)
	return cmd
}

// dumpInstallStrategy runs the strategy Job's pod side
// (internal/strategystore) with the command's cluster. Errors a retry
// cannot fix are plain (exit 2); others are ExitErrors with code 1.
func dumpInstallStrategy(ctx context.Context, raw, signingKey string, kube *clusterFlags, log io.Writer) error {
	cm, err := strategystore.RenderForJob(raw, signingKey, kube.overrides.Context.Namespace, log)
	if err != nil {
		return err
	}
	restCfg, err := kube.ToRESTConfig()
	if err != nil {
		return &ExitError{Code: 1, Err: fmt.Errorf("load kubeconfig: %w", err)}
	}
	restCfg.UserAgent = "virtop-dump-install-strategy"
	c, err := client.New(restCfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return &ExitError{Code: 1, Err: fmt.Errorf("build client: %w", err)}
	}
	// A slow or unreachable API server is waited for (up to the command's
	// timeout): the Job's log says so while it lasts.
	rep := progress.Start(fmt.Sprintf("the API server at %s to take ConfigMap %s/%s", restCfg.Host, cm.Namespace, cm.Name),
		progress.ForStderr(log, false))
	rep.Reason("create sent")
	created, err := strategystore.CreateFromJob(ctx, c, cm)
	rep.Stop()
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w (after %s)", err, dumpInstallStrategyTimeout)
		}
		return &ExitError{Code: 1, Err: fmt.Errorf("write ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)}
	}
	if !created {
		fmt.Fprintf(log, "ConfigMap %s/%s exists already (an earlier attempt wrote it); the operator checks its signature\n", cm.Namespace, cm.Name)
		return nil
	}
	fmt.Fprintf(log, "Created ConfigMap %s/%s (field manager %s)\n", cm.Namespace, cm.Name, vocab.FieldManager)
	return nil
}
