package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/certs"
	"github.com/virtop-dev/virtop/internal/plan"
)

var (
	certificateExpiry = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "virtop_certificate_expiry_timestamp_seconds",
		Help: "When each KubeVirt certificate virtop manages expires (Unix seconds), by Secret name.",
	}, []string{"secret"})
	// certificateRenewal is when virtop means to renew each certificate;
	// KubeVirtCertificateExpiringSoon compares the time left with the
	// renewal window, so it follows the configured lifetimes.
	certificateRenewal = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "virtop_certificate_renewal_timestamp_seconds",
		Help: "When virtop renews each KubeVirt certificate it manages (Unix seconds), by Secret name.",
	}, []string{"secret"})
)

// liveCertificates reads the install namespace's Secrets (from the cache)
// for the plan's certificate step: live certificates are kept while they
// are valid, others issued. The CA ConfigMaps are not read: they are
// output only (certs.Live).
//
// The cache holds only Secrets labelled as virtop's. A certificate Secret
// of the strategy it does not hold is read uncached, by name, in the
// install namespace: an installation made by upstream's operator (being
// adopted) has its CAs and certificates in unlabelled Secrets, which are
// kept and taken over, not re-issued. Once virtop has applied them they
// are labelled and cached, so steady state reads nothing more.
func (r *Reconciler) liveCertificates(ctx context.Context, namespace string, objs []client.Object) (*plan.Certificates, error) {
	m := r.Certs
	if m == nil {
		m = &certs.Manager{Clock: r.Clock}
	}
	live := certs.Live{Secrets: map[string]*corev1.Secret{}}
	var secrets corev1.SecretList
	if err := r.Client.List(ctx, &secrets, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("list Secrets: %w", err)
	}
	for i := range secrets.Items {
		live.Secrets[secrets.Items[i].Name] = &secrets.Items[i]
	}
	names, err := certs.SecretNames(objs)
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		if live.Secrets[name] != nil {
			continue
		}
		sec := &corev1.Secret{}
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, sec)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("reading Secret %s: %w", name, err)
		default:
			live.Secrets[name] = sec
		}
	}
	return &plan.Certificates{Manager: m, Live: live}, nil
}

// reportCertificates exports the certificates' expiry and says which the
// plan issued.
func (r *Reconciler) reportCertificates(ctx context.Context, kv *kvv1.KubeVirt, rep *certs.Report) {
	if rep == nil {
		return
	}
	for _, c := range rep.Certificates {
		certificateExpiry.WithLabelValues(c.Name).Set(float64(c.NotAfter.Unix()))
		certificateRenewal.WithLabelValues(c.Name).Set(float64(c.RenewAt.Unix()))
		if c.Issued {
			ctrl.LoggerFrom(ctx).Info("Issued certificate", "secret", c.Name, "notAfter", c.NotAfter.UTC().Format(time.RFC3339), "reason", c.Reason)
		}
	}
	if issued := rep.Issued(); len(issued) > 0 && r.Recorder != nil {
		r.Recorder.Eventf(kv, nil, corev1.EventTypeNormal, "CertificatesIssued", "Issue", "Issued certificates: %s", summarize(issued))
	}
}
