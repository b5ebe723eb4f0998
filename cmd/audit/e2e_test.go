package main

// End-to-end and interop tests: `audit server` and a client as
// real processes on loopback. Each test starts its own server, since the
// sessions of one server serialise, and runs in parallel with the others.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/internal/testutil"
	"github.com/backoff-audit/audit/session"
)

// auditBin is the audit binary TestMain builds once for every test here.
var auditBin string

// systemPython is Debian's interpreter, the one python3-grpcio installs for
// (docs/spec.md §6); a python3 earlier on PATH may lack grpc.
const systemPython = "/usr/bin/python3"

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "audit-e2e-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	auditBin = filepath.Join(dir, "audit")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", auditBin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: go build: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// auditServer is a running `audit server` process.
type auditServer struct {
	Control, Retry int // the chosen ports
	Record         string
	log            *testutil.SyncBuffer
}

var (
	controlLine = regexp.MustCompile(`control port (\S+)`)
	retryLine   = regexp.MustCompile(`retry port (\S+)`)
)

// startServer runs `audit server` on port 0 with a record file and the
// flags args, and waits for the addresses it prints. The process is
// interrupted when the test ends.
func startServer(t *testing.T, args ...string) *auditServer {
	t.Helper()
	s := &auditServer{Record: filepath.Join(t.TempDir(), "record.jsonl"), log: &testutil.SyncBuffer{}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	cmd := exec.CommandContext(ctx, auditBin, append([]string{"server", "--control_port=0", "--retry_port=0", "--record=" + s.Record}, args...)...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 5 * time.Second
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start audit server: %v", err)
	}
	exited := make(chan error, 1)
	go func() { err := cmd.Wait(); pw.Close(); exited <- err }()
	t.Cleanup(func() {
		cancel() // interrupts the server
		if err := <-exited; err != nil && !errors.Is(err, context.Canceled) && !killedBySignal(err) {
			t.Errorf("audit server did not end cleanly on interrupt: %v\n%s", err, s.log)
		} else if t.Failed() {
			t.Logf("audit server output:\n%s", s.log)
		}
	})

	// The scanner reads until the process ends, so the server never blocks
	// on its output; it publishes the ports once, by closing ready.
	ready, scanned := make(chan struct{}), make(chan struct{})
	var control, retry int
	var parseErr error
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			s.log.WriteString(line + "\n")
			if control != 0 && retry != 0 || parseErr != nil {
				continue
			}
			if m := controlLine.FindStringSubmatch(line); m != nil {
				control, parseErr = portOf(m[1])
			}
			if m := retryLine.FindStringSubmatch(line); m != nil && parseErr == nil {
				retry, parseErr = portOf(m[1])
			}
			if control != 0 && retry != 0 || parseErr != nil {
				close(ready)
			}
		}
		io.Copy(io.Discard, pr)
	}()
	timeout := time.NewTimer(20 * time.Second)
	defer timeout.Stop()
	select {
	case <-ready:
	case <-scanned:
		t.Fatalf("audit server ended before printing its ports:\n%s", s.log)
	case <-timeout.C:
		t.Fatalf("audit server printed no ports in 20 s:\n%s", s.log)
	}
	if parseErr != nil {
		t.Fatalf("audit server: %v\n%s", parseErr, s.log)
	}
	s.Control, s.Retry = control, retry
	return s
}

// portOf reads the port of a printed address such as "127.0.0.1:4000" or
// "[::]:4001".
func portOf(hostport string) (int, error) {
	_, p, err := net.SplitHostPort(strings.TrimRight(hostport, ",;"))
	if err != nil {
		return 0, fmt.Errorf("printed address %q: %w", hostport, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port <= 0 {
		return 0, fmt.Errorf("printed address %q: no port", hostport)
	}
	return port, nil
}

func killedBySignal(err error) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee) && !ee.Exited()
}

// session reads the record file and returns the stop event of the one
// session and the accept times of its verified chain.
func (s *auditServer) session(t *testing.T) (session.SessionEnd, []time.Time) {
	t.Helper()
	f, err := os.Open(s.Record)
	if err != nil {
		t.Fatalf("record: %v", err)
	}
	defer f.Close()
	events, err := session.ReadRecord(f)
	if err != nil {
		t.Fatalf("record %s: %v", s.Record, err)
	}
	var end *session.SessionEnd
	var accepts []session.RecordEvent
	for _, e := range events {
		switch {
		case e.Event == session.EventAccept && e.Session == 1:
			accepts = append(accepts, e)
		case e.Event == session.EventStop && e.Session == 1:
			end = e.End
		case e.Event == session.EventStart && e.Session != 1:
			t.Errorf("record holds session %d; want only session 1", e.Session)
		}
	}
	if end == nil {
		t.Fatalf("record %s has no stop event for session 1", s.Record)
	}
	var times []time.Time
	for _, e := range accepts {
		if e.Peer.Addr().Unmap() == end.VerifiedPeer {
			times = append(times, e.Time)
		}
	}
	return *end, times
}

// runClient runs a client process and returns its stdout, stderr and exit
// code.
func runClient(t *testing.T, timeout time.Duration, name string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.WaitDelay = 5 * time.Second
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ee.Exited():
		code = ee.ExitCode()
	default:
		t.Fatalf("%s %s: %v (context: %v)\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), err, ctx.Err(), &out, &errb)
	}
	return out.String(), errb.String(), code
}

func ports(s *auditServer) []string {
	return []string{
		"--server_host=127.0.0.1",
		"--server_control_port=" + strconv.Itoa(s.Control),
		"--server_retry_port=" + strconv.Itoa(s.Retry),
	}
}

// tableRow is one interval row of the client's table: k, then backoff_ms.
var tableRow = regexp.MustCompile(`(?m)^\s*(\d+)\s+(-?\d+)\s+\d+\.\d\s+`)

func printedBackoffs(t *testing.T, out string) []int32 {
	t.Helper()
	var got []int32
	for i, m := range tableRow.FindAllStringSubmatch(out, -1) {
		if m[1] != strconv.Itoa(i+1) {
			t.Fatalf("table row %d is numbered %s:\n%s", i+1, m[1], out)
		}
		b, err := strconv.ParseInt(m[2], 10, 32)
		if err != nil {
			t.Fatalf("table row %d: %v", i+1, err)
		}
		got = append(got, int32(b))
	}
	return got
}

// checkChain re-verifies the record's accept times and holds them to the
// server's answer: the same backoffs, each within its window of p.
func checkChain(t *testing.T, p backoff.Policy, end session.SessionEnd, times []time.Time) backoff.Result {
	t.Helper()
	res := backoff.Verify(p, times)
	if diff := cmp.Diff(end.BackoffMS, res.BackoffMS, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("backoff_ms: server's answer vs its recorded accepts (-stop +accepts):\n%s", diff)
	}
	return res
}

// TestE2EGoClientPasses runs `audit server` and `audit client` (grpc-go
// with the spec's policy, capped at 2 s): passed, with intervals that grow
// 1000 → 1600 → 2000 and stay capped, each within its window.
func TestE2EGoClientPasses(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	out, stderr, code := runClient(t, time.Minute, auditBin,
		append(append([]string{"client"}, ports(s)...), "--max_reconnect_backoff_ms=2000", "--deadline=10s")...)
	if code != exitOK {
		t.Fatalf("audit client exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitOK, out, stderr)
	}
	t.Logf("audit client:\n%s", out)

	end, times := s.session(t)
	if !end.Passed || end.Verdict != backoff.Passed {
		t.Errorf("server verdict %q (passed=%v, reason %q), want passed", end.Verdict, end.Passed, end.Reason)
	}
	p := backoff.ReferencePolicy(2000)
	res := checkChain(t, p, end, times)
	// 10 s holds at least 1000 + 1920 + 3·2400 ms of backoff: ≥ 4 intervals.
	if len(res.Intervals) < 4 {
		t.Fatalf("%d intervals in 10 s, want at least 4: %v", len(res.Intervals), res.BackoffMS)
	}
	var gotExpected, wantExpected []float64
	for i, iv := range res.Intervals {
		if !iv.OK {
			t.Errorf("interval %d: %d ms outside %.0f–%.0f ms", iv.K, iv.BackoffMS, iv.MinMS, iv.MaxMS)
		}
		gotExpected = append(gotExpected, iv.ExpectedMS)
		wantExpected = append(wantExpected, []float64{1000, 1600}[min(i, 1)])
		if i >= 2 {
			wantExpected[i] = 2000
		}
	}
	if diff := cmp.Diff(wantExpected, gotExpected); diff != "" {
		t.Errorf("expected backoffs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(end.BackoffMS, printedBackoffs(t, out)); diff != "" {
		t.Errorf("client's table vs server's backoff_ms (-server +client):\n%s", diff)
	}
	if !strings.Contains(out, "server: passed") || !strings.Contains(out, "own check: passed") {
		t.Errorf("client output lacks both verdicts:\n%s", out)
	}
}

// TestE2EGoClientWrongPolicy gives grpc-go a 300 ms base delay: the server
// fails it at the first interval, and the client exits 1 saying so.
func TestE2EGoClientWrongPolicy(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	out, stderr, code := runClient(t, time.Minute, auditBin,
		append(append([]string{"client"}, ports(s)...), "--max_reconnect_backoff_ms=2000", "--initial_backoff_ms=300", "--deadline=3s")...)
	if code != exitFail {
		t.Fatalf("audit client exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitFail, out, stderr)
	}
	if want := "server says failed; interval 1: "; !strings.Contains(stderr, want) {
		t.Errorf("client stderr %q, want it to contain %q", stderr, want)
	}

	end, times := s.session(t)
	if end.Passed || end.Verdict != backoff.Failed {
		t.Errorf("server verdict %q (passed=%v), want failed", end.Verdict, end.Passed)
	}
	if !strings.HasPrefix(end.Reason, "interval 1: ") {
		t.Errorf("server reason %q, want it to name interval 1", end.Reason)
	}
	res := checkChain(t, backoff.ReferencePolicy(2000), end, times)
	if res.Reference.FirstFailure != 1 || res.Intervals[0].Outcome != backoff.Early {
		t.Errorf("re-verified: first failure %d (%v), want interval 1 early", res.Reference.FirstFailure, res.Intervals)
	}
}

// pythonResult is the JSON line of testdata/interop/reconnect_client.py.
type pythonResult struct {
	Passed      bool    `json:"passed"`
	BackoffMS   []int32 `json:"backoff_ms"`
	RetryStatus string  `json:"retry_status"`
	GRPCVersion string  `json:"grpc_version"`
}

// runPython runs the C-core client; it skips, loudly, where python3-grpcio
// is missing (CI installs it, so there it always runs).
func runPython(t *testing.T, s *auditServer, args ...string) (pythonResult, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, systemPython, "-c", "import grpc").CombinedOutput(); err != nil {
		t.Skipf("SKIPPED: interop with C-core needs python3-grpcio for %s (apt-get install python3-grpcio): %v\n%s", systemPython, err, out)
	}
	out, stderr, code := runClient(t, time.Minute, systemPython,
		append(append([]string{"../../testdata/interop/reconnect_client.py"}, ports(s)...), args...)...)
	var r pythonResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("reconnect_client.py exit %d printed %q: %v\nstderr:\n%s", code, out, err, stderr)
	}
	t.Logf("reconnect_client.py (exit %d): %s", code, out)
	if r.RetryStatus != "DEADLINE_EXCEEDED" {
		t.Errorf("retry RPC ended in %s, want DEADLINE_EXCEEDED", r.RetryStatus)
	}
	return r, code
}

// TestInteropPythonPasses: gRPC C-core with its default policy, capped at
// 2 s, passes `audit server`.
func TestInteropPythonPasses(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	r, code := runPython(t, s, "--max_reconnect_backoff_ms=2000", "--deadline_s=8")
	if code != 0 || !r.Passed {
		t.Errorf("C-core %s: passed=%v exit %d, want passed and exit 0", r.GRPCVersion, r.Passed, code)
	}
	end, times := s.session(t)
	if diff := cmp.Diff(end.BackoffMS, r.BackoffMS, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("backoff_ms (-record +client):\n%s", diff)
	}
	res := checkChain(t, backoff.ReferencePolicy(2000), end, times)
	// 8 s holds at least 1200 + 1920 + 2400 ms of backoff: ≥ 3 intervals.
	if len(res.Intervals) < 3 || !res.Passed() {
		t.Errorf("re-verified: %d intervals, %s %s; want ≥ 3, passed", len(res.Intervals), res.Reference.Verdict, res.Reason())
	}
}

// TestInteropPythonWrongPolicy: C-core told to start at 300 ms fails at the
// first interval.
func TestInteropPythonWrongPolicy(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	r, code := runPython(t, s, "--max_reconnect_backoff_ms=2000", "--initial_reconnect_backoff_ms=300", "--deadline_s=6")
	if code != 1 || r.Passed {
		t.Errorf("C-core %s with 300 ms: passed=%v exit %d, want failed and exit 1", r.GRPCVersion, r.Passed, code)
	}
	end, _ := s.session(t)
	if end.Passed || !strings.HasPrefix(end.Reason, "interval 1: ") {
		t.Errorf("server: passed=%v reason %q, want failed naming interval 1", end.Passed, end.Reason)
	}
	if diff := cmp.Diff(end.BackoffMS, r.BackoffMS, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("backoff_ms (-record +client):\n%s", diff)
	}
}
