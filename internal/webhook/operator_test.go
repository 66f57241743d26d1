package webhook_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/operator"
	"github.com/virtop-dev/virtop/internal/testing/kvtest"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
	"github.com/virtop-dev/virtop/internal/vocab"
	"github.com/virtop-dev/virtop/internal/webhook"
)

// fakeReadiness plays kube-controller-manager for the namespace: every
// Deployment and DaemonSet is marked ready.
func fakeReadiness(t *testing.T, c client.Client, ns string) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		for ctx.Err() == nil {
			var ds appsv1.DeploymentList
			if err := c.List(ctx, &ds, client.InNamespace(ns)); err == nil {
				for i := range ds.Items {
					d := &ds.Items[i]
					if d.Status.ObservedGeneration != d.Generation || d.Status.AvailableReplicas == 0 {
						_ = testenv.MarkDeploymentReady(ctx, c, client.ObjectKeyFromObject(d))
					}
				}
			}
			var dss appsv1.DaemonSetList
			if err := c.List(ctx, &dss, client.InNamespace(ns)); err == nil {
				for i := range dss.Items {
					d := &dss.Items[i]
					if d.Status.ObservedGeneration != d.Generation || d.Status.NumberReady == 0 {
						_ = testenv.MarkDaemonSetReady(ctx, c, client.ObjectKeyFromObject(d), 1)
					}
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
}

// TestOperatorServesWebhookByURL runs the operator as a host process does
// on the local cluster (--webhook-url-host): it registers
// virt-operator-validator by URL with its own CA, keeping the local
// cluster's failurePolicy Ignore, the API server calls it and a second
// KubeVirt is refused; the operator's own uninstall then goes through.
func TestOperatorServesWebhookByURL(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	c := env.Client
	ctx := context.Background()
	fakeReadiness(t, c, ns)

	port := freePort(t)
	host := fmt.Sprintf("127.0.0.1:%d", port)
	mgr, err := operator.New(env.Config, operator.Options{
		Namespace: ns, MetricsBindAddress: "0", HealthProbeBindAddress: "0",
		WebhookBindAddress: host, WebhookURLHost: host,
	})
	if err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("operator exited with %v", err)
		}
		// Whatever the test left, no webhook of this operator may outlive it.
		vwc := &admissionv1.ValidatingWebhookConfiguration{}
		vwc.Name = vocab.OperatorValidatingWebhookName
		_ = c.Delete(context.Background(), vwc)
	})

	kv := kvtest.KubeVirt(t, ns)
	if err := c.Create(ctx, kv); err != nil {
		t.Fatal(err)
	}
	cleanKubeVirts(t, env, ns)

	poll.Eventually(t, "virt-operator-validator registered by URL", 3*time.Minute, func() (bool, string) {
		vwc := &admissionv1.ValidatingWebhookConfiguration{}
		if err := c.Get(ctx, types.NamespacedName{Name: vocab.OperatorValidatingWebhookName}, vwc); err != nil {
			return false, err.Error()
		}
		if len(vwc.Webhooks) != 3 {
			return false, fmt.Sprintf("%d webhooks", len(vwc.Webhooks))
		}
		for _, w := range vwc.Webhooks {
			cc := w.ClientConfig
			if cc.Service != nil || cc.URL == nil || !strings.HasPrefix(*cc.URL, "https://"+host+"/kubevirt-validate-") || len(cc.CABundle) == 0 {
				return false, fmt.Sprintf("webhook %s: clientConfig %+v", w.Name, cc)
			}
			if w.FailurePolicy == nil || *w.FailurePolicy != admissionv1.Ignore {
				return false, fmt.Sprintf("webhook %s: failurePolicy %v, want the local cluster's Ignore", w.Name, w.FailurePolicy)
			}
		}
		return true, ""
	})

	second := &kvv1.KubeVirt{}
	second.Namespace, second.Name = ns, "second"
	var lastErr error
	poll.Eventually(t, "the operator's webhook to refuse a second KubeVirt", 3*time.Minute, func() (bool, string) {
		lastErr = c.Create(ctx, second.DeepCopy(), client.DryRunAll)
		return lastErr != nil && strings.Contains(lastErr.Error(), "denied the request"), fmt.Sprint(lastErr)
	})
	refused(t, lastErr, ns+"/kubevirt", "only one KubeVirt")

	// Uninstall: the delete is admitted (no workloads), the operator
	// removes its webhook first and its finalizer last.
	poll.Eventually(t, "the KubeVirt to carry the finalizer", 3*time.Minute, func() (bool, string) {
		cur := &kvv1.KubeVirt{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(kv), cur); err != nil {
			return false, err.Error()
		}
		return len(cur.Finalizers) > 0, "no finalizer yet"
	})
	if err := c.Delete(ctx, kv); err != nil {
		t.Fatalf("deleting the KubeVirt: %v", err)
	}
	poll.Eventually(t, "the KubeVirt to be gone", 3*time.Minute, func() (bool, string) {
		err := c.Get(ctx, client.ObjectKeyFromObject(kv), &kvv1.KubeVirt{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

// TestOperatorServesUpstreamCertificate runs the operator as it runs in
// the cluster (its certificate from Secret kubevirt-operator-certs) while
// that Secret is still upstream's operator's: not labelled as virtop's,
// so outside the operator's cache, as during the takeover of an upstream
// installation, when virtop's operator already answers upstream's
// virt-operator-validator. The handshake must present the Secret's
// certificate.
func TestOperatorServesUpstreamCertificate(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	c := env.Client
	ctx := context.Background()

	cert, ca, err := webhook.SelfSigned("127.0.0.1", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	crt, key := pemPair(t, cert)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: vocab.VirtOperatorCertSecretName, Namespace: ns,
			Labels: map[string]string{vocab.ManagedByLabel: "virt-operator"}},
		Type: corev1.SecretTypeTLS,
		Data: map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key},
	}
	if err := c.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}

	port := freePort(t)
	host := fmt.Sprintf("127.0.0.1:%d", port)
	mgr, err := operator.New(env.Config, operator.Options{
		Namespace: ns, MetricsBindAddress: "0", HealthProbeBindAddress: "0",
		WebhookBindAddress: host,
	})
	if err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("operator exited with %v", err)
		}
	})

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	var served *x509.Certificate
	poll.Eventually(t, "the operator's webhook to present upstream's certificate", 2*time.Minute, func() (bool, string) {
		conn, err := tls.Dial("tcp", host, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
		if err != nil {
			return false, err.Error()
		}
		defer conn.Close()
		served = conn.ConnectionState().PeerCertificates[0]
		return true, ""
	})
	if !served.Equal(cert.Leaf) {
		t.Error("served a certificate other than the Secret's")
	}
	live := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(secret), live); err != nil {
		t.Fatal(err)
	}
	if live.Labels[vocab.ManagedByLabel] == vocab.ManagedByValue {
		t.Error("the Secret was labelled as virtop's: the test no longer covers an unlabelled one")
	}
}
