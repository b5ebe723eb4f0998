package server

import (
	"bytes"
	"os"
	"testing"
)

// TestEmbeddedCertIsTestdata: the certificate the binary embeds is the one
// committed in testdata/tls, which clients and scripts take as their root.
func TestEmbeddedCertIsTestdata(t *testing.T) {
	for _, f := range []struct {
		path     string
		embedded []byte
	}{
		{"../testdata/tls/server.pem", testCertPEM},
		{"../testdata/tls/server.key", testKeyPEM},
	} {
		b, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, f.embedded) {
			t.Errorf("%s differs from its embedded copy in server/testcert: remake both with go run ./server/internal/gencert -o testdata/tls -o server/testcert", f.path)
		}
	}
	if _, err := defaultCertificate(); err != nil {
		t.Fatal(err)
	}
}
