package backoff

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// chainAt returns attempt times starting at t0 with the given gaps in ms.
func chainAt(t0 time.Time, gaps ...float64) []time.Time {
	ts := []time.Time{t0}
	for _, g := range gaps {
		ts = append(ts, ts[len(ts)-1].Add(time.Duration(g*float64(time.Millisecond))))
	}
	return ts
}

func hangPolicy(t time.Duration) Policy {
	p := DefaultPolicy()
	p.MinConnectTimeout = t
	return p
}

func TestVerifyRunCloseIsVerify(t *testing.T) {
	ts := chainAt(t0, 1000, 1700, 2500, 4300)
	a, b := Verify(DefaultPolicy(), ts), VerifyRun(DefaultPolicy(), ts, Run{Mode: RetryMode{Kind: ModeRefuse}})
	if a.Reason() != b.Reason() || a.Reference != b.Reference || len(a.Intervals) != len(b.Intervals) {
		t.Fatalf("close %+v and refuse %+v differ", a.Reference, b.Reference)
	}
	for i := range a.Intervals {
		if a.Intervals[i] != b.Intervals[i] {
			t.Errorf("interval %d: %+v vs %+v", i+1, a.Intervals[i], b.Intervals[i])
		}
	}
}

// C-core with a hung retry port retries every MIN_CONNECT_TIMEOUT, which
// outlasts the first backoffs: the spec's model passes it.
func TestVerifyRunHangConnectTimeoutDominates(t *testing.T) {
	ts := chainAt(t0, 20002, 20002, 20001)
	run := Run{Mode: RetryMode{Kind: ModeHang}, End: ts[3].Add(10 * time.Second)}
	r := VerifyRun(hangPolicy(20*time.Second), ts, run)
	if !r.Passed() || !r.Strict.Passed {
		t.Fatalf("reference %+v strict %+v: %s", r.Reference, r.Strict, r.Reason())
	}
	for _, iv := range r.Intervals {
		if iv.Term != TermConnectTimeout || iv.ExpectedMS != 20000 || iv.MinMS != 19900 || iv.MaxMS != 20100 {
			t.Errorf("interval %d: term %q expected %v window %v–%v", iv.K, iv.Term, iv.ExpectedMS, iv.MinMS, iv.MaxMS)
		}
	}
	// Where the backoff outgrows the timeout it sets the window.
	late := hangPolicy(3*time.Second).checkHung(4, 4, 4096, 4000*time.Millisecond)
	if late.Term != TermBackoff || late.MinMS != 4096*0.8-100 || !late.OK {
		t.Errorf("interval 4 with T=3 s: %+v", late)
	}
}

// grpc-go sleeps its backoff after the connect timeout: intervals measured
// with a 3 s timeout were 4003 and 4495 ms.
func TestVerifyRunHangSleptAfter(t *testing.T) {
	ts := chainAt(t0, 4003, 4495)
	r := VerifyRun(hangPolicy(3*time.Second), ts, Run{Mode: RetryMode{Kind: ModeHang}})
	if r.Passed() || r.Reference.FirstFailure != 1 {
		t.Fatalf("reference %+v", r.Reference)
	}
	if want := "set by the connect timeout, window 2900–3100 ms"; !strings.Contains(r.Reason(), want) {
		t.Errorf("reason %q lacks %q", r.Reason(), want)
	}
	sigs := Signatures(r)
	if len(sigs) != 1 || sigs[0].Name != SigSleptAfter || sigs[0].Seen != "grpc-go" {
		t.Fatalf("signatures %+v", sigs)
	}
	if !strings.Contains(sigs[0].Detail, "interval 1 is 4003 ms ≈ 3000 ms + 1003 ms") {
		t.Errorf("detail %q", sigs[0].Detail)
	}
	// Durations from the wire replace the timeout in the sum.
	run := Run{Mode: RetryMode{Kind: ModeHang}, Endings: []Ending{
		{Fate: FateAbandoned, Duration: 3001 * time.Millisecond}, {Fate: FateAbandoned, Duration: 3002 * time.Millisecond}, {Fate: FateAbandoned}}}
	if sigs := Signatures(VerifyRun(hangPolicy(3*time.Second), ts, run)); len(sigs) != 1 || !strings.Contains(sigs[0].Detail, "3001 ms + 1002 ms") {
		t.Errorf("with durations: %+v", sigs)
	}
	// A passing hung chain carries no signature.
	if sigs := Signatures(VerifyRun(hangPolicy(3*time.Second), chainAt(t0, 3001, 3002), Run{Mode: RetryMode{Kind: ModeHang}})); len(sigs) != 0 {
		t.Errorf("passing chain: %+v", sigs)
	}
}

// grpc-js has no connect timeout: one attempt, hung for the whole run, is
// a failure, never a vacuous pass.
func TestVerifyRunNeverGaveUp(t *testing.T) {
	ts := []time.Time{t0}
	for _, run := range []Run{
		{Mode: RetryMode{Kind: ModeHang}, End: t0.Add(70 * time.Second)},
		{Mode: RetryMode{Kind: ModeHang}, End: t0.Add(70 * time.Second), Endings: []Ending{{Fate: FateOpen}}},
		{End: t0.Add(70 * time.Second), Endings: []Ending{{Fate: FateOpen}}}, // the wire shows it without a mode
	} {
		r := VerifyRun(hangPolicy(20*time.Second), ts, run)
		if r.Reference.Verdict != Failed || r.Strict.Verdict != Failed || r.Passed() {
			t.Fatalf("%+v: reference %+v strict %+v", run, r.Reference, r.Strict)
		}
		if !strings.HasPrefix(r.Reason(), "the client never gave up on a hung connection: attempt 1 was still waiting after 70000 ms") {
			t.Errorf("reason %q", r.Reason())
		}
		if sigs := Signatures(r); len(sigs) != 1 || sigs[0].Name != SigNoConnTimeout {
			t.Errorf("signatures %+v", sigs)
		}
	}
	// Within its deadline the attempt may still be waiting; TooFew stays.
	r := VerifyRun(hangPolicy(20*time.Second), ts, Run{Mode: RetryMode{Kind: ModeHang}, End: t0.Add(20100 * time.Millisecond)})
	if r.Reference.Verdict != TooFew || r.Tail != "" {
		t.Errorf("at the deadline: %+v %q", r.Reference, r.Tail)
	}
	// Gave up, then never came back.
	r = VerifyRun(hangPolicy(20*time.Second), ts, Run{Mode: RetryMode{Kind: ModeHang}, End: t0.Add(60 * time.Second),
		Endings: []Ending{{Fate: FateAbandoned, Duration: 20 * time.Second}}})
	if !strings.HasPrefix(r.Reason(), "no attempt after attempt 1: the client gave up on it after 20000 ms") {
		t.Errorf("reason %q", r.Reason())
	}
	// A client that held a hung attempt 45 s before giving up.
	r = VerifyRun(hangPolicy(20*time.Second), chainAt(t0, 46000), Run{Mode: RetryMode{Kind: ModeHang},
		Endings: []Ending{{Fate: FateAbandoned, Duration: 45 * time.Second}, {Fate: FateOpen}}})
	if sigs := Signatures(r); len(sigs) == 0 || sigs[len(sigs)-1].Name != SigNoConnTimeout ||
		!strings.Contains(sigs[len(sigs)-1].Detail, "attempt 1 hung for 45000 ms") {
		t.Errorf("signatures %+v", sigs)
	}
}

// Fates decide per attempt: in hang mode an attempt the server closed at
// once (beyond its held-connection bound) leaves the plain window.
func TestVerifyRunFatesDecide(t *testing.T) {
	ts := chainAt(t0, 1000, 20000)
	run := Run{Mode: RetryMode{Kind: ModeHang}, Endings: []Ending{{Fate: FateClosed}, {Fate: FateAbandoned, Duration: 19950 * time.Millisecond}, {Fate: FateOpen}}}
	r := VerifyRun(hangPolicy(20*time.Second), ts, run)
	if r.Intervals[0].Term != "" || r.Intervals[1].Term != TermConnectTimeout || !r.Passed() {
		t.Fatalf("%+v %+v: %s", r.Intervals[0], r.Intervals[1], r.Reason())
	}
	// A connection the client dropped after 50 ms (a failed handshake)
	// failed at once: its next interval is the plain backoff's.
	run.Endings[0] = Ending{Fate: FateAbandoned, Duration: 50 * time.Millisecond}
	if r := VerifyRun(hangPolicy(20*time.Second), ts, run); r.Intervals[0].Term != "" || !r.Intervals[0].OK {
		t.Errorf("after a quick abandon: %+v", r.Intervals[0])
	}
}

func TestVerifyRunRestartRecovery(t *testing.T) {
	ts := chainAt(t0, 1000, 1600, 2360)
	back := t0.Add(3000 * time.Millisecond)
	r := VerifyRun(DefaultPolicy(), ts, Run{Mode: RetryMode{Kind: ModeRestart, Down: 3 * time.Second}, Back: back})
	rc := r.Recovery
	if rc == nil || rc.Attempt != 3 || rc.AfterMS != 1960 || rc.OwedMS != 2160 || !rc.OK || rc.MinMS != 2560*0.8-100-400 {
		t.Fatalf("recovery %+v", rc)
	}
	if r := VerifyRun(DefaultPolicy(), ts, Run{Back: t0.Add(time.Hour)}); r.Recovery != nil {
		t.Errorf("no attempt after the return: %+v", r.Recovery)
	}
}

func TestVerifyRunReconnects(t *testing.T) {
	gaps := make([]float64, 40)
	for i := range gaps {
		gaps[i] = 50
	}
	ts := chainAt(t0, gaps...)
	r := VerifyRun(DefaultPolicy(), ts, Run{Mode: RetryMode{Kind: ModeGoaway}})
	if !r.Passed() || r.Reconnects == nil || !r.Reconnects.TightLoop || r.Reconnects.PerSecond != 20 || r.Reconnects.MedianMS != 50 {
		t.Fatalf("%+v %+v", r.Reference, r.Reconnects)
	}
	if r.Intervals[3].Term != TermReset {
		t.Errorf("term %q", r.Intervals[3].Term)
	}
	r = VerifyRun(DefaultPolicy(), chainAt(t0, 1000, 1600, 2560), Run{Mode: RetryMode{Kind: ModeSettingsClose}})
	if r.Reconnects.TightLoop {
		t.Errorf("a client that kept backing off is no tight loop: %+v", r.Reconnects)
	}
}

func TestSignaturesShapes(t *testing.T) {
	// C-core and grpc-java jitter the first backoff.
	r := Verify(DefaultPolicy(), chainAt(t0, 1180, 1600))
	if sigs := Signatures(r); len(sigs) != 1 || sigs[0].Name != SigFirstJittered || !strings.Contains(sigs[0].Detail, "1180 ms (+18.0 %)") {
		t.Errorf("first jittered: %+v", sigs)
	}
	// grpc-js bases each step on the previous jittered value.
	r = Verify(DefaultPolicy(), chainAt(t0, 1000, 1920, 3686, 7078))
	if sigs := Signatures(r); len(sigs) != 1 || sigs[0].Name != SigCompounding || !strings.Contains(sigs[0].Detail, "interval 3 drifted to 3686 ms") {
		t.Errorf("compounding: %+v (%s)", sigs, r.Reason())
	}
	// A spec chain matches none.
	if sigs := Signatures(Verify(DefaultPolicy(), chainAt(t0, 1000, 1700, 2400, 4000))); len(sigs) != 0 {
		t.Errorf("spec chain: %+v", sigs)
	}
	// grpc-js's first connection starts tens of milliseconds after its
	// timer (testdata/real-compound.pcap.gz): interval 1 is short of the
	// 1000 ms drawn, and interval 2, drawn from 1000, is matched from
	// 940 ± the tolerance.
	r = Verify(DefaultPolicy(), chainAt(t0, 940, 1910, 3600, 6500))
	if sigs := Signatures(r); len(sigs) != 1 || sigs[0].Name != SigCompounding || !strings.Contains(sigs[0].Detail, "interval 3 drifted to 3600 ms") {
		t.Errorf("compounding after a late first connection: %+v (%s)", sigs, r.Reason())
	}
}

// grpc-go sleeps from an attempt's end: a first attempt the server closed
// 70 ms late lengthens interval 1 without jitter, and the wire shows it.
func TestSignaturesFirstAttemptDuration(t *testing.T) {
	closed := func(first time.Duration) Run {
		run := Run{Endings: []Ending{{Fate: FateClosed, Accepted: 10 * time.Microsecond, Duration: first}}}
		for range 3 {
			run.Endings = append(run.Endings, Ending{Fate: FateClosed, Accepted: 10 * time.Microsecond, Duration: 200 * time.Microsecond})
		}
		return run
	}
	ts := chainAt(t0, 1112, 1747, 2248)
	for _, tt := range []struct {
		name  string
		run   Run
		wants []string
	}{
		{"first attempt closed late", closed(70 * time.Millisecond), []string{SigFromEnd}},
		{"first attempt closed at once", closed(200 * time.Microsecond), []string{SigFirstJittered}},
		{"no fates", Run{}, []string{SigFirstJittered}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, s := range Signatures(VerifyRun(DefaultPolicy(), ts, tt.run)) {
				got = append(got, s.Name)
			}
			if !slices.Equal(got, tt.wants) {
				t.Errorf("signatures %q, want %q", got, tt.wants)
			}
		})
	}
}

func TestParseRetryMode(t *testing.T) {
	for in, want := range map[string]string{"close": "close", "hang": "hang", "restart=5s": "restart=5s", "restart=1500ms": "restart=1.5s", "goaway": "goaway", "settings-close": "settings-close", "refuse": "refuse"} {
		m, err := ParseRetryMode(in)
		if err != nil || m.String() != want {
			t.Errorf("%q: %v %v", in, m, err)
		}
	}
	for in, want := range map[string]string{"restart": "needs how long", "restart=0s": "positive duration", "hang=1s": "takes no value", "flap": "close, refuse, hang, restart=DURATION, settings-close, goaway"} {
		if _, err := ParseRetryMode(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", in, err, want)
		}
	}
	var m RetryMode
	if !m.Is(ModeClose) || m.String() != "close" {
		t.Errorf("zero mode %v", m)
	}
}

// A READY connection resets the backoff in every mode, given or not: a
// grpc-go client (backoff 500 ms ×1.6, no jitter) whose connection was
// READY for 600 ms until the server went down reconnected 6 ms later, was
// refused three times at 501, 801 and 1281 ms, and came back when the
// server did. The interval after the READY one is reported, not judged,
// and the next ones are intervals 1, 2, 3 of a new chain.
func TestVerifyRunReadyResets(t *testing.T) {
	p := Policy{BaseDelay: 500 * time.Millisecond, Multiplier: 1.6, MaxDelay: 120 * time.Second,
		MinConnectTimeout: 20 * time.Second, Tolerance: 100 * time.Millisecond}
	ts := chainAt(t0, 606, 501, 801, 1281)
	endings := []Ending{
		{Fate: FateClosed, Accepted: 20 * time.Microsecond, Duration: 600 * time.Millisecond, Ready: true, ReadyAfter: time.Millisecond,
			ClientSent: PayloadH2Preface, ServerSent: PayloadH2Settings},
		{Fate: FateRefused, Duration: 30 * time.Microsecond, RST: true},
		{Fate: FateRefused, Duration: 30 * time.Microsecond, RST: true},
		{Fate: FateRefused, Duration: 30 * time.Microsecond, RST: true},
		{Fate: FateOpen, Accepted: 20 * time.Microsecond, Ready: true, ReadyAfter: time.Millisecond},
	}
	for _, mode := range []RetryMode{{}, {Kind: ModeRefuse}, {Kind: ModeRestart, Down: 2 * time.Second}, {Kind: ModeOutage, Serve: time.Second, Down: 2 * time.Second}} {
		r := VerifyRun(p, ts, Run{Mode: mode, Endings: endings, End: ts[4].Add(time.Second)})
		if !r.Passed() || !r.Strict.Passed {
			t.Errorf("mode %v: %s; want passed", mode, r.Reason())
		}
		var got []string
		for _, iv := range r.Intervals {
			got = append(got, fmt.Sprintf("%s %.0f", cmp.Or(string(iv.Term), string(iv.Outcome)), iv.ExpectedMS))
		}
		if want := []string{"reset 0", "ok 500", "ok 800", "ok 1280"}; !slices.Equal(got, want) {
			t.Errorf("mode %v: intervals %v, want %v", mode, got, want)
		}
	}
	// Without the fates, the mode decides: close judges interval 1 against
	// the first backoff and fails it.
	if r := VerifyRun(p, ts, Run{}); r.Passed() || r.Reference.FirstFailure != 1 {
		t.Errorf("without fates: %s, want interval 1 late", r.Reason())
	}
}

// An attempt that nothing answered in the capture and that shows no wait
// (no SYN retransmission) ended by the next SYN: with that SYN before the
// connect deadline it is judged by the backoff window, not as a hang.
func TestVerifyRunUnseen(t *testing.T) {
	ts := chainAt(t0, 1000, 1600, 2560)
	unseen := make([]Ending, 4)
	for i := range unseen {
		unseen[i] = Ending{Fate: FateUnanswered}
	}
	r := VerifyRun(DefaultPolicy(), ts, Run{Endings: unseen, End: ts[3].Add(time.Minute)})
	if !r.Passed() || r.Unseen != 4 || r.Tail != "" {
		t.Errorf("unseen answers: %s, %d unseen, tail %q; want passed, 4, none", r.Reason(), r.Unseen, r.Tail)
	}
	for _, iv := range r.Intervals {
		if iv.Term != "" {
			t.Errorf("interval %d: term %q, want the backoff's plain window", iv.K, iv.Term)
		}
	}
	// Retransmitted, the wait shows: a hang.
	hung := slices.Clone(unseen)
	hung[0].Duration = 3 * time.Second
	if c := (Run{Endings: hung}).Class(0, DefaultPolicy(), ts[0], time.Second); c != ClassHung {
		t.Errorf("a retransmitted SYN: %v, want hung", c)
	}
	// The next SYN after the connect deadline: a hang too.
	if c := (Run{Endings: unseen}).Class(0, DefaultPolicy(), ts[0], 21*time.Second); c != ClassHung {
		t.Errorf("the next SYN 21 s later: %v, want hung", c)
	}
}

func TestParseRetryModeOutage(t *testing.T) {
	m, err := ParseRetryMode("outage=3s,5s")
	if err != nil || m != (RetryMode{Kind: ModeOutage, Serve: 3 * time.Second, Down: 5 * time.Second}) || m.String() != "outage=3s,5s" {
		t.Errorf("outage=3s,5s: %+v %q %v", m, m, err)
	}
	// Alone, an outage read from a capture: its durations unknown.
	if m, err := ParseRetryMode("outage"); err != nil || m != (RetryMode{Kind: ModeOutage}) || m.String() != "outage" {
		t.Errorf("outage: %+v %q %v", m, m, err)
	}
	for _, bad := range []string{"outage=3s", "outage=3s,", "outage=,5s", "outage=0s,5s", "outage=3s,-1s", "outage=x,y"} {
		if _, err := ParseRetryMode(bad); err == nil || !strings.Contains(err.Error(), "outage needs") {
			t.Errorf("%q: %v, want an error that says what outage needs", bad, err)
		}
	}
	// Without fates, an outage's attempts are READY but while the port is
	// down.
	run := Run{Mode: m, Down: t0.Add(3 * time.Second), Back: t0.Add(8 * time.Second)}
	for _, tt := range []struct {
		at   time.Duration
		want Class
	}{{0, ClassReady}, {3 * time.Second, ClassFailed}, {7 * time.Second, ClassFailed}, {8 * time.Second, ClassReady}} {
		if got := run.Class(0, DefaultPolicy(), t0.Add(tt.at), time.Second); got != tt.want {
			t.Errorf("at +%v: %v, want %v", tt.at, got, tt.want)
		}
	}
}

// The states of a client whose READY connection the server dropped: it
// was refused twice, then READY again.
func TestStates(t *testing.T) {
	ts := chainAt(t0, 606, 501, 801)
	ends := []Ending{
		{Fate: FateClosed, Duration: 600 * time.Millisecond, Ready: true, ReadyAfter: time.Millisecond},
		{Fate: FateRefused, Duration: time.Millisecond, RST: true},
		{Fate: FateUnanswered},
		{Fate: FateOpen, Ready: true, ReadyAfter: 2 * time.Millisecond},
	}
	var got []string
	for _, st := range States(ts, ends) {
		got = append(got, fmt.Sprintf("%s %.0f", st.State, Millis(st.At.Sub(t0))))
	}
	want := []string{"CONNECTING 0", "READY 1", "IDLE 600", "CONNECTING 606", "TRANSIENT_FAILURE 607",
		"CONNECTING 1107", "TRANSIENT_FAILURE 1908", "CONNECTING 1908", "READY 1910"}
	if !slices.Equal(got, want) {
		t.Errorf("states %v\nwant %v", got, want)
	}
}

// TestRecoveryWhereTheFatesShowIt: a port's return placed by a mode's
// schedule rather than the server's clock (a control port's session) is
// moved to where the fates show the port was back: after every refusal,
// at the latest at the first accepted attempt after them. Without fates
// it stays where it was placed.
func TestRecoveryWhereTheFatesShowIt(t *testing.T) {
	// An outage: READY, three attempts refused while the port was down
	// (from 3 s to 7 s), then READY again.
	ts := []time.Time{t0, t0.Add(3000 * time.Millisecond), t0.Add(4000 * time.Millisecond), t0.Add(5600 * time.Millisecond), t0.Add(7600 * time.Millisecond)}
	ready := Ending{Fate: FateOpen, Ready: true}
	refused := Ending{Fate: FateRefused, Duration: time.Millisecond}
	endings := []Ending{ready, refused, refused, refused, ready}
	tests := []struct {
		name    string
		back    time.Time
		endings []Ending
		// wantAttempt is the recovery's attempt (from 0), wantAfter the ms
		// from the return to it.
		wantAttempt int
		wantAfter   float64
	}{
		{name: "the server's clock", back: t0.Add(7000 * time.Millisecond), endings: endings, wantAttempt: 4, wantAfter: 600},
		{name: "placed before the last refusal", back: t0.Add(5000 * time.Millisecond), endings: endings, wantAttempt: 4, wantAfter: 1999},
		{name: "placed between two refusals", back: t0.Add(3500 * time.Millisecond), endings: endings, wantAttempt: 4, wantAfter: 1999},
		{name: "placed after the return", back: t0.Add(8000 * time.Millisecond), endings: endings, wantAttempt: 4, wantAfter: 0},
		{name: "no fates", back: t0.Add(5000 * time.Millisecond), wantAttempt: 3, wantAfter: 600},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run := Run{Mode: RetryMode{Kind: ModeOutage, Serve: 3 * time.Second, Down: 4 * time.Second}, Endings: tt.endings, Back: tt.back}
			rc := VerifyRun(DefaultPolicy(), ts, run).Recovery
			if rc == nil || rc.Attempt != tt.wantAttempt || math.Abs(rc.AfterMS-tt.wantAfter) > 1e-9 {
				t.Errorf("recovery %+v; want attempt %d, %v ms after the return", rc, tt.wantAttempt+1, tt.wantAfter)
			}
		})
	}
}

// TestSchedule: the port's phases a mode's timers place from a session's
// start, as a reader that knows the mode but not the server's events
// places them; what the session's end comes before is not there.
func TestSchedule(t *testing.T) {
	outage := RetryMode{Kind: ModeOutage, Serve: 3 * time.Second, Down: 4 * time.Second}
	restart := RetryMode{Kind: ModeRestart, Down: 3 * time.Second}
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	tests := []struct {
		name           string
		mode           RetryMode
		end            time.Time
		wantDown, back time.Time
	}{
		{name: "outage", mode: outage, end: at(10), wantDown: at(3), back: at(7)},
		{name: "outage, open", mode: outage, wantDown: at(3), back: at(7)},
		{name: "outage, ended while down", mode: outage, end: at(5), wantDown: at(3)},
		{name: "outage, ended while serving", mode: outage, end: at(2)},
		{name: "restart", mode: restart, end: at(10), back: at(3)},
		{name: "restart, ended while down", mode: restart, end: at(2)},
		{name: "close", mode: RetryMode{}, end: at(10)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			down, back := tt.mode.Schedule(t0, tt.end)
			if !down.Equal(tt.wantDown) || !back.Equal(tt.back) {
				t.Errorf("Schedule = %v, %v; want %v, %v", down, back, tt.wantDown, tt.back)
			}
		})
	}
}
