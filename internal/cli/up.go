package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/virtop-dev/virtop/internal/tools/devcluster"
	"github.com/virtop-dev/virtop/internal/tools/progress"
)

func init() { register(newUpCommand) }

func newUpCommand() *cobra.Command {
	var (
		name       string
		nodes      int
		prometheus string
		quiet      bool
		realNode   bool
		vms        bool
		manifest   string
		image      string
	)
	cmd := &cobra.Command{
		Use:   "up [--nodes N] [--prometheus none|before|late] [--name NAME]",
		Short: "Start a local cluster (kwok) with virtop's operator and KubeVirt",
		Long: `Start a local cluster: kwokctl's binary runtime runs etcd, kube-apiserver,
kube-controller-manager, kube-scheduler and kwok-controller as host processes
(binaries from the tools cache, ${VIRTOP_TOOLS_DIR:-~/.cache/virtop/tools}: ` + "`make tools-demo`" + `
in a checkout builds them; up names any that is missing and how to build it),
with fake nodes that run Deployments and DaemonSets to Ready without
containers. Then it applies the release manifest's base (virtop's CRDs, the
kubevirt namespace, the PriorityClass: the files of config/, embedded in this
binary, so dist/virtop-operator.yaml applies on top without conflicts),
starts ` + "`virtop operator`" + ` from this binary as a detached host process, applies
the sample KubeVirt resource (config/samples/kubevirt-cr.yaml, embedded) and
shows progress until KubeVirt is Available. No checkout is needed.

State lives in ${XDG_STATE_HOME:-$HOME/.local/state}/virtop/NAME/ (kubeconfig,
operator.log, operator.pid); ~/.kube/config is not touched. Running up again
reuses the cluster and the running operator.

A real node (--real-node, on by default) joins the fake ones: containerd,
kubelet and kube-proxy in the cluster's network namespace, its pods on a
bridge there. KubeVirt's control plane (virt-api, virt-controller,
virt-exportproxy, the synchronization controller) is placed on it and runs as
real containers, from images built from upstream's source at the installed
release (` + "`make node-images`" + `, or $VIRTOP_KUBEVIRT_IMAGES: a directory of
docker-archive tars); every webhook keeps its release's failurePolicy.
virt-handler stays on the fake nodes, unless --vms: then it runs on the real
node too, KubeVirt's software emulation is on, and up starts default/testvm,
a VM of a guest made from Debian's kernel and busybox (` + "`make node-images-vm`" + `
builds virt-handler's and virt-launcher's images from upstream's source on
Debian's QEMU and libvirt, and the guest); ` + "`virtctl console testvm`" + ` reaches
its serial console. With --real-node=false nothing serves
webhooks or APIServices: KubeVirt's webhooks are applied with failurePolicy
Ignore and the APIServices stay unregistered.

--prometheus before|late creates a kube-prometheus-stack-shaped Prometheus
resource (namespace monitoring). With a real node a real Prometheus serves it:
prometheus-operator generates its configuration from virtop's ServiceMonitor
and PrometheusRule, kube-state-metrics runs beside it, and Debian's
prometheus runs on what was generated, in the cluster's network namespace
(state in <state>/prometheus/). up prints its URL, for
` + "`virtop doctor --prometheus-url`" + `; without those tools only the resource
is created.

While it waits without news (the cluster being created, KubeVirt rolling
out), a progress report on stderr says for what, for how long and the latest
state: one line rewritten in place on a terminal, a plain line every 10 s
otherwise; --quiet turns it off.`,
		Example: `  # A cluster called "virtop" with 3 fake nodes
  virtop up

  # Prometheus (kube-prometheus-stack-shaped) arriving after the control plane
  virtop up --prometheus late

  # A second, one-node cluster next to the first
  virtop up --name small --nodes 1
  export KUBECONFIG=$HOME/.local/state/virtop/small/kubeconfig

  # A VM booted on the real node under emulation (after make node-images-vm)
  virtop up --vms

  # In a script: the steps only, no progress reports
  virtop up --quiet > up.log`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			mode, err := devcluster.ParsePrometheusMode(prometheus)
			if err != nil {
				return &ExitError{Code: 2, Err: err}
			}
			if nodes < 1 {
				return &ExitError{Code: 2, Err: fmt.Errorf("--nodes must be at least 1")}
			}
			if vms && !realNode {
				return &ExitError{Code: 2, Err: fmt.Errorf("--vms runs VMs on the real node: it needs --real-node")}
			}
			c, err := devcluster.New(name)
			if err != nil {
				return err
			}
			self, err := os.Executable()
			if err != nil {
				return fmt.Errorf("cannot find the virtop binary to run the operator from: %w", err)
			}
			var pod *devcluster.PodOperator
			switch {
			case manifest != "" && image != "":
				if !realNode {
					return &ExitError{Code: 2, Err: fmt.Errorf("--operator-manifest runs the operator as a pod on the real node: it needs --real-node")}
				}
				for _, p := range []string{manifest, image} {
					if _, err := os.Stat(p); err != nil {
						return &ExitError{Code: 2, Err: err}
					}
				}
				pod = &devcluster.PodOperator{Manifest: manifest, Image: image}
			case manifest != "" || image != "":
				return &ExitError{Code: 2, Err: fmt.Errorf("--operator-manifest and --operator-image go together")}
			}
			ctx, stop := signal.NotifyContext(contextOf(cmd), os.Interrupt, syscall.SIGTERM)
			defer stop()
			rep := progress.Start(fmt.Sprintf("cluster %s and KubeVirt", name), progress.ForStderr(cmd.ErrOrStderr(), quiet))
			defer rep.Stop()
			return c.Up(ctx, rep.Writer(cmd.OutOrStdout()), devcluster.UpOptions{
				ClusterOptions: devcluster.ClusterOptions{Nodes: nodes, RealNode: realNode, VMs: vms},
				Prometheus:     mode,
				Virtop:         self,
				PodOperator:    pod,
			})
		},
	}
	cmd.Flags().StringVar(&name, "name", devcluster.DefaultName, "name of the local cluster")
	cmd.Flags().IntVar(&nodes, "nodes", 3, "number of fake nodes (the first is the control-plane node)")
	cmd.Flags().BoolVar(&realNode, "real-node", true, "add a real node (kubelet, containerd) where KubeVirt's control plane runs as containers from images built from upstream's source (make node-images); false keeps an all-fake cluster whose webhooks are patched to failurePolicy Ignore")
	cmd.Flags().BoolVar(&vms, "vms", false, "run virt-handler on the real node too, with software emulation on, so that VMs boot there (images: make node-images-vm); starts a small VM, testvm")
	cmd.Flags().StringVar(&manifest, "operator-manifest", "", "run the operator as a pod on the real node from this release manifest (make release-manifests: dist/virtop-operator.yaml); with --operator-image")
	cmd.Flags().StringVar(&image, "operator-image", "", "the operator's image archive imported into the real node: make image's OCI layout (dist/virtop-image.tar, the digest the manifest pins) or a docker-archive")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress reports on stderr while waiting")
	cmd.Flags().StringVar(&prometheus, "prometheus", string(devcluster.PrometheusNone), "install a Prometheus stack: none, before (the KubeVirt resource) or late (after the control plane is Available); with a real node a real Prometheus runs for it")
	_ = cmd.RegisterFlagCompletionFunc("prometheus", cobra.FixedCompletions([]string{string(devcluster.PrometheusNone), string(devcluster.PrometheusBefore), string(devcluster.PrometheusLate)}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("name", completeClusterNames)
	return cmd
}

// contextOf returns the command's context, or a background one.
func contextOf(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}
