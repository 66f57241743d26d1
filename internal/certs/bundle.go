package certs

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"slices"
	"time"
)

// maxBundle caps the CAs a bundle holds, as upstream (MergeCABundle) does,
// so a record of previous CAs cannot grow it without bound.
const maxBundle = 10

// parseBundle returns the CA certificates of a PEM bundle. Blocks that are
// not certificates, do not parse or are not CAs are skipped: a damaged
// bundle loses only what is damaged, and the still-valid CAs it holds keep
// being trusted.
func parseBundle(data []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for len(data) > 0 {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != pemCertificate {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil || !c.IsCA {
			continue
		}
		out = append(out, c)
	}
	return out
}

// bundle is the trust a CA ConfigMap carries: the current CA first, then
// the previous ones still trusted, newest first (those the CA Secret
// records under vocab.PreviousCABundleKey).
type bundle struct {
	certs []*x509.Certificate
	pem   []byte
	// changeAt is when an old CA leaves the bundle (zero if none is kept).
	changeAt time.Time
}

// mergeBundle computes the bundle for current, given the previously
// trusted CAs. As upstream (components.MergeCABundle): previous CAs are
// sorted newest first; each stays while the CA after it has existed for
// less than overlap and it has not expired; duplicates of the current CA
// are dropped. The output is canonical (each certificate re-encoded from
// its DER), so the same inputs give the same bytes.
func mergeBundle(current *x509.Certificate, previous []*x509.Certificate, overlap time.Duration, now time.Time) bundle {
	var olds []*x509.Certificate
	for _, c := range previous {
		if c.Equal(current) || slices.ContainsFunc(olds, c.Equal) {
			continue
		}
		olds = append(olds, c)
	}
	slices.SortStableFunc(olds, func(a, b *x509.Certificate) int {
		if c := b.NotBefore.Compare(a.NotBefore); c != 0 {
			return c
		}
		return bytes.Compare(a.Raw, b.Raw)
	})
	b := bundle{certs: []*x509.Certificate{current}}
	prev := current
	for _, c := range olds {
		if len(b.certs) == maxBundle {
			break
		}
		until := prev.NotBefore.Add(overlap)
		if !now.Before(until) {
			break
		}
		prev = c
		if !now.Before(c.NotAfter) {
			continue // expired
		}
		b.certs = append(b.certs, c)
		if c.NotAfter.Before(until) {
			until = c.NotAfter
		}
		if b.changeAt.IsZero() || until.Before(b.changeAt) {
			b.changeAt = until
		}
	}
	b.pem = encodeBundle(b.certs)
	return b
}

// encodeBundle is the canonical PEM of certs, in their order.
func encodeBundle(certs []*x509.Certificate) []byte {
	var out []byte
	for _, c := range certs {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: pemCertificate, Bytes: c.Raw})...)
	}
	return out
}

// signer returns the CA of the bundle that signed cert, or nil.
func (b *bundle) signer(cert *x509.Certificate) *x509.Certificate {
	for _, ca := range b.certs {
		if bytes.Equal(cert.RawIssuer, ca.RawSubject) && cert.CheckSignatureFrom(ca) == nil {
			return ca
		}
	}
	return nil
}
