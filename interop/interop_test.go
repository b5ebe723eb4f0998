package interop

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/internal/testutil"
	"github.com/backoff-audit/audit/pb"
)

func TestConnectParams(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want grpc.ConnectParams
	}{
		{
			name: "defaults: never a zero MaxDelay",
			cfg:  Config{InitialBackoffMS: 1000},
			want: grpc.ConnectParams{
				Backoff:           grpcbackoff.Config{BaseDelay: time.Second, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 120 * time.Second},
				MinConnectTimeout: 20 * time.Second,
			},
		},
		{
			name: "a short connect timeout",
			cfg:  Config{InitialBackoffMS: 1000, MinConnectTimeoutMS: 3000},
			want: grpc.ConnectParams{
				Backoff:           grpcbackoff.Config{BaseDelay: time.Second, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 120 * time.Second},
				MinConnectTimeout: 3 * time.Second,
			},
		},
		{
			name: "cap and a deliberately wrong base delay",
			cfg:  Config{InitialBackoffMS: 300, MaxReconnectBackoffMS: 2000},
			want: grpc.ConnectParams{
				Backoff:           grpcbackoff.Config{BaseDelay: 300 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
				MinConnectTimeout: 20 * time.Second,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.cfg.connectParams()); diff != "" {
				t.Errorf("connectParams() (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCheckBackoffs holds the own check to Policy.Check interval by
// interval: laying the gaps end to end must not change a single judgement.
func TestCheckBackoffs(t *testing.T) {
	p := backoff.ReferencePolicy(2000)
	tests := []struct {
		name        string
		backoffMS   []int32
		wantVerdict backoff.Verdict
	}{
		{name: "none", wantVerdict: backoff.TooFew},
		{name: "grpc-go capped", backoffMS: []int32{1000, 1734, 1650, 2388}, wantVerdict: backoff.Passed},
		{name: "window edges", backoffMS: []int32{700, 1180, 1500, 2500}, wantVerdict: backoff.Passed},
		{name: "a millisecond early", backoffMS: []int32{699}, wantVerdict: backoff.Failed},
		{name: "300 ms base", backoffMS: []int32{300, 480, 768}, wantVerdict: backoff.Failed},
		{name: "late after a pass", backoffMS: []int32{1000, 2021}, wantVerdict: backoff.Failed},
		{name: "backwards", backoffMS: []int32{-5}, wantVerdict: backoff.Failed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := backoff.VerifyBackoff(p, tt.backoffMS, backoff.RetryMode{})
			var want []backoff.Interval
			for i, b := range tt.backoffMS {
				want = append(want, p.Check(i+1, time.Duration(b)*time.Millisecond))
			}
			if diff := cmp.Diff(want, got.Intervals, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("intervals (-Policy.Check +VerifyBackoff):\n%s", diff)
			}
			if diff := cmp.Diff(tt.backoffMS, got.BackoffMS, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("backoff_ms (-want +got):\n%s", diff)
			}
			if got.Reference.Verdict != tt.wantVerdict {
				t.Errorf("verdict = %q, want %q", got.Reference.Verdict, tt.wantVerdict)
			}
		})
	}
}

func TestVerdict(t *testing.T) {
	p := backoff.ReferencePolicy(2000)
	tests := []struct {
		name         string
		code         codes.Code
		serverPassed bool
		backoffMS    []int32
		wantPassed   bool
		wantReason   string
	}{
		{name: "both pass", code: codes.DeadlineExceeded, serverPassed: true, backoffMS: []int32{1000, 1600}, wantPassed: true},
		{
			name: "both fail", code: codes.DeadlineExceeded, backoffMS: []int32{300, 480},
			wantReason: "server says failed; interval 1: 300 ms is early (expected 1000 ms, window 700–1300 ms)",
		},
		{
			name: "server passes what the own check fails", code: codes.DeadlineExceeded, serverPassed: true, backoffMS: []int32{1000, 2100},
			wantReason: "server says passed, but the client's own check fails: interval 2: 2100 ms is late (expected 1600 ms, window 1180–2020 ms)",
		},
		{
			name: "reference passes a client that never connected", code: codes.DeadlineExceeded, serverPassed: true,
			wantReason: "server says passed, but the client's own check fails: too few attempts: 1 connection(s), at least 2 are needed to measure a backoff",
		},
		{
			name: "server fails what the own check passes", code: codes.DeadlineExceeded, backoffMS: []int32{1000},
			wantReason: "server says failed, but its 1 backoff(s) pass the client's own check",
		},
		{
			name: "retry RPC succeeded", code: codes.OK, serverPassed: true, backoffMS: []int32{1000},
			wantReason: "retry RPC ended in OK, want DeadlineExceeded: <nil>",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Report{
				Retry:  RetryOutcome{Code: tt.code},
				Server: &pb.ReconnectInfo{Passed: tt.serverPassed, BackoffMs: tt.backoffMS},
				Own:    backoff.VerifyBackoff(p, tt.backoffMS, backoff.RetryMode{}),
			}
			passed, reason := r.Verdict()
			if diff := cmp.Diff([]any{tt.wantPassed, tt.wantReason}, []any{passed, reason}); diff != "" {
				t.Errorf("Verdict() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReportWrite(t *testing.T) {
	cfg := Config{ServerHost: "127.0.0.1", ControlPort: 1001, RetryPort: 1002, MaxReconnectBackoffMS: 2000, InitialBackoffMS: 1000, Deadline: 10 * time.Second}
	backoffMS := []int32{1000, 1734, 1650, 2500, 2501}
	r := &Report{
		Config:  cfg,
		Connect: cfg.connectParams(),
		Retry:   RetryOutcome{Code: codes.DeadlineExceeded, Took: 10*time.Second + 1234567},
		Server:  &pb.ReconnectInfo{Passed: false, BackoffMs: backoffMS},
		Own:     backoff.VerifyBackoff(cfg.policy(), backoffMS, backoff.RetryMode{}),
	}
	var buf bytes.Buffer
	if err := r.Write(&buf); err != nil {
		t.Fatalf("Write: %v", err)
	}
	want := `control 127.0.0.1:1001, retry 127.0.0.1:1002 (TLS, server name foo.test.google.fr)
grpc-go backoff: initial 1s ×1.6 ±20% cap 2s, min connect timeout 20s
retry RPC: DeadlineExceeded after 10.001s (want DeadlineExceeded)

  k  backoff_ms  expected_ms  window_ms   jitter  verdict
  1        1000       1000.0   700–1300   +0.00%  ok
  2        1734       1600.0  1180–2020   +8.38%  ok
  3        1650       2000.0  1500–2500  -17.50%  ok
  4        2500       2000.0  1500–2500  +25.00%  ok
  5        2501       2000.0  1500–2500  +25.05%  late

server: failed (5 backoffs)
own check: failed: interval 5: 2501 ms is late (expected 2000 ms, window 1500–2500 ms) (initial 1s ×1.6 ±20% cap 2s, tolerance 100ms)
`
	if diff := cmp.Diff(want, buf.String()); diff != "" {
		t.Errorf("Write (-want +got):\n%s", diff)
	}
}

// cannedServer answers Stop with a fixed ReconnectInfo, whatever arrived:
// a server that lies, which the real one cannot be made to do.
type cannedServer struct {
	pb.UnimplementedReconnectServiceServer
	info *pb.ReconnectInfo

	mu     sync.Mutex
	starts []*pb.ReconnectParams
	stops  int
}

func (s *cannedServer) Start(_ context.Context, p *pb.ReconnectParams) (*pb.Empty, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.starts = append(s.starts, p)
	return &pb.Empty{}, nil
}

func (s *cannedServer) Stop(context.Context, *pb.Empty) (*pb.ReconnectInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stops++
	return s.info, nil
}

// TestRunOwnCheckDisagrees runs the five steps against a server that
// says passed for a backoff the verifier fails: the client must not pass.
func TestRunOwnCheckDisagrees(t *testing.T) {
	t.Parallel()
	srv := &cannedServer{info: &pb.ReconnectInfo{Passed: true, BackoffMs: []int32{1000, 3000}}}
	cfg := Config{
		ServerHost:            "127.0.0.1",
		ControlPort:           startCanned(t, srv),
		RetryPort:             startClosing(t),
		MaxReconnectBackoffMS: 2000,
		InitialBackoffMS:      1000,
		Deadline:              1500 * time.Millisecond,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if rep.Retry.Code != codes.DeadlineExceeded {
		t.Errorf("retry RPC ended in %v (%v), want DeadlineExceeded", rep.Retry.Code, rep.Retry.Err)
	}
	passed, reason := rep.Verdict()
	if passed || !strings.Contains(reason, "own check fails: interval 2: 3000 ms is late") {
		t.Errorf("Verdict() = %v, %q; want a failure naming interval 2", passed, reason)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if diff := cmp.Diff([]*pb.ReconnectParams{{MaxReconnectBackoffMs: 2000}}, srv.starts, protocmp.Transform()); diff != "" {
		t.Errorf("Start requests (-want +got):\n%s", diff)
	}
	if srv.stops != 1 {
		t.Errorf("Stop called %d times, want 1", srv.stops)
	}
}

// startCanned serves srv on a loopback port until the test ends.
func startCanned(t *testing.T, srv *cannedServer) (port int) {
	t.Helper()
	control, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	gs := grpc.NewServer()
	pb.RegisterReconnectServiceServer(gs, srv)
	go gs.Serve(control)
	t.Cleanup(gs.Stop)
	return control.Addr().(*net.TCPAddr).Port
}

// startClosing is a retry port as docs/spec.md §1 has it: every connection
// closed at once.
func startClosing(t *testing.T) (port int) {
	t.Helper()
	retry, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	var accepted sync.WaitGroup
	accepted.Add(1)
	go func() {
		defer accepted.Done()
		for {
			c, err := retry.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	t.Cleanup(func() { retry.Close(); accepted.Wait() })
	return retry.Addr().(*net.TCPAddr).Port
}

var progressLine = regexp.MustCompile(`^retry channel (still )?(IDLE|CONNECTING|READY|TRANSIENT_FAILURE|SHUTDOWN) after (\d+\.\d) s of 1\.5 s$`)

// TestRunProgress holds the retry RPC to its sign of life: with a retry
// port nothing listens on, a line when the channel reaches
// TRANSIENT_FAILURE and lines while the state holds, in time order, none
// past the deadline and none once the RPC has ended.
func TestRunProgress(t *testing.T) {
	t.Parallel()
	srv := &cannedServer{info: &pb.ReconnectInfo{Passed: true, BackoffMs: []int32{1000}}}
	var progress testutil.SyncBuffer
	cfg := Config{
		ServerHost:       "127.0.0.1",
		ControlPort:      startCanned(t, srv),
		RetryPort:        int(testutil.ClosedPort(t)),
		InitialBackoffMS: 1000,
		Deadline:         1500 * time.Millisecond,
		Progress:         &progress,
		ProgressEvery:    400 * time.Millisecond,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if rep.Retry.Code != codes.DeadlineExceeded {
		t.Errorf("retry RPC ended in %v (%v), want DeadlineExceeded", rep.Retry.Code, rep.Retry.Err)
	}
	out := progress.String()
	t.Logf("progress:\n%s", out)
	var states []string
	var still int
	last := -1.0
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		m := progressLine.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("progress line %q does not match %v", l, progressLine)
		}
		var elapsed float64
		fmt.Sscan(m[3], &elapsed)
		if elapsed < last || elapsed > 1.5 {
			t.Errorf("line %q: elapsed %.1f s after %.1f s; want time order within the 1.5 s deadline", l, elapsed, last)
		}
		last = elapsed
		if m[1] != "" {
			if len(states) == 0 {
				t.Errorf("line %q before any state change; the first line must name the state the RPC's start led to", l)
			}
			still++
		} else {
			states = append(states, m[2])
		}
	}
	// A state may be missed (IDLE to CONNECTING to TRANSIENT_FAILURE can
	// pass between two looks), but a change line names a new state.
	if !slices.Contains(states, "TRANSIENT_FAILURE") {
		t.Errorf("state changes %v; want TRANSIENT_FAILURE among them", states)
	}
	for i := 1; i < len(states); i++ {
		if states[i] == states[i-1] {
			t.Errorf("state changes %v: %s twice in a row", states, states[i])
		}
	}
	if still == 0 {
		t.Errorf("no line while the state held, with a line due every %v", cfg.ProgressEvery)
	}
	// The report keeps the changes too, from the state before the RPC.
	got := rep.Retry.States
	var names []string
	for i, sc := range got {
		names = append(names, sc.State.String())
		if i == 0 && (sc.State != connectivity.Idle || !sc.At.Equal(rep.Retry.Start)) {
			t.Errorf("first state %v at %v, want IDLE at the RPC's start %v", sc.State, sc.At, rep.Retry.Start)
		}
		if i > 0 && sc.At.Before(got[i-1].At) {
			t.Errorf("state %d (%v) at %v, before the one it follows", i, sc.State, sc.At)
		}
		if d := sc.At.Sub(rep.Retry.Start); d < 0 || d > rep.Retry.Took {
			t.Errorf("state %d (%v) %v after the RPC's start, outside its %v", i, sc.State, d, rep.Retry.Took)
		}
	}
	if !slices.Contains(names, "TRANSIENT_FAILURE") {
		t.Errorf("Retry.States %v; want TRANSIENT_FAILURE among them", names)
	}
	// The watcher would have written again by now, had Run left it running.
	time.Sleep(2 * cfg.ProgressEvery)
	if after := progress.String(); after != out {
		t.Errorf("progress after Run returned: %q", after[len(out):])
	}
}

// The own check judges the server's list in the retry port's mode: a storm
// of READY connections is reset after reset, not early intervals; and in a
// mode where the server sees only some attempts, neither its answer nor the
// own check judges the chain, and the run does not fail for it.
func TestOwnCheckModes(t *testing.T) {
	p := backoff.ReferencePolicy(2000)
	storm := []int32{2, 3, 2, 5, 2}
	for _, tt := range []struct {
		mode         backoff.RetryMode
		serverPassed bool
		wantOwn      backoff.Verdict
		wantPassed   bool
	}{
		{backoff.RetryMode{}, true, backoff.Failed, false},
		{backoff.RetryMode{Kind: backoff.ModeSettingsClose}, true, backoff.Passed, true},
		{backoff.RetryMode{Kind: backoff.ModeGoaway}, true, backoff.Passed, true},
		{backoff.RetryMode{Kind: backoff.ModeRefuse}, false, backoff.NotJudged, true},
		{backoff.RetryMode{Kind: backoff.ModeRestart, Down: 3 * time.Second}, false, backoff.NotJudged, true},
	} {
		r := &Report{Retry: RetryOutcome{Code: codes.DeadlineExceeded}, Server: &pb.ReconnectInfo{Passed: tt.serverPassed, BackoffMs: storm},
			Own: backoff.VerifyBackoff(p, storm, tt.mode)}
		passed, reason := r.Verdict()
		if r.Own.Reference.Verdict != tt.wantOwn || passed != tt.wantPassed {
			t.Errorf("%v: own check %s (%s), run passed %v (%s); want %s, %v", tt.mode, r.Own.Reference.Verdict, r.Own.Reason(), passed, reason, tt.wantOwn, tt.wantPassed)
		}
	}
}

// TestOwnCheckTakesTheConnectTimeout: in hang mode each interval is the
// connect timeout the client was given (docs/spec.md §7.3), and the own
// check judges them with it, as audit live does; with the spec's 20 s a
// client that gave up at 3 s would fail it.
func TestOwnCheckTakesTheConnectTimeout(t *testing.T) {
	hang := backoff.RetryMode{Kind: backoff.ModeHang}
	backoffMS := []int32{3002, 3001, 3003}
	for _, tt := range []struct {
		minConnectMS int32
		want         backoff.Verdict
	}{{3000, backoff.Passed}, {0, backoff.Failed}} {
		cfg := Config{MaxReconnectBackoffMS: 2000, MinConnectTimeoutMS: tt.minConnectMS}
		if got := backoff.VerifyBackoff(cfg.policy(), backoffMS, hang).Reference.Verdict; got != tt.want {
			t.Errorf("--min_connect_timeout_ms=%d: own check %s, want %s", tt.minConnectMS, got, tt.want)
		}
		if got := cfg.connectParams().MinConnectTimeout; got != cfg.policy().MinConnectTimeout {
			t.Errorf("--min_connect_timeout_ms=%d: grpc-go's MinConnectTimeout %v, the check's %v", tt.minConnectMS, got, cfg.policy().MinConnectTimeout)
		}
	}
}
