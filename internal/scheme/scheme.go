// Package scheme holds the runtime scheme that knows every kind virtop
// renders, applies or reads.
package scheme

import (
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	virtopv1alpha1 "github.com/virtop-dev/virtop/api/v1alpha1"
)

// Scheme knows the Kubernetes built-in kinds, CRDs, APIServices, the
// monitoring.coreos.com kinds, the KubeVirt resource and virtop.dev's
// KubeVirtMonitoring.
var Scheme = New()

// New builds a fresh scheme with every kind virtop uses.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme,
		apiextensionsv1.AddToScheme,
		apiregistrationv1.AddToScheme,
		monitoringv1.AddToScheme,
		kvv1.AddToScheme,
		virtopv1alpha1.AddToScheme,
	} {
		utilruntime.Must(add(s))
	}
	return s
}
