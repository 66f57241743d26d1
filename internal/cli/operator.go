package cli

import (
	"fmt"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/monitoring/placement"
	"github.com/virtop-dev/virtop/internal/operator"
	"github.com/virtop-dev/virtop/internal/vocab"
)

func init() { register(newOperatorCommand) }

func newOperatorCommand() *cobra.Command {
	var (
		opts        operator.Options
		kube        *clusterFlags
		zapOpts     zap.Options
		metricsAuth bool
		clientQPS   float32
		clientBurst int
	)
	cmd := &cobra.Command{
		Use:   "operator",
		Short: "Run the operator: reconcile the KubeVirt resource into a running control plane",
		Long: `Run the controller that installs, keeps, upgrades and removes the KubeVirt
control plane for the KubeVirt resource in --namespace.

In a cluster it runs as the Deployment virt-operator; on a local cluster
'virtop up' starts it as a host process.`,
		Example: `  # in a cluster (leader election on: replicas take turns holding Lease virt-operator)
  virtop operator --namespace kubevirt

  # one process against the cluster of a kubeconfig, which need not wait
  # for a Lease a killed predecessor held
  virtop operator --kubeconfig ~/.kube/config --namespace kubevirt --leader-elect=false`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if clientQPS <= 0 || clientBurst <= 0 {
				return fmt.Errorf("--client-qps %g and --client-burst %d: both must be positive", clientQPS, clientBurst)
			}
			ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
			restCfg, err := kube.RESTConfig()
			if err != nil {
				return err
			}
			opts.Namespace = kube.Namespace()
			opts.MetricsAuthDisabled = !metricsAuth
			if !cmd.Flags().Changed("prometheus-namespaces") {
				// Upstream's defaults, trusted only if they existed when the
				// KubeVirt resource was created; named explicitly, at any
				// age (docs/security.md).
				opts.PrometheusNamespaces = nil
			}
			restCfg.UserAgent = "virtop"
			restCfg.QPS, restCfg.Burst = clientQPS, clientBurst
			mgr, err := operator.New(restCfg, opts)
			if err != nil {
				return err
			}
			return mgr.Start(ctrl.SetupSignalHandler())
		},
	}
	kube = addClusterFlags(cmd)
	cmd.Flags().Lookup("namespace").Usage = "install namespace: where the operator and the KubeVirt resource live (default " + config.DefaultNamespace + ")"
	fs := cmd.Flags()
	// On by default: two operators of one namespace would otherwise both
	// reconcile, with the same field manager.
	fs.BoolVar(&opts.LeaderElect, "leader-elect", true, "elect a leader among operator replicas (Lease virt-operator); =false only for a single process")
	fs.StringVar(&opts.MetricsBindAddress, "metrics-bind-address", ":8443", "address of the HTTPS metrics endpoint; 0 disables it")
	fs.BoolVar(&metricsAuth, "metrics-auth", true, "serve metrics only to callers the API server authenticates and authorizes for get on /metrics "+
		"(ClusterRole "+vocab.MetricsReaderName+", bound to the Prometheus found); =false serves them to anyone who reaches the port, as upstream's virt-operator does")
	// client-go's default limits (5 QPS, burst 10) make a fresh install of
	// a release's ~350 requests take over a minute; upstream's
	// virt-operator sends up to 200 a second with bursts of 400
	// (virtconfig.DefaultVirtOperatorQPS/Burst), and so does virtop.
	fs.Float32Var(&clientQPS, "client-qps", 200, "requests per second the operator sends the API server at most, after a burst")
	fs.IntVar(&clientBurst, "client-burst", 400, "requests the operator may send at once before --client-qps applies")
	fs.StringVar(&opts.PprofBindAddress, "pprof-bind-address", "", "address of net/http/pprof for profiling; empty disables it")
	fs.StringVar(&opts.HealthProbeBindAddress, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz endpoints; 0 disables them")
	fs.DurationVar(&opts.PassTimeout, "pass-timeout", operator.DefaultPassTimeout, "bound of one reconcile pass; a step still running then fails the pass (Degraded, reason PassTimedOut) and the next pass starts afresh")
	fs.StringVar(&opts.StrategyImage, "strategy-image", "", "virtop image whose catalog renders versions outside this operator's catalog (dump-install-strategy Job)")
	fs.StringVar(&opts.RunbookURLTemplate, "runbook-url-template", config.DefaultRunbookURLTemplate, "runbook URL of each alert; %s is the alert name")
	fs.StringSliceVar(&opts.PrometheusNamespaces, "prometheus-namespaces", placement.DefaultPrometheusNamespaces(),
		"namespaces whose Prometheus resources are trusted as monitoring targets and RoleBinding subjects, besides the KubeVirt resource's spec.monitorNamespace "+
			"(by default only if they existed when the KubeVirt resource was created; named explicitly, whenever they were created); "+
			"* trusts every namespace (single-tenant clusters), an empty value only spec.monitorNamespace")
	fs.StringSliceVar(&opts.CatalogVersions, "catalog-versions", nil, "render only these catalog versions in process (plays an older operator)")
	fs.StringVar(&opts.DefaultVersion, "default-version", "", "KubeVirt version installed when the resource names none (default: the catalog default)")
	fs.StringVar(&opts.WebhookBindAddress, "webhook-bind-address", ":8444", "address of the KubeVirt validating webhook (HTTPS, port \"webhooks\"); 0 disables it")
	fs.StringVar(&opts.WebhookURLHost, "webhook-url-host", "", "host:port at which the API server reaches this process when it runs outside the cluster (local cluster): "+
		"serve a self-signed certificate and register virt-operator-validator by URL instead of Service kubevirt-operator-webhook")
	addGoFlags(cmd, zapOpts.BindFlags)
	return cmd
}
