package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestCertificate: what generate makes, and the committed pair in
// testdata/tls, is a P-256 certificate that is its own CA, valid until
// 2126, and verifies for every name an interop client asks for.
func TestCertificate(t *testing.T) {
	certPEM, keyPEM, err := generate()
	if err != nil {
		t.Fatal(err)
	}
	committedCert, err := os.ReadFile("../../../testdata/tls/server.pem")
	if err != nil {
		t.Fatal(err)
	}
	committedKey, err := os.ReadFile("../../../testdata/tls/server.key")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		cert, key []byte
	}{
		{name: "generated", cert: certPEM, key: keyPEM},
		{name: "testdata/tls", cert: committedCert, key: committedKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pair, err := tls.X509KeyPair(tt.cert, tt.key)
			if err != nil {
				t.Fatalf("key pair: %v", err)
			}
			c := pair.Leaf
			if pub, ok := c.PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve != elliptic.P256() {
				t.Errorf("public key %T, want ECDSA P-256", c.PublicKey)
			}
			if !c.IsCA {
				t.Error("not a CA")
			}
			if y := c.NotAfter.Year(); y != 2126 {
				t.Errorf("valid until %v, want 2126", c.NotAfter)
			}
			roots := x509.NewCertPool()
			roots.AddCert(c)
			for _, name := range []string{"localhost", "foo.test.google.fr", "bar.test.google.fr", "127.0.0.1", "::1"} {
				opts := x509.VerifyOptions{DNSName: name, Roots: roots, CurrentTime: time.Date(2125, 6, 1, 0, 0, 0, 0, time.UTC)}
				if _, err := c.Verify(opts); err != nil {
					t.Errorf("verify for %s: %v", name, err)
				}
			}
			if _, err := c.Verify(x509.VerifyOptions{DNSName: "example.com", Roots: roots}); err == nil {
				t.Error("verifies for example.com")
			}
		})
	}
}

// TestWrite: every folder gets the same pair.
func TestWrite(t *testing.T) {
	certPEM, keyPEM, err := generate()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b", "c")
	for _, d := range []string{a, b} {
		if err := write(d, certPEM, keyPEM); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"server.pem", "server.key"} {
		x, err := os.ReadFile(filepath.Join(a, f))
		if err != nil {
			t.Fatal(err)
		}
		y, err := os.ReadFile(filepath.Join(b, f))
		if err != nil {
			t.Fatal(err)
		}
		if string(x) != string(y) {
			t.Errorf("%s differs between the folders", f)
		}
	}
}
