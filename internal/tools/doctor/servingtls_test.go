package doctor

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"
)

// testCA is a CA that issues serving certificates, as KubeVirt's operator
// makes one for virt-api.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

var serial int64 = 100

func newTestCA(t *testing.T, cn string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// serving issues a serving certificate for names, valid from notBefore to
// notAfter.
func (ca *testCA) serving(t *testing.T, notBefore, notAfter time.Time, names ...string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func (ca *testCA) valid(t *testing.T, names ...string) tls.Certificate {
	return ca.serving(t, time.Now().Add(-time.Hour), time.Now().Add(time.Hour), names...)
}

// tlsServer serves cert on a loopback port until the test ends: each
// connection gets a handshake, then is closed. It returns the address.
func tlsServer(t *testing.T, cert tls.Certificate) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				tc := tls.Server(c, cfg)
				_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
				_ = tc.Handshake()
				// Wait for the client to hang up.
				var b [1]byte
				_, _ = tc.Read(b[:])
			}()
		}
	}()
	return ln.Addr().String()
}

func dialLoopback(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const testServerName = "virt-api.kubevirt.svc"

// TestVerifyServingTLS: a real TLS server presents each kind of
// certificate; the verification against the webhook's caBundle for the
// Service's name accepts the right one and says, for each wrong one, why.
func TestVerifyServingTLS(t *testing.T) {
	ca := newTestCA(t, "kubevirt.io@1")
	other := newTestCA(t, "someone-else")
	now := time.Now()
	tests := []struct {
		name     string
		cert     tls.Certificate
		caBundle []byte
		reason   string
		message  []string
	}{
		{name: "good", cert: ca.valid(t, "virt-api", "virt-api.kubevirt", testServerName), caBundle: ca.pem},
		{name: "good, the caBundle holding two CAs", cert: ca.valid(t, testServerName), caBundle: append(append([]byte{}, other.pem...), ca.pem...)},
		{
			name: "signed by another CA", cert: other.valid(t, testServerName), caBundle: ca.pem,
			reason:  TLSUnknownAuthority,
			message: []string{"subject CN=virt-api.kubevirt.svc, issuer CN=someone-else", "is not signed by the caBundle's CA CN=kubevirt.io@1", "unknown authority"},
		},
		{
			name: "for another name", cert: ca.valid(t, "virt-exportproxy.kubevirt.svc", "virt-exportproxy"), caBundle: ca.pem,
			reason:  TLSNameMismatch,
			message: []string{"is valid for virt-exportproxy.kubevirt.svc, virt-exportproxy, not for " + testServerName},
		},
		{
			name: "expired", cert: ca.serving(t, now.Add(-48*time.Hour), now.Add(-2*time.Hour), testServerName), caBundle: ca.pem,
			reason:  TLSExpired,
			message: []string{"the certificate presented (subject CN=virt-api.kubevirt.svc, issuer CN=kubevirt.io@1) expired at", "(2h0m", "ago; x509: certificate has expired)"},
		},
		{
			name: "not valid yet", cert: ca.serving(t, now.Add(2*time.Hour), now.Add(48*time.Hour), testServerName), caBundle: ca.pem,
			reason:  TLSNotYetValid,
			message: []string{"is not valid before"},
		},
		{
			name: "a caBundle without a certificate", cert: ca.valid(t, testServerName), caBundle: []byte("not PEM"),
			reason:  TLSBadCABundle,
			message: []string{"the caBundle holds no PEM certificate"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := tlsServer(t, tt.cert)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			got, err := VerifyServingTLS(ctx, dialLoopback(t, addr), tt.caBundle, testServerName, time.Now())
			if tt.reason == "" {
				if err != nil {
					t.Fatalf("verification failed: %v", err)
				}
				if got == nil || !strings.Contains(got.Subject, "CN=") || got.NotAfter.IsZero() {
					t.Errorf("no certificate described: %+v", got)
				}
				return
			}
			var te *TLSError
			if !errors.As(err, &te) {
				t.Fatalf("error %v (%T), want a *TLSError %s", err, err, tt.reason)
			}
			t.Logf("%s: %s", te.Reason, te.Message)
			if te.Reason != tt.reason {
				t.Errorf("reason %s (%s), want %s", te.Reason, te.Message, tt.reason)
			}
			for _, want := range tt.message {
				if !strings.Contains(te.Message, want) {
					t.Errorf("message %q lacks %q", te.Message, want)
				}
			}
			if tt.reason != TLSBadCABundle && te.Cert == nil {
				t.Errorf("the presented certificate is not described")
			}
		})
	}
}

// TestVerifyServingTLSNotTLS: a port that answers something else than TLS
// (here: closes at once) is a handshake failure, and a port-forward whose
// pod refused the connection says so instead of the bare EOF.
func TestVerifyServingTLSNotTLS(t *testing.T) {
	ca := newTestCA(t, "kubevirt.io@1")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = VerifyServingTLS(ctx, dialLoopback(t, ln.Addr().String()), ca.pem, testServerName, time.Now())
	var te *TLSError
	if !errors.As(err, &te) || te.Reason != TLSHandshake || !strings.Contains(te.Message, "TLS handshake failed") {
		t.Fatalf("error %v, want a handshake failure", err)
	}

	client, server := net.Pipe()
	_ = server.Close()
	refused := &refusedConn{Conn: client, err: &PodPortError{Namespace: "kubevirt", Pod: "virt-api-x", Port: 8443, Message: "dial tcp4 127.0.0.1:8443: connect: connection refused"}}
	_, err = VerifyServingTLS(ctx, refused, ca.pem, testServerName, time.Now())
	var pe *PodPortError
	if !errors.As(err, &te) || !errors.As(err, &pe) || !strings.Contains(te.Message, "port 8443 of pod kubevirt/virt-api-x did not accept the connection: dial tcp4 127.0.0.1:8443: connect: connection refused") {
		t.Fatalf("error %v, want the pod's refusal", err)
	}
}

// refusedConn fails every read and write with err, as a port-forward's
// connection does once the kubelet reported the pod's port refused.
type refusedConn struct {
	net.Conn
	err error
}

func (c *refusedConn) Read([]byte) (int, error)  { return 0, c.err }
func (c *refusedConn) Write([]byte) (int, error) { return 0, c.err }
