package server

import (
	"crypto/tls"
	_ "embed"
	"fmt"
	"io"
	"net"

	"github.com/backoff-audit/audit/internal/field"
	"golang.org/x/net/http2"

	"github.com/backoff-audit/audit/internal/infile"
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

// LoadKeyPair reads the certificate and key (PEM) a TLS mode presents, for
// Config.TLSCert: nil when both paths are empty (the committed test
// certificate). Its error is a field.Error of Flags.TLSCert or TLSKey: the
// one given alone, or the certificate, with the key, when they do not load.
// Each file is read up to infile.MaxSmall bytes: a longer one is an error
// naming its field.
func LoadKeyPair(certFile, keyFile string) (*tls.Certificate, error) {
	switch {
	case certFile == "" && keyFile == "":
		return nil, nil
	case keyFile == "":
		return nil, field.Errorf("TLSCert", certFile, "needs %s: give both or neither", field.Name("TLSKey"))
	case certFile == "":
		return nil, field.Errorf("TLSKey", keyFile, "needs %s: give both or neither", field.Name("TLSCert"))
	}
	certPEM, err := infile.ReadSmall(certFile)
	if err != nil {
		return nil, field.Errorf("TLSCert", certFile, "%w", err)
	}
	keyPEM, err := infile.ReadSmall(keyFile)
	if err != nil {
		return nil, field.Errorf("TLSKey", keyFile, "%w", err)
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, field.Errorf("TLSCert", certFile, "with %s %s: %w", field.Name("TLSKey"), keyFile, err)
	}
	return &c, nil
}

// h2Exchange is the server's side of a connection of the settings-close
// and goaway modes (docs/spec.md §7.1): the TLS handshake with ALPN h2, the
// client's HTTP/2 preface read, the server's SETTINGS frame written, then
// for goaway a GOAWAY (last stream 0, NO_ERROR); then sent is called, and
// the close begins. c's deadline bounds it all; the caller closes c. An
// error after sent is the close's, and is not returned.
func h2Exchange(c net.Conn, conf *tls.Config, goaway bool, sent func()) error {
	tc := tls.Server(c, conf)
	if err := tc.Handshake(); err != nil {
		return fmt.Errorf("tls handshake: %w", err)
	}
	if p := tc.ConnectionState().NegotiatedProtocol; p != http2.NextProtoTLS {
		return fmt.Errorf("tls handshake: the client did not offer ALPN %s (negotiated %q)", http2.NextProtoTLS, p)
	}
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(tc, preface); err != nil {
		return fmt.Errorf("read the client's HTTP/2 preface: %w", err)
	}
	if string(preface) != http2.ClientPreface {
		return fmt.Errorf("read the client's HTTP/2 preface: got %q", preface)
	}
	fr := http2.NewFramer(tc, tc)
	if err := fr.WriteSettings(); err != nil {
		return fmt.Errorf("write SETTINGS: %w", err)
	}
	if goaway {
		if err := fr.WriteGoAway(0, http2.ErrCodeNo, nil); err != nil {
			return fmt.Errorf("write GOAWAY: %w", err)
		}
	}
	sent()
	// Closing a socket with unread data in it (the client's SETTINGS, at
	// least) sends a reset, which may destroy the frames just written
	// before the client reads them. So: close_notify, FIN, and read what
	// the client still sends until it closes too or the deadline passes.
	if tc.CloseWrite() == nil {
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		io.Copy(io.Discard, c)
	}
	return nil
}
