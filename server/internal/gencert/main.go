// Command gencert writes the test certificate of the retry port's TLS modes
// (settings-close and goaway, docs/spec.md §7.1): a self-signed ECDSA P-256
// certificate that is its own CA, valid until 2126, for the names a client
// of the interop test asks for (docs/spec.md §2.3: foo.test.google.fr)
// and for loopback.
//
//	go run ./server/internal/gencert -o testdata/tls -o server/testcert
//
// writes server.pem (the certificate) and server.key (its PKCS #8 key) into
// each folder given; every folder gets the same pair. A new run makes a new
// key: the committed pair is the one testdata/README.md describes, and
// server's tests hold its embedded copy (server/testcert) to testdata/tls.
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// The certificate's names and validity.
var (
	dnsNames  = []string{"localhost", "foo.test.google.fr", "*.test.google.fr"}
	ipAddrs   = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	notBefore = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	notAfter  = time.Date(2126, 1, 1, 0, 0, 0, 0, time.UTC)
)

func main() {
	var dirs []string
	flag.Func("o", "folder to write server.pem and server.key into (may be repeated)", func(s string) error {
		dirs = append(dirs, s)
		return nil
	})
	flag.Parse()
	if len(dirs) == 0 || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: gencert -o DIR [-o DIR ...]")
		os.Exit(2)
	}
	certPEM, keyPEM, err := generate()
	if err != nil {
		fmt.Fprintf(os.Stderr, "gencert: %v\n", err)
		os.Exit(1)
	}
	for _, d := range dirs {
		if err := write(d, certPEM, keyPEM); err != nil {
			fmt.Fprintf(os.Stderr, "gencert: %v\n", err)
			os.Exit(1)
		}
		fmt.Printf("wrote %s and %s\n", filepath.Join(d, "server.pem"), filepath.Join(d, "server.key"))
	}
}

// generate makes a new key and its self-signed certificate, both PEM.
func generate() (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, fmt.Errorf("draw serial number: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{Organization: []string{"backoff-audit test"}, CommonName: "audit test server"},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		// Its own CA: a client trusts it by taking server.pem as its root.
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:              dnsNames,
		IPAddresses:           ipAddrs,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("create certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

func write(dir string, certPEM, keyPEM []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	// The key is a test key, committed for anyone to read: 0644 like the
	// rest of the tree.
	return errors.Join(
		os.WriteFile(filepath.Join(dir, "server.pem"), certPEM, 0o644),
		os.WriteFile(filepath.Join(dir, "server.key"), keyPEM, 0o644),
	)
}
