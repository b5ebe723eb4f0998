package auditrun

// Run in the retry port's fault modes (docs/spec.md §7): the
// kernel's verdict judges by the mode's model, with raw TCP clients whose
// timing the test sets.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/pb"
)

// controlClient returns the ReconnectService of a live run.
func controlClient(t *testing.T, r *liveRun) pb.ReconnectServiceClient {
	t.Helper()
	cc, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", r.control), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return pb.NewReconnectServiceClient(cc)
}

// startSession calls Start on a live run's control port, with the short
// cap, and returns its ReconnectService and a context for the session's
// calls.
func startSession(t *testing.T, r *liveRun) (pb.ReconnectServiceClient, context.Context) {
	t.Helper()
	rpc := controlClient(t, r)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	if _, err := rpc.Start(ctx, &pb.ReconnectParams{MaxReconnectBackoffMs: liveMaxMS}); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return rpc, ctx
}

// A client with no connect timeout (grpc-js) connects once to a port that
// hangs and waits for ever: both verdicts fail it, never a vacuous pass.
func TestLiveHangNeverGaveUp(t *testing.T) {
	t.Parallel()
	cfg := Config{}
	cfg.Server.Mode = backoff.RetryMode{Kind: backoff.ModeHang}
	cfg.Server.MinConnectTimeout = time.Second
	r := startLive(t, cfg)
	rpc, ctx := startSession(t, r)
	c, err := net.Dial("tcp4", fmt.Sprintf("127.0.0.1:%d", r.retry))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Its deadline is max(1 s, 1.2 × 1 s) + 100 ms: wait well past it.
	time.Sleep(2500 * time.Millisecond)
	info, err := rpc.Stop(ctx, &pb.Empty{})
	if err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if info.Passed {
		t.Errorf("Stop passed a client that never gave up on its hung connection")
	}
	reps, _ := r.reports(t, 1)
	rep := reps[0]
	if len(rep.Peers) != 1 {
		t.Fatalf("peers %+v; want the one client", rep.Peers)
	}
	p := rep.Peers[0]
	const want = "the client never gave up on a hung connection: attempt 1 was still waiting after"
	if p.Passed || p.Verdict != backoff.Failed || !strings.HasPrefix(p.Reason, want) {
		t.Errorf("kernel verdict %s: %q; want failed: %q", p.Verdict, p.Reason, want)
	}
	if rep.Server == nil || rep.Server.Passed || !strings.HasPrefix(rep.Server.Reason, want) {
		t.Errorf("server verdict %+v; want failed: %q", rep.Server, want)
	}
	if len(p.Signatures) == 0 || p.Signatures[0].Name != backoff.SigNoConnTimeout {
		t.Errorf("signatures %+v; want %q", p.Signatures, backoff.SigNoConnTimeout)
	}
	if res := r.stop(t); res.verdict() != runFailed {
		t.Errorf("Run: %s (%v); want a failed verdict", res.verdict(), res.err)
	}
}

// In refuse mode the server sees nothing and says so; the kernel's SYNs
// judge the session, which passes for a client that backs off.
func TestLiveRefuseJudgedByKernel(t *testing.T) {
	t.Parallel()
	cfg := Config{HTML: filepath.Join(t.TempDir(), "session.html")}
	cfg.Server.Mode = backoff.RetryMode{Kind: backoff.ModeRefuse}
	r := startLive(t, cfg)
	rpc, ctx := startSession(t, r)
	// Attempts 1000 ms apart: the spec's first backoff, then the 1 s cap.
	t0 := time.Now()
	for i := range 3 {
		time.Sleep(time.Until(t0.Add(time.Duration(i) * time.Second)))
		c, err := net.Dial("tcp4", fmt.Sprintf("127.0.0.1:%d", r.retry))
		if err == nil {
			c.Close()
			t.Fatalf("attempt %d was accepted; refuse mode must refuse it", i+1)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("attempt %d: %v; want connection refused", i+1, err)
		}
	}
	if _, err := rpc.Stop(ctx, &pb.Empty{}); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	reps, _ := r.reports(t, 1)
	rep := reps[0]
	if rep.Server == nil || rep.Server.Verdict != backoff.NotJudged {
		t.Errorf("server verdict %+v; want %q", rep.Server, backoff.NotJudged)
	}
	if len(rep.Peers) != 1 || !rep.Peers[0].Passed || len(rep.Peers[0].Attempts) != 3 {
		t.Fatalf("kernel verdict %+v; want 3 attempts, passed", rep.Peers)
	}
	if res := r.stop(t); res.verdict() != runPassed {
		t.Errorf("Run: %s (%v); want passed: the kernel's verdict passed", res.verdict(), res.err)
	}
	// HTML: the session's page, written when its report was.
	page, err := os.ReadFile(cfg.HTML)
	if err != nil || !strings.Contains(string(page), "not judged") || !strings.Contains(string(page), "refuse") {
		t.Errorf("HTML page (%d bytes, %v) lacks the session's server verdict and mode", len(page), err)
	}
}
