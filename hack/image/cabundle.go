package main

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"runtime/debug"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// CABundleModule is the Go module the CA bundle comes from: Mozilla's NSS
// root store as the Go project packages it, pinned by this module's go.sum,
// so the bundle (and the image digest) changes only when go.mod does.
const CABundleModule = "golang.org/x/crypto/x509roots/fallback"

// CA is the image's CA bundle.
type CA struct {
	// PEM is /etc/ssl/certs/ca-certificates.crt.
	PEM []byte
	// Roots is the number of certificates in it.
	Roots int
	// Skipped counts the roots left out: those NSS trusts only for
	// certificates issued before a date, which a PEM bundle cannot say.
	Skipped int
	// Version is CABundleModule's version.
	Version string
}

// CABundle writes the unconstrained roots of the NSS store as PEM, in the
// store's order.
func CABundle() (CA, error) {
	var ca CA
	var buf bytes.Buffer
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			ca.Skipped++
			continue
		}
		if _, err := x509.ParseCertificate(r.Certificate); err != nil {
			return ca, fmt.Errorf("CA bundle: %w", err)
		}
		if err := pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate}); err != nil {
			return ca, err
		}
		ca.Roots++
	}
	if ca.Roots == 0 {
		return ca, fmt.Errorf("CA bundle: %s has no unconstrained roots", CABundleModule)
	}
	ca.PEM = buf.Bytes()
	ca.Version = moduleVersion(CABundleModule)
	return ca, nil
}

// moduleVersion is the version of a module this program was built with.
func moduleVersion(path string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, d := range bi.Deps {
		if d.Path == path {
			if d.Replace != nil {
				return d.Replace.Version
			}
			return d.Version
		}
	}
	return ""
}
