package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"slices"
	"time"
)

// PEM block types, as upstream writes them (pkg/certificates/triple/cert).
const (
	pemCertificate  = "CERTIFICATE"
	pemECPrivateKey = "EC PRIVATE KEY"
)

// keyPair is a parsed certificate with its private key and the exact PEM
// bytes they came from (or were encoded to), so a kept certificate is
// written back byte for byte.
type keyPair struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
	keyPEM  []byte
	// duration is the kubevirt.io/duration annotation of the live Secret
	// a kept pair came from, in its writer's spelling (upstream's or
	// virtop's, issuedFor); "" for a pair just issued.
	duration string
}

// errRandom is returned when the random source fails. It never wraps the
// underlying error: an error from a crypto routine is not supposed to
// carry key material, but nothing here relies on that.
var errRandom = errors.New("reading the random source failed")

// serial returns a positive 127-bit serial number read from r.
func serial(r io.Reader) (*big.Int, error) {
	var b [16]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return nil, errRandom
	}
	b[0] &= 0x7f
	n := new(big.Int).SetBytes(b[:])
	if n.Sign() == 0 {
		n.SetInt64(1)
	}
	return n, nil
}

// newKey returns an ECDSA P-256 key, as upstream's triple.NewCA and
// NewServerKeyPair use.
func newKey(r io.Reader) (*ecdsa.PrivateKey, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), r)
	if err != nil {
		return nil, errRandom
	}
	return k, nil
}

// encode builds the keyPair of a freshly signed DER certificate.
func encode(der []byte, key *ecdsa.PrivateKey) (*keyPair, error) {
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, errors.New("parsing a freshly signed certificate failed")
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, errors.New("encoding a fresh private key failed")
	}
	return &keyPair{
		cert:    cert,
		key:     key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: pemCertificate, Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: pemECPrivateKey, Bytes: keyDER}),
	}, nil
}

// issueCA creates a self-signed CA valid from now for d. Its common name
// is "<prefix>@<unix seconds>" as upstream's triple.NewCA names it, and it
// has upstream's key usages.
func issueCA(r io.Reader, prefix string, now time.Time, d time.Duration) (*keyPair, error) {
	key, err := newKey(r)
	if err != nil {
		return nil, err
	}
	sn, err := serial(r)
	if err != nil {
		return nil, err
	}
	now = now.UTC().Truncate(time.Second)
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: fmt.Sprintf("%s@%d", prefix, now.Unix())},
		NotBefore:             now,
		NotAfter:              now.Add(d),
		KeyUsage:              x509.KeyUsageKeyEncipherment | x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(r, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, errors.New("self-signing a CA certificate failed")
	}
	return encode(der, key)
}

// issueLeaf creates a certificate for s signed by ca, valid until now+d.
// As upstream (triple/cert.NewSignedCert), NotBefore is the CA's
// NotBefore, which also absorbs clock skew between the operator and the
// certificate's users.
func issueLeaf(r io.Reader, s *spec, ns string, ca *keyPair, now time.Time, d time.Duration) (*keyPair, error) {
	key, err := newKey(r)
	if err != nil {
		return nil, err
	}
	sn, err := serial(r)
	if err != nil {
		return nil, err
	}
	now = now.UTC().Truncate(time.Second)
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: s.commonName(ns)},
		DNSNames:     s.dnsNames(ns),
		NotBefore:    ca.cert.NotBefore,
		NotAfter:     now.Add(d),
		KeyUsage:     x509.KeyUsageKeyEncipherment | x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{s.usage()},
	}
	der, err := x509.CreateCertificate(r, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return nil, fmt.Errorf("signing certificate %s with %s failed", s.name, s.issuer)
	}
	return encode(der, key)
}

// parseKeyPair parses a Secret's tls.crt and tls.key. On failure it
// returns a reason fit for a status message: it never includes the data
// or an error of a parser that might quote it.
func parseKeyPair(certPEM, keyPEM []byte) (*keyPair, string) {
	if len(certPEM) == 0 || len(keyPEM) == 0 {
		return nil, ReasonMissing
	}
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != pemCertificate {
		return nil, "tls.crt holds no PEM certificate"
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, "tls.crt does not parse as an X.509 certificate"
	}
	// X509KeyPair parses the key and checks it matches the first
	// certificate's public key. Its error is deliberately dropped.
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, "tls.key is not a private key matching tls.crt"
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, "tls.key is of an unsupported type"
	}
	return &keyPair{cert: cert, key: signer, certPEM: certPEM, keyPEM: keyPEM}, ""
}

// checkCA reports why cert cannot serve as CA s, or "".
func checkCA(cert *x509.Certificate, s *spec) string {
	if !cert.BasicConstraintsValid || !cert.IsCA {
		return "tls.crt is not a CA certificate"
	}
	if cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return "tls.crt may not sign certificates"
	}
	if err := cert.CheckSignatureFrom(cert); err != nil {
		return "tls.crt is not self-signed"
	}
	if !hasPrefix(cert.Subject.CommonName, s.caPrefix+"@") {
		return fmt.Sprintf("common name is not %s@<timestamp>", s.caPrefix)
	}
	return ""
}

// checkLeaf reports why cert does not fit s in namespace ns, or "".
func checkLeaf(cert *x509.Certificate, s *spec, ns string) string {
	if cert.IsCA {
		return "tls.crt is a CA certificate"
	}
	if cert.Subject.CommonName != s.commonName(ns) {
		return fmt.Sprintf("common name is not %s", s.commonName(ns))
	}
	want := s.dnsNames(ns)
	got := slices.Clone(cert.DNSNames)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) || len(cert.IPAddresses) != 0 || len(cert.URIs) != 0 || len(cert.EmailAddresses) != 0 {
		return "subject alternative names differ from the expected ones"
	}
	usage := s.usage()
	if !slices.ContainsFunc(cert.ExtKeyUsage, func(u x509.ExtKeyUsage) bool {
		return u == usage || u == x509.ExtKeyUsageAny
	}) {
		return "extended key usage lacks " + usageName(usage)
	}
	return ""
}

func usageName(u x509.ExtKeyUsage) string {
	if u == x509.ExtKeyUsageClientAuth {
		return "client auth"
	}
	return "server auth"
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }
