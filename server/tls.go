package server

import (
	"crypto/tls"
	_ "embed"
	"fmt"
)

// The committed test certificate (testdata/README.md, "Test certificate"):
// the retry port's TLS modes present it unless Config.TLSCert names
// another. server/testcert is a copy of testdata/tls, which
// TestEmbeddedCertIsTestdata keeps identical.
var (
	//go:embed testcert/server.pem
	testCertPEM []byte
	//go:embed testcert/server.key
	testKeyPEM []byte
)

// defaultCertificate returns the committed test certificate: self-signed, its
// own CA, for localhost, foo.test.google.fr, *.test.google.fr, 127.0.0.1
// and ::1. A client trusts it by taking testdata/tls/server.pem as its root.
func defaultCertificate() (tls.Certificate, error) {
	c, err := tls.X509KeyPair(testCertPEM, testKeyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("embedded test certificate: %w", err)
	}
	return c, nil
}
