package auditrun

// Tests of Run with Attach and ControlPort: sessions that follow the
// Start and Stop calls decoded live from a server's control port, with no
// record file (docs/spec.md §5.6). Like the other live tests they capture
// on lo and skip, loudly, where this process may not.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/capture"
	"github.com/backoff-audit/audit/internal/testutil"
	"github.com/backoff-audit/audit/pb"
	"github.com/backoff-audit/audit/report"
	"github.com/backoff-audit/audit/session"
)

// checkControlSession asserts what a session followed from the control
// port must show: the Start's cap, the server's verdict as its Stop
// answered it, and a cross-check of Stop's backoff_ms against the
// kernel's intervals, interval by interval, that agrees.
func checkControlSession(t *testing.T, rep liveJSON, maxMS int32, passed bool, backoffMS []int32, control int) {
	t.Helper()
	if rep.Session.MaxMS != maxMS || rep.Session.Cause != session.CauseStop {
		t.Errorf("session %+v; want the Start's cap %d ms, ended by Stop", rep.Session, maxMS)
	}
	if rep.Server == nil || rep.Server.Passed != passed {
		t.Fatalf("server verdict %+v; want passed=%v as Stop answered", rep.Server, passed)
	}
	if diff := cmp.Diff(backoffMS, rep.Server.BackoffMS); diff != "" {
		t.Errorf("server's backoff_ms (-Stop's answer +report):\n%s", diff)
	}
	cc := rep.CrossCheck
	if cc == nil || cc.ServerSide != session.ServerSideBackoff {
		t.Fatalf("cross-check %+v; want one against backoff_ms", cc)
	}
	if len(cc.Intervals) != len(backoffMS) || len(rep.Peers) != 1 || len(rep.Peers[0].Intervals) != len(backoffMS) {
		t.Fatalf("cross-check has %d intervals, kernel peers %d; want the %d of backoff_ms on both sides",
			len(cc.Intervals), len(rep.Peers), len(backoffMS))
	}
	for i, iv := range cc.Intervals {
		kernel := rep.Peers[0].Intervals[i]
		// On loopback an app delay is a few ms (docs/spec.md §6.4), tens
		// on a busy machine: the shift stays within the tolerance the
		// verifier allows for it, far below an interval's length.
		if tol := float64(backoff.DefaultPolicy().Tolerance) / float64(time.Millisecond); !iv.InKernel || !iv.InServer || iv.ServerMS != backoffMS[i] || iv.KernelMS != kernel.MeasuredMS ||
			iv.ShiftMS < -tol || iv.ShiftMS > tol || iv.KernelOK != iv.ServerOK {
			t.Errorf("interval %d: %+v; want kernel %.3f ms beside the server's %d ms, within %.0f ms, same verdict",
				i+1, iv, kernel.MeasuredMS, backoffMS[i], tol)
		}
	}
	if !cc.Agree {
		t.Errorf("cross-check does not agree: %+v", cc.Disagreements)
	}
	c := rep.Live.Control
	if c == nil || int(c.Port) != control || c.Received == 0 || c.Lost() != 0 || c.MidStream != 0 {
		t.Errorf("control capture %+v; want port %d, packets received, none lost", c, control)
	}
}

// TestLiveAttachControlPort: the reference server, an auditor attached to
// its control port, the grpc-go interop client.
// The session starts at the decoded Start and ends at the decoded Stop,
// and its report agrees with what the server's Stop answered.
func TestLiveAttachControlPort(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	r := startLive(t, Config{Attach: true, RetryPort: srv.Retry, ControlPort: srv.Control})
	if !strings.Contains(r.errOut.String(), "capturing control port "+strconv.Itoa(srv.Control)) {
		t.Errorf("stderr does not say the control port is captured:\n%s", r.errOut)
	}
	client := runLiveClient(t, srv.Control, srv.Retry, 4500*time.Millisecond)
	end, _ := srv.session(t)
	if diff := cmp.Diff(end.BackoffMS, client.Server.GetBackoffMs()); diff != "" {
		t.Fatalf("backoff_ms (-record +client):\n%s", diff)
	}
	reps, _ := r.reports(t, 1)
	checkControlSession(t, reps[0], liveMaxMS, end.Passed, end.BackoffMS, srv.Control)
	// The JSON members this adds to a session report.
	var js struct {
		Live       struct{ Control map[string]json.RawMessage }
		CrossCheck map[string]json.RawMessage `json:"crosscheck"`
	}
	if err := json.Unmarshal([]byte(strings.SplitN(r.out.String(), "\n", 2)[0]), &js); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"port", "received", "dropped", "if_dropped", "joined_mid_stream"} {
		if _, ok := js.Live.Control[k]; !ok {
			t.Errorf("JSON live.control lacks %q", k)
		}
	}
	for _, k := range []string{"server_side", "intervals"} {
		if _, ok := js.CrossCheck[k]; !ok {
			t.Errorf("JSON crosscheck lacks %q", k)
		}
	}
}

// TestLiveAttachControlPortWrite: with Write the file keeps the control
// port's whole packets beside the retry port's headers (pcapng, one
// interface each), so AuditFiles redoes the cross-check from the file
// alone: it finds the control port by itself and gives the session the
// live run gave, server verdict, backoff_ms and every interval alike.
func TestLiveAttachControlPortWrite(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	path := filepath.Join(t.TempDir(), "run.pcap")
	r := startLive(t, Config{Attach: true, RetryPort: srv.Retry, ControlPort: srv.Control, Write: path})
	runLiveClient(t, srv.Control, srv.Retry, 4500*time.Millisecond)
	end, _ := srv.session(t)
	reps, _ := r.reports(t, 1)
	rep := reps[0]
	// TestLiveAttachControlPort checks the live report itself; here, that
	// it is the session the file must give again.
	if rep.Server == nil || rep.Server.Passed != end.Passed || !slices.Equal(rep.Server.BackoffMS, end.BackoffMS) ||
		rep.CrossCheck == nil || len(rep.CrossCheck.Intervals) != len(end.BackoffMS) {
		t.Fatalf("live report: server %+v, cross-check %+v; want Stop's answer (passed=%v, backoff_ms %v) and its intervals",
			rep.Server, rep.CrossCheck, end.Passed, end.BackoffMS)
	}
	live := r.stop(t)
	if live.err != nil {
		t.Fatalf("Run: %v", live.err)
	}
	if rep.Live.Write != path {
		t.Errorf("report's write file %q; want %q", rep.Live.Write, path)
	}
	st, err := capture.ReadFile(path, capture.Options{}, func(attempt.SYN) {})
	if err != nil || st.Format != "pcapng" || st.Truncated {
		t.Fatalf("write file: %+v, %v; want a complete pcapng file", st, err)
	}

	for _, control := range []uint16{0, uint16(srv.Control)} { // found, or named
		f := auditFiles(t, FilesConfig{JSON: true, Control: control}, path)
		var off report.Report
		if err := json.Unmarshal([]byte(f.stdout), &off); err != nil {
			t.Fatalf("AuditFiles, control port %d: %s, %v (%v)\n%s\n%s", control, f.verdict(), err, f.err, f.stdout, f.stderr)
		}
		if f.verdict() != live.verdict() || off.Record == nil || int(off.Record.ControlPort) != srv.Control ||
			int(off.Port) != srv.Retry || len(off.Sessions) != 1 {
			t.Fatalf("AuditFiles, control port %d: %s, record %+v, port %d, %d sessions; want %s as live, control port %d, retry port %d, 1 session\n%s",
				control, f.verdict(), off.Record, off.Port, len(off.Sessions), live.verdict(), srv.Control, srv.Retry, f.stderr)
		}
		s := off.Sessions[0]
		if s.Session.MaxMS != rep.Session.MaxMS {
			t.Errorf("AuditFiles, control port %d: cap %d ms; live %d ms", control, s.Session.MaxMS, rep.Session.MaxMS)
		}
		if diff := cmp.Diff(rep.Server, s.Server); diff != "" {
			t.Errorf("AuditFiles, control port %d: server verdict (-live +file):\n%s", control, diff)
		}
		if diff := cmp.Diff(rep.CrossCheck, s.CrossCheck, netipEq, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("AuditFiles, control port %d: cross-check (-live +file):\n%s", control, diff)
		}
	}
}

// systemPython is Debian's interpreter, the one python3-grpcio installs for
// (docs/spec.md §6); a python3 earlier on PATH may lack grpc.
const systemPython = "/usr/bin/python3"

// pythonServer is testdata/interop/reconnect_server.py running: a
// ReconnectService of gRPC C-core, whose server sends its SETTINGS before
// the client's preface.
type pythonServer struct {
	control, retry int
	lines          chan string // what it prints after its ports
}

// startPythonServer runs the Python server, or skips loudly where
// python3-grpcio is missing.
func startPythonServer(t *testing.T) *pythonServer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	if out, err := exec.CommandContext(ctx, systemPython, "-c", "import grpc").CombinedOutput(); err != nil {
		t.Skipf("SKIPPED, NOT RUN: the C-core server needs python3-grpcio for %s (apt-get install python3-grpcio): %v\n%s", systemPython, err, out)
	}
	cmd := exec.CommandContext(ctx, systemPython, "../testdata/interop/reconnect_server.py")
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 5 * time.Second
	stderr := &testutil.SyncBuffer{}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		cmd.Wait()
		if t.Failed() {
			t.Logf("reconnect_server.py stderr:\n%s", stderr)
		}
	})
	s := &pythonServer{lines: make(chan string, 16)}
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		t.Fatalf("reconnect_server.py printed no ports: %v\n%s", sc.Err(), stderr)
	}
	var ports struct {
		Control int `json:"control_port"`
		Retry   int `json:"retry_port"`
	}
	if err := json.Unmarshal(sc.Bytes(), &ports); err != nil || ports.Control == 0 || ports.Retry == 0 {
		t.Fatalf("reconnect_server.py printed %q: %v", sc.Text(), err)
	}
	s.control, s.retry = ports.Control, ports.Retry
	go func() {
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		close(s.lines)
		io.Copy(io.Discard, out)
	}()
	return s
}

// stop waits for the server's line of its Stop answer.
func (s *pythonServer) stop(t *testing.T) (passed bool, backoffMS []int32) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case l, ok := <-s.lines:
			if !ok {
				t.Fatal("reconnect_server.py ended without a Stop line")
			}
			var v struct {
				Stop *struct {
					Passed    bool    `json:"passed"`
					BackoffMS []int32 `json:"backoff_ms"`
				} `json:"stop"`
			}
			if json.Unmarshal([]byte(l), &v) == nil && v.Stop != nil {
				return v.Stop.Passed, v.Stop.BackoffMS
			}
		case <-timeout:
			t.Fatal("no Stop line from reconnect_server.py in 20 s")
		}
	}
}

// TestLiveAttachControlPortCCore: the same with neither side of this
// project: the Python ReconnectService and the C-core client, both of
// Debian's python3-grpcio.
func TestLiveAttachControlPortCCore(t *testing.T) {
	t.Parallel()
	requireCapture(t)
	srv := startPythonServer(t)
	r := startLive(t, Config{Attach: true, RetryPort: srv.retry, ControlPort: srv.control})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, systemPython, "../testdata/interop/reconnect_client.py",
		"--server_host=127.0.0.1", "--server_control_port="+strconv.Itoa(srv.control), "--server_retry_port="+strconv.Itoa(srv.retry),
		"--max_reconnect_backoff_ms=2000", "--deadline_s=6")
	var stderr bytes.Buffer
	cmd.Stderr, cmd.WaitDelay = &stderr, 5*time.Second
	out, err := cmd.Output()
	var client struct {
		BackoffMS []int32 `json:"backoff_ms"`
	}
	if jerr := json.Unmarshal(out, &client); jerr != nil {
		t.Fatalf("reconnect_client.py (%v) printed %q: %v\nstderr:\n%s", err, out, jerr, &stderr)
	}
	passed, backoffMS := srv.stop(t)
	if diff := cmp.Diff(backoffMS, client.BackoffMS); diff != "" {
		t.Fatalf("backoff_ms (-server +client):\n%s", diff)
	}
	reps, _ := r.reports(t, 1)
	checkControlSession(t, reps[0], 2000, passed, backoffMS, srv.control)
}

// TestLiveAttachControlMidStream: a control connection open before the
// capture started cannot be decoded (its HPACK state went by unseen): the
// auditor says so on stderr as soon as it sees the connection, and in its
// statistics at exit, rather than missing the session silently.
func TestLiveAttachControlMidStream(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := grpc.NewClient(net.JoinHostPort("127.0.0.1", strconv.Itoa(srv.Control)),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Connect()
	for st := conn.GetState(); st != connectivity.Ready; st = conn.GetState() {
		if !conn.WaitForStateChange(ctx, st) {
			t.Fatalf("control connection not ready: %v", st)
		}
	}
	// The connection and its preface are on the wire: now the capture.
	r := startLive(t, Config{Attach: true, RetryPort: srv.Retry, ControlPort: srv.Control})
	rc := pb.NewReconnectServiceClient(conn)
	if _, err := rc.Start(ctx, &pb.ReconnectParams{MaxReconnectBackoffMs: liveMaxMS}); err != nil {
		t.Fatal(err)
	}
	retry, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(srv.Retry)))
	if err == nil {
		retry.Close()
	}
	if _, err := rc.Stop(ctx, &pb.Empty{}); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "the mid-stream warning", func() bool { return strings.Contains(r.errOut.String(), "joined mid-stream") })
	if res := r.stop(t); res.verdict() != runNothing {
		t.Errorf("Run: %s (%v); want nothing judged", res.verdict(), res.err)
	}
	if out := r.out.String(); out != "" {
		t.Errorf("a session was reported from calls that cannot be decoded:\n%s", out)
	}
	for _, want := range []string{"cannot be decoded", "1 connection joined mid-stream", "outside any session"} {
		if !strings.Contains(r.errOut.String(), want) {
			t.Errorf("stderr does not say %q:\n%s", want, r.errOut)
		}
	}
}
