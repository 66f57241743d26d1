package controller_test

import (
	"context"
	"crypto/x509"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kvv1 "github.com/virtop-dev/virtop/api/v1"
	"github.com/virtop-dev/virtop/internal/operator"
	"github.com/virtop-dev/virtop/internal/testing/kvtest"
	"github.com/virtop-dev/virtop/internal/testing/operatortest"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
)

// TestTrustReachesWebhooksBeforeRollout: a CA rotated in a pass that then
// waits for a rollout (here, new lifetimes change the install strategy,
// so every Deployment rolls out, and its pods stay unready) must reach
// every webhook's caBundle in that same pass: the leaf Secrets the pass
// writes are signed by the new CA, and virt-api serves them as soon as
// kubelet refreshes its volume. Found on the real node: the webhooks
// trusted only the old CA for the 90 s of the rollout, and every request
// they matched was refused once virt-api presented its new certificate.
func TestTrustReachesWebhooksBeforeRollout(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	c := env.Client
	ctx := context.Background()
	hold := testenv.HoldableReadiness(t, c, ns)
	operatortest.Start(t, env.Config, operator.Options{Namespace: ns})
	kv := kvtest.KubeVirt(t, ns)
	if err := c.Create(ctx, kv); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(kv)
	kvtest.WaitRolledOut(t, c, key)
	first, err := readCertState(t, c, ns)
	if err != nil {
		t.Fatal(err)
	}

	hold(true)
	cur := &kvv1.KubeVirt{}
	if err := c.Get(ctx, key, cur); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(cur.DeepCopy())
	d := func(x time.Duration) *metav1.Duration { return &metav1.Duration{Duration: x} }
	cur.Spec.CertificateRotateStrategy.SelfSigned = &kvv1.KubeVirtSelfSignConfiguration{
		CA:     &kvv1.CertConfig{Duration: d(6 * time.Minute), RenewBefore: d(4 * time.Minute)},
		Server: &kvv1.CertConfig{Duration: d(3 * time.Minute), RenewBefore: d(2 * time.Minute)},
	}
	if err := c.Patch(ctx, cur, patch); err != nil {
		t.Fatal(err)
	}
	// Until the new CA's leaf is written, then for 10 s more: whatever the
	// virt-api Secret holds must verify against every virt-api webhook's
	// caBundle, every time the test looks.
	var issuedAt time.Time
	poll.Eventually(t, "the new CA's serving certificate written, then 10 s", 2*time.Minute, func() (bool, string) {
		st, err := readCertState(t, c, ns)
		if err != nil {
			return false, err.Error()
		}
		for name, b := range st.webhooks {
			if err := verifyServing(st.serving, b, ns); err != nil {
				t.Fatalf("virt-api's Secret holds a certificate (issuer %s) that webhook %s does not trust (its caBundle: %s): %v",
					st.serving.Issuer.CommonName, name, commonNames(b), err)
			}
		}
		if st.ca.Equal(first.ca) || st.serving.Equal(first.serving) {
			return false, "CA or serving certificate not issued again yet"
		}
		if issuedAt.IsZero() {
			issuedAt = time.Now()
		}
		if time.Since(issuedAt) < 10*time.Second {
			return false, fmt.Sprintf("watching for %s more", (10*time.Second - time.Since(issuedAt)).Round(time.Second))
		}
		return true, ""
	})
	hold(false)
	kvtest.WaitRolledOut(t, c, key)
}

func commonNames(cs []*x509.Certificate) string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Subject.CommonName)
	}
	return strings.Join(out, ", ")
}
