package flows_test

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/backoff-audit/audit/flows"
	"github.com/backoff-audit/audit/h2"
)

// The captures of real grpc-go stacks that h2/internal/h2gen records
// (testdata/README.md, "HTTP/2 captures"). They are remade with new times
// and jitter: these tests hold what any run shows, the golden reports
// (TestH2GRPCGoCaptures) the rest.

// readGRPCGoCapture decodes a capture of testdata/h2 and wants every
// connection whole: no warning, no damage, no gap.
func readGRPCGoCapture(t *testing.T, name string, diag h2.DiagnoseOptions) *flows.Result {
	t.Helper()
	res, err := flows.ReadFiles([]string{filepath.Join("..", "testdata", "h2", name)}, flows.Options{}, diag)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range res.Conns {
		if r := c.Report; r.Damaged != "" || r.Encrypted || len(r.Warnings) > 0 || !c.SYN {
			t.Errorf("connection %d: damaged %q, encrypted %v, warnings %+v, SYN %v; want a whole, clean decode", i, r.Damaged, r.Encrypted, r.Warnings, c.SYN)
		}
	}
	return res
}

// grpcGoFindings returns the texts of res's findings of kind.
func grpcGoFindings(res *flows.Result, kind string) []string {
	var out []string
	for _, f := range res.Findings {
		if f.Kind == kind {
			out = append(out, f.Text)
		}
	}
	return out
}

// TestGRPCGoKeepaliveCapture: a grpc-go client pinging every 10 s meets a
// grpc-go server whose enforcement policy wants 60 s. The server forgives
// the client's BDP probe, strikes each keepalive PING, and at the third
// strike answers GOAWAY ENHANCE_YOUR_CALM "too_many_pings"
// (internal/transport/http2_server.go, maxPingStrikes = 2); the client's
// next call opens a new connection.
func TestGRPCGoKeepaliveCapture(t *testing.T) {
	res := readGRPCGoCapture(t, "keepalive-too-many-pings.pcap", h2.DiagnoseOptions{})
	if len(res.Conns) != 2 {
		t.Fatalf("%d connections, want the one the GOAWAY ended and the next", len(res.Conns))
	}
	first := res.Conns[0].Report
	k, ok := h2.TooManyPings(first)
	if !ok {
		t.Fatalf("no GOAWAY ENHANCE_YOUR_CALM on the first connection: %+v", first.Events)
	}
	if k.Debug != "too_many_pings" || k.Pings.Count != 3 || k.Pings.Probes != 1 {
		t.Errorf("keepalive %+v: want too_many_pings after 3 keepalive PINGs and 1 BDP probe", k)
	}
	// grpc-go pings 10 s after its last read; the first PING follows the
	// call's response, each next one the previous PING's ACK.
	if k.Pings.Min < 10*time.Second || k.Pings.Median > 10*time.Second+500*time.Millisecond {
		t.Errorf("keepalive PINGs at least %v apart, median %v: want every 10 s, a little more", k.Pings.Min, k.Pings.Median)
	}
	if age := k.GoAway.Sub(first.Start); age < 30*time.Second || age > 31*time.Second {
		t.Errorf("GOAWAY at connection age %v, want 30–31 s: the call, then three PINGs 10 s apart", age)
	}
	want := regexp.MustCompile(`^keepalive pings every 10 s; the server answered GOAWAY ENHANCE_YOUR_CALM too_many_pings after 3$`)
	if got := grpcGoFindings(res, h2.FindingTooManyPings); len(got) != 1 || !want.MatchString(got[0]) {
		t.Errorf("keepalive findings %q, want one matching %s", got, want)
	}
	rcs := h2.Reconnects(h2.Digests(res.Reports()))
	if len(rcs) != 1 || rcs[0].From != 0 || rcs[0].To != 1 || rcs[0].Code != "ENHANCE_YOUR_CALM" || rcs[0].Delay < 0 || rcs[0].Delay > time.Second {
		t.Errorf("reconnects %+v: want connection 1 within 1 s of connection 0's GOAWAY ENHANCE_YOUR_CALM", rcs)
	}
	if next := res.Conns[1].Report; len(next.Streams) != 1 || next.Streams[0].GRPCStatus != "OK" {
		t.Errorf("next connection's streams %+v, want the call after the GOAWAY, OK", next.Streams)
	}
}

// grpcGoRetryPolicy is the retry policy of the client of
// retry-unavailable.pcap (h2gen's retryServiceConfig).
var grpcGoRetryPolicy = h2.RetryPolicy{MaxAttempts: 5, InitialBackoff: 100 * time.Millisecond, MaxBackoff: time.Second, BackoffMultiplier: 2}

// TestGRPCGoRetryCapture: a grpc-go client with grpcGoRetryPolicy calls
// six times a server that answers UNAVAILABLE to the first 0, 1, 2, 3, 4
// and 5 attempts of each call. The five calls that retried make five
// chains, linked by grpc-previous-rpc-attempts, and held to the policy
// the client had, to a smaller maxAttempts and to a policy with shorter
// backoffs.
func TestGRPCGoRetryCapture(t *testing.T) {
	res := readGRPCGoCapture(t, "retry-unavailable.pcap", h2.DiagnoseOptions{})
	if len(res.Conns) != 1 {
		t.Fatalf("%d connections, want 1", len(res.Conns))
	}
	chains := h2.RetryChains(h2.Digests(res.Reports()))
	var got [][]string
	for _, ch := range chains {
		var st []string
		for i, a := range ch.Attempts {
			if a.Number != i+1 {
				t.Errorf("%s: attempt %d numbered %d", ch.Text(), i+1, a.Number)
			}
			st = append(st, a.Status)
		}
		if ch.Missing {
			t.Errorf("%s: first attempt missing", ch.Text())
		}
		got = append(got, st)
	}
	u, ok := "UNAVAILABLE", "OK"
	want := [][]string{{u, ok}, {u, u, ok}, {u, u, u, ok}, {u, u, u, u, ok}, {u, u, u, u, u}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("chains' statuses (-want +got):\n%s", d)
	}

	t.Run("the client's policy", func(t *testing.T) {
		// A delay is measured from the trailers on the wire to the next
		// HEADERS, so it is never shorter than the client's timer, but a
		// loaded machine fires timers late: one remake on a busy host
		// had 253 ms for b 200 ms. lateTimer bounds that lateness, so
		// that these checks hold for any run.
		const lateTimer = 50 * time.Millisecond
		for _, ch := range chains {
			chk := h2.CheckRetries(ch, grpcGoRetryPolicy, lateTimer)
			for i, d := range chk.Delays {
				// grpc-go draws each delay in b·[0.8, 1.2] (stream.go,
				// shouldRetry), b = 100, 200, 400, 800 ms.
				if wantB := 100 * time.Millisecond << i; d.Backoff != wantB || d.Delay < wantB*8/10 || !d.InJittered {
					t.Errorf("%s: delay before attempt %d %+v, want b %v and the delay in [0.8·b, 1.2·b + %v]", ch.Text(), d.Attempt, d, wantB, lateTimer)
				}
			}
			if len(chk.TooMany) != 0 {
				t.Errorf("%s: attempts %v beyond maxAttempts 5", ch.Text(), chk.TooMany)
			}
		}
		res := readGRPCGoCapture(t, "retry-unavailable.pcap", h2.DiagnoseOptions{Retry: &grpcGoRetryPolicy, Tolerance: lateTimer})
		for _, f := range res.Findings {
			if f.Problem {
				t.Errorf("finding %s is a problem: %s", f.Kind, f.Text)
			}
		}
	})

	t.Run("maxAttempts 3", func(t *testing.T) {
		p := grpcGoRetryPolicy
		p.MaxAttempts = 3
		var tooMany [][]int
		for _, ch := range chains {
			tooMany = append(tooMany, h2.CheckRetries(ch, p, h2.DefaultTolerance).TooMany)
		}
		if d := cmp.Diff([][]int{nil, nil, {4}, {4, 5}, {4, 5}}, tooMany); d != "" {
			t.Errorf("attempts beyond 3 (-want +got):\n%s", d)
		}
		res := readGRPCGoCapture(t, "retry-unavailable.pcap", h2.DiagnoseOptions{Retry: &p})
		want := []string{
			"/grpc.testing.ReconnectService/Start: attempt 4 beyond maxAttempts 3",
			"/grpc.testing.ReconnectService/Start: attempt 4, 5 beyond maxAttempts 3",
			"/grpc.testing.ReconnectService/Start: attempt 4, 5 beyond maxAttempts 3",
		}
		if d := cmp.Diff(want, grpcGoFindings(res, h2.FindingRetryAttempts)); d != "" {
			t.Errorf("attempts findings (-want +got):\n%s", d)
		}
	})

	t.Run("shorter backoffs", func(t *testing.T) {
		// A policy the client did not have: 20 ms initial, 50 ms at most.
		// Every retry came later than either reading of A6 allows.
		p := h2.RetryPolicy{MaxAttempts: 5, InitialBackoff: 20 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, BackoffMultiplier: 2}
		res := readGRPCGoCapture(t, "retry-unavailable.pcap", h2.DiagnoseOptions{Retry: &p})
		n := 0
		for _, f := range res.Findings {
			if f.Kind != h2.FindingRetry {
				continue
			}
			n++
			if !f.Problem || !strings.Contains(f.Text, "outside b·U(0.8, 1.2) (A6 as revised) before attempt 2") ||
				!strings.Contains(f.Text, "outside U(0, b) (A6 as first published) before attempt 2") {
				t.Errorf("finding %q (problem %v): want a problem, every delay outside both windows", f.Text, f.Problem)
			}
		}
		if n != len(chains) {
			t.Errorf("%d retry findings, want %d", n, len(chains))
		}
	})
}
