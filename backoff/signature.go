package backoff

import (
	"fmt"
	"math"
)

// Signature is a known deviation from the spec that a chain's shape
// matches, with the implementations it was measured in (docs/spec.md §7).
// It explains a verdict; it never changes one.
type Signature struct {
	Name   string `json:"name"`
	Seen   string `json:"seen_in"`
	Detail string `json:"detail"`
}

// The signatures Signatures knows.
const (
	SigSleptAfter     = "backoff slept after the connect timeout"
	SigFirstJittered  = "first interval jittered"
	SigFromEnd        = "backoff counted from the attempt's end"
	SigCompounding    = "compounding jitter"
	SigNoConnTimeout  = "no connect timeout"
	seenGo            = "grpc-go"
	seenCoreJava      = "C-core, grpc-java"
	seenJS            = "grpc-js"
	minCompoundChecks = 3
)

// Signatures names the known deviations r's chain matches.
func Signatures(r Result) []Signature {
	var out []Signature
	for _, f := range []func(Result) (Signature, bool){sleptAfter, firstJittered, fromEnd, compounding, noConnectTimeout} {
		if s, ok := f(r); ok {
			out = append(out, s)
		}
	}
	return out
}

// sleptAfter: after a hung attempt the client slept its whole backoff
// after the connect timeout instead of until the backoff's deadline, so
// each such interval is the attempt's duration plus a backoff. Shown only
// when such an interval failed and every one of them fits that shape.
func sleptAfter(r Result) (Signature, bool) {
	p := r.Policy
	tol := Millis(p.Tolerance)
	failed, fits, first, firstHeld := false, 0, 0, 0.0
	for _, iv := range r.Intervals {
		if iv.Term != TermBackoff && iv.Term != TermConnectTimeout {
			continue
		}
		held := Millis(p.MinConnectTimeout)
		if i := iv.K - 1; i < len(r.Run.Endings) && r.Run.Endings[i].Fate == FateAbandoned {
			held = Millis(r.Run.Endings[i].Duration)
		}
		e := p.Expected(iv.K)
		rest := iv.MeasuredMS - held
		if rest < e*(1-p.Jitter)-tol || rest > e*(1+p.Jitter)+tol {
			return Signature{}, false
		}
		if !iv.OK {
			failed = true
			if first == 0 {
				first, firstHeld = iv.K, held
			}
		}
		fits++
	}
	if !failed {
		return Signature{}, false
	}
	iv := r.Intervals[first-1]
	return Signature{Name: SigSleptAfter, Seen: seenGo, Detail: fmt.Sprintf(
		"%d of %d intervals after a hung attempt are its connect timeout plus a backoff: interval %d is %.0f ms ≈ %.0f ms + %.0f ms, where the spec sleeps only until the backoff's deadline",
		fits, fits, first, iv.MeasuredMS, firstHeld, iv.MeasuredMS-firstHeld)}, true
}

// firstJittered: interval 1 lies within the reference's ±jitter window but
// not within INITIAL_BACKOFF ± tolerance, nor within it once attempt 1's
// duration is taken off (that is fromEnd): the first backoff was jittered.
func firstJittered(r Result) (Signature, bool) {
	iv, ok := strictFirst(r)
	if !ok || fromEndFits(r, iv) {
		return Signature{}, false
	}
	return Signature{Name: SigFirstJittered, Seen: seenCoreJava, Detail: fmt.Sprintf(
		"interval 1 is %.0f ms (%+.1f %%): jittered, where the spec's first backoff is exactly %.0f ms",
		iv.MeasuredMS, iv.JitterPct, Millis(r.Policy.BaseDelay))}, true
}

// fromEnd: interval 1 fails the strict reading, and attempt 1's duration,
// where the wire shows it, brings it back within INITIAL_BACKOFF ±
// tolerance: the client slept its first backoff from the failed attempt's
// end, where the spec counts from its start (docs/spec.md §4.2). A server
// slow to close the first connection lengthens interval 1 without any
// jitter.
func fromEnd(r Result) (Signature, bool) {
	iv, ok := strictFirst(r)
	if !ok || !fromEndFits(r, iv) {
		return Signature{}, false
	}
	held := Millis(r.Run.Endings[0].Duration)
	return Signature{Name: SigFromEnd, Seen: seenGo, Detail: fmt.Sprintf(
		"interval 1 is %.0f ms ≈ attempt 1's %.0f ms + %.0f ms: the first backoff of %.0f ms was slept from the attempt's end, not its start",
		iv.MeasuredMS, held, iv.MeasuredMS-held, Millis(r.Policy.BaseDelay))}, true
}

// strictFirst returns interval 1 when the reference's reading passes it
// and the strict reading does not.
func strictFirst(r Result) (Interval, bool) {
	if len(r.Intervals) == 0 {
		return Interval{}, false
	}
	iv := r.Intervals[0]
	return iv, iv.Term == "" && iv.OK && !iv.StrictOK
}

// fromEndFits says whether interval 1 less attempt 1's duration lies
// within INITIAL_BACKOFF ± tolerance.
func fromEndFits(r Result, iv Interval) bool {
	if len(r.Run.Endings) == 0 {
		return false
	}
	p := r.Policy
	rest := iv.MeasuredMS - Millis(r.Run.Endings[0].Duration)
	return math.Abs(rest-Millis(p.BaseDelay)) <= Millis(p.Tolerance)
}

// compounding: each interval is the previous measured one times the
// multiplier, ±jitter, instead of the previous expected one: jitter
// compounds and the chain drifts out of its windows. Shown only when an
// interval failed and every step before the cap fits.
//
// The previous interval is itself measured within ± tolerance of the
// backoff the client drew, and the step multiplies that error too: grpc-js
// starts its timer before it connects, and its first connection waits on
// its TLS setup, so interval 1 comes out up to tens of milliseconds short
// of the 1000 ms it drew (docs/spec.md §7.4). The base is widened by the
// tolerance before the multiplier and the jitter apply.
func compounding(r Result) (Signature, bool) {
	p := r.Policy
	tol := Millis(p.Tolerance)
	steps, failed := 0, 0
	for i := 1; i < len(r.Intervals); i++ {
		prev, iv := r.Intervals[i-1], r.Intervals[i]
		if prev.Term != "" || iv.Term != "" {
			return Signature{}, false
		}
		if iv.ExpectedMS >= Millis(p.MaxDelay) {
			break
		}
		lo := (prev.MeasuredMS - tol) * p.Multiplier * (1 - p.Jitter)
		hi := (prev.MeasuredMS + tol) * p.Multiplier * (1 + p.Jitter)
		if iv.MeasuredMS < lo-tol || iv.MeasuredMS > hi+tol {
			return Signature{}, false
		}
		steps++
		if !iv.OK && failed == 0 {
			failed = iv.K
		}
	}
	if steps < minCompoundChecks || failed == 0 {
		return Signature{}, false
	}
	iv := r.Intervals[failed-1]
	return Signature{Name: SigCompounding, Seen: seenJS, Detail: fmt.Sprintf(
		"each interval is ×%g ±%g %% of the previous measured one, not of the expected one: interval %d drifted to %.0f ms (window %.0f–%.0f ms)",
		p.Multiplier, p.Jitter*100, failed, iv.MeasuredMS, iv.MinMS, iv.MaxMS)}, true
}

// noConnectTimeout: a hung attempt outlived max(connect timeout, backoff)
// plus the tolerance without the client giving up on it.
func noConnectTimeout(r Result) (Signature, bool) {
	p := r.Policy
	for i, en := range r.Run.Endings {
		if i >= r.Attempts || en.Fate != FateAbandoned {
			continue
		}
		due := p.due(p.Expected(i + 1))
		if held := Millis(en.Duration); held > due {
			return Signature{Name: SigNoConnTimeout, Seen: seenJS, Detail: fmt.Sprintf(
				"attempt %d hung for %.0f ms before the client gave up, beyond its connect deadline of %.0f ms", i+1, held, due)}, true
		}
	}
	if r.Tail != "" && r.Attempts > 0 && !(r.Attempts <= len(r.Run.Endings) && r.Run.Endings[r.Attempts-1].Fate == FateAbandoned) {
		return Signature{Name: SigNoConnTimeout, Seen: seenJS, Detail: r.Tail}, true
	}
	return Signature{}, false
}
