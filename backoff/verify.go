package backoff

import (
	"fmt"
	"math"
	"time"
)

// Outcome places one measured interval against its window.
type Outcome string

const (
	OK    Outcome = "ok"
	Early Outcome = "early"
	Late  Outcome = "late"
)

// Verdict is the answer for one chain of attempts.
type Verdict string

const (
	Passed Verdict = "passed"
	Failed Verdict = "failed"
	// TooFew is a chain of fewer than two attempts: nothing shows that the
	// client backs off at all. The reference calls it a pass (docs/spec.md §4).
	TooFew Verdict = "too few attempts"
	// Overflow is a session that recorded more attempts than it may keep.
	Overflow Verdict = "too many attempts"
	// NotJudged is the server's answer in a mode where it accepts nothing
	// for a while (refuse, restart), so it never saw the attempts that a
	// verdict needs: only a capture judges them (docs/spec.md §7.1).
	NotJudged Verdict = "not judged"
)

// Rank is the order reports list verdicts in: failed first, then too few
// attempts, any other failing verdict, and passed last.
func (v Verdict) Rank() int {
	switch v {
	case Failed:
		return 0
	case TooFew:
		return 1
	case Passed:
		return 3
	}
	return 2
}

// Interval is one gap between consecutive attempts, judged as the reference
// judges it (docs/spec.md §3).
type Interval struct {
	K int `json:"k"` // 1 for the gap between the first and second attempt
	// Measured is the exact gap; the verdict uses BackoffMS, its whole
	// milliseconds rounded down and saturated to int32, as the reference
	// does.
	Measured   time.Duration `json:"-"`
	MeasuredMS float64       `json:"measured_ms"`
	BackoffMS  int32         `json:"backoff_ms"`
	ExpectedMS float64       `json:"expected_ms"`
	MinMS      float64       `json:"min_ms"`
	MaxMS      float64       `json:"max_ms"`
	OK         bool          `json:"ok"`
	Outcome    Outcome       `json:"outcome"`
	// JitterPct is (measured−expected)·100/expected of the exact gap
	// (MeasuredMS): whole milliseconds would show 1000.827 ms against
	// 1000 as +0.00 %. Only the verdict is on whole milliseconds; the
	// reference's log line keeps its own jitter (LogLine).
	JitterPct float64 `json:"jitter_pct"`
	// StrictOK is the stricter reading after the spec text: the first
	// backoff is not jittered, so interval 1 must lie within
	// BaseDelay ± Tolerance. Later intervals read as in the reference.
	StrictOK bool `json:"strict_ok"`
	// Term names what set the window when the attempt before the interval
	// hung (docs/spec.md §7): TermConnectTimeout when the connect timeout
	// outlasts the backoff's expected value, else TermBackoff; TermReset
	// when the connection before it succeeded, so backoff began anew and
	// the interval is reported, not judged. Empty for a plain backoff.
	Term Term `json:"term,omitempty"`
}

// Reading is one verdict over a chain.
type Reading struct {
	Passed  bool    `json:"passed"`
	Verdict Verdict `json:"verdict"`
	// FirstFailure is the k of the first failing interval, 0 when none.
	FirstFailure int `json:"first_failure,omitempty"`
}

// Result is the verification of one chain of attempts. It is not
// marshalled: reports write a PeerReport, built from it.
type Result struct {
	Policy    Policy
	Attempts  int
	Intervals []Interval
	// Reference is the reference verifier's reading, with one fix: fewer
	// than two attempts is TooFew, not a pass.
	Reference Reading
	// Strict is the reading after the spec text (interval 1 un-jittered).
	// It is reported beside Reference, never instead of it.
	Strict Reading
	// ReferencePassed is what the C++ reference would answer, its bug
	// included: true for 0 or 1 attempts.
	ReferencePassed bool
	// BackoffMS is ReconnectInfo.backoff_ms: every interval, in order, even
	// after a failure.
	BackoffMS []int32
	// Run is what the chain was verified in: the retry port's mode, and
	// what the wire or the server showed of each attempt.
	Run Run
	// Tail, when not empty, is the failure after the last attempt: a
	// client that never gave up on a hung connection, or never tried
	// again after it did (docs/spec.md §7). It fails both readings, with
	// no interval at fault.
	Tail string
	// Skipped, for a NotJudged reading, says why the chain was not
	// judged.
	Skipped string
	// Unseen counts the attempts whose answer the capture lacks: nothing
	// answered them and nothing shows them waiting (ClassUnseen).
	Unseen int
	// Recovery is set when the retry port came back during the chain
	// (ModeRestart): how long after its return the client came again.
	Recovery *Recovery
	// Reconnects is set in the modes where each connection succeeds
	// before it is closed (settings-close, goaway): how fast the client
	// came back.
	Reconnects *Reconnects
}

// Passed reports the reference reading's verdict.
func (r Result) Passed() bool { return r.Reference.Passed }

// Check judges one gap d as interval k (k ≥ 1) of a chain.
func (p Policy) Check(k int, d time.Duration) Interval {
	return p.check(k, k, p.Expected(k), d)
}

// check judges gap d as interval k of a chain, step of the backoff since
// the chain (re)started, its expected value e.
func (p Policy) check(k, step int, e float64, d time.Duration) Interval {
	b := floorMS(d)
	backoff := float64(b)
	measured := Millis(d)
	tol := Millis(p.Tolerance)
	// The same operations in the same order as ReconnectServiceImpl::Verify,
	// so every bound is the reference's to the last bit.
	lo := e*(1-p.Jitter) - tol
	hi := e*(1+p.Jitter) + tol
	iv := Interval{
		K:          k,
		Measured:   d,
		MeasuredMS: measured,
		BackoffMS:  b,
		ExpectedMS: e,
		MinMS:      lo,
		MaxMS:      hi,
		Outcome:    OK,
		JitterPct:  (measured - e) * 100 / e,
	}
	switch {
	case backoff < lo:
		iv.Outcome = Early
	case backoff > hi:
		iv.Outcome = Late
	}
	iv.OK = iv.Outcome == OK
	iv.StrictOK = iv.OK
	if step == 1 {
		base := p.first()
		iv.StrictOK = backoff >= base-tol && backoff <= base+tol
	}
	return iv
}

// With judges gap d in iv's window: what iv's verdict would be had the
// interval measured d, as another clock measured it (the server's of the
// kernel's interval). An interval after a READY connection is reported,
// not judged, whatever it measured. StrictOK follows OK.
func (iv Interval) With(d time.Duration) Interval {
	out := iv
	out.Measured, out.MeasuredMS, out.BackoffMS = d, Millis(d), floorMS(d)
	if iv.Term == TermReset {
		out.MaxMS = out.MeasuredMS
		return out
	}
	if iv.ExpectedMS != 0 {
		out.JitterPct = (out.MeasuredMS - iv.ExpectedMS) * 100 / iv.ExpectedMS
	}
	out.Outcome = OK
	switch b := float64(out.BackoffMS); {
	case b < iv.MinMS:
		out.Outcome = Early
	case b > iv.MaxMS:
		out.Outcome = Late
	}
	out.OK = out.Outcome == OK
	out.StrictOK = out.OK
	return out
}

// WholeMS is the measured gap in whole milliseconds rounded down: BackoffMS
// without its int32 saturation. Texts print it, so a gap of 30 days reads
// as 2592000000 ms, not as 2147483647. It is computed from Measured, which
// the JSON form does not carry.
func (iv Interval) WholeMS() int64 { return wholeMS(iv.Measured) }

// wholeMS is a gap in whole milliseconds rounded down.
func wholeMS(d time.Duration) int64 {
	m := int64(d / time.Millisecond)
	if d%time.Millisecond < 0 {
		m--
	}
	return m
}

// floorMS is the reference's gpr_time_to_millis of a gap: whole milliseconds
// rounded down, saturated to int32 as the reference's int32 backoff_ms.
func floorMS(d time.Duration) int32 {
	return int32(max(min(wholeMS(d), math.MaxInt32), math.MinInt32))
}

// Verify judges the attempt times t[0] < t[1] < … of one chain against p,
// as the reference does: every attempt failed at once (ModeClose). The
// times are taken as given; a gap that runs backwards is early.
func Verify(p Policy, times []time.Time) Result { return VerifyRun(p, times, Run{}) }

func reading(ivs []Interval, attempts int, tail string, ok func(Interval) bool) Reading {
	if tail != "" {
		return Reading{Verdict: Failed}
	}
	if attempts < 2 {
		return Reading{Verdict: TooFew}
	}
	for _, iv := range ivs {
		if !ok(iv) {
			return Reading{Verdict: Failed, FirstFailure: iv.K}
		}
	}
	return Reading{Passed: true, Verdict: Passed}
}

// Reason says in one line why the reference reading did not pass, naming
// the first failing interval; "" when it passed.
func (r Result) Reason() string {
	switch {
	case r.Reference.Verdict == Passed:
		return ""
	case r.Tail != "":
		return r.Tail
	case r.Reference.Verdict == NotJudged && r.Skipped != "":
		return r.Skipped
	}
	switch r.Reference.Verdict {
	case TooFew:
		return fmt.Sprintf("too few attempts: %d connection(s), at least 2 are needed to measure a backoff", r.Attempts)
	}
	if k := r.Reference.FirstFailure; k > 0 {
		iv := r.Intervals[k-1]
		// The verdict compares the saturated BackoffMS, as the reference
		// does; when that differs from the gap, say so rather than print a
		// number that was never measured.
		judged := ""
		if w := iv.WholeMS(); w != int64(iv.BackoffMS) {
			judged = fmt.Sprintf("judged as %d ms, the reference's int32 limit; ", iv.BackoffMS)
		}
		term := ""
		if iv.Term != "" {
			term = ", set by the " + string(iv.Term)
		}
		return fmt.Sprintf("interval %d: %d ms is %s (%sexpected %.0f ms%s, window %.0f–%.0f ms)",
			k, iv.WholeMS(), iv.Outcome, judged, iv.ExpectedMS, term, iv.MinMS, iv.MaxMS)
	}
	return string(r.Reference.Verdict)
}

// LogLine is the reference server's per-interval log line, with the gap's
// whole milliseconds where the reference would print its saturated int32.
// Its jitter is the reference's, of those whole milliseconds
// (docs/spec.md §3.6), not JitterPct: `audit server` logs the line the
// reference would.
func (iv Interval) LogLine() string {
	whole := float64(iv.WholeMS())
	if iv.ExpectedMS == 0 {
		// A reset interval (TermReset) owes no backoff: no jitter to give.
		return fmt.Sprintf("retry %2d:backoff %6.2fs,expected backoff %6.2fs, %s", iv.K, whole/1000, iv.ExpectedMS/1000, iv.Term)
	}
	jitter := (whole - iv.ExpectedMS) * 100 / iv.ExpectedMS
	return fmt.Sprintf("retry %2d:backoff %6.2fs,expected backoff %6.2fs, jitter %4.2f%%",
		iv.K, whole/1000, iv.ExpectedMS/1000, jitter)
}

// VerifyBackoff is the reading of a list of intervals in whole ms, as a
// server's Stop returns them, in the retry mode the server ran: the same
// model, over times that lie exactly those whole ms apart, where every
// attempt ended as the mode makes it end. In a mode where the server does
// not see every attempt (ServerSeesAll) the list is not the chain, and
// the result is NotJudged, its reason saying why.
func VerifyBackoff(p Policy, backoffMS []int32, mode RetryMode) Result {
	return Run{Mode: mode}.VerifyBackoff(p, backoffMS)
}

// VerifyBackoff is the package's VerifyBackoff with what r knows of the
// list's attempts beside its mode: their fates (r.Endings, one per
// attempt of the list, as a capture of them or the client's own account
// shows them), which decide where they show how an attempt ended (a TLS
// handshake that failed in a mode whose connections succeed).
func (r Run) VerifyBackoff(p Policy, backoffMS []int32) Result {
	times := make([]time.Time, len(backoffMS)+1)
	t := time.Unix(0, 0).UTC()
	times[0] = t
	for i, b := range backoffMS {
		t = t.Add(time.Duration(b) * time.Millisecond)
		times[i+1] = t
	}
	if len(r.Endings) != len(times) {
		r.Endings = nil
	}
	r.End, r.Down, r.Back = time.Time{}, time.Time{}, time.Time{}
	return VerifyRun(p, times, r).ServerList(r.Mode)
}

// NoneReady is r for a client that saw none of its n attempts reach READY
// (its channel never was): in a mode whose connections succeed
// (RetryMode.Succeeds), each failed instead; in the others r is as it
// was. A client's own check of a server's list knows that much of the
// fates, and a list read as resets would pass a client that retried a
// failed TLS handshake at once.
func (r Run) NoneReady(n int) Run {
	if !r.Mode.Succeeds() {
		return r
	}
	r.Endings = make([]Ending, n)
	for i := range r.Endings {
		r.Endings[i] = Ending{Fate: FateClosed}
	}
	return r
}

// ServerList is r, the reading of a server's list (VerifyRun over its
// accept times, VerifyBackoff over its backoff_ms), as a verdict on the
// chain: in a mode where the server does not see every attempt
// (ServerSeesAll) its list is not the chain, and r is NotJudged, Skipped
// saying why.
func (r Result) ServerList(mode RetryMode) Result {
	if !mode.ServerSeesAll() {
		r.Reference, r.Strict = Reading{Verdict: NotJudged}, Reading{Verdict: NotJudged}
		r.Skipped = fmt.Sprintf("in %v mode the server's list holds only the attempts it accepted, not those refused while its port was down; the kernel's SYNs judge the chain", mode)
	}
	return r
}
