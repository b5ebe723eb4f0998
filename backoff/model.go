package backoff

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
	// Down is when the retry port stopped serving (ModeOutage), Back when
	// it listened or served again (ModeRestart, ModeOutage); zero
	// otherwise, or when it has not.
	Down, Back time.Time
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
	// ReadyMS is the time from the port's return to the connection of that
	// attempt reaching READY, where the wire shows it did.
	ReadyMS *float64 `json:"ready_ms,omitempty"`
}

// Reconnects is how fast a client came back after connections that reached
// READY and were closed (settings-close, goaway, the serving phases of
// outage). The spec resets backoff
// on success, so a client that follows it reconnects at once, each time: a
// tight loop that a flapping server turns into a storm (docs/spec.md §7).
type Reconnects struct {
	// PerSecond is reconnections a second: the intervals after a READY
	// connection over their total time.
	PerSecond float64 `json:"per_second"`
	// MedianMS is the median of those intervals.
	MedianMS float64 `json:"median_ms"`
	// TightLoop is set when the median interval is below the first
	// backoff's window: the client reset its backoff every time.
	TightLoop bool `json:"tight_loop"`
}

// Class is what the model reads of one attempt (docs/spec.md §7.3): how it
// ended, as far as the wire shows it, and otherwise as the retry mode says.
type Class uint8

const (
	// ClassFailed: the attempt failed at once (refused, closed, a TLS handshake
	// the client failed): the next attempt comes at the backoff's deadline.
	ClassFailed Class = iota
	// ClassHung: the wire shows the attempt waiting (SYN retransmissions, or an
	// accepted connection held without a byte from the server) until its
	// connect deadline, max(backoff's deadline, start + connect timeout).
	ClassHung
	// ClassReady: the connection reached READY (the server's SETTINGS, or a TLS
	// handshake completed with data both ways): the backoff resets.
	ClassReady
	// ClassUnseen: nothing answered the attempt in the capture and nothing
	// shows it waiting (no SYN retransmission), while the client's next
	// SYN came before the connect deadline: the answer was not captured
	// (a one-sided tap, a filter, drops). The next SYN shows it ended: it
	// is judged as one that failed at once.
	ClassUnseen
)

func (c Class) String() string {
	return [...]string{"failed", "hung", "ready", "unseen"}[c]
}

// Class classifies attempt i, made at at, gap after which came the next
// attempt (0 for the last attempt of a chain). Fates decide where the wire
// shows them; otherwise the mode does.
func (r Run) Class(i int, p Policy, at time.Time, gap time.Duration) Class {
	if i < len(r.Endings) {
		switch e := r.Endings[i]; {
		case e.Ready:
			return ClassReady
		case e.Fate == FateUnanswered && e.Duration > 0, e.Fate == FateOpen:
			return ClassHung
		case e.Fate == FateUnanswered:
			if gap == 0 || gap < p.MinConnectTimeout-p.Tolerance {
				return ClassUnseen
			}
			return ClassHung // the next SYN came only after the connect deadline
		case e.Fate == FateAbandoned, e.Fate == FateClosed:
			if e.ServerSent == PayloadNone && e.Duration >= p.MinConnectTimeout-p.Tolerance {
				return ClassHung
			}
			return ClassFailed
		case e.Fate == FateRefused:
			return ClassFailed
		}
	}
	switch {
	case r.Mode.Hangs():
		return ClassHung
	case r.Mode.Kind == ModeOutage && r.down(at):
		return ClassFailed
	case r.Mode.Succeeds():
		return ClassReady
	}
	return ClassFailed
}

// down reports whether the retry port was down at t: from Down, until
// Back when it came back.
func (r Run) down(t time.Time) bool {
	return !r.Down.IsZero() && !t.Before(r.Down) && (r.Back.IsZero() || r.Back.Before(r.Down) || t.Before(r.Back))
}

// VerifyRun judges one chain's attempt times against p in run: the model
// of docs/spec.md §7.3, which the spec's ConnectWithBackoff gives. Each
// attempt's connect deadline is max(current_deadline, now +
// MIN_CONNECT_TIMEOUT); after a failure the client sleeps until
// current_deadline. An attempt that failed at once (or whose answer the
// capture lacks) leaves the reference's window; one that hung until the
// connect timeout T leaves [max(T, lo), max(T, hi)], lo and hi the
// backoff's bounds before the tolerance. After a connection that reached
// READY the backoff starts anew: the interval is reported (TermReset), not
// judged, and the next one is judged as the first of a new chain.
func VerifyRun(p Policy, times []time.Time, run Run) Result {
	return VerifyRunInto(p, times, run, nil, nil)
}

// VerifyRunInto is VerifyRun with the result's Intervals and BackoffMS
// appended to ivs[:0] and ms[:0], so that a caller that verifies chain
// after chain and keeps no result reuses their memory.
func VerifyRunInto(p Policy, times []time.Time, run Run, ivs []Interval, ms []int32) Result {
	r := Result{Policy: p, Attempts: len(times), ReferencePassed: true, Run: run}
	if n := len(times) - 1; n > 0 {
		r.Intervals = slices.Grow(ivs[:0], n)
		r.BackoffMS = slices.Grow(ms[:0], n)
	}
	j := Judge{Policy: p, Run: run}
	ready := 0
	for k, t := range times {
		var prev Ending
		if k > 0 && k-1 < len(run.Endings) {
			prev = run.Endings[k-1]
		}
		iv, class, ok := j.Next(t, prev)
		if !ok {
			continue
		}
		switch class {
		case ClassReady:
			ready++
		case ClassUnseen:
			r.Unseen++
		}
		r.Intervals = append(r.Intervals, iv)
		r.BackoffMS = append(r.BackoffMS, iv.BackoffMS)
		if !iv.OK {
			r.ReferencePassed = false
		}
	}
	if n := len(times); n > 0 {
		r.Tail = p.tail(times, run, j.e)
		if run.Class(n-1, p, times[n-1], 0) == ClassUnseen {
			r.Unseen++
		}
	}
	r.Reference = reading(r.Intervals, len(times), r.Tail, func(iv Interval) bool { return iv.OK })
	r.Strict = reading(r.Intervals, len(times), r.Tail, func(iv Interval) bool { return iv.StrictOK })
	if !run.Back.IsZero() {
		r.Recovery = p.recovery(times, run.Endings, run.Back, r.Intervals)
	}
	if ready > 1 { // a rate, not one reconnection
		r.Reconnects = p.reconnects(r.Intervals)
	}
	return r
}

// Judge applies the model to one chain an attempt at a time, as the
// attempts come: the live auditor's lines, the server's log, the interop
// client's check. VerifyRun is a Judge over a whole chain, so that a line
// printed as an attempt arrives says what the verdict will. The zero
// Judge's policy is the zero Policy: set Policy and Run (its Endings are
// not read).
type Judge struct {
	Policy Policy
	Run    Run
	n      int       // attempts so far
	last   time.Time // the last attempt's start
	e      float64   // the next interval's expected backoff, in ms
	step   int       // the next interval's step since the chain began or reset
}

// Attempts is the number of attempts judged so far.
func (j *Judge) Attempts() int { return j.n }

// Next judges the interval that an attempt at t ends, prev being what the
// wire (or the server) showed of the attempt before it; ok is false for
// the chain's first attempt, which ends no interval. class is what the
// model read of the attempt before.
func (j *Judge) Next(t time.Time, prev Ending) (iv Interval, class Class, ok bool) {
	j.n++
	if j.n == 1 {
		j.last, j.e, j.step = t, j.Policy.first(), 1
		return Interval{}, ClassFailed, false
	}
	p, k, d := j.Policy, j.n-1, t.Sub(j.last)
	run := j.Run
	run.Endings = []Ending{prev}
	class = run.Class(0, p, j.last, d)
	switch class {
	case ClassReady:
		iv = p.reset(k, d)
	case ClassHung:
		iv = p.checkHung(k, j.step, j.e, d)
	default:
		iv = p.check(k, j.step, j.e, d)
	}
	if iv.Term == TermReset {
		j.e, j.step = p.first(), 1
	} else {
		j.e, j.step = p.Next(j.e), j.step+1
	}
	j.last = t
	return iv, class, true
}

// checkHung judges gap d as interval k after an attempt that hung until
// the connect timeout: its window is the reference's, each bound raised to
// at least the connect timeout.
func (p Policy) checkHung(k, step int, e float64, d time.Duration) Interval {
	t := Millis(p.MinConnectTimeout)
	iv := p.check(k, step, max(e, t), d)
	tol := Millis(p.Tolerance)
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
	if step == 1 {
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
	measured := Millis(d)
	return Interval{K: k, Measured: d, MeasuredMS: measured, BackoffMS: floorMS(d),
		ExpectedMS: 0, MinMS: 0, MaxMS: measured, OK: true, StrictOK: true, Outcome: OK, Term: TermReset}
}

// tail judges what came after the last attempt: when it hung and the run
// went on past the time by which its connect deadline and backoff were
// over (e is the expected value of the interval that never came), the
// client never gave up on it, or never came back after it did.
func (p Policy) tail(times []time.Time, run Run, e float64) string {
	last := len(times) - 1
	if run.End.IsZero() || run.Class(last, p, times[last], 0) != ClassHung {
		return ""
	}
	due := p.due(e)
	waited := Millis(run.End.Sub(times[last]))
	if waited <= due {
		return ""
	}
	if last < len(run.Endings) && run.Endings[last].Fate == FateAbandoned {
		return fmt.Sprintf("no attempt after attempt %d: the client gave up on it after %.0f ms, then waited %.0f ms in all without trying again (due by %.0f ms)",
			last+1, Millis(run.Endings[last].Duration), waited, due)
	}
	return fmt.Sprintf("the client never gave up on a hung connection: attempt %d was still waiting after %.0f ms, beyond its connect timeout of %.0f ms (due by %.0f ms)",
		last+1, waited, Millis(p.MinConnectTimeout), due)
}

// recovery finds the first attempt after back and what the backoff owed
// then: interval k's expected time, counted from back.
func (p Policy) recovery(times []time.Time, endings []Ending, back time.Time, ivs []Interval) *Recovery {
	back = evidentBack(times, endings, back)
	i, _ := slices.BinarySearchFunc(times, back, func(t, b time.Time) int { return t.Compare(b) })
	if i == 0 || i == len(times) {
		return nil
	}
	iv := ivs[i-1]
	from := Millis(back.Sub(times[i-1]))
	rc := &Recovery{
		Attempt: i,
		AfterMS: Millis(times[i].Sub(back)),
		OwedMS:  iv.ExpectedMS - from,
		MinMS:   iv.MinMS - from,
		MaxMS:   iv.MaxMS - from,
		OK:      iv.OK,
	}
	if i < len(endings) && endings[i].Ready {
		v := Millis(times[i].Add(endings[i].ReadyAfter).Sub(back))
		rc.ReadyMS = &v
	}
	return rc
}

// evidentBack is back, when the retry port came back, where the attempts'
// fates place it: after the RST of every refused attempt from back on,
// and at the latest at the first attempt accepted after the last refused
// one. A return the server read from its clock lies there already; one a
// mode's schedule placed (RetryMode.Schedule: a control port's session,
// whose server's timers fire late under load) is moved there.
func evidentBack(times []time.Time, endings []Ending, back time.Time) time.Time {
	if len(endings) != len(times) {
		return back
	}
	i, _ := slices.BinarySearchFunc(times, back, func(t, b time.Time) int { return t.Compare(b) })
	for ; i < len(times) && endings[i].Fate == FateRefused; i++ {
		back = times[i].Add(endings[i].Duration)
	}
	j := i - 1
	for j >= 0 && endings[j].Fate.Accepted() {
		j--
	}
	if j >= 0 && j < i-1 && endings[j].Fate == FateRefused {
		back = times[j+1]
	}
	return back
}

// reconnects measures how fast the client came back after its
// connections that reached READY: the intervals that followed them.
func (p Policy) reconnects(ivs []Interval) *Reconnects {
	var ds []float64
	var span float64
	for _, iv := range ivs {
		if iv.Term == TermReset {
			ds = append(ds, iv.MeasuredMS)
			span += iv.MeasuredMS
		}
	}
	slices.Sort(ds)
	med := ds[len(ds)/2]
	if len(ds)%2 == 0 {
		med = (ds[len(ds)/2-1] + med) / 2
	}
	rc := &Reconnects{MedianMS: med, TightLoop: med < p.first()*(1-p.Jitter)-Millis(p.Tolerance)}
	if span > 0 {
		rc.PerSecond = float64(len(ds)) * 1000 / span
	}
	return rc
}

// A channel's connectivity states, as gRPC names them.
const (
	StateConnecting       = "CONNECTING"
	StateReady            = "READY"
	StateTransientFailure = "TRANSIENT_FAILURE"
	StateIdle             = "IDLE"
)

// State is a channel entering a connectivity state, as the wire shows it.
type State struct {
	State string    `json:"state"`
	At    time.Time `json:"time"`
}

// States reads a chain's channel states from the wire: CONNECTING at each
// attempt's SYN, READY when its connection reached READY, IDLE when a
// READY connection ended, TRANSIENT_FAILURE when an attempt failed (at its
// end on the wire; an attempt whose answer the capture lacks, at the next
// SYN). endings[i] is what the wire showed of attempt i at times[i]; with
// no fate known, nothing but CONNECTING is shown.
func States(times []time.Time, endings []Ending) []State {
	out := make([]State, 0, 2*len(times))
	for i, t := range times {
		out = append(out, State{StateConnecting, t})
		if i >= len(endings) {
			continue
		}
		e := endings[i]
		switch {
		case e.Ready:
			out = append(out, State{StateReady, t.Add(e.ReadyAfter)})
			if e.Fate.Ended() {
				out = append(out, State{StateIdle, t.Add(e.Duration)})
			}
		case e.Fate == FateUnanswered:
			if i+1 < len(times) { // it ended, at the latest, with the next SYN
				out = append(out, State{StateTransientFailure, times[i+1]})
			}
		case e.Fate.Ended():
			out = append(out, State{StateTransientFailure, t.Add(e.Duration)})
		}
	}
	// A connection may outlive the next attempt's SYN (a client that
	// dropped it without closing): the states in time order.
	slices.SortStableFunc(out, func(a, b State) int { return a.At.Compare(b.At) })
	return out
}
