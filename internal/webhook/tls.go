package webhook

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SecretCertificate serves the certificate of a kubernetes.io/tls Secret
// (tls.crt, tls.key), read when a TLS handshake asks for it and parsed
// again only when the Secret's resourceVersion changed. While the Secret is
// missing or empty (the certificate code has not filled it yet) the
// handshake fails with an error saying so; nothing else breaks.
//
// The Secret is read as unstructured so that a cached reader shares the
// operator's existing informer of managed Secrets.
//
// That informer holds only Secrets labelled as virtop's. While virtop
// takes over an installation made by upstream's operator, the Secret is
// still upstream's (unlabelled): virtop's operator already answers
// upstream's virt-operator-validator webhooks, which guard the KubeVirt
// resource the adoption is recorded on. Fallback then reads the Secret
// uncached, by name, at most once per FallbackInterval; once virtop has
// applied it the cache holds it and Fallback is not used again.
type SecretCertificate struct {
	// Reader reads the Secret; a cache-backed reader makes each handshake
	// a memory lookup.
	Reader client.Reader
	// Fallback, when set, reads the Secret while Reader does not find it
	// (an uncached reader: the Secret is read by name only).
	Fallback client.Reader
	// Key names the Secret.
	Key types.NamespacedName

	mu   sync.Mutex
	rv   string
	cert *tls.Certificate
	// fellBack is when Fallback last found the Secret; handshakes until
	// FallbackInterval later reuse its certificate without a read.
	fellBack time.Time
}

// FallbackInterval is how long a certificate read through Fallback is
// served before Fallback is read again: handshakes, which anyone who
// reaches the webhook port can open, do not each cost an API request.
const FallbackInterval = 10 * time.Second

// GetCertificate is a tls.Config GetCertificate callback.
func (s *SecretCertificate) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	ctx := hello.Context()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("Secret")
	err := s.Reader.Get(ctx, s.Key, u)
	fallback := apierrors.IsNotFound(err) && s.Fallback != nil
	if fallback {
		s.mu.Lock()
		if s.cert != nil && time.Since(s.fellBack) < FallbackInterval {
			defer s.mu.Unlock()
			return s.cert, nil
		}
		s.mu.Unlock()
		err = s.Fallback.Get(ctx, s.Key, u)
	}
	if err != nil {
		return nil, fmt.Errorf("webhook serving certificate: reading Secret %s: %w", s.Key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if fallback {
		s.fellBack = time.Now()
	} else {
		s.fellBack = time.Time{}
	}
	if s.cert != nil && s.rv == u.GetResourceVersion() {
		return s.cert, nil
	}
	data, _, _ := unstructured.NestedStringMap(u.Object, "data")
	crt, err := base64.StdEncoding.DecodeString(data[corev1.TLSCertKey])
	if err != nil {
		return nil, fmt.Errorf("webhook serving certificate: Secret %s: %s is not base64", s.Key, corev1.TLSCertKey)
	}
	key, err := base64.StdEncoding.DecodeString(data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return nil, fmt.Errorf("webhook serving certificate: Secret %s: %s is not base64", s.Key, corev1.TLSPrivateKeyKey)
	}
	if len(crt) == 0 || len(key) == 0 {
		return nil, fmt.Errorf("webhook serving certificate: Secret %s holds no certificate yet", s.Key)
	}
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		// Never echo key material: the parser's message is generic.
		return nil, fmt.Errorf("webhook serving certificate: Secret %s: %w", s.Key, err)
	}
	s.cert, s.rv = &pair, u.GetResourceVersion()
	return s.cert, nil
}

// SelfSigned issues, in memory, a CA and a serving certificate signed by it
// for host (an IP address or a DNS name, with or without a port), valid
// for validFor from now. It returns the serving certificate and the CA in
// PEM, the caBundle of a webhook that calls host.
func SelfSigned(host string, validFor time.Duration) (tls.Certificate, []byte, error) {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if host == "" {
		return tls.Certificate{}, nil, errors.New("self-signed webhook certificate: no host")
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: fmt.Sprintf("virtop-webhook-ca@%d", now.Unix())},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validFor),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: host},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(validFor),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip := net.ParseIP(host); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	cert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
	return cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return big.NewInt(time.Now().UnixNano())
	}
	return n
}

// TLSOptions returns the webhook server's TLS settings: certificates from
// get, HTTP/1.1 only (HTTP/2 stream floods, CVE-2023-44487, are avoided
// as controller-runtime recommends) and TLS 1.2 at least.
func TLSOptions(get func(*tls.ClientHelloInfo) (*tls.Certificate, error)) []func(*tls.Config) {
	return []func(*tls.Config){func(c *tls.Config) {
		c.GetCertificate = get
		c.NextProtos = []string{"http/1.1"}
		c.MinVersion = tls.VersionTLS12
	}}
}
