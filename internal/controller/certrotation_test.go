package controller_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/operator"
	"github.com/virtop-dev/virtop/internal/testing/kvtest"
	"github.com/virtop-dev/virtop/internal/testing/operatortest"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// parseCerts returns every certificate of a PEM blob.
func parseCerts(t *testing.T, what string, data []byte) []*x509.Certificate {
	t.Helper()
	var out []*x509.Certificate
	for len(data) > 0 {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		out = append(out, c)
	}
	return out
}

func containsCert(list []*x509.Certificate, c *x509.Certificate) bool {
	for _, x := range list {
		if x.Equal(c) {
			return true
		}
	}
	return false
}

// certState is what the test reads of the certificates in the cluster.
type certState struct {
	serving *x509.Certificate // kubevirt-virt-api-certs tls.crt
	ca      *x509.Certificate // kubevirt-ca tls.crt
	bundle  []*x509.Certificate
	// webhooks maps "<configuration>/<webhook>" to its caBundle.
	webhooks map[string][]*x509.Certificate
}

func readCertState(t *testing.T, c client.Client, ns string) (*certState, error) {
	t.Helper()
	ctx := context.Background()
	st := &certState{webhooks: map[string][]*x509.Certificate{}}
	sec := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: vocab.VirtAPICertSecretName}, sec); err != nil {
		return nil, err
	}
	if cs := parseCerts(t, "virt-api tls.crt", sec.Data[corev1.TLSCertKey]); len(cs) > 0 {
		st.serving = cs[0]
	} else {
		return nil, fmt.Errorf("secret %s holds no certificate", sec.Name)
	}
	ca := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: vocab.CASecretName}, ca); err != nil {
		return nil, err
	}
	if cs := parseCerts(t, "CA tls.crt", ca.Data[corev1.TLSCertKey]); len(cs) > 0 {
		st.ca = cs[0]
	} else {
		return nil, fmt.Errorf("secret %s holds no certificate", ca.Name)
	}
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: vocab.CASecretName}, cm); err != nil {
		return nil, err
	}
	st.bundle = parseCerts(t, "CA bundle", []byte(cm.Data[vocab.CABundleKey]))
	vwc := &admissionv1.ValidatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: vocab.VirtAPIValidatingWebhookName}, vwc); err != nil {
		return nil, err
	}
	for _, w := range vwc.Webhooks {
		st.webhooks[vwc.Name+"/"+w.Name] = parseCerts(t, "caBundle of "+w.Name, w.ClientConfig.CABundle)
	}
	mwc := &admissionv1.MutatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: vocab.VirtAPIMutatingWebhookName}, mwc); err != nil {
		return nil, err
	}
	for _, w := range mwc.Webhooks {
		st.webhooks[mwc.Name+"/"+w.Name] = parseCerts(t, "caBundle of "+w.Name, w.ClientConfig.CABundle)
	}
	return st, nil
}

// verifyServing checks that the serving certificate chains to a CA of
// roots for virt-api's service name, now.
func verifyServing(serving *x509.Certificate, roots []*x509.Certificate, ns string) error {
	return verifyServingAt(serving, roots, ns, time.Time{})
}

// verifyServingAt is verifyServing at a given time (zero: now).
func verifyServingAt(serving *x509.Certificate, roots []*x509.Certificate, ns string, at time.Time) error {
	pool := x509.NewCertPool()
	for _, r := range roots {
		pool.AddCert(r)
	}
	_, err := serving.Verify(x509.VerifyOptions{
		Roots:       pool,
		CurrentTime: at,
		DNSName:     vocab.VirtAPI + "." + ns + ".svc",
		KeyUsages:   []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	return err
}

// TestCertRotation runs the operator with short certificate lifetimes and
// watches it rotate the virt-api serving certificate and then the CA with
// no event but its own requeue at the next rotation: the new CA reaches
// the bundle and every virt-api webhook while the old one is still
// trusted, the serving certificate is re-signed by the new CA, and
// Available stays True throughout.
func TestCertRotation(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	c := env.Client
	ctx := context.Background()
	testenv.FakeReadiness(t, c, ns)
	operatortest.Start(t, env.Config, operator.Options{Namespace: ns})
	d := func(x time.Duration) *metav1.Duration { return &metav1.Duration{Duration: x} }
	// CA renewed 2 min after issue with a 1 min overlap; the serving
	// certificate every 40 s; leaves signed by the previous CA are
	// re-signed min(5m, 1m/2) = 30 s after a CA rotation.
	kv := kvtest.KubeVirt(t, ns, func(kv *kvv1.KubeVirt) {
		kv.Spec.CertificateRotateStrategy.SelfSigned = &kvv1.KubeVirtSelfSignConfiguration{
			CA:     &kvv1.CertConfig{Duration: d(3 * time.Minute), RenewBefore: d(time.Minute)},
			Server: &kvv1.CertConfig{Duration: d(time.Minute), RenewBefore: d(20 * time.Second)},
		}
	})
	if err := c.Create(ctx, kv); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	key := client.ObjectKeyFromObject(kv)
	kvtest.WaitRolledOut(t, c, key)
	t.Logf("Available after %s", time.Since(start).Round(time.Second))

	first, err := readCertState(t, c, ns)
	if err != nil {
		t.Fatal(err)
	}
	// A leaf's NotBefore is its CA's (as upstream), so only NotAfter
	// tells its lifetime.
	if left := time.Until(first.serving.NotAfter); left > time.Minute+5*time.Second {
		t.Fatalf("serving certificate valid for another %s, the configured 1m was not applied", left)
	}
	if got := first.ca.NotAfter.Sub(first.ca.NotBefore); got != 3*time.Minute {
		t.Fatalf("CA lives %s, want 3m", got)
	}
	if !containsCert(first.bundle, first.ca) {
		t.Fatal("the CA bundle does not hold the CA of kubevirt-ca")
	}
	if err := verifyServing(first.serving, first.bundle, ns); err != nil {
		t.Fatalf("initial serving certificate does not verify against the bundle: %v", err)
	}
	if len(first.webhooks) < 2 {
		t.Fatalf("only %d virt-api webhooks", len(first.webhooks))
	}
	for name, b := range first.webhooks {
		if !containsCert(b, first.ca) {
			t.Errorf("webhook %s does not trust the CA", name)
		}
	}

	// read reads the state, failing at once if Available leaves True.
	read := func(key types.NamespacedName) (*certState, string) {
		cur := &kvv1.KubeVirt{}
		if err := c.Get(ctx, key, cur); err != nil {
			return nil, err.Error()
		}
		if a := cur.Status.Condition(kvv1.KubeVirtConditionAvailable); a.Status != corev1.ConditionTrue {
			t.Fatalf("Available went %s during certificate rotation: %s %s", a.Status, a.Reason, a.Message)
		}
		st, err := readCertState(t, c, ns)
		if err != nil {
			return nil, err.Error()
		}
		return st, ""
	}

	poll.Eventually(t, "a new virt-api serving certificate", 3*time.Minute, func() (bool, string) {
		st, why := read(key)
		if st == nil {
			return false, why
		}
		if st.serving.Equal(first.serving) {
			return false, fmt.Sprintf("serving certificate unchanged, renewal due at %s", first.serving.NotAfter.Add(-20*time.Second).Format(time.RFC3339))
		}
		if err := verifyServing(st.serving, st.bundle, ns); err != nil {
			t.Fatalf("the new serving certificate does not verify against the bundle: %v", err)
		}
		return true, ""
	})
	t.Logf("serving certificate rotated after %s", time.Since(start).Round(time.Second))
	// Issued on time: the operator requeued at the renewal, nothing else
	// woke it.
	if st, _ := read(key); st != nil {
		due := first.serving.NotAfter.Add(-20 * time.Second)
		onTime(t, "serving certificate", st.serving.NotAfter.Add(-time.Minute), due)
	}

	var rotated *certState
	sawBundle := false
	poll.Eventually(t, "a new CA in the bundle and every virt-api webhook", 3*time.Minute, func() (bool, string) {
		st, why := read(key)
		if st == nil {
			return false, why
		}
		if st.ca.Equal(first.ca) {
			return false, fmt.Sprintf("CA unchanged, renewal due at %s", first.ca.NotAfter.Add(-time.Minute).Format(time.RFC3339))
		}
		if !containsCert(st.bundle, st.ca) {
			return false, "the new CA is not in the bundle yet"
		}
		if !sawBundle {
			// The first sight of the new CA in the bundle: the old one
			// is still trusted there (the overlap lasts 1 min).
			sawBundle = true
			if !containsCert(st.bundle, first.ca) {
				t.Fatalf("the old CA left the bundle as the new one arrived (%d CAs)", len(st.bundle))
			}
		}
		for name, b := range st.webhooks {
			if !containsCert(b, st.ca) {
				return false, "webhook " + name + " does not trust the new CA yet"
			}
		}
		rotated = st
		return true, ""
	})
	t.Logf("CA rotated after %s (%d CAs in the bundle)", time.Since(start).Round(time.Second), len(rotated.bundle))
	onTime(t, "CA", rotated.ca.NotBefore, first.ca.NotAfter.Add(-time.Minute))
	if !containsCert(rotated.bundle, first.ca) {
		t.Error("the old CA is no longer in the bundle right after the rotation")
	}
	for name, b := range rotated.webhooks {
		if !containsCert(b, first.ca) {
			t.Errorf("webhook %s no longer trusts the old CA right after the rotation", name)
		}
	}

	// The serving certificate follows the new CA (at once if its renewal
	// was due, else after the re-issue delay), and verifies against what
	// the webhooks trust.
	poll.Eventually(t, "the serving certificate signed by the new CA", 2*time.Minute, func() (bool, string) {
		st, why := read(key)
		if st == nil {
			return false, why
		}
		if err := st.serving.CheckSignatureFrom(rotated.ca); err != nil {
			return false, "serving certificate not signed by the new CA yet"
		}
		for name, b := range st.webhooks {
			if err := verifyServing(st.serving, b, ns); err != nil {
				t.Fatalf("serving certificate does not verify against the caBundle of %s: %v", name, err)
			}
		}
		return true, ""
	})
	t.Logf("serving certificate re-signed by the new CA after %s", time.Since(start).Round(time.Second))
}

// onTime checks that a certificate due at due was issued at issued, within
// a margin for a loaded machine.
func onTime(t *testing.T, what string, issued, due time.Time) {
	t.Helper()
	late := issued.Sub(due)
	t.Logf("%s issued %s after it fell due", what, late.Round(time.Millisecond))
	if late < -time.Second || late > 10*time.Second {
		t.Errorf("%s issued at %s, due at %s: not at its rotation time", what, issued.Format(time.RFC3339), due.Format(time.RFC3339))
	}
}
