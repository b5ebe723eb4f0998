package server

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/backoff-audit/audit/internal/testutil"
	"github.com/backoff-audit/audit/pb"
	"github.com/backoff-audit/audit/session"
)

// Two Starts on one connection, as two threads of one client send them:
// the second waits for the first's session and runs after its Stop, with
// the same caller. Neither is refused.
func TestStartsShareAConnection(t *testing.T) {
	h := start(t, Config{})
	h.startSession(0)
	second := make(chan error, 1)
	go func() {
		_, err := h.rpc.Start(h.ctx, &pb.ReconnectParams{MaxReconnectBackoffMs: 2000})
		second <- err
	}()
	h.waitFor("the second Start to wait", func() bool { return h.s.waiting.Load() == 1 })
	h.stop()
	if err := recv(h, second); err != nil {
		t.Fatalf("the second Start on the session's connection: %v; want it served once the first session stopped", err)
	}
	h.stop()
	ss := h.s.Sessions()
	if len(ss) != 2 || ss[0].Peer != ss[1].Peer || ss[1].Params.MaxReconnectBackoffMS != 2000 {
		t.Errorf("sessions %+v; want 2 from one caller, the second with its own cap 2000", ss)
	}
}

// concurrentStartsScript is the C-core client that sends Starts from
// several threads of one process.
const concurrentStartsScript = "../testdata/interop/concurrent_starts.py"

// systemPython is Debian's interpreter, the one python3-grpcio installs for
// (docs/spec.md §6.1).
const systemPython = "/usr/bin/python3"

// Eight threads of one Python process, each with its own gRPC channel,
// reach the control port over the one connection C-core shares between
// them; each calls Start, connects 3 times 1 s apart, then Stop. Every
// Start is served, one session at a time, each session with its own two
// intervals, which its thread's Stop answers.
func TestConcurrentStartsCCore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, systemPython, "-c", "import grpc").CombinedOutput(); err != nil {
		t.Skipf("SKIPPED, NOT RUN: the C-core client needs python3-grpcio for %s (apt-get install python3-grpcio): %v\n%s", systemPython, err, out)
	}
	var log testutil.SyncBuffer
	h := start(t, Config{Now: time.Now, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	_, control, _ := net.SplitHostPort(h.s.ControlAddr())
	cmd := exec.CommandContext(ctx, systemPython, concurrentStartsScript, "--server_control_port", control,
		"--server_retry_port", strconv.Itoa(h.s.RetryPort()), "--threads", "8", "--connects", "3")
	var stderr testutil.SyncBuffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	type result struct {
		Thread      int
		Start, Stop string
		Passed      bool
		BackoffMS   []int32 `json:"backoff_ms"`
	}
	var results []result
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		var r result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("concurrent_starts.py printed %q: %v", sc.Text(), err)
		}
		results = append(results, r)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("concurrent_starts.py: %v\n%s", err, stderr.String())
	}
	for _, r := range results {
		if r.Start != "OK" || r.Stop != "OK" {
			t.Errorf("thread %d: Start %q, Stop %q; want both OK", r.Thread, r.Start, r.Stop)
		}
	}
	ss := h.s.Sessions()
	if len(ss) != 8 {
		t.Fatalf("%d sessions, want 8\n%s", len(ss), log.String())
	}
	var peers []string
	for i, s := range ss {
		if !slices.Contains(peers, s.Peer.String()) {
			peers = append(peers, s.Peer.String())
		}
		if i > 0 && s.Started.Before(ss[i-1].Ended) {
			t.Errorf("session %d started at %v, before session %d ended at %v", s.ID, s.Started, ss[i-1].ID, ss[i-1].Ended)
		}
		// Each thread waits for the server's close before its 1 s sleep,
		// so its own intervals are at least 1000 ms; another thread's
		// connection in the session would make one shorter, or a third.
		if s.End.Cause != session.CauseStop || len(s.End.BackoffMS) != 2 || slices.Min(s.End.BackoffMS) < 1000 {
			t.Errorf("session %d: ended by %s, backoff_ms %v; want Stop and two intervals of 1000 ms or a little more",
				s.ID, s.End.Cause, s.End.BackoffMS)
		}
	}
	// What the test is about: the Starts share one connection.
	if len(peers) != 1 {
		t.Errorf("the Starts came from %v; want one ip:port (C-core's shared connection)", peers)
	}
	var fromServer, fromClients [][]int32
	for _, s := range ss {
		fromServer = append(fromServer, s.End.BackoffMS)
	}
	for _, r := range results {
		fromClients = append(fromClients, r.BackoffMS)
	}
	sortLists := func(l [][]int32) { slices.SortFunc(l, slices.Compare) }
	sortLists(fromServer)
	sortLists(fromClients)
	if diff := cmp.Diff(fromServer, fromClients); diff != "" {
		t.Errorf("backoff_ms of the sessions against what the threads' Stops answered (-server +clients):\n%s", diff)
	}
}
