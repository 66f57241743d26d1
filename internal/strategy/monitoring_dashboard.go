package strategy

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/monitoring/dashboard"
	"github.com/virtop-dev/virtop/internal/release"
	"github.com/virtop-dev/virtop/internal/stage"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// newDashboardConfigMap renders the control-plane dashboard of the release
// for the install namespace into a ConfigMap labelled for Grafana's
// dashboard sidecar. It is rendered in the install namespace and gated on a
// sidecar convention being present; the plan moves it to the namespace it
// finds one in, and a KubeVirtMonitoring can leave it out.
func newDashboardConfigMap(c *config.DeploymentConfig, r *release.Release) (*corev1.ConfigMap, error) {
	d, err := dashboard.Render(dashboard.Options{Release: r.Version, Namespace: c.Namespace})
	if err != nil {
		return nil, fmt.Errorf("ConfigMap %s for %s: %w", vocab.DashboardConfigMapName, r.Version, err)
	}
	b, err := d.JSON()
	if err != nil {
		return nil, err
	}
	cm := &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      vocab.DashboardConfigMapName,
			Namespace: c.Namespace,
			Labels: map[string]string{
				vocab.DashboardSidecarLabel: vocab.DashboardSidecarLabelValue,
				vocab.K8sAppLabel:           "kubevirt",
			},
		},
		Data: map[string]string{dashboard.FileName: string(b)},
	}
	stage.Set(cm, stage.Monitoring, stage.MonitoringTarget, stage.GrafanaDashboards)
	return cm, nil
}
