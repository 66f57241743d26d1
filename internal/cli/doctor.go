package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
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
	// prometheus is --prometheus (auto or none); the token, its file and
	// the CA go with --prometheus-url.
	prometheus          string
	prometheusToken     string
	prometheusTokenFile string
	prometheusCA        string
}

func newDoctorCommand() *cobra.Command {
	var o doctorOptions
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Tell a real KubeVirt control-plane outage from a broken monitoring path",
		Long: `Read the cluster (get and list; doctor never writes) and answer the
first question of every KubeVirt control-plane alert: are virt-api or
virt-controller really down, or did a link of the metrics path break?

Always name the cluster with --context. Without it doctor uses the
kubeconfig's current context, which may have changed since you last looked
(a default context that changed silently makes every command answer about
another cluster). The first lines of the report say which kubeconfig file,
context, API server and user doctor used, and whether the context was only
the default.

Then its verdict:

  Healthy             virt-api and virt-controller are ready, every checked link holds
  ControlPlaneDown    virt-api or virt-controller has no ready pod (running VMs keep running)
  MonitoringArtefact  the components are ready and a link of the metrics path is broken
                      (the link is named)
  Degraded            partial problems (virt-handler, virt-operator, nodes, the
                      KubeVirt resource, its GitOps owner, an upgrade, the
                      APIService, the strategy Job, RBAC...)
  Unknown             doctor cannot tell, and says why

with the likely causes it found (a Flux Kustomization or HelmRelease, or an
Argo CD Application, that applies the KubeVirt resource or the operator and
failed; memory, disk or PID pressure on the nodes of components that flap;
an upgrade stuck at one component, with the way back), and how many VMs
keep running, on which nodes. Then the failing checks, each with the next
command to run, then the rest. docs/doctor.md lists every check, what it
reads and what it concludes.

virt-operator counts as running when a pod of it in the namespace is ready,
or when its leader-election Lease (virt-operator) is renewed: an operator
run beside the cluster (virtop up) or in another namespace. An APIService
virtop withholds until virt-api answers through the API server is told
apart from one registered but unavailable, which makes every namespace
deletion hang; each of KubeVirt's APIServices is named with its Available
condition.

Webhooks: for each Service, port and caBundle that the webhooks of the
configurations virtop (or upstream's virt-operator) manages call, doctor
port-forwards through the API server (pods/portforward: the one request
that is not a get or list; it opens a stream and changes nothing) to one
ready pod behind the Service and checks that it answers TLS with a
certificate that verifies against the caBundle for <service>.<ns>.svc, 5 s
per Service, 30 s in all. A broken one is named (webhook, configuration,
Service, pod, why); one that fails closed (failurePolicy Fail) is a
failure, one that fails open a warning. Pods on simulated (kwok) nodes are
skipped.

Prometheus: --prometheus auto finds the Prometheus resource that selects
KubeVirt's ServiceMonitor and asks it through the API server's service
proxy (/api/v1/namespaces/<ns>/services/<scheme>:<name>:<port>/proxy/) with
the kubeconfig's credentials: no port-forward. --prometheus-url asks the
URL given, with --prometheus-token (or --prometheus-token-file) as a bearer
token and --prometheus-ca to verify its certificate (a Thanos querier, an
OAuth proxy); a URL of the API server's service proxy uses the kubeconfig's
credentials. doctor asks for the KubeVirt targets' up series, the component
metrics, the loaded rules and the firing alerts, with GET requests only, and
the header names the Prometheus that answered.

Checks whose reads are forbidden are skipped and named. Works on clusters
installed by virtop and by upstream's virt-operator alike.

Exit status: 0 Healthy, 1 any other verdict, 2 doctor could not run.`,
		Example: `  # the cluster of a kubeconfig context, default install namespace kubevirt
  virtop doctor --context prod-east

  # another install namespace, as another user
  virtop doctor -n virt --as alice --as-group sre

  # also ask the Prometheus that selects KubeVirt's ServiceMonitor, through the API server
  virtop doctor --context prod-east --prometheus auto

  # OpenShift's Thanos querier, with a token and the router's CA
  virtop doctor --context prod-east --prometheus-url https://thanos-querier-openshift-monitoring.apps.example.com \
      --prometheus-token "$(oc whoami -t)" --prometheus-ca router-ca.pem

  # for a script
  virtop doctor --context prod-east -o json | jq -r '.verdict, .reason'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(o.output, reportFormats); err != nil {
				return err
			}
			if _, err := doctorPrometheus(o); err != nil {
				return err
			}
			return runDoctor(cmd.Context(), o, cmd.OutOrStdout())
		},
	}
	o.kube = addClusterFlags(cmd)
	fs := cmd.Flags()
	fs.StringVar(&o.prometheusURL, "prometheus-url", "", "base URL of the Prometheus HTTP API to query (a Prometheus, a Thanos querier, an OAuth proxy, or the API server's service proxy)")
	fs.StringVar(&o.prometheus, "prometheus", "none", "auto: ask the Prometheus that selects KubeVirt's ServiceMonitor, through the API server's service proxy; none: ask none (unless --prometheus-url)")
	fs.StringVar(&o.prometheusToken, "prometheus-token", "", "bearer token for --prometheus-url")
	fs.StringVar(&o.prometheusTokenFile, "prometheus-token-file", "", "file holding the bearer token for --prometheus-url")
	fs.StringVar(&o.prometheusCA, "prometheus-ca", "", "PEM file of the CAs that verify --prometheus-url's certificate")
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
	where := doctor.Locate(o.kube.ToRawKubeConfigLoader(), doctor.Explicit{Kubeconfig: o.kube.Kubeconfig(), Context: o.kube.ExplicitContext()}, cfg)
	where.Namespace, where.PrometheusURL = o.kube.Namespace(), o.prometheusURL
	return cfg, where, nil
}

// doctorPrometheus turns the Prometheus flags into the doctor's options.
func doctorPrometheus(o doctorOptions) (doctor.PrometheusOptions, error) {
	auto, err := doctor.ParsePrometheusMode(o.prometheus)
	if err != nil {
		return doctor.PrometheusOptions{}, err
	}
	p := doctor.PrometheusOptions{URL: o.prometheusURL, Token: o.prometheusToken, CAFile: o.prometheusCA, Auto: auto}
	if o.prometheusTokenFile != "" {
		if o.prometheusToken != "" {
			return p, errors.New("--prometheus-token and --prometheus-token-file exclude each other")
		}
		raw, err := os.ReadFile(o.prometheusTokenFile)
		if err != nil {
			return p, fmt.Errorf("--prometheus-token-file: %w", err)
		}
		p.Token = strings.TrimSpace(string(raw))
	}
	return p, p.Validate()
}

func runDoctor(ctx context.Context, o doctorOptions, out io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	cfg, where, err := doctorConfig(o)
	if err != nil {
		return &ExitError{Code: 2, Err: err}
	}
	prom, err := doctorPrometheus(o)
	if err != nil {
		return &ExitError{Code: 2, Err: err}
	}
	report, err := doctorReport(ctx, cfg, where, prom, o.timeout)
	if err != nil {
		// The error may quote the cluster: shown, never obeyed.
		return &ExitError{Code: 2, Err: errors.New(doctor.Printable(err.Error()))}
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
func doctorReport(ctx context.Context, cfg *rest.Config, where doctor.Where, prom doctor.PrometheusOptions, timeout time.Duration) (*doctor.Report, error) {
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
	g := &doctor.Gatherer{Client: client.Reader(c), Discovery: dc, Where: where, Config: cfg, Prometheus: prom}
	facts, err := g.Gather(ctx)
	if err != nil {
		if errors.Is(err, doctor.ErrUnreachable) {
			return nil, err
		}
		return nil, fmt.Errorf("doctor: %w", err)
	}
	return doctor.Run(facts), nil
}
