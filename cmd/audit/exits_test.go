package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestExitCodes: audit pcap and audit h2 exit 0 when every verdict
// passed, 1 when one failed, 2 when nothing was judged, the report on
// stdout and why on stderr; the flags that choose what is judged (ports,
// peers, the policies) reach it.
func TestExitCodes(t *testing.T) {
	maxAge, retries := fixture("h2/max-age.pcap"), fixture("h2/retry-unavailable.pcap")
	shortRetry := []string{"h2", "--retry_initial_backoff", "20ms", "--retry_max_backoff", "50ms", retries}
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string // in stdout
		stderr string // in stderr
	}{
		{name: "pcap: port auto-detected", args: []string{"pcap", fixture("ipv4-ether.pcap")}, code: exitOK, stdout: "port 50052:"},
		{name: "pcap: explicit port", args: []string{"pcap", "--port", "50052", fixture("two-ports.pcap")}, code: exitOK, stdout: "PASS: 1 peer"},
		{name: "pcap: peer filter", args: []string{"pcap", "--peer", "127.0.0.2", fixture("mixed.pcapng")}, code: exitOK, stdout: "PASS: 1 peer"},
		{name: "pcap: too soon fails", args: []string{"pcap", fixture("too-soon.pcap")}, code: exitFail, stdout: "interval 3: 1500 ms is early"},
		{name: "pcap: uncapped client fails a 2s cap", args: []string{"pcap", "--max_backoff", "2s", fixture("no-cap.pcap")}, code: exitFail, stdout: "interval 3:"},
		{name: "pcap: port with no SYNs", args: []string{"pcap", "--port", "443", fixture("ipv4-ether.pcap")}, code: exitUsage,
			stderr: "nothing judged: no connection attempt to port 443"},
		{name: "h2: clean", args: []string{"h2", maxAge}, code: exitOK, stdout: "verdict: no problem found"},
		{name: "h2: by port", args: []string{"h2", "--port", "50051", maxAge}, code: exitOK, stdout: "3 connections"},
		{name: "h2: a retry flag asks for the check", args: shortRetry, code: exitFail, stderr: "problem"},
		{name: "h2: a tolerance that widens every window", args: append(shortRetry, "--retry_tolerance", "2s"), code: exitOK},
		{name: "h2: another port", args: []string{"h2", "--port", "9", maxAge}, code: exitUsage,
			stdout: "verdict: nothing judged: no connection to port 9 in the capture", stderr: "nothing judged: no connection to port 9"},
		{name: "h2: SYNs only", args: []string{"h2", fixture("real-grpc-go.pcap")}, code: exitUsage,
			stderr: "nothing judged: no HTTP/2 or TLS connection in the capture (--port names the port to decode when it is not detected)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runAudit(t, tt.args...)
			if code != tt.code || !strings.Contains(stdout, tt.stdout) || !strings.Contains(stderr, tt.stderr) {
				t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s\nwant %d, %q in stdout, %q in stderr", code, stdout, stderr, tt.code, tt.stdout, tt.stderr)
			}
		})
	}
}

// TestH2Golden: `audit h2` prints the golden reports of the committed
// MaxConnectionAge capture (made and checked in flows, TestMaxAgeGolden).
func TestH2Golden(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			code, stdout, stderr := runAudit(t, "h2", "--format", format, filepath.Join("testdata", "h2", "max-age.pcap"))
			if code != exitOK {
				t.Fatalf("exit %d, want %d; stderr: %s", code, exitOK, stderr)
			}
			golden := map[string]string{"text": "max-age.txt", "json": "max-age.json"}[format]
			want, err := os.ReadFile(filepath.Join("testdata", "h2", golden))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), stdout); diff != "" {
				t.Errorf("(-golden +got):\n%s", diff)
			}
		})
	}
}

// TestClientExitCodes: `audit client` against `audit server`, both in
// process, exits 0 when both verdicts pass and 1 when one fails, the
// report on stdout; progress goes to stderr, a line when the retry
// channel's state changes and one every 5 s while it holds, unless
// --quiet; the retry channel's flags reach grpc-go, as the report's first
// lines say (a plaintext client of the interop test's retry port passes
// too: the port closes every connection before either side speaks).
func TestClientExitCodes(t *testing.T) {
	progress := regexp.MustCompile(`(?m)^retry channel (still )?([A-Z_]+) after (\d+\.\d) s of 6 s$`)
	tests := []struct {
		name     string
		args     []string
		code     int
		stdout   []string // in stdout; CONTROL and RETRY are the server's ports
		stderr   string   // in stderr
		progress bool     // stderr has lines of both kinds
		quiet    bool     // stderr is empty
	}{
		{name: "passed, with progress", args: []string{"--max_reconnect_backoff_ms=2000", "--deadline=6s"}, code: exitOK,
			stdout: []string{"server: passed", "own check: passed"}, progress: true},
		{name: "quiet, plaintext, a short connect timeout", args: []string{"--max_reconnect_backoff_ms=2000", "--deadline=2500ms", "--quiet",
			"--use_tls=false", "--min_connect_timeout_ms=2500", "--reissue"}, code: exitOK, quiet: true,
			stdout: []string{"control 127.0.0.1:CONTROL, retry 127.0.0.1:RETRY (plaintext)\n", ", min connect timeout 2.5s\n", "retry RPC: DeadlineExceeded after 2.5"}},
		{name: "a wrong policy", args: []string{"--max_reconnect_backoff_ms=2000", "--initial_backoff_ms=300", "--deadline=3s"}, code: exitFail,
			stderr: "server says failed; interval 1: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			control, retry := runningServer(t)
			code, stdout, stderr := runAudit(t, append(append([]string{"client"}, ports(control, retry)...), tt.args...)...)
			if code != tt.code || !strings.Contains(stderr, tt.stderr) {
				t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s\nwant %d and %q in stderr", code, stdout, stderr, tt.code, tt.stderr)
			}
			for _, w := range tt.stdout {
				if w = strings.NewReplacer("CONTROL", control, "RETRY", retry).Replace(w); !strings.Contains(stdout, w) {
					t.Errorf("the report lacks %q:\n%s", w, stdout)
				}
			}
			if strings.Contains(stdout, "retry channel") || tt.quiet && stderr != "" {
				t.Errorf("progress on stdout, or on stderr with --quiet:\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
			}
			changes, still := 0, 0
			for _, m := range progress.FindAllStringSubmatch(stderr, -1) {
				if m[1] == "" {
					changes++
				} else {
					still++
				}
			}
			if tt.progress && (changes == 0 || still == 0) {
				t.Errorf("%d state-change and %d still lines on stderr, want both:\n%s", changes, still, stderr)
			}
		})
	}
}

// TestServerExitCodes: `audit server` exits 0 on interrupt
// (runningServer), and 2, printing no port, when it cannot start: a
// record another server holds.
func TestServerExitCodes(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "run.jsonl")
	runningServer(t, "--record", rec)
	code, stdout, stderr := runAudit(t, "server", "--control_port=0", "--retry_port=0", "--record", rec)
	want := fmt.Sprintf("record file %s is locked by process %d", rec, os.Getpid())
	if code != exitUsage || !strings.Contains(stderr, want) || stdout != "" {
		t.Errorf("a second server on the record: exit %d, stdout %q, stderr %q; want %d, no ports, and %q", code, stdout, stderr, exitUsage, want)
	}
}
