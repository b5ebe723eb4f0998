package tlsdec

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// opensslFixture is a connection of `openssl s_client` and `s_server`
// that tlsdec/internal/opensslgen recorded (testdata/README.md, "TLS
// fixtures").
type opensslFixture struct {
	Name   string `json:"name"`
	Suite  string `json:"suite"`
	Keylog string `json:"keylog"`
	Chunks []struct {
		Dir  int    `json:"dir"`
		Data []byte `json:"data"`
	} `json:"chunks"`
	ClientData string `json:"client_data"`
	ServerData string `json:"server_data"`
}

// TestOpenSSLSessions decrypts OpenSSL's connections in the TLS 1.3
// suites crypto/tls never chooses, key updates of both sides included,
// whole and cut into pieces: the data each side was given comes out, and
// every key update is followed. CCM is not an AEAD this package opens.
func TestOpenSSLSessions(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "openssl-*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixture in testdata (%v): go run ./tlsdec/internal/opensslgen", err)
	}
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var fx opensslFixture
		if err := json.Unmarshal(b, &fx); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		t.Run(fx.Name, func(t *testing.T) {
			var rec recording
			for _, c := range fx.Chunks {
				rec.chunks = append(rec.chunks, chunk{Direction(c.Dir), c.Data})
			}
			keys := mustKeys(t, []byte(fx.Keylog))
			if keys.Skipped != 0 {
				t.Errorf("OpenSSL's key log: %d lines skipped, first line %d", keys.Skipped, keys.FirstSkipped)
			}
			type result struct {
				Version, Suite, Why string
				KeyUpdates          int
				Client, Server      string
			}
			// OpenSSL logs the secret of each key update the client made
			// or saw.
			updates := strings.Count(fx.Keylog, "_TRAFFIC_SECRET_N ")
			want := result{Version: "TLS 1.3", Suite: fx.Suite, KeyUpdates: updates, Client: fx.ClientData, Server: fx.ServerData}
			if strings.Contains(fx.Suite, "CCM") {
				want = result{Version: "TLS 1.3", Suite: fx.Suite, Why: WhyUnsupportedSuite}
			}
			for _, cut := range []int{0, 1, 3, 100} {
				got := decode(rec, keys, cut)
				r := result{got.Status.Version, got.Status.Suite, got.Status.Why, got.Status.KeyUpdates, string(got.Data[0]), string(got.Data[1])}
				if diff := cmp.Diff(want, r); diff != "" {
					t.Errorf("cut %d: (-want +got)\n%s\nstatus %+v", cut, diff, got.Status)
				}
			}
		})
	}
}
