package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/scheme"
	"github.com/virtop-dev/virtop/internal/strategy"
	"github.com/virtop-dev/virtop/internal/strategyjob"
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
		Short: "Render the install strategy named by $" + strategyjob.EnvDeploymentConfig + " and write its ConfigMap (what the strategy Job runs)",
		Long: `Render the install strategy of the deployment config in $` + strategyjob.EnvDeploymentConfig + `
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
			return dumpInstallStrategy(ctx, os.Getenv(strategyjob.EnvDeploymentConfig), os.Getenv(vocab.EnvStrategySigningKey), kube, cmd.ErrOrStderr())
		},
	}
	kube = addClusterFlags(cmd)
	return cmd
}

// dumpInstallStrategy renders the strategy of a JSON deployment config and
// applies its ConfigMap. Errors a retry cannot fix are plain (exit 2);
// others are ExitErrors with code 1.
func dumpInstallStrategy(ctx context.Context, raw, signingKey string, kube *clusterFlags, log io.Writer) error {
	if raw == "" {
		return fmt.Errorf("$%s is empty: it must hold the deployment config as JSON", strategyjob.EnvDeploymentConfig)
	}
	if len(signingKey) < strategy.MinSigningKeyLen {
		return fmt.Errorf("$%s holds %d bytes, fewer than %d: it must hold the key of Secret %s (the operator loads no unsigned strategy)",
			vocab.EnvStrategySigningKey, len(signingKey), strategy.MinSigningKeyLen, vocab.StrategySigningKeySecret)
	}
	cfg, err := config.Parse([]byte(raw))
	if err != nil {
		return fmt.Errorf("$%s: %w", strategyjob.EnvDeploymentConfig, err)
	}
	if ns := *kube.ConfigFlags.Namespace; ns != "" && ns != cfg.Namespace {
		return fmt.Errorf("-n %s: the deployment config's namespace is %s", ns, cfg.Namespace)
	}
	start := time.Now()
	st, err := strategy.Generate(cfg)
	if err != nil {
		return fmt.Errorf("render the install strategy of %s: %w", cfg.Version, err)
	}
	cm, err := st.ConfigMap(cfg.Namespace)
	if err != nil {
		return fmt.Errorf("encode the install strategy of %s: %w", cfg.Version, err)
	}
	if err := strategy.Sign(cm, []byte(signingKey)); err != nil {
		return err
	}
	fmt.Fprintf(log, "Rendered the install strategy of KubeVirt %s (deployment %s): %d objects, %d bytes encoded, in %s\n",
		cfg.Version, cfg.ID, len(st.Objects), len(cm.Data[vocab.ManifestsKey]), time.Since(start).Round(time.Millisecond))

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
	// A plain create: the Job's Role grants create on ConfigMaps and no
	// patch (a server-side apply is a patch), so its account cannot change
	// any existing ConfigMap of the namespace (kubevirt-ca among them).
	err = c.Create(ctx, cm, client.FieldOwner(vocab.FieldManager))
	rep.Stop()
	if apierrors.IsAlreadyExists(err) {
		fmt.Fprintf(log, "ConfigMap %s/%s exists already (an earlier attempt wrote it); the operator checks its signature\n", cm.Namespace, cm.Name)
		return nil
	}
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w (after %s)", err, dumpInstallStrategyTimeout)
		}
		return &ExitError{Code: 1, Err: fmt.Errorf("write ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)}
	}
	fmt.Fprintf(log, "Created ConfigMap %s/%s (field manager %s)\n", cm.Namespace, cm.Name, vocab.FieldManager)
	return nil
}
