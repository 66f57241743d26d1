package framework

import (
	"crypto/x509"
	"encoding/pem"
)

// CertSerial is the serial number of the first certificate of a PEM
// bundle, "" if it holds none.
func CertSerial(pemBytes []byte) string {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return ""
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return ""
	}
	return cert.SerialNumber.String()
}
