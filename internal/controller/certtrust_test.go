package controller_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/operator"
	"github.com/virtop-dev/virtop/internal/testing/kvtest"
	"github.com/virtop-dev/virtop/internal/testing/operatortest"
	"github.com/virtop-dev/virtop/internal/testing/poll"
	"github.com/virtop-dev/virtop/internal/testing/testenv"
	"github.com/virtop-dev/virtop/internal/vocab"
)

// plantedCA is a CA shaped like virtop's kubevirt-ca (self-signed, may
// sign, common name kubevirt.io@<unix>, valid for a week) that virtop did
// not issue.
func plantedCA(t *testing.T) (*x509.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(4242),
		Subject:               pkix.Name{CommonName: fmt.Sprintf("kubevirt.io@%d", now.Unix())},
		NotBefore:             now,
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// TestPlantedCAIsNotPublished: whoever may patch ConfigMaps in the install
// namespace (the strategy Job's account could, before it was made
// create-only) adds a CA of their own to the kubevirt-ca ConfigMap. The
// operator, woken by the change, puts its own bundle back, and neither the
// ConfigMap nor any virt-api webhook ever carries the planted CA after
// that: the ConfigMap is output only, the previous CAs live in the CA
// Secret.
func TestPlantedCAIsNotPublished(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t)
	c := env.Client
	ctx := context.Background()
	testenv.FakeReadiness(t, c, ns)
	operatortest.Start(t, env.Config, operator.Options{Namespace: ns})
	kv := kvtest.KubeVirt(t, ns)
	if err := c.Create(ctx, kv); err != nil {
		t.Fatal(err)
	}
	kvtest.WaitRolledOut(t, c, client.ObjectKeyFromObject(kv))
	before, err := readCertState(t, c, ns)
	if err != nil {
		t.Fatal(err)
	}

	planted, plantedPEM := plantedCA(t)
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: vocab.CASecretName}, cm); err != nil {
		t.Fatal(err)
	}
	cm.Data[vocab.CABundleKey] += string(plantedPEM)
	if err := c.Update(ctx, cm, client.FieldOwner("planter")); err != nil {
		t.Fatal(err)
	}
	plantedRV := cm.ResourceVersion

	// The operator rewrites the ConfigMap (a newer resourceVersion) with
	// its own bundle, and the webhooks carry it.
	poll.Eventually(t, "the operator's own bundle back in the ConfigMap and every webhook", time.Minute, func() (bool, string) {
		cur := &corev1.ConfigMap{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(cm), cur); err != nil {
			return false, err.Error()
		}
		if cur.ResourceVersion == plantedRV {
			return false, "the ConfigMap is as planted"
		}
		st, err := readCertState(t, c, ns)
		if err != nil {
			return false, err.Error()
		}
		if containsCert(st.bundle, planted) {
			return false, fmt.Sprintf("the ConfigMap's bundle (%d CAs) holds the planted CA", len(st.bundle))
		}
		for name, b := range st.webhooks {
			if containsCert(b, planted) {
				return false, "webhook " + name + " trusts the planted CA"
			}
		}
		if len(st.bundle) != 1 || !st.bundle[0].Equal(before.ca) {
			return false, fmt.Sprintf("the ConfigMap's bundle holds %d CAs", len(st.bundle))
		}
		return true, ""
	})
	// And it stays so: later passes do not pick the planted CA up.
	time.Sleep(3 * time.Second)
	st, err := readCertState(t, c, ns)
	if err != nil {
		t.Fatal(err)
	}
	if containsCert(st.bundle, planted) {
		t.Fatal("the planted CA came back into the ConfigMap")
	}
	for name, b := range st.webhooks {
		if containsCert(b, planted) {
			t.Errorf("webhook %s trusts the planted CA", name)
		}
	}
}
