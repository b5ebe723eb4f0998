package flows_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/backoff-audit/audit/flows"
	"github.com/backoff-audit/audit/internal/testutil"
)

// The grpc-js TLS 1.2 capture and its key log (testdata/README.md, "TLS
// captures"): 24 connections to a goaway retry port, relative to the
// repository.
const (
	tlsCapture = "testdata/tls-grpcjs-tls12.pcap.gz"
	tlsKeylog  = "testdata/tls-grpcjs-tls12.keylog"
)

// TestH2KeyLogGolden: `audit h2 --keylog` on a real TLS capture, text
// against its golden file (go test ./flows -run TestH2KeyLogGolden -update
// rewrites it), and the lines that matter by pattern.
func TestH2KeyLogGolden(t *testing.T) {
	t.Chdir("..")
	out, _ := audit(t, []string{tlsCapture}, flows.AuditOptions{Format: "text", KeyLog: tlsKeylog})
	testutil.Golden(t, filepath.Join("testdata", "tls-grpcjs-tls12.txt"), []byte(out), *update)
	for _, p := range []string{
		`(?m)^24 connections in testdata/tls-grpcjs-tls12.pcap.gz: 24 decrypted with the key log, 0 encrypted, 0 damaged$`,
		`(?m)^key log testdata/tls-grpcjs-tls12.keylog: 24 connections \(24 entries\)$`,
	} {
		if !regexp.MustCompile(p).MatchString(out) {
			t.Errorf("text lacks a line matching %s:\n%s", p, out)
		}
	}
	for _, p := range []string{
		`(?m)^  TLS 1\.2 TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256: decrypted with the key log, \d+ records$`,
		`(?m)^  [\dT:.Z-]+ server GOAWAY NO_ERROR last stream 0 at age `,
	} {
		if n := len(regexp.MustCompile(p).FindAllString(out, -1)); n != 24 {
			t.Errorf("%d lines match %s, want one per connection, 24", n, p)
		}
	}
}

// TestH2KeyLog: what the report says of TLS connections with a key log that
// decrypts them, without one, with one that does not, and with a key log
// that cannot be read.
func TestH2KeyLog(t *testing.T) {
	t.Chdir("..")
	dir := t.TempDir()
	keys, err := os.ReadFile(tlsKeylog)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	garbage := write("garbage.keylog", append([]byte("a line of no format\nCLIENT_RANDOM 00 11\n"), keys...))
	// Every master secret with its first hex digit changed.
	wrong := write("wrong.keylog", regexp.MustCompile(`(?m)^(CLIENT_RANDOM \w+ )(.)`).ReplaceAllFunc(keys, func(b []byte) []byte {
		c := b[len(b)-1]
		b[len(b)-1] = map[bool]byte{true: '1', false: '0'}[c == '0']
		return b
	}))
	tests := []struct {
		name   string
		keylog string
		text   []string // patterns, each on a line of the text
		err    string   // Audit's error
		// notDecoded counts the connections the text says are not decoded.
		notDecoded int
	}{
		{name: "without a key log",
			text: []string{`^24 connections in .*: 24 encrypted, 0 damaged$`, `^  encrypted \(TLS\): not decoded$`}},
		{name: "lines not of the format", keylog: garbage,
			text: []string{`^24 connections in .*: 24 decrypted with the key log, 0 encrypted, 0 damaged$`,
				`^key log .*garbage.keylog: 24 connections \(24 entries\), 2 lines skipped, not of the key log format \(first: line 1\)$`}},
		{name: "another capture's key log", keylog: "testdata/tls-grpcgo.keylog",
			text: []string{`^24 connections in .*: 0 decrypted with the key log, 24 encrypted, 0 damaged$`,
				`^  encrypted \(TLS 1\.2 TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256\): not decoded: no key: the key log has no CLIENT_RANDOM line for client random [0-9a-f]{64}$`,
				`^  encrypted +#0 +connection 127\.0\.0\.1:\d+ → 127\.0\.0\.1:\d+ is TLS: not decoded: no key: `}, notDecoded: 24},
		{name: "wrong secrets", keylog: wrong,
			text:       []string{`^  encrypted \(TLS 1\.2 [A-Z0-9_]+\): not decoded: the key log's secret does not decrypt it: the (client|server)'s first encrypted record does not authenticate under the key log's secret for client random [0-9a-f]{64}$`},
			notDecoded: 24},
		{name: "missing key log", keylog: filepath.Join(dir, "none.keylog"), err: "KeyLog: open " + filepath.Join(dir, "none.keylog") + ": no such file or directory"},
		{name: "a directory", keylog: dir, err: "KeyLog: key log " + dir + ": read line 1: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := flows.Audit([]string{tlsCapture}, flows.AuditOptions{Format: "text", KeyLog: tt.keylog})
			if tt.err != "" || err != nil {
				if err == nil || !strings.HasPrefix(err.Error(), tt.err) || tt.err == "" {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			var b strings.Builder
			if err := rep.WriteText(&b); err != nil {
				t.Fatal(err)
			}
			out := b.String()
			for _, p := range tt.text {
				if !regexp.MustCompile("(?m)" + p).MatchString(out) {
					t.Errorf("text lacks a line matching %s:\n%s", p, out)
				}
			}
			if n := strings.Count(out, "): not decoded: "); n != tt.notDecoded {
				t.Errorf("%d connections not decoded, want %d", n, tt.notDecoded)
			}
		})
	}
}

// TestH2KeyLogJSON: each connection's "tls" member and the report's
// "keylog".
func TestH2KeyLogJSON(t *testing.T) {
	t.Chdir("..")
	out, _ := audit(t, []string{tlsCapture}, flows.AuditOptions{Format: "json", KeyLog: tlsKeylog})
	var rep struct {
		Connections []struct {
			Encrypted bool `json:"encrypted"`
			TLS       struct {
				Version      string `json:"version"`
				ClientRandom string `json:"client_random"`
				Decoded      bool   `json:"decoded"`
				WhyNot       string `json:"why_not"`
			} `json:"tls"`
		} `json:"connections"`
		KeyLog struct {
			Lines, Entries, Skipped int
		} `json:"keylog"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Connections) != 24 {
		t.Fatalf("%d connections, want 24", len(rep.Connections))
	}
	keys, err := os.ReadFile(tlsKeylog)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range rep.Connections {
		if c.Encrypted || !c.TLS.Decoded || c.TLS.WhyNot != "" || c.TLS.Version != "TLS 1.2" || !strings.Contains(string(keys), " "+c.TLS.ClientRandom+" ") {
			t.Errorf("connection %d: %+v, want TLS 1.2 decrypted, its random in the key log", i, c)
		}
	}
	if diff := cmp.Diff(struct{ Lines, Entries, Skipped int }{24, 24, 0}, rep.KeyLog); diff != "" {
		t.Errorf("keylog (-want +got)\n%s", diff)
	}
}
