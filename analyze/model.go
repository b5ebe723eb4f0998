package analyze

import (
	"fmt"
	"slices"
	"time"
)

// Run is what a chain is verified in beyond its SYN times: what the retry
// port did, and what the wire (or the server) showed of each attempt. The
// zero Run is the interop test: every attempt failed at once.
type Run struct {
	Mode RetryMode
	// End is when the session or the capture ended; zero when unknown.
	End time.Time
	// Endings, when not nil, holds each attempt's fate, in time order,
	// one per attempt time.
	Endings []Ending
	// Back is when a restarted retry port listened again (ModeRestart);
	// zero otherwise.
	Back time.Time
}

// Term names what set an interval's window (docs/spec.md §7).
type Term string

const (
	// TermBackoff: the backoff outlasted the connect timeout.
	TermBackoff Term = "backoff"
	// TermConnectTimeout: the attempt before hung until the connect
	// timeout, which outlasted the backoff.
	TermConnectTimeout Term = "connect timeout"
	// TermReset: the connection before succeeded, so the backoff began
	// anew; the interval is reported, not judged.
	TermReset Term = "reset"
)

// Recovery is how a client came back to a restarted retry port: the time
// from the port's return to the client's next attempt, against what the
// backoff it was in still owed at that moment.
type Recovery struct {
	// Attempt is the index (from 0) of the first attempt after the return.
	Attempt int `json:"attempt"`
	// AfterMS is the time from the port's return to that attempt.
	AfterMS float64 `json:"after_ms"`
	// OwedMS is what the backoff still owed at the return: the expected
	// time of the attempt, from the return (negative: overdue). MinMS and
	// MaxMS bound it as the interval's window does.
	OwedMS float64 `json:"owed_ms"`
	MinMS  float64 `json:"min_ms"`
	MaxMS  float64 `json:"max_ms"`
	OK     bool    `json:"ok"`
}

// Reconnects is how fast a client came back to connections that succeeded
// and were closed at once (settings-close, goaway). The spec resets backoff
// on success, so a client that follows it reconnects at once, each time: a
// tight loop that a flapping server turns into a storm (docs/spec.md §7).
type Reconnects struct {
	// PerSecond is attempts per second over the chain.
	PerSecond float64 `json:"per_second"`
	// MedianMS is the median interval.
	MedianMS float64 `json:"median_ms"`
	// TightLoop is set when the median interval is below the first
	// backoff's window: the client reset its backoff every time.
	TightLoop bool `json:"tight_loop"`
}

// hung reports whether attempt i hung until the client's connect timeout:
// the server never answered it, or accepted it and sent nothing while it
// lasted at least the connect timeout (less the tolerance), whoever closed
// it in the end (the server closes what it holds when a session ends).
// Fates decide where the wire shows them; otherwise the mode does. A
// connection that ended sooner (refused, closed at once, a TLS handshake
// the client failed) failed at once.
func (r Run) hung(i int, p Policy) bool {
	if i < len(r.Endings) {
		switch e := r.Endings[i]; e.Fate {
		case FateUnanswered, FateOpen:
			return true
		case FateAbandoned, FateClosed:
			return e.ServerSent == PayloadNone && e.Duration >= p.MinConnectTimeout-p.Tolerance
		case FateUnknown, "":
		default:
			return false
		}
	}
	return r.Mode.Hangs()
}

// succeeds reports whether the connections of this mode succeed before
// they close, so that each one resets the client's backoff.
func (r Run) succeeds() bool {
	return r.Mode.Kind == ModeSettingsClose || r.Mode.Kind == ModeGoaway
}

// VerifyRun judges one chain's attempt times against p in run: the model
// of docs/spec.md §7, which the spec's ConnectWithBackoff gives for each
// mode. Each attempt's connect deadline is max(current_deadline, now +
// MIN_CONNECT_TIMEOUT); after a failure the client sleeps until
// current_deadline. An attempt that failed at once (close, refuse) leaves
// the reference's window; one that hung until the connect timeout T leaves
// [max(T, lo), max(T, hi)], lo and hi the backoff's bounds before the
// tolerance. After a success (settings-close, goaway) backoff starts anew:
// the interval is reported (TermReset), not judged.
func VerifyRun(p Policy, times []time.Time, run Run) Result {
	r := Result{Policy: p, Attempts: len(times), ReferencePassed: true, Run: run}
	if n := len(times) - 1; n > 0 {
		r.Intervals = make([]Interval, 0, n)
		r.BackoffMS = make([]int32, 0, n)
	}
	e := p.first()
	for k := 1; k < len(times); k++ {
		d := times[k].Sub(times[k-1])
		var iv Interval
		switch {
		case run.succeeds():
			iv = p.reset(k, d)
		case run.hung(k-1, p):
			iv = p.checkHung(k, e, d)
		default:
			iv = p.check(k, e, d)
		}
		r.Intervals = append(r.Intervals, iv)
		r.BackoffMS = append(r.BackoffMS, iv.BackoffMS)
		if !iv.OK {
			r.ReferencePassed = false
		}
		e = p.next(e)
	}
	if len(times) > 0 {
		r.Tail = p.tail(times, run, e)
	}
	r.Reference = reading(r.Intervals, len(times), r.Tail, func(iv Interval) bool { return iv.OK })
	r.Strict = reading(r.Intervals, len(times), r.Tail, func(iv Interval) bool { return iv.StrictOK })
	if !run.Back.IsZero() {
		r.Recovery = p.recovery(times, run.Back, r.Intervals)
	}
	if run.succeeds() && len(times) > 1 {
		r.Reconnects = p.reconnects(times, r.Intervals)
	}
	return r
}

// checkHung judges gap d as interval k after an attempt that hung until
// the connect timeout: its window is the reference's, each bound raised to
// at least the connect timeout.
func (p Policy) checkHung(k int, e float64, d time.Duration) Interval {
	t := ms(p.MinConnectTimeout)
	iv := p.check(k, max(e, t), d)
	tol := ms(p.Tolerance)
	iv.MinMS = max(t, e*(1-p.Jitter)) - tol
	iv.MaxMS = max(t, e*(1+p.Jitter)) + tol
	iv.Term = TermBackoff
	if t > e {
		iv.Term = TermConnectTimeout
	}
	iv.Outcome = OK
	switch b := float64(iv.BackoffMS); {
	case b < iv.MinMS:
		iv.Outcome = Early
	case b > iv.MaxMS:
		iv.Outcome = Late
	}
	iv.OK = iv.Outcome == OK
	iv.StrictOK = iv.OK
	if k == 1 {
		// The first backoff is not jittered: the attempt hangs until
		// max(T, INITIAL_BACKOFF).
		first := max(t, p.first())
		b := float64(iv.BackoffMS)
		iv.StrictOK = b >= first-tol && b <= first+tol
	}
	return iv
}

// reset reports gap d as interval k after a connection that succeeded:
// backoff began anew, so nothing bounds it.
func (p Policy) reset(k int, d time.Duration) Interval {
	measured := ms(d)
	return Interval{K: k, Measured: d, MeasuredMS: measured, BackoffMS: floorMS(d),
		ExpectedMS: 0, MinMS: 0, MaxMS: measured, OK: true, StrictOK: true, Outcome: OK, Term: TermReset}
}

// tail judges what came after the last attempt: when it hung and the run
// went on past the time by which its connect deadline and backoff were
// over (e is the expected value of the interval that never came), the
// client never gave up on it, or never came back after it did.
func (p Policy) tail(times []time.Time, run Run, e float64) string {
	last := len(times) - 1
	if run.End.IsZero() || !run.hung(last, p) || run.succeeds() {
		return ""
	}
	due := p.due(e)
	waited := ms(run.End.Sub(times[last]))
	if waited <= due {
		return ""
	}
	if last < len(run.Endings) && run.Endings[last].Fate == FateAbandoned {
		return fmt.Sprintf("no attempt after attempt %d: the client gave up on it after %.0f ms, then waited %.0f ms in all without trying again (due by %.0f ms)",
			last+1, ms(run.Endings[last].Duration), waited, due)
	}
	return fmt.Sprintf("the client never gave up on a hung connection: attempt %d was still waiting after %.0f ms, beyond its connect timeout of %.0f ms (due by %.0f ms)",
		last+1, waited, ms(p.MinConnectTimeout), due)
}

// recovery finds the first attempt after back and what the backoff owed
// then: interval k's expected time, counted from back.
func (p Policy) recovery(times []time.Time, back time.Time, ivs []Interval) *Recovery {
	i, _ := slices.BinarySearchFunc(times, back, func(t, b time.Time) int { return t.Compare(b) })
	if i == 0 || i == len(times) {
		return nil
	}
	iv := ivs[i-1]
	from := ms(back.Sub(times[i-1]))
	return &Recovery{
		Attempt: i,
		AfterMS: ms(times[i].Sub(back)),
		OwedMS:  iv.ExpectedMS - from,
		MinMS:   iv.MinMS - from,
		MaxMS:   iv.MaxMS - from,
		OK:      iv.OK,
	}
}

// reconnects measures the rate of a chain of successful connections.
func (p Policy) reconnects(times []time.Time, ivs []Interval) *Reconnects {
	span := ms(times[len(times)-1].Sub(times[0]))
	ds := make([]float64, len(ivs))
	for i, iv := range ivs {
		ds[i] = iv.MeasuredMS
	}
	slices.Sort(ds)
	med := ds[len(ds)/2]
	if len(ds)%2 == 0 {
		med = (ds[len(ds)/2-1] + med) / 2
	}
	rc := &Reconnects{MedianMS: med, TightLoop: med < p.first()*(1-p.Jitter)-ms(p.Tolerance)}
	if span > 0 {
		rc.PerSecond = float64(len(ivs)) * 1000 / span
	}
	return rc
}

// InferMode reads what the retry port did from the fates of the chains'
// attempts, for a capture read without --retry_mode: the most common of
// refused (refuse), hung (hang: as VerifyRun reads a hung attempt, with
// p's connect timeout), succeeded then closed (settings-close: the server
// sent a TLS ServerHello or SETTINGS; a GOAWAY inside TLS cannot be told
// apart) and closed at once (close). ok is false when no fate is known.
func (c *Chains) InferMode(p Policy) (m RetryMode, ok bool) {
	var refused, hung, succeeded, closed int
	var buf []Ending
	for i := range c.Len() {
		buf = c.endings(i, buf)
		run := Run{Endings: buf}
		for k, e := range buf {
			switch {
			case e.Fate == "" || e.Fate == FateUnknown:
			case e.Fate == FateRefused:
				refused++
			case run.hung(k, p):
				hung++
			case e.Succeeded():
				succeeded++
			default:
				closed++
			}
		}
	}
	switch most := max(refused, hung, succeeded, closed); {
	case most == 0:
		return RetryMode{}, false
	case most == refused:
		return RetryMode{Kind: ModeRefuse}, true
	case most == hung:
		return RetryMode{Kind: ModeHang}, true
	case most == succeeded:
		return RetryMode{Kind: ModeSettingsClose}, true
	}
	return RetryMode{}, true
}
