package components

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/catalog"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/strategy/stage"
	"github.com/virtop-dev/virtop/internal/vocab"
)

func init() { register("services", renderServices) }

// renderServices renders upstream's four Services
// (components/deployments.go NewPrometheusService, NewApiServerService,
// NewExportProxyService; components/webhooks.go NewOperatorWebhookService).
//
// virt-exportproxy's Service is rendered whatever the VMExport feature
// gate says: upstream v1.5.3 always applies it and gates only the
// Deployment (and the Route). A Service without endpoints is harmless,
// and the strategy stays the same object set as upstream's.
func renderServices(c *config.DeploymentConfig, _ catalog.Release) ([]client.Object, error) {
	ns := c.Namespace
	// The operator runs in the install namespace, so its webhook Service
	// lives there too.
	return []client.Object{
		newService(ns, vocab.PrometheusServiceName,
			map[string]string{vocab.AppLabel: "", vocab.PrometheusLabel: vocab.PrometheusLabelValue},
			map[string]string{vocab.PrometheusLabel: vocab.PrometheusLabelValue},
			corev1.ServicePort{Name: "metrics", Port: 443, TargetPort: intstr.FromString("metrics"), Protocol: corev1.ProtocolTCP},
			true),
		newService(ns, vocab.VirtAPI,
			map[string]string{vocab.AppLabel: vocab.VirtAPI},
			map[string]string{vocab.AppLabel: vocab.VirtAPI},
			corev1.ServicePort{Port: 443, TargetPort: intstr.FromInt32(8443), Protocol: corev1.ProtocolTCP},
			false),
		newService(ns, vocab.OperatorWebhookServiceName,
			map[string]string{vocab.AppLabel: "", vocab.PrometheusLabel: vocab.PrometheusLabelValue},
			map[string]string{vocab.AppLabel: vocab.VirtOperator},
			corev1.ServicePort{Name: "webhooks", Port: 443, TargetPort: intstr.FromString("webhooks"), Protocol: corev1.ProtocolTCP},
			false),
		newService(ns, vocab.VirtExportProxy,
			map[string]string{vocab.AppLabel: vocab.VirtExportProxy},
			map[string]string{vocab.AppLabel: vocab.VirtExportProxy},
			corev1.ServicePort{Port: 443, TargetPort: intstr.FromInt32(8443), Protocol: corev1.ProtocolTCP},
			false),
	}, nil
}

// newService builds a ClusterIP Service with one port. Upstream sets
// nothing else (no sessionAffinity, no ipFamilies): the API server
// defaults them.
func newService(ns, name string, labels, selector map[string]string, port corev1.ServicePort, headless bool) *corev1.Service {
	svc := &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns,
			Name:      name,
			Labels:    labels,
		},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: selector,
			Ports:    []corev1.ServicePort{port},
		},
	}
	if headless {
		svc.Spec.ClusterIP = corev1.ClusterIPNone
	}
	stage.Set(svc, stage.Services)
	return svc
}
