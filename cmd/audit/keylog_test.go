package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/backoff-audit/audit/tlsdec"
)

// TestE2EKeyLogWriters: `audit server --keylog` and `audit client --keylog`
// on a goaway retry port write the secrets of the same connections, in
// the NSS format, to files only their owner reads; a key log that was
// there is appended to and made 0600.
func TestE2EKeyLogWriters(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	serverLog, clientLog := filepath.Join(dir, "server.keylog"), filepath.Join(dir, "client.keylog")
	const before = "# a line that was there\n"
	if err := os.WriteFile(clientLog, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "--retry_mode=goaway", "--keylog="+serverLog)
	out, stderr, code := runClient(t, time.Minute, auditBin, append(append([]string{"client"}, ports(s)...),
		"--ca_file="+fixture("tls/server.pem"), "--reissue", "--deadline=500ms", "--quiet", "--keylog="+clientLog)...)
	if code == exitUsage {
		t.Fatalf("audit client exit code %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	secrets := map[string]map[string]string{} // file → "LABEL RANDOM" → secret
	for _, path := range []string{serverLog, clientLog} {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", filepath.Base(path), st.Mode().Perm())
		}
		k, err := tlsdec.ReadKeyLog(path)
		if err != nil {
			t.Fatal(err)
		}
		if k.Skipped != 0 || k.Connections() == 0 {
			t.Errorf("%s: %s; want lines of the format only, of at least one connection", filepath.Base(path), k.Summary())
		}
		b, _ := os.ReadFile(path)
		secrets[path] = map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if f := strings.Fields(line); len(f) == 3 {
				secrets[path][f[0]+" "+f[1]] = f[2]
			}
		}
	}
	if b, _ := os.ReadFile(clientLog); !strings.HasPrefix(string(b), before) {
		t.Errorf("the client's key log lost what it held before:\n%.200s", b)
	}
	// The server logs every connection to its retry port, the client
	// every one it made: the same secrets, but for the last connection,
	// which the client's exit may cut after the server's flight and
	// before the client read it.
	shared := map[string]string{}
	for k := range secrets[clientLog] {
		shared[k] = secrets[serverLog][k]
	}
	if diff := cmp.Diff(secrets[clientLog], shared); diff != "" {
		t.Errorf("secrets by label and random (-client +server)\n%s", diff)
	}
	if missing := len(secrets[serverLog]) - len(secrets[clientLog]); missing > 4 {
		t.Errorf("the server logged %d secrets the client did not, more than one connection's 4", missing)
	}
}

// TestKeyLogUsageErrors: --keylog where no TLS connection could be logged
// is a usage error naming the flags, and nothing is written.
func TestKeyLogUsageErrors(t *testing.T) {
	keylog := filepath.Join(t.TempDir(), "keys.log")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"server, a mode without TLS", []string{"server", "--retry_mode=close", "--keylog=" + keylog},
			"--keylog: --retry_mode close makes no TLS connection (only settings-close, goaway and outage do)"},
		{"live, a mode without TLS", []string{"live", "--retry_mode=hang", "--keylog=" + keylog},
			"--keylog: --retry_mode hang makes no TLS connection"},
		{"live --attach", []string{"live", "--attach", "--retry_port=1", "--retry_mode=goaway", "--keylog=" + keylog},
			"--keylog with --attach: the server that would write it runs elsewhere"},
		{"client, plaintext", []string{"client", "--server_control_port=1", "--server_retry_port=2", "--use_tls=false", "--keylog=" + keylog},
			"--keylog " + keylog + ": logs TLS secrets, and the retry channel is plaintext (--use_tls)"},
		{"client, a folder that is not there", []string{"client", "--server_control_port=1", "--server_retry_port=2", "--keylog=/nonexistent/keys.log"},
			"--keylog: open /nonexistent/keys.log: no such file or directory"},
		{"h2, a key log that is not there", []string{"h2", "--keylog", "/nonexistent/keys.log", fixture("tls-grpcgo.pcap.gz")},
			"--keylog: open /nonexistent/keys.log: no such file or directory"},
		{"pcap, a key log that is not there", []string{"pcap", "--keylog", "/nonexistent/keys.log", fixture("tls-grpcgo.pcap.gz")},
			"--keylog: open /nonexistent/keys.log: no such file or directory"},
		{"pcap, standard input", []string{"pcap", "--keylog", fixture("tls-grpcgo.keylog"), "-"},
			"--keylog " + fixture("tls-grpcgo.keylog") + ": not with standard input (-)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runAudit(t, tt.args...)
			if code != exitUsage || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, exitUsage, tt.want)
			}
			if _, err := os.Stat(keylog); err == nil {
				t.Errorf("%s was written", keylog)
			}
		})
	}
}

// TestKeyLogHelp: every writer's help says the file holds secrets.
func TestKeyLogHelp(t *testing.T) {
	for _, verb := range []string{"server", "client", "live"} {
		t.Run(verb, func(t *testing.T) {
			_, stdout, _ := runAudit(t, verb, "--help")
			if !strings.Contains(stdout, "--keylog FILE") || !strings.Contains(stdout, "it holds secrets, mode 0600") {
				t.Errorf("audit %s --help does not say --keylog's file holds secrets:\n%s", verb, stdout)
			}
		})
	}
	_, stdout, _ := runAudit(t, "h2", "--help")
	if !strings.Contains(stdout, "--keylog FILE") || !strings.Contains(stdout, "NODE_OPTIONS=--tls-keylog=FILE") {
		t.Errorf("audit h2 --help does not explain --keylog:\n%s", stdout)
	}
}
