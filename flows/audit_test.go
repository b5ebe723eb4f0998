package flows_test

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/backoff-audit/audit/flows"
	"github.com/backoff-audit/audit/h2"
	"github.com/backoff-audit/audit/internal/testutil"
)

// audit runs Audit, what `audit h2` runs, and returns the report in
// opt.Format and how many of its findings are problems.
func audit(t *testing.T, files []string, opt flows.AuditOptions) (string, int) {
	t.Helper()
	rep, err := flows.Audit(files, opt)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := rep.Write(&out, opt.Format); err != nil {
		t.Fatal(err)
	}
	return out.String(), rep.Problems
}

// The client's retry policy in testdata/h2/retry-unavailable.pcap
// (testdata/README.md, "HTTP/2 captures").
var grpcGoRetry = h2.RetryPolicy{MaxAttempts: 5, InitialBackoff: 100 * time.Millisecond, MaxBackoff: time.Second, BackoffMultiplier: 2}

// TestH2GRPCGoCaptures: the report of the real grpc-go keepalive and retry
// captures, text and JSON, against golden files (-update rewrites them).
// Each case also holds, by pattern, the lines that matter, so that a
// failure names what changed, not only that a byte did.
func TestH2GRPCGoCaptures(t *testing.T) {
	t.Chdir("..")
	const retryCapture = "testdata/h2/retry-unavailable.pcap"
	maxAttempts3, short := grpcGoRetry, grpcGoRetry
	maxAttempts3.MaxAttempts = 3
	short.InitialBackoff, short.MaxBackoff = 20*time.Millisecond, 50*time.Millisecond
	tests := []struct {
		name   string
		file   string
		retry  *h2.RetryPolicy
		fails  bool     // a finding is a problem
		golden string   // testdata/h2/GOLDEN.txt and GOLDEN.json
		want   []string // patterns the text must match, each on a line
		count  string   // a pattern the text must match …
		times  int      // … this many times
	}{
		{
			name: "keepalive", file: "testdata/h2/keepalive-too-many-pings.pcap", fails: true,
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
			name: "retries, the client's policy", file: retryCapture, retry: &grpcGoRetry,
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
			name: "retries, maxAttempts 3", file: retryCapture, retry: &maxAttempts3, fails: true,
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
			name: "retries, backoffs too short", file: retryCapture, retry: &short, fails: true,
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
				out, problems := audit(t, []string{tt.file}, flows.AuditOptions{Format: format, Retry: tt.retry})
				if problems > 0 != tt.fails {
					t.Errorf("%s: %d problems, want some: %v", format, problems, tt.fails)
				}
				if out == "" {
					t.Fatalf("%s: no report", format)
				}
				ext := map[string]string{"text": ".txt", "json": ".json"}[format]
				testutil.Golden(t, filepath.Join("testdata", "h2", tt.golden+ext), []byte(out), *update)
				if format != "text" {
					continue
				}
				for _, p := range tt.want {
					if !regexp.MustCompile(p).MatchString(out) {
						t.Errorf("text lacks a line matching %s:\n%s", p, out)
					}
				}
				if tt.count != "" {
					if n := len(regexp.MustCompile(tt.count).FindAllString(out, -1)); n != tt.times {
						t.Errorf("%d lines match %s, want %d:\n%s", n, tt.count, tt.times, out)
					}
				}
				if !strings.Contains(out, ": 0 encrypted, 0 damaged\n") {
					t.Errorf("a connection is encrypted or damaged:\n%s", out)
				}
			}
		})
	}
}

// TestH2CCoreBDPProbes: on the C-core capture (C-core 1.51 client and
// server), each side's PINGs answer the other's DATA within microseconds,
// as C-core's BDP estimator sends them: they are counted as BDP probes,
// with no PING cadence found, though their data is not grpc-go's.
func TestH2CCoreBDPProbes(t *testing.T) {
	out, problems := audit(t, []string{filepath.Join("..", "testdata", "control-ccore.pcap")}, flows.AuditOptions{Format: "json"})
	if problems != 0 {
		t.Fatalf("%d problems, want none:\n%s", problems, out)
	}
	var rep struct {
		Connections []struct {
			Pings []struct {
				Dir    string `json:"dir"`
				Count  int    `json:"count"`
				Probes int    `json:"bdp_probes"`
			} `json:"pings"`
		} `json:"connections"`
		Findings []struct {
			Kind string `json:"kind"`
		} `json:"findings"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Connections) == 0 || len(rep.Connections[0].Pings) != 2 {
		t.Fatalf("want the control connection first, with both sides' PINGs:\n%s", out)
	}
	for _, p := range rep.Connections[0].Pings {
		if p.Count != 0 || p.Probes != 2 {
			t.Errorf("%s: %d PINGs and %d BDP probes; want 0 and 2 (one after each call's DATA)", p.Dir, p.Count, p.Probes)
		}
	}
	for _, f := range rep.Findings {
		if f.Kind == "ping_cadence" {
			t.Errorf("a ping_cadence finding on BDP probes alone:\n%s", out)
		}
	}
}
