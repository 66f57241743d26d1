package components

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/catalog"
	"github.com/virtop-dev/virtop/internal/config"
	"github.com/virtop-dev/virtop/internal/strategy/stage"
	"github.com/virtop-dev/virtop/internal/vocab"
)

func init() { register("certificates", renderCertificates) }

// renderCertificates renders the certificate Secrets and the CA ConfigMaps
// as placeholders: the certificate code (internal/certs) fills tls.crt and
// tls.key, and the ca-bundle key of the ConfigMaps, at apply time. An
// applier must therefore never write these placeholders' data over a live
// object's.
//
// Upstream puts no labels on them besides app.kubernetes.io/managed-by
// (which the strategy stamps) and no annotations in the strategy; it adds
// kubevirt.io/duration when it issues a certificate. The export Secrets
// and the export CA ConfigMap do not depend on the VMExport feature gate:
// upstream v1.5.3 creates and rotates them always.
func renderCertificates(c *config.DeploymentConfig, _ catalog.Release) ([]client.Object, error) {
	ns := c.Namespace
	var out []client.Object
	// Serving and client certificates, then the two CAs, in upstream's
	// order (NewCertSecrets, NewCACertSecrets). The operator's certificate
	// and the CAs go to the operator namespace upstream, which for virtop
	// is the install namespace.
	for _, name := range []string{
		vocab.VirtAPICertSecretName,
		vocab.VirtControllerCertSecretName,
		vocab.VirtExportProxyCertSecretName,
		vocab.VirtHandlerServerCertSecretName,
		vocab.VirtHandlerCertSecretName,
		vocab.VirtOperatorCertSecretName,
		vocab.CASecretName,
		vocab.ExportCASecretName,
	} {
		out = append(out, newCertSecret(ns, name))
	}
	// Upstream appends NewCAConfigMaps twice (GenerateCurrentInstallStrategy
	// in install/strategy.go), so its strategy holds each CA ConfigMap
	// twice. A strategy must not hold duplicate objects: virtop renders
	// each once.
	for _, name := range []string{vocab.CASecretName, vocab.ExportCASecretName} {
		out = append(out, newCAConfigMap(ns, name))
	}
	return out, nil
}

func newCertSecret(ns, name string) *corev1.Secret {
	s := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type:       corev1.SecretTypeTLS,
		// A kubernetes.io/tls Secret must have both keys; they stay empty
		// until the certificate code issues the certificate.
		Data: map[string][]byte{
			corev1.TLSCertKey:       {},
			corev1.TLSPrivateKeyKey: {},
		},
	}
	stage.Set(s, stage.Certificates)
	return s
}

func newCAConfigMap(ns, name string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
	}
	stage.Set(cm, stage.Certificates)
	return cm
}
