package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/scheme"
	"github.com/virtop-dev/virtop/internal/tools/doctor"
)

func init() { register(newDoctorCommand) }

// doctorOptions are the flags of virtop doctor.
type doctorOptions struct {
	kube          *clusterFlags
	prometheusURL string
	output        string
	timeout       time.Duration
}

func newDoctorCommand() *cobra.Command {
	var o doctorOptions
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Tell a real KubeVirt control-plane outage from a broken monitoring path",
		Long: `Read the cluster (get and list only; doctor never writes) and answer the
first question of every KubeVirt control-plane alert: are virt-api or
virt-controller really down, or did a link of the metrics path break?

It says first where it looks (context, API server, install namespace), then
its verdict:

  Healthy             virt-api and virt-controller are ready, every checked link holds
  ControlPlaneDown    virt-api or virt-controller has no ready pod (running VMs keep running)
  MonitoringArtefact  the components are ready and a link of the metrics path is broken
                      (the link is named)
  Degraded            partial problems (virt-handler, virt-operator, nodes, the
                      KubeVirt resource, the APIService, the strategy Job, RBAC...)
  Unknown             doctor cannot tell, and says why

then the failing checks, each with the next command to run, then the rest.
It checks the control-plane pods, their restarts and nodes, the KubeVirt
resource, recent warning events, VMs and VMIs; the metrics path link by link
(Service kubevirt-prometheus-metrics, its EndpointSlices, the ServiceMonitor
and PrometheusRule and the Prometheus selectors that must match them, the
Prometheus ServiceAccount's RBAC including endpointslices, NetworkPolicies,
strategy ConfigMaps without monitoring objects); strategy Job pods that
cannot be scheduled; the APIService v1.subresources.kubevirt.io; and short
resource names that resolve to several kinds.

virt-operator counts as running when its leader-election Lease
(virt-operator) is renewed, also when no pod of the namespace runs it (an
operator beside the cluster). An APIService virtop withholds until virt-api
answers through the API server is told apart from one registered but
unavailable, which makes every namespace deletion hang: withheld, it only
degrades the installation (virtctl's subresources fail), and on simulated
(kwok) nodes, where no pod serves, it is withheld by design. With --prometheus-url it also
asks Prometheus for the KubeVirt targets' up series, the component metrics,
the loaded rules and the firing alerts.

Checks whose reads are forbidden are skipped and named. Works on clusters
installed by virtop and by upstream's virt-operator alike.

Exit status: 0 Healthy, 1 any other verdict, 2 doctor could not run.`,
		Example: `  # the cluster of a kubeconfig context, default install namespace kubevirt
  virtop doctor --context prod-east

  # another install namespace, as another user
  virtop doctor -n virt --as alice --as-group sre

  # also ask the Prometheus that raised the alert
  virtop doctor --context prod-east --prometheus-url http://localhost:9090

  # for a script
  virtop doctor --context prod-east -o json | jq -r '.verdict'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(o.output, reportFormats); err != nil {
				return err
			}
			return runDoctor(cmd.Context(), o, cmd.OutOrStdout())
		},
	}
	o.kube = addClusterFlags(cmd)
	fs := cmd.Flags()
	fs.StringVar(&o.prometheusURL, "prometheus-url", "", "base URL of the Prometheus HTTP API to query (for example http://localhost:9090)")
	addOutputFlag(cmd, &o.output, reportFormats)
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "bound on the whole run")
	return cmd
}

// doctorConfig resolves the kubeconfig: the client config and where it
// points.
func doctorConfig(o doctorOptions) (*rest.Config, doctor.Where, error) {
	cfg, err := o.kube.ToRESTConfig()
	if err != nil {
		return nil, doctor.Where{}, fmt.Errorf("load kubeconfig: %w", err)
	}
	where := doctor.Where{Kubeconfig: o.kube.Kubeconfig(), Namespace: o.kube.Namespace(), Server: cfg.Host,
		Context: o.kube.Context(), PrometheusURL: o.prometheusURL}
	return cfg, where, nil
}

func runDoctor(ctx context.Context, o doctorOptions, out io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	cfg, where, err := doctorConfig(o)
	if err != nil {
		return &ExitError{Code: 2, Err: err}
	}
	report, err := doctorReport(ctx, cfg, where, o.timeout)
	if err != nil {
		return &ExitError{Code: 2, Err: err}
	}
	if o.output == "json" {
		err = report.WriteJSON(out)
	} else {
		err = report.WriteText(out)
	}
	if err != nil {
		return &ExitError{Code: 2, Err: err}
	}
	if code := report.ExitCode(); code != 0 {
		return &ExitError{Code: code}
	}
	return nil
}

// doctorReport gathers the facts with a read-only client and evaluates them.
func doctorReport(ctx context.Context, cfg *rest.Config, where doctor.Where, timeout time.Duration) (*doctor.Report, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "virtop-doctor"
	cfg.QPS, cfg.Burst = 20, 40
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, fmt.Errorf("%w %s: %v", doctor.ErrUnreachable, cfg.Host, err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	g := &doctor.Gatherer{Client: client.Reader(c), Discovery: dc, Where: where}
	facts, err := g.Gather(ctx)
	if err != nil {
		if errors.Is(err, doctor.ErrUnreachable) {
			return nil, err
		}
		return nil, fmt.Errorf("doctor: %w", err)
	}
	return doctor.Run(facts), nil
}
