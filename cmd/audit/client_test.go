package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/backoff-audit/audit/internal/testutil"
)

func TestClientUsageErrors(t *testing.T) {
	closed := strconv.Itoa(int(testutil.ClosedPort(t)))
	tests := []struct {
		name string
		args []string
		want string // in stderr
	}{
		{name: "no ports", args: []string{"client"}, want: "server_control_port"},
		{name: "bad port", args: []string{"client", "--server_control_port=70000", "--server_retry_port=1"}, want: "--server_control_port 70000: not a port (1–65535)"},
		{name: "zero initial backoff", args: []string{"client", "--server_control_port=1", "--server_retry_port=1", "--initial_backoff_ms=0"}, want: "--initial_backoff_ms 0"},
		{name: "negative connect timeout", args: []string{"client", "--server_control_port=1", "--server_retry_port=1", "--min_connect_timeout_ms=-5"}, want: "--min_connect_timeout_ms -5"},
		{name: "roots without TLS", args: []string{"client", "--server_control_port=1", "--server_retry_port=1", "--use_tls=false", "--ca_file=ca.pem"},
			want: "--ca_file ca.pem: trusts roots for TLS, and the retry channel is plaintext (--use_tls)"},
		{
			// Read before Start: no session is opened for a client that cannot run.
			name: "unreadable roots",
			args: []string{"client", "--server_host=127.0.0.1", "--server_control_port=" + closed, "--server_retry_port=1", "--ca_file=/nonexistent/ca.pem"},
			want: "--ca_file /nonexistent/ca.pem: open /nonexistent/ca.pem",
		},
		{
			name: "endless roots", args: []string{"client", "--server_control_port=1", "--server_retry_port=1", "--ca_file=/dev/zero"},
			want: "--ca_file /dev/zero: more than 1048576 bytes: not a certificate or key file",
		},
		{
			name: "unreachable control port",
			args: []string{"client", "--server_host=127.0.0.1", "--server_control_port=" + closed, "--server_retry_port=1", "--deadline=5s"},
			want: "control port 127.0.0.1:" + closed + " unreachable",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runAudit(t, tt.args...)
			if code != exitUsage || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, exitUsage, tt.want)
			}
		})
	}
}

// progressLine is a line of `audit client`'s progress while the retry RPC
// waits, against a 6 s deadline.
var progressLine = regexp.MustCompile(`(?m)^retry channel (still )?([A-Z_]+) after (\d+\.\d) s of 6 s$`)

// TestE2EClientProgress runs `audit client` against `audit server` with a
// deadline past the first 5 s of silence: stderr shows the retry channel's
// state when it changes and again while it holds, and the report on stdout
// has none of it.
func TestE2EClientProgress(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	out, stderr, code := runClient(t, time.Minute, auditBin,
		append(append([]string{"client"}, ports(s)...), "--max_reconnect_backoff_ms=2000", "--deadline=6s")...)
	if code != exitOK {
		t.Fatalf("audit client exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitOK, out, stderr)
	}
	t.Logf("audit client stderr:\n%s", stderr)
	var changes, still int
	for _, m := range progressLine.FindAllStringSubmatch(stderr, -1) {
		if m[1] == "" {
			changes++
		} else {
			still++
		}
	}
	if changes == 0 || still == 0 {
		t.Errorf("%d state-change and %d still lines on stderr, want both:\n%s", changes, still, stderr)
	}
	if strings.Contains(out, "retry channel") {
		t.Errorf("progress on stdout:\n%s", out)
	}
}

// TestE2EClientQuiet: --quiet leaves stderr empty on a passing run.
func TestE2EClientQuiet(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	out, stderr, code := runClient(t, time.Minute, auditBin,
		append(append([]string{"client"}, ports(s)...), "--max_reconnect_backoff_ms=2000", "--deadline=3s", "--quiet")...)
	if code != exitOK {
		t.Fatalf("audit client exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitOK, out, stderr)
	}
	if stderr != "" {
		t.Errorf("stderr with --quiet: %q, want nothing", stderr)
	}
}

// TestE2EClientRetryChannelFlags: --use_tls=false and
// --min_connect_timeout_ms reach grpc-go, as the report's first two lines
// say, and a plaintext client of the interop test's retry port still
// passes (the port closes every connection before either side speaks).
// --reissue changes nothing there: the one retry RPC can only end at its
// deadline.
func TestE2EClientRetryChannelFlags(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	out, stderr, code := runClient(t, time.Minute, auditBin,
		append(append([]string{"client"}, ports(s)...), "--max_reconnect_backoff_ms=2000", "--deadline=2500ms", "--quiet",
			"--use_tls=false", "--min_connect_timeout_ms=2500", "--reissue")...)
	if code != exitOK {
		t.Fatalf("audit client exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitOK, out, stderr)
	}
	for _, want := range []string{
		"control 127.0.0.1:" + strconv.Itoa(s.Control) + ", retry 127.0.0.1:" + strconv.Itoa(s.Retry) + " (plaintext)\n",
		", min connect timeout 2.5s\n",
		"retry RPC: DeadlineExceeded after 2.5",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}
