package doctor

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"
)

// Why a serving certificate does not verify (TLSError.Reason).
const (
	// TLSUnknownAuthority: no CA of the caBundle signed the chain.
	TLSUnknownAuthority = "unknown-authority"
	// TLSNameMismatch: the certificate is not valid for the Service's name.
	TLSNameMismatch = "name-mismatch"
	// TLSExpired: the certificate, or one of its chain, has expired.
	TLSExpired = "expired"
	// TLSNotYetValid: the certificate, or one of its chain, is not valid yet.
	TLSNotYetValid = "not-yet-valid"
	// TLSBadCABundle: the caBundle holds no PEM certificate.
	TLSBadCABundle = "bad-ca-bundle"
	// TLSInvalid: another verification failure (key usage, a constraint).
	TLSInvalid = "invalid"
	// TLSHandshake: no certificate to verify: the handshake itself
	// failed (the pod's port refused, not TLS, closed, timed out).
	TLSHandshake = "handshake"
)

// ServingCert is the certificate a server presented, as doctor prints it.
type ServingCert struct {
	Subject  string
	Issuer   string
	DNSNames []string
	NotAfter time.Time
}

// TLSError is why a server's certificate does not verify against a
// caBundle for a server name, worded for the report.
type TLSError struct {
	// Reason is one of the TLS* reasons.
	Reason string
	// Message says it in full: what was presented, what was expected.
	Message string
	// Cert is the leaf the server presented; nil when the handshake
	// failed before one was seen.
	Cert *ServingCert
	// Err is the underlying error (an x509 error, a network error).
	Err error
}

func (e *TLSError) Error() string { return e.Message }
func (e *TLSError) Unwrap() error { return e.Err }

// VerifyServingTLS does a TLS handshake over conn, as the API server does
// when it calls a webhook or an APIService of a Service: the chain the
// server presents must verify against caBundle (PEM; empty means the
// system's roots, as for the API server) for serverName
// (<service>.<namespace>.svc), for server authentication, at now. It sends
// nothing after the handshake and closes conn. A failure is a *TLSError.
func VerifyServingTLS(ctx context.Context, conn net.Conn, caBundle []byte, serverName string, now time.Time) (*ServingCert, error) {
	defer conn.Close()
	var roots *x509.CertPool
	var cas []*x509.Certificate
	if len(caBundle) > 0 {
		cas = parsePEMCerts(caBundle)
		if len(cas) == 0 {
			return nil, &TLSError{Reason: TLSBadCABundle, Message: "the caBundle holds no PEM certificate: the API server cannot verify any server with it"}
		}
		roots = x509.NewCertPool()
		for _, c := range cas {
			roots.AddCert(c)
		}
	}
	var verr *TLSError
	var leaf *ServingCert
	cfg := &tls.Config{
		ServerName: serverName,
		MinVersion: tls.VersionTLS12,
		// Verified below, in VerifyConnection, the way crypto/tls would
		// (same options), so that a failure can say what was presented.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				verr = &TLSError{Reason: TLSHandshake, Message: "the server presented no certificate"}
				return verr
			}
			l := cs.PeerCertificates[0]
			leaf = describeCert(l)
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := l.Verify(x509.VerifyOptions{
				DNSName: serverName, Roots: roots, Intermediates: inter, CurrentTime: now,
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			})
			if err != nil {
				verr = explainVerifyError(err, l, cs.PeerCertificates[1:], cas, serverName, now)
				return verr
			}
			return nil
		},
	}
	tc := tls.Client(conn, cfg)
	err := tc.HandshakeContext(ctx)
	if err == nil {
		_ = tc.Close()
		return leaf, nil
	}
	if verr != nil {
		return leaf, verr
	}
	msg := "TLS handshake failed: " + err.Error()
	var pe *PodPortError
	switch {
	case errors.As(err, &pe):
		msg = pe.Error()
	case ctx.Err() != nil:
		msg = "TLS handshake did not finish in time: " + err.Error()
	}
	return nil, &TLSError{Reason: TLSHandshake, Message: msg, Err: err}
}

// PodPortError is a port-forward that reached the pod but whose port
// answered with an error (nothing listens, the connection was refused).
type PodPortError struct {
	Namespace, Pod string
	Port           int32
	// Message is the error the kubelet reported.
	Message string
}

func (e *PodPortError) Error() string {
	return fmt.Sprintf("port %d of pod %s/%s did not accept the connection: %s", e.Port, e.Namespace, e.Pod, strings.TrimSpace(e.Message))
}

// explainVerifyError words an x509 verification error: which certificate,
// issued by whom, valid for which names and until when.
func explainVerifyError(err error, leaf *x509.Certificate, chain, cas []*x509.Certificate, serverName string, now time.Time) *TLSError {
	e := &TLSError{Err: err, Cert: describeCert(leaf)}
	presented := fmt.Sprintf("the certificate presented (subject %s, issuer %s)", dn(leaf.Subject.String()), dn(leaf.Issuer.String()))
	var inv x509.CertificateInvalidError
	var host x509.HostnameError
	var ua x509.UnknownAuthorityError
	switch {
	case errors.As(err, &inv) && inv.Reason == x509.Expired:
		c := inv.Cert
		if c == nil {
			c = leaf
		}
		which := presented
		if c != leaf {
			which = fmt.Sprintf("certificate %s in the chain presented", dn(c.Subject.String()))
		}
		if now.Before(c.NotBefore) {
			e.Reason = TLSNotYetValid
			e.Message = fmt.Sprintf("%s is not valid before %s (in %s; x509: certificate is not yet valid)", which, c.NotBefore.UTC().Format(time.RFC3339), c.NotBefore.Sub(now).Round(time.Second))
			return e
		}
		e.Reason = TLSExpired
		e.Message = fmt.Sprintf("%s expired at %s (%s ago; x509: certificate has expired)", which, c.NotAfter.UTC().Format(time.RFC3339), now.Sub(c.NotAfter).Round(time.Second))
	case errors.As(err, &host):
		e.Reason = TLSNameMismatch
		names := leaf.DNSNames
		for _, ip := range leaf.IPAddresses {
			names = append(names, ip.String())
		}
		valid := "no DNS name or IP address (only the legacy common name " + dn(leaf.Subject.CommonName) + ", which Go ignores)"
		if len(names) > 0 {
			valid = strings.Join(names, ", ")
		}
		e.Message = fmt.Sprintf("%s is valid for %s, not for %s, the name the API server checks (x509: name mismatch)", presented, valid, serverName)
	case errors.As(err, &ua):
		e.Reason = TLSUnknownAuthority
		var subjects []string
		for _, c := range cas {
			subjects = append(subjects, dn(c.Subject.String()))
		}
		trust := "the system's roots (the caBundle is empty)"
		if len(cas) > 0 {
			trust = "the caBundle's CA " + strings.Join(subjects, ", ")
		}
		e.Message = fmt.Sprintf("%s is not signed by %s: %v", presented, trust, err)
		if len(chain) > 0 {
			e.Message += fmt.Sprintf(" (%d intermediate certificates presented)", len(chain))
		}
	default:
		e.Reason = TLSInvalid
		e.Message = fmt.Sprintf("%s does not verify: %v", presented, err)
	}
	return e
}

func describeCert(c *x509.Certificate) *ServingCert {
	names := slices.Clone(c.DNSNames)
	for _, ip := range c.IPAddresses {
		names = append(names, ip.String())
	}
	return &ServingCert{Subject: c.Subject.String(), Issuer: c.Issuer.String(), DNSNames: names, NotAfter: c.NotAfter}
}

// dn prints a distinguished name, "<empty>" when it has none.
func dn(s string) string {
	if s == "" {
		return "<empty>"
	}
	return s
}

// parsePEMCerts returns the certificates of a PEM bundle, skipping what
// does not parse.
func parsePEMCerts(b []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return out
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		if c, err := x509.ParseCertificate(blk.Bytes); err == nil {
			out = append(out, c)
		}
	}
}
