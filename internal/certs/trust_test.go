package certs

import (
	"crypto/x509"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtop-dev/virtop/internal/vocab"
)

// The CA ConfigMaps are no input of Fill (Live holds Secrets only), so a
// CA planted there cannot reach a bundle; the envtest
// TestPlantedCAIsNotPublished in internal/controller shows it end to end.

// TestPreviousCARecordFiltered: what the CA Secret's record of previous
// CAs holds is trusted only while it looks like a CA of that Secret
// (self-signed, allowed to sign, named <prefix>@<unix>); garbage, a leaf
// and the other CA's certificate are dropped from the bundle and from the
// record.
func TestPreviousCARecordFiltered(t *testing.T) {
	e := newEnv(t)
	e.fill()
	e.at(time.Hour)
	live := liveOf(e.out)
	ca := live.Secrets["kubevirt-ca"]
	ca.Data[vocab.PreviousCABundleKey] = []byte("garbage\n" + string(live.Secrets["kubevirt-virt-api-certs"].Data["tls.crt"]) +
		string(live.Secrets["kubevirt-export-ca"].Data["tls.crt"]) + "-----BEGIN FOO-----\nAAAA\n-----END FOO-----\n")
	out, rep, err := e.m.Fill(e.plan, live, e.lt)
	if err != nil {
		t.Fatal(err)
	}
	if got := issued(rep); len(got) != 0 {
		t.Errorf("issued %v", got)
	}
	if b := bundleOf(t, out, "kubevirt-ca"); len(b) != 1 {
		t.Errorf("kubevirt-ca bundle holds %d CAs, want 1", len(b))
	}
	if _, ok := secretOf(out, "kubevirt-ca").Data[vocab.PreviousCABundleKey]; ok {
		t.Errorf("the record of previous CAs is kept")
	}
	verifyAll(t, out, e.clock.Now())
}

// TestPreviousCAsKeptInTheCASecret: after a CA rotation the previous CA
// stays in the bundle for its overlap because the CA Secret records it,
// and leaves it when the overlap ends; the record then empties too.
func TestPreviousCAsKeptInTheCASecret(t *testing.T) {
	caRenewal := 7*24*time.Hour - 7*24*time.Hour/5
	e := newEnv(t)
	e.fill()
	e.runTo(start.Add(caRenewal))
	oldCA := certOf(t, e.out, "kubevirt-ca")
	e.at(caRenewal).fill()
	newCA := certOf(t, e.out, "kubevirt-ca")
	if got := previousOf(t, e.out, "kubevirt-ca"); len(got) != 1 || !got[0].Equal(oldCA) {
		t.Fatalf("the CA Secret records %d previous CAs, want the old CA", len(got))
	}
	// The ConfigMap plays no part: the next Fill keeps the old CA from the
	// Secret's record alone.
	e.at(caRenewal + time.Minute)
	out, rep, err := e.m.Fill(e.plan, liveOf(e.out), e.lt)
	if err != nil {
		t.Fatal(err)
	}
	b := bundleOf(t, out, "kubevirt-ca")
	if len(b) != 2 || !b[0].Equal(newCA) || !b[1].Equal(oldCA) {
		t.Fatalf("bundle holds %d CAs, want [new, old]", len(b))
	}
	if got := issued(rep); len(got) != 0 {
		t.Errorf("issued %v", got)
	}
	verifyAll(t, out, e.clock.Now())
	// The overlap ends: the old CA leaves the bundle and the record.
	e.runTo(start.Add(caRenewal + 7*24*time.Hour/5 + time.Second))
	if b := bundleOf(t, e.out, "kubevirt-ca"); len(b) != 1 {
		t.Errorf("bundle holds %d CAs after the overlap", len(b))
	}
	if got := previousOf(t, e.out, "kubevirt-ca"); len(got) != 0 {
		t.Errorf("the CA Secret still records %d previous CAs after the overlap", len(got))
	}
}

// TestUpgradeIgnoresTheConfigMapsPreviousCAs: an install written by a
// virtop that kept previous CAs only in the ConfigMap (no record in the
// CA Secret) loses them on the first Fill after the upgrade, by design:
// the ConfigMap cannot tell the operator's old CA from a planted one. A
// component certificate still signed by the old CA (within the re-sign
// delay) is re-signed at once, as upstream does after every rotation.
func TestUpgradeIgnoresTheConfigMapsPreviousCAs(t *testing.T) {
	caRenewal := 7*24*time.Hour - 7*24*time.Hour/5
	e := newEnv(t)
	e.fill()
	e.runTo(start.Add(caRenewal))
	e.at(caRenewal).fill()
	live := liveOf(e.out)
	delete(live.Secrets["kubevirt-ca"].Data, vocab.PreviousCABundleKey)
	if len(bundleOf(t, e.out, "kubevirt-ca")) != 2 {
		t.Fatal("the ConfigMap does not hold the previous CA")
	}
	e.at(caRenewal + time.Minute)
	out, rep, err := e.m.Fill(e.plan, live, e.lt)
	if err != nil {
		t.Fatal(err)
	}
	if b := bundleOf(t, out, "kubevirt-ca"); len(b) != 1 {
		t.Errorf("bundle holds %d CAs, want the current CA alone", len(b))
	}
	for _, n := range leafNames {
		if r := reasonOf(rep, n); r != ReasonUntrusted {
			t.Errorf("%s: reason %q, want %q", n, r, ReasonUntrusted)
		}
	}
	verifyAll(t, out, e.clock.Now())
}

// previousOf parses the previous CAs the CA Secret name records.
func previousOf(t testing.TB, objs []client.Object, name string) []*x509.Certificate {
	t.Helper()
	s := secretOf(objs, name)
	if s == nil {
		t.Fatalf("no Secret %s", name)
	}
	return parseBundle(s.Data[vocab.PreviousCABundleKey])
}

func containsCA(list []*x509.Certificate, c *x509.Certificate) bool {
	for _, x := range list {
		if x.Equal(c) {
			return true
		}
	}
	return false
}
