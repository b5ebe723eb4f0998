package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/backoff-audit/audit/internal/testutil"
)

// The client's retry policy in testdata/h2/retry-unavailable.pcap
// (testdata/README.md, "HTTP/2 captures").
var grpcGoRetryFlags = []string{"--retry-max-attempts", "5", "--retry-initial-backoff", "100ms", "--retry-max-backoff", "1s", "--retry-multiplier", "2"}

// TestH2GRPCGoCaptures: `audit h2` on the real grpc-go keepalive and retry
// captures, text and JSON, against golden files (-update rewrites them).
// Each case also holds, by pattern, the lines that matter, so that a
// failure names what changed, not only that a byte did.
func TestH2GRPCGoCaptures(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	const retryCapture = "testdata/h2/retry-unavailable.pcap"
	tests := []struct {
		name   string
		args   []string
		code   int
		golden string   // testdata/h2/GOLDEN.txt and GOLDEN.json
		want   []string // patterns the text must match, each on a line
		count  string   // a pattern the text must match …
		times  int      // … this many times
	}{
		{
			name: "keepalive", args: []string{"testdata/h2/keepalive-too-many-pings.pcap"}, code: exitFail,
			golden: "keepalive-too-many-pings",
			want: []string{
				`(?m)^  client PINGs: 3 and 1 BDP probe, 4 ACKed, interval min 10\.\d+s, median 10\.\d+s$`,
				`(?m)^! too_many_pings +#0 +keepalive pings every 10 s; the server answered GOAWAY ENHANCE_YOUR_CALM too_many_pings after 3$`,
				`(?m)^  goaway_age +#0 +the server's GOAWAY ENHANCE_YOUR_CALM \(too_many_pings\) at connection age ≈ 30 s, `,
				`(?m)^  reconnect +#0 +after the server's GOAWAY ENHANCE_YOUR_CALM on connection 0, the client's next connection \(1\) came [\d.]+ ms later$`,
			},
		},
		{
			// The policy the client had: every delay in grpc-go's b·[0.8, 1.2].
			name: "retries, the client's policy", args: append(grpcGoRetryFlags, retryCapture), code: exitOK,
			golden: "retry-unavailable",
			want: []string{
				`(?m)^  retry +all +/grpc.testing.ReconnectService/Start from 127.0.0.1: 2 attempts \(UNAVAILABLE, OK\), delays \d+ ms; delays \d+ ms \(b 100 ms\): within b·U\(0.8, 1.2\) \(A6 as revised\)`,
				`(?m)^  retry +all +[^ ]+ from 127.0.0.1: 5 attempts \(UNAVAILABLE, UNAVAILABLE, UNAVAILABLE, UNAVAILABLE, UNAVAILABLE\), delays .*\(b 100 ms\), .*\(b 200 ms\), .*\(b 400 ms\), .*\(b 800 ms\): within b·U\(0.8, 1.2\) \(A6 as revised\)`,
				`(?m)^verdict: no problem found$`,
			},
			count: `(?m)^  retry +all +.*: within b·U\(0.8, 1.2\) \(A6 as revised\)`, times: 5,
		},
		{
			// Attempts 4 and 5 of the client's policy are beyond 3.
			name: "retries, maxAttempts 3", args: append(append([]string(nil), grpcGoRetryFlags...), "--retry-max-attempts", "3", retryCapture), code: exitFail,
			golden: "retry-unavailable-max-attempts-3",
			want: []string{
				`(?m)^! retry_attempts +all +/grpc.testing.ReconnectService/Start: attempt 4 beyond maxAttempts 3$`,
				`(?m)^verdict: 3 problems \(marked !\)$`,
			},
			count: `(?m)^! retry_attempts +all +/grpc.testing.ReconnectService/Start: attempt 4, 5 beyond maxAttempts 3$`, times: 2,
		},
		{
			// A policy the client did not have: every retry came later
			// than either reading of A6 allows.
			name: "retries, backoffs too short", args: []string{"--retry-initial-backoff", "20ms", "--retry-max-backoff", "50ms", retryCapture}, code: exitFail,
			golden: "retry-unavailable-short-backoff",
			want: []string{
				`(?m)^! retry +all +.* delays \d+ ms \(b 20 ms\): outside b·U\(0.8, 1.2\) \(A6 as revised\) before attempt 2, outside U\(0, b\) \(A6 as first published\) before attempt 2$`,
				`(?m)^verdict: 5 problems \(marked !\)$`,
			},
			count: `(?m)^! retry +all +.*\(b 20 ms\), \d+ ms \(b 40 ms\).*: outside b·U\(0.8, 1.2\) .* outside U\(0, b\) `, times: 4,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, format := range []string{"text", "json"} {
				code, stdout, stderr := runAudit(t, append([]string{"h2", "--format", format}, tt.args...)...)
				if code != tt.code {
					t.Errorf("%s: exit %d, want %d; stderr: %s", format, code, tt.code, stderr)
				}
				if stdout == "" {
					t.Fatalf("%s: no report; stderr: %s", format, stderr)
				}
				ext := map[string]string{"text": ".txt", "json": ".json"}[format]
				testutil.Golden(t, filepath.Join("testdata", "h2", tt.golden+ext), []byte(stdout), *update)
				if format != "text" {
					continue
				}
				for _, p := range tt.want {
					if !regexp.MustCompile(p).MatchString(stdout) {
						t.Errorf("text lacks a line matching %s:\n%s", p, stdout)
					}
				}
				if tt.count != "" {
					if n := len(regexp.MustCompile(tt.count).FindAllString(stdout, -1)); n != tt.times {
						t.Errorf("%d lines match %s, want %d:\n%s", n, tt.count, tt.times, stdout)
					}
				}
				if !strings.Contains(stdout, ": 0 encrypted, 0 damaged\n") {
					t.Errorf("a connection is encrypted or damaged:\n%s", stdout)
				}
			}
		})
	}
}
