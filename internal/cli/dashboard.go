package cli

import (
	"fmt"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"

	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/monitoring/dashboard"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/vocab"
)

func init() { register(newDashboardCommand) }

func newDashboardCommand() *cobra.Command {
	var (
		rf          rulesFlags
		asConfigMap bool
	)
	cmd := &cobra.Command{
		Use:   "dashboard",
		Short: "Print virtop's Grafana dashboard of the KubeVirt control plane for a version",
		Long: `Print the Grafana dashboard virtop ships with a KubeVirt version: component
readiness, requests to the API server, work queues, VMI phases, migrations,
certificate expiry, and virtop's own monitoring gate and conditions. Panels
read only the metrics that version exposes.

The operator installs it as the ConfigMap ` + vocab.DashboardConfigMapName + `, labelled
` + vocab.DashboardSidecarLabel + `=` + vocab.DashboardSidecarLabelValue + `, where it finds a Grafana dashboard sidecar convention (a
ConfigMap with that label in a monitoring namespace, as kube-prometheus-stack
ships its dashboards); a KubeVirtMonitoring with spec.dashboard.disabled
leaves it out. It prints the dashboard's JSON for Grafana's import, or with
--as-configmap the ConfigMap as the install strategy holds it.`,
		Example: `  virtop dashboard > kubevirt-control-plane.json
  virtop dashboard --version v1.5.0 --namespace kv --as-configmap`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := rf.release()
			if err != nil {
				return err
			}
			if !asConfigMap {
				ns := rf.namespace
				if ns == "" {
					ns = config.DefaultNamespace
				}
				d, err := dashboard.Render(dashboard.Options{Release: r.Version, Namespace: ns})
				if err != nil {
					return err
				}
				b, err := d.JSON()
				if err != nil {
					return err
				}
				_, err = cmd.OutOrStdout().Write(b)
				return err
			}
			cm, err := dashboardConfigMap(r, rf.namespace)
			if err != nil {
				return err
			}
			out, err := printObject(cm, "yaml")
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
	cmd.Flags().StringVar(&rf.version, "version", "", "KubeVirt version whose dashboard to print (default: the catalog default, "+release.Default+")")
	cmd.Flags().StringVar(&rf.namespace, "namespace", "", "install namespace the queries select in (default kubevirt)")
	cmd.Flags().BoolVar(&asConfigMap, "as-configmap", false, "print the ConfigMap that ships the dashboard (YAML) instead of the dashboard's JSON")
	return cmd
}

// dashboardConfigMap renders the strategy of a release and returns its
// dashboard ConfigMap.
func dashboardConfigMap(r *release.Release, namespace string) (*corev1.ConfigMap, error) {
	f := renderFlags{version: r.Version, namespace: namespace}
	s, err := f.generate()
	if err != nil {
		return nil, err
	}
	for _, o := range s.Objects {
		if cm, ok := o.(*corev1.ConfigMap); ok && cm.Name == vocab.DashboardConfigMapName {
			return cm, nil
		}
	}
	return nil, fmt.Errorf("the %s strategy holds no dashboard ConfigMap", r.Version)
}
