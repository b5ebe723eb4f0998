package realclients

import (
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/backoff-audit/audit/backoff"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// modeCase is one retry-port mode: how each client is run in it and what
// it must have done.
type modeCase struct {
	// name is the subtest's: the mode as --retry_mode spells it, or a
	// variant of it.
	name string
	mode backoff.RetryMode
	// stacks, when set, are the only stacks run in this case.
	stacks []string
	// storm marks the modes whose connections succeed and drop: the
	// clients reconnect hundreds of times a second, which loads the
	// machine under the other runs' timing, so these run on their own.
	storm bool
	// args are the run's settings for one stack.
	args func(stack string) args
	// check holds one client's run to what that client does in this mode.
	check func(t testing.TB, o outcome)
}

// TestClients runs every client in every mode, each run with its own
// server; `go test -v -run 'TestClients/^MODE$/STACK'` shows one run's
// figures (anchored: "close" alone also matches settings-close). The storm
// modes run first, one after the other; then every other run at once, as
// they wait on timers, not on the CPU.
func TestClients(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			if !m.storm {
				t.Parallel()
			}
			for _, st := range stacks {
				if m.stacks != nil && !slices.Contains(m.stacks, st.name) {
					continue
				}
				t.Run(st.name, func(t *testing.T) {
					st.require(t)
					t.Parallel()
					runChecked(t, st, m)
				})
			}
		})
	}
}

// tries is how many times a run is made before its checks' failures
// stand. The machines these tests run on are shared, and stall a process
// for one to three seconds now and then (a client's 1.6 s backoff measured
// as 3.0 s, grpc-go's 3 s connect timeout as 4.4 s, all runs at the same
// moment): such a run says nothing about the client. A client that
// misbehaves fails every try.
const tries = 3

// runChecked makes the run of st in m and checks it, again while its
// checks fail, up to tries times; every try's figures and failures are
// logged, and the last try's failures fail the test.
func runChecked(t *testing.T, st stack, m modeCase) {
	for try := 1; ; try++ {
		o := run(t, st, m.mode, m.args(st.name))
		t.Logf("try %d: %s%s", try, o.summary(), o.readingsSummary())
		// The readings of one wire agree or not whatever the machine's
		// load did to the client: every try's disagreement stands.
		wantAgree(t, o)
		rec := &recorder{TB: t}
		rec.check(m.check, o)
		rec.check(wantServerSaw, o)
		if rec.skip != "" {
			t.Skip(rec.skip)
		}
		if len(rec.errs) == 0 {
			return
		}
		if try == tries {
			for _, e := range rec.errs {
				t.Error(e)
			}
			return
		}
		t.Logf("try %d of %d failed, so once more:\n\t%s", try, tries, strings.Join(rec.errs, "\n\t"))
	}
}

// recorder is a testing.TB whose failures and skips are kept, not
// reported, so that runChecked can decide on them; everything else goes
// to the real test.
type recorder struct {
	testing.TB
	errs []string
	skip string
}

// check runs fn in a goroutine of its own, where Fatalf and Skipf can end
// it as they end a test.
func (r *recorder) check(fn func(testing.TB, outcome), o outcome) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(r, o)
	}()
	<-done
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) Error(args ...any) {
	r.errs = append(r.errs, fmt.Sprint(args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Fatal(args ...any) {
	r.Error(args...)
	runtime.Goexit()
}

func (r *recorder) Skipf(format string, args ...any) {
	r.skip = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Skip(args ...any) {
	r.skip = fmt.Sprint(args...)
	runtime.Goexit()
}

func (r *recorder) Failed() bool { return len(r.errs) > 0 }

var modes = []modeCase{
	closeMode, closePlaintextMode, refuseMode, hangMode, hangDefaultMode, restartMode,
	settingsCloseMode, goawayMode, otherNameMode, outageMode,
}

// testCA is the retry port's test certificate, its own CA
// (testdata/README.md, "Test certificate"), for foo.test.google.fr.
var testCA = filepath.Join(repoRoot, "testdata", "tls", "server.pem")

// closeMode is the interop test (docs/spec.md §1.2): every connection is
// accepted and closed at once, so every attempt fails at once and the
// intervals are the clients' backoffs. With a 2 s cap, 8 s hold at least
// 1000 + 1920 + 2400 ms of backoff and a slow start: at least 4 attempts
// (a client with no backoff makes hundreds).
var closeMode = modeCase{
	name: "close",
	mode: backoff.RetryMode{Kind: backoff.ModeClose},
	args: func(string) args {
		return args{duration: 8 * time.Second, maxBackoffMS: 2000}
	},
	check: func(t testing.TB, o outcome) {
		wantDeadlineOnly(t, o)
		wantStopAgrees(t, o)
		wantServerAgrees(t, o)
		if len(o.chain) < 4 {
			t.Fatalf("%d attempts in %v, want at least 4", len(o.chain), o.args.duration)
		}
		// All start with the initial backoff (docs/spec.md §4.2), the
		// newer C-core's jittered, and jitter within the spec's window
		// after it: a client with no backoff, or a wrong first one, fails
		// here.
		wantReadings(t, o, o.serverResult())
		wantClientSawServer(t, o, 50*time.Millisecond)
		wantKernelSawServer(t, o, 50*time.Millisecond)
	},
}

// closePlaintextMode is closeMode with plaintext channels (--use_tls=false):
// the port closes before either side speaks, so nothing changes.
var closePlaintextMode = modeCase{
	name: "close-plaintext",
	mode: closeMode.mode,
	args: func(stack string) args {
		a := closeMode.args(stack)
		a.plaintext = true
		return a
	},
	check: closeMode.check,
}

// refuseMode: the port listens on nothing during the session, so every
// attempt is refused at once and only the kernel sees it (docs/spec.md
// §7.1); the clients back off as in close mode.
var refuseMode = modeCase{
	name: "refuse",
	mode: backoff.RetryMode{Kind: backoff.ModeRefuse},
	args: func(string) args {
		return args{duration: 8 * time.Second, maxBackoffMS: 2000}
	},
	check: func(t testing.TB, o outcome) {
		wantDeadlineOnly(t, o)
		if len(o.chain) != 0 {
			t.Errorf("the server accepted %d connections on a port that listened on nothing", len(o.chain))
		}
		if v := o.end().Verdict; v != backoff.NotJudged {
			t.Errorf("the server's verdict %q, want %q: it saw none of the attempts", v, backoff.NotJudged)
		}
		ts := needAttempts(t, o)
		if len(ts) < 4 {
			t.Fatalf("%d attempts in %v, want at least 4", len(ts), o.args.duration)
		}
		wantReadings(t, o, backoff.VerifyRun(o.policy(), ts, backoff.Run{Mode: o.mode, End: o.retryEnd()}))
	},
}

// needAttempts are the refused attempts: the kernel's SYNs, or, without
// a capture, the client's own account of them: grpc-js's moves to
// CONNECTING, C-core's failures (a refused attempt fails at once). grpc-go
// gives none, so without a capture its run is skipped, loudly, except in
// CI, which runs as root.
func needAttempts(t testing.TB, o outcome) []time.Time {
	t.Helper()
	if o.noCapture == "" {
		return o.syns
	}
	switch o.stack {
	case grpcJS:
		t.Logf("no capture (%s): the client's own account of its attempts stands in", o.noCapture)
		ca, _ := o.clientAttempts()
		return ca
	case cCore:
		t.Logf("no capture (%s): the client's own account of its failures stands in", o.noCapture)
		at, _ := o.connectFailures()
		return at
	}
	if isCI() {
		t.Fatalf("no capture, and grpc-go's refused attempts show nowhere else: %s", o.noCapture)
	}
	t.Skipf("SKIPPED, NOT RUN: grpc-go's refused attempts show only in a capture of lo, which needs root: %s", o.noCapture)
	return nil
}

// hangT is the connect timeout the hang runs give C-core and grpc-go.
const hangT = 3000 * time.Millisecond

// hangMode: the port accepts and never answers, so each attempt lasts
// until the client gives up on it (docs/spec.md §7.3): the spec's client
// at its connect deadline max(current_deadline, start + T), then at once
// again if that deadline has passed.
var hangMode = modeCase{
	name: "hang",
	mode: backoff.RetryMode{Kind: backoff.ModeHang},
	args: func(string) args {
		return args{duration: 11 * time.Second, maxBackoffMS: 2000, minConnectMS: int32(hangT / time.Millisecond), caFile: testCA}
	},
	check: checkHang,
}

// hangDefaultMode: grpc-go with the spec's connect timeout, 20 s, the
// one run that waits that long.
var hangDefaultMode = modeCase{
	name:   "hang-20s",
	mode:   backoff.RetryMode{Kind: backoff.ModeHang},
	stacks: []string{grpcGo},
	args: func(string) args {
		return args{duration: 24 * time.Second, maxBackoffMS: 2000, caFile: testCA}
	},
	check: checkHang,
}

func checkHang(t testing.TB, o outcome) {
	wantDeadlineOnly(t, o)
	wantStopAgrees(t, o)
	wantServerAgrees(t, o)
	wantKernelSawServer(t, o, 50*time.Millisecond)
	ts, _ := o.attempts()
	res, sigs := o.verify()
	T := o.policy().MinConnectTimeout
	gaps := gapsOf(ts)
	switch o.stack {
	case cCore:
		// C-core gives up at its connect timeout (grpc.min_reconnect_backoff_ms,
		// docs/spec.md §4.3) and, the backoff's deadline (at most 2 s
		// away) being past, tries again at once: every interval is T.
		if len(ts) < 4 {
			t.Fatalf("%d attempts in %v, want at least 4 (one per %v)", len(ts), o.args.duration, T)
		}
		for i, g := range gaps {
			if g < T-50*time.Millisecond || g > T+300*time.Millisecond {
				t.Errorf("interval %d: %v, want the connect timeout %v (−50 ms, +300 ms)", i+1, g, T)
			}
		}
		if !res.Reference.Passed || len(sigs) > 0 {
			t.Errorf("model %s (%s), signatures %v; want passed and none", res.Reference.Verdict, res.Reason(), sigs)
		}
	case grpcGo:
		// grpc-go sleeps its whole backoff after the connect timeout
		// (docs/spec.md §7.4): interval 1 is T + 1000 ms exactly, interval
		// k is T + e_k·U(0.8, 1.2). 11 s hold three attempts at T = 3 s,
		// 24 s two at the default 20 s.
		want := 3
		if T > hangT {
			want = 2
		}
		if len(ts) < want {
			t.Fatalf("%d attempts in %v, want at least %d", len(ts), o.args.duration, want)
		}
		p := o.policy()
		for i, g := range gaps {
			e := time.Duration(p.Expected(i+1) * float64(time.Millisecond))
			lo, hi := T+e*8/10-50*time.Millisecond, T+e*12/10+300*time.Millisecond
			if i == 0 {
				lo, hi = T+e-50*time.Millisecond, T+e+300*time.Millisecond
			}
			if g < lo || g > hi {
				t.Errorf("interval %d: %v, want the connect timeout %v plus the backoff: %v–%v", i+1, g, T, lo, hi)
			}
		}
		if res.Reference.Passed || !hasSig(sigs, backoff.SigSleptAfter) {
			t.Errorf("model %s, signatures %v; want failed, with %q", res.Reference.Verdict, sigs, backoff.SigSleptAfter)
		}
	case grpcJS:
		// grpc-js has no connect timeout: its one attempt hangs until the
		// run ends, and the subchannel never leaves CONNECTING before the
		// channel is closed.
		if len(ts) != 1 {
			t.Errorf("%d attempts, want 1: grpc-js never gives up on a hung connection", len(ts))
		}
		for _, e := range o.line.Subchannel {
			if unixMS(e.UnixMS).Before(o.retryEnd()) && e.State != "CONNECTING" {
				t.Errorf("subchannel went %s (%s); want CONNECTING throughout", e.State, e.Error)
			}
		}
		if res.Reference.Passed || res.Tail == "" || !hasSig(sigs, backoff.SigNoConnTimeout) {
			t.Errorf("model %s (tail %q), signatures %v; want failed, with %q", res.Reference.Verdict, res.Tail, sigs, backoff.SigNoConnTimeout)
		}
	}
}

// wantReadings holds res to both readings passing; for a client that
// jitters its first backoff the strict reading fails exactly when
// interval 1 lies outside INITIAL_BACKOFF ± tolerance (docs/spec.md
// §3.7), and the chain is then named "first interval jittered".
func wantReadings(t testing.TB, o outcome, res backoff.Result) {
	t.Helper()
	if !res.Reference.Passed {
		t.Errorf("reference reading %s (%s); want passed", res.Reference.Verdict, res.Reason())
		return
	}
	if !o.jittersFirst || len(res.Intervals) == 0 {
		if !res.Strict.Passed {
			t.Errorf("strict reading %s (%s); want passed", res.Strict.Verdict, res.Reason())
		}
		return
	}
	p, iv := o.policy(), res.Intervals[0]
	outside := math.Abs(iv.MeasuredMS-float64(p.BaseDelay.Milliseconds())) > float64(p.Tolerance.Milliseconds())
	sig := hasSig(backoff.Signatures(res), backoff.SigFirstJittered)
	if res.Strict.Passed == outside || sig != outside {
		t.Errorf("interval 1 %.1f ms: strict reading %s, %q named %v; want failed and named exactly when outside %v ± %v",
			iv.MeasuredMS, res.Strict.Verdict, backoff.SigFirstJittered, sig, p.BaseDelay, p.Tolerance)
	}
	t.Logf("interval 1 %.1f ms (jittered first backoff): strict reading %s", iv.MeasuredMS, res.Strict.Verdict)
}

func hasSig(sigs []backoff.Signature, name string) bool {
	return slices.ContainsFunc(sigs, func(s backoff.Signature) bool { return s.Name == name })
}

// restartDown is how long the restart runs' port refuses.
const restartDown = 3 * time.Second

// restartMode: the port refuses for restartDown from the session's start,
// then accepts and closes (docs/spec.md §7.1). A client that backs off as
// the spec says comes back at its next scheduled attempt; the model judges
// every interval across the return and reports the recovery.
var restartMode = modeCase{
	name: "restart=" + restartDown.String(),
	mode: backoff.RetryMode{Kind: backoff.ModeRestart, Down: restartDown},
	args: func(string) args {
		return args{duration: 9 * time.Second, maxBackoffMS: 2000}
	},
	check: func(t testing.TB, o outcome) {
		wantDeadlineOnly(t, o)
		wantStopAgrees(t, o)
		if o.session.Back.IsZero() {
			t.Fatalf("the port never came back within the %v run", o.args.duration)
		}
		if d := o.session.Back.Sub(o.session.Start); d < restartDown || d > restartDown+time.Second {
			t.Errorf("the port came back %v after Start, want %v", d, restartDown)
		}
		ts := needAttempts(t, o)
		var after int
		for _, a := range ts {
			if !a.Before(o.session.Back) {
				after++
			}
		}
		if after < 2 || len(ts)-after < 2 {
			t.Fatalf("%d attempts before the port's return and %d after, want at least 2 of each", len(ts)-after, after)
		}
		if o.noCapture == "" && len(o.chain) != after {
			t.Errorf("the server accepted %d connections, the kernel saw %d SYNs after the port came back", len(o.chain), after)
		}
		if v := o.end().Verdict; v != backoff.NotJudged {
			t.Errorf("the server's verdict %q, want %q: it saw only the attempts after the port came back", v, backoff.NotJudged)
		}
		res := backoff.VerifyRun(o.policy(), ts, backoff.Run{Mode: o.mode, End: o.retryEnd(), Back: o.session.Back})
		wantReadings(t, o, res)
		if rv := res.Recovery; rv == nil || !rv.OK {
			t.Errorf("recovery %+v, want one, ok: the first attempt after the return on the backoff's schedule", rv)
		}
	},
}

// outageMode: a healthy server that goes down and comes back
// (docs/spec.md §7.1). The port serves for 3 s, holding the client's
// connection READY; then it closes it and refuses for 4 s, then serves
// again. The client's success reset its backoff, so it comes back at once,
// is refused, backs off as in refuse mode across the outage (1000, 1600,
// then 2000 ms under the 2 s cap: its attempts fall at about 3.0, 4.0,
// 5.6 and 7.6 s), and its first attempt after the return is READY again.
var outageMode = modeCase{
	name: "outage=3s,4s",
	mode: backoff.RetryMode{Kind: backoff.ModeOutage, Serve: 3 * time.Second, Down: 4 * time.Second},
	args: func(string) args {
		return args{duration: 10 * time.Second, maxBackoffMS: 2000, caFile: testCA}
	},
	check: checkOutage,
}

func checkOutage(t testing.TB, o outcome) {
	// The port answers each RPC UNAVAILABLE while it serves, and the
	// client makes it again; the last one ends at the run's deadline.
	for st, n := range o.line.Counts.RPCStatus {
		if st != "UNAVAILABLE" && st != "DEADLINE_EXCEEDED" && st != "UNKNOWN" {
			t.Errorf("%d retry RPCs ended in %s; want UNAVAILABLE, UNKNOWN or DEADLINE_EXCEEDED", n, st)
		}
	}
	wantStopAgrees(t, o)
	if v := o.end().Verdict; v != backoff.NotJudged {
		t.Errorf("the server's verdict %q, want %q: it saw none of the attempts its port refused", v, backoff.NotJudged)
	}
	down, back := o.session.Down, o.session.Back
	if down.IsZero() || back.IsZero() {
		t.Fatalf("the port went down at %v and came back at %v; want both within the %v run", down, back, o.args.duration)
	}
	// The client's own account: READY, not READY once the port went down,
	// READY again after it came back.
	var states []string
	for _, s := range o.line.States {
		at := unixMS(s.UnixMS)
		switch {
		case s.State == "READY" && at.Before(down):
			states = appendOnce(states, "READY before the outage")
		case s.State != "READY" && !at.Before(down) && at.Before(back):
			states = appendOnce(states, "not READY in the outage")
		case s.State == "READY" && !at.Before(back):
			states = appendOnce(states, "READY after it")
		}
	}
	if want := []string{"READY before the outage", "not READY in the outage", "READY after it"}; !slices.Equal(states, want) {
		t.Errorf("the client's channel states %v; want %v", o.line.States, want)
	}
	if o.noCapture != "" {
		t.Logf("no capture (%s): the refused attempts show nowhere else", o.noCapture)
		return
	}
	// The wire's account: attempt 1 READY, refused ones across the outage,
	// the first after the return READY.
	var fates []string
	for i, e := range o.endings {
		at := o.syns[i]
		switch {
		case e.Ready && at.Before(down):
			fates = appendOnce(fates, "READY before the outage")
		case e.Fate == backoff.FateRefused && !at.Before(down) && at.Before(back):
			fates = appendOnce(fates, "refused in the outage")
		case e.Ready && !at.Before(back):
			fates = appendOnce(fates, "READY after it")
		}
	}
	if want := []string{"READY before the outage", "refused in the outage", "READY after it"}; !slices.Equal(fates, want) {
		t.Errorf("the attempts' fates %v at %v; want %v", o.endings, o.syns, want)
	}
	res, _ := o.verify()
	if !res.Reference.Passed {
		t.Errorf("the model: %s (%s); want passed", res.Reference.Verdict, res.Reason())
	}
	if rv := res.Recovery; rv == nil || !rv.OK || rv.ReadyMS == nil {
		t.Errorf("recovery %+v, want one, ok, READY: the first attempt after the return on the backoff's schedule", rv)
	}
}

// appendOnce appends s unless it is the last of list.
func appendOnce(list []string, s string) []string {
	if len(list) > 0 && list[len(list)-1] == s {
		return list
	}
	return append(list, s)
}

// stormArgs are the settings of the modes whose connections succeed: TLS
// with the test CA, as the handshake now completes, and a short run.
func stormArgs(string) args {
	return args{duration: 3 * time.Second, maxBackoffMS: 2000, caFile: testCA}
}

// settingsCloseMode: each connection completes TLS and HTTP/2's SETTINGS,
// then closes: it succeeded, so the spec resets the backoff and reconnects
// at once, every time (docs/spec.md §7.3).
var settingsCloseMode = modeCase{
	name:  "settings-close",
	mode:  backoff.RetryMode{Kind: backoff.ModeSettingsClose},
	storm: true,
	args:  stormArgs,
	check: checkStorm,
}

// goawayMode: as settings-close, with a GOAWAY before the close.
var goawayMode = modeCase{
	name:  "goaway",
	mode:  backoff.RetryMode{Kind: backoff.ModeGoaway},
	storm: true,
	args:  stormArgs,
	check: checkStorm,
}

// otherNameMode is settings-close with a client that asks TLS for a name
// the test certificate does not hold (--server_host_override): every
// handshake fails, so every attempt fails, and the client backs off as in
// close mode instead of reconnecting in a loop. It shows the name reaches
// each client's TLS.
var otherNameMode = modeCase{
	name: "settings-close-other-name",
	mode: settingsCloseMode.mode,
	args: func(stack string) args {
		a := stormArgs(stack)
		a.hostOverride = "other.example"
		return a
	},
	check: func(t testing.TB, o outcome) {
		wantDeadlineOnly(t, o)
		if slices.ContainsFunc(o.line.States, func(s stateAt) bool { return s.State == "READY" }) {
			t.Errorf("the retry channel became READY with a name the certificate does not hold")
		}
		// 3 s hold attempts at 0, 1000 and 1000 + 1600·U(0.8, 1.2) ms.
		ts, _ := o.attempts()
		if len(ts) < 2 || len(ts) > 4 {
			t.Errorf("%d attempts in %v, want 2–4: a failed handshake is a failed attempt", len(ts), o.args.duration)
		}
		res, _ := o.verify()
		if res.Reconnects != nil && res.Reconnects.TightLoop {
			t.Errorf("a tight reconnect loop (%+v) on handshakes that failed", res.Reconnects)
		}
	},
}

func checkStorm(t testing.TB, o outcome) {
	// Each RPC fails with its connection (grpc-go reads an end of file as
	// UNKNOWN), and is made again; none is answered.
	for st, n := range o.line.Counts.RPCStatus {
		if st != "UNAVAILABLE" && st != "DEADLINE_EXCEEDED" && st != "UNKNOWN" {
			t.Errorf("%d retry RPCs ended in %s; want UNAVAILABLE, UNKNOWN or DEADLINE_EXCEEDED", n, st)
		}
	}
	wantStopAgrees(t, o)
	wantServerAgrees(t, o)
	if !slices.ContainsFunc(o.line.States, func(s stateAt) bool { return s.State == "READY" }) {
		t.Errorf("the retry channel was never READY: the handshake with the test CA failed (states %v)", o.line.States)
	}
	ts, _ := o.attempts()
	res, _ := o.verify()
	if len(ts) < 10 {
		t.Fatalf("%d attempts in %v, want at least 10: each success resets the backoff", len(ts), o.args.duration)
	}
	if rc := res.Reconnects; rc == nil || !rc.TightLoop {
		t.Errorf("reconnects %+v, want a tight loop", rc)
	}
}

// wantDeadlineOnly: the retry RPCs never ended before the run's end.
func wantDeadlineOnly(t testing.TB, o outcome) {
	t.Helper()
	for i, r := range o.line.RPCs {
		if r.Status != "DEADLINE_EXCEEDED" {
			t.Errorf("retry RPC %d ended in %s (%s), want DEADLINE_EXCEEDED", i+1, r.Status, r.Error)
		}
	}
	if len(o.line.RPCs) == 0 {
		t.Errorf("no retry RPC ended")
	}
}

// wantServerAgrees: Stop's verdict, from the server's accepts, is the
// model's from the attempts (the kernel's where captured).
func wantServerAgrees(t testing.TB, o outcome) {
	t.Helper()
	res, _ := o.verify()
	if got, want := o.end().Verdict, res.Reference.Verdict; got != want {
		t.Errorf("the server's verdict %q (%s), the model's from the attempts %q (%s)", got, o.end().Reason, want, res.Reason())
	}
}

// wantStopAgrees: the client got the server's session in Stop's answer.
func wantStopAgrees(t testing.TB, o outcome) {
	t.Helper()
	if diff := cmp.Diff(o.end().BackoffMS, o.line.BackoffMS, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("backoff_ms (-server's session +Stop's answer to the client):\n%s", diff)
	}
	if o.line.Passed == nil || *o.line.Passed != o.end().Passed {
		t.Errorf("Stop's passed %v, the session's %v", o.line.Passed, o.end().Passed)
	}
}

// wantClientSawServer holds the client's own account of its attempts to
// the server's accepts: as many, each accept within slack of the attempt's
// start. grpc-go does not trace its attempts; nothing to compare.
func wantClientSawServer(t testing.TB, o outcome, slack time.Duration) {
	t.Helper()
	ca, first := o.clientAttempts()
	if o.stack == grpcGo {
		return
	}
	if first+len(ca) != len(o.chain) {
		t.Errorf("the client saw attempts %d–%d, the server accepted %d", first+1, first+len(ca), len(o.chain))
		return
	}
	for i := range ca {
		if d := o.chain[first+i].Sub(ca[i]); d < -slack || d > slack {
			t.Errorf("attempt %d: the server accepted it %v after the client began it, want within ±%v", first+i+1, d, slack)
		}
	}
}

// wantKernelSawServer holds the server's accepts to the kernel's SYNs,
// where the capture could open: as many, each accept at most slack after
// its SYN (docs/spec.md §5.1: the server stamps after the handshake and a
// wake-up).
func wantKernelSawServer(t testing.TB, o outcome, slack time.Duration) {
	t.Helper()
	if o.noCapture != "" {
		t.Logf("no kernel timestamps: %s", o.noCapture)
		return
	}
	if len(o.syns) != len(o.chain) {
		t.Errorf("the kernel saw %d SYNs, the server accepted %d", len(o.syns), len(o.chain))
		return
	}
	for i := range o.syns {
		if d := o.chain[i].Sub(o.syns[i]); d < 0 || d > slack {
			t.Errorf("attempt %d: accepted %v after its SYN, want 0–%v", i+1, d, slack)
		}
	}
}

// TestRecorder: a check's failures are kept, Fatalf and Skipf end the
// check as they end a test, and nothing reaches the real test.
func TestRecorder(t *testing.T) {
	tests := []struct {
		name     string
		fn       func(testing.TB, outcome)
		wantErrs []string
		wantSkip string
	}{
		{name: "pass", fn: func(testing.TB, outcome) {}},
		{
			name: "errors, then fatal ends it",
			fn: func(t testing.TB, _ outcome) {
				t.Errorf("one %d", 1)
				t.Fatalf("two")
				t.Errorf("never")
			},
			wantErrs: []string{"one 1", "two"},
		},
		{
			name: "skip ends it",
			fn: func(t testing.TB, _ outcome) {
				t.Skipf("no %s", "capture")
				t.Errorf("never")
			},
			wantSkip: "no capture",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{TB: t}
			rec.check(tt.fn, outcome{})
			if diff := cmp.Diff(tt.wantErrs, rec.errs); diff != "" {
				t.Errorf("kept failures (-want +got):\n%s", diff)
			}
			if rec.skip != tt.wantSkip {
				t.Errorf("skip %q, want %q", rec.skip, tt.wantSkip)
			}
			if rec.Failed() != (len(tt.wantErrs) > 0) {
				t.Errorf("Failed() = %v with %d failures", rec.Failed(), len(rec.errs))
			}
		})
	}
}

// TestCloseCheckFailsWrongBackoff holds the close mode's check to its
// purpose: each real client, told to start its backoff at 100 ms instead
// of 1 s (C-core's floor, docs/spec.md §4.3), reconnects ten times too
// fast, and the check must say so.
func TestCloseCheckFailsWrongBackoff(t *testing.T) {
	for _, st := range stacks {
		t.Run(st.name, func(t *testing.T) {
			st.require(t)
			t.Parallel()
			a := closeMode.args(st.name)
			a.duration, a.initialBackoffMS = 4*time.Second, 100
			o := run(t, st, closeMode.mode, a)
			t.Logf("%s%s", o.summary(), o.readingsSummary())
			wantAgree(t, o)
			rec := &recorder{TB: t}
			rec.check(closeMode.check, o)
			if len(rec.errs) == 0 {
				t.Errorf("the close mode's check passed a client whose backoff starts at 100 ms")
			}
			t.Logf("the check failed it, as it must:\n\t%s", strings.Join(rec.errs, "\n\t"))
		})
	}
}
