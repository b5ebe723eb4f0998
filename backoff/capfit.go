package backoff

import (
	"math"
	"slices"
	"time"
)

// A client run with a lower cap than the one it is judged against (the
// interop client's --max_reconnect_backoff_ms, grpc-go's MaxDelay) grows
// its backoff, then stays at its cap while the expected value keeps
// growing: the first interval past the cap, or a few later, comes early,
// and the report fails the peer without saying why. A report looks for one
// lower cap under which every failing peer passes, so that the report can
// name it (Summary.FitsCapMS).
//
// Each failing peer's verification already says which caps could explain
// it (CapRange, computed with the verdict, at no extra pass over the
// chain); only when every failing peer has such a range, and the ranges
// meet, are a few round candidates in the common range tried, by verifying
// the failing peers again with that cap. A capture whose failing peers
// retry at once or late costs nothing more.

// CapRange is the caps C (in ms) that could make one failing chain pass: the
// intervals from the first failure on are its plateau, each of which must
// lie in C's window (docs/spec.md §3.3) once E is capped at C.
type CapRange struct {
	Lo, Hi float64 // bounds on C, in ms
	Center float64 // the median of the plateau's whole milliseconds
	Capped bool    // false: no cap below the policy's explains the failure
}

// CapRangeOf is the CapRange of a chain verified against p whose reference
// reading failed first at interval first; buf is scratch space for the
// median.
func CapRangeOf(p Policy, ivs []Interval, first int, buf *[]float64) CapRange {
	// E1 is never capped (§3.2): a failing interval 1 fails under any cap.
	if first < 2 || first > len(ivs) {
		return CapRange{}
	}
	j, tol := p.Jitter, Millis(p.Tolerance)
	// A cap fits only if it is lower than what the first failure was judged
	// against (a cap at or above it leaves that window as it is) and lower
	// than the policy's. Nor may its window reach down to an immediate
	// retry: with the 100 ms tolerance a "cap" of 125 ms would pass a
	// client that never backs off.
	lo := tol / (1 - j)
	hi := min(ivs[first-1].ExpectedMS, Millis(p.MaxDelay))
	plateau := (*buf)[:0]
	for _, iv := range ivs[first-1:] {
		b := float64(iv.BackoffMS)
		// E(1−J) − tol ≤ b ≤ E(1+J) + tol, solved for E.
		lo = max(lo, (b-tol)/(1+j))
		hi = min(hi, (b+tol)/(1-j))
		if !(lo <= hi) {
			*buf = plateau
			return CapRange{}
		}
		plateau = append(plateau, b)
	}
	*buf = plateau
	return CapRange{Lo: lo, Hi: hi, Center: median(plateau), Capped: true}
}

// median sorts v and returns its median; v is not empty.
func median(v []float64) float64 {
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// capSteps are the roundings tried for a cap, roundest first: a client's
// cap is most often whole seconds, else tenths of one.
var capSteps = []float64{1000, 100, 1}

// FitCap returns the cap, in whole ms, below p's, under which every
// failing chain passes (0 when there is none, or no failing chain): the
// roundest candidate within every failing chain's CapRange, nearest the
// median of their plateaus, that verification confirms. ranges[i] is
// failing chain i's range; times gives its attempt times (in buf's array).
func FitCap(p Policy, ranges []CapRange, times func(i int, buf []time.Time) []time.Time) int64 {
	if len(ranges) == 0 {
		return 0
	}
	lo, hi := math.Inf(-1), math.Inf(1)
	centers := make([]float64, 0, len(ranges))
	for _, r := range ranges {
		if !r.Capped {
			return 0
		}
		lo, hi = max(lo, r.Lo), min(hi, r.Hi)
		if lo > hi {
			return 0
		}
		centers = append(centers, r.Center)
	}
	center := min(max(median(centers), lo), hi)
	j, tol, limit := p.Jitter, Millis(p.Tolerance), Millis(p.MaxDelay)
	tried := map[int64]bool{}
	var buf []time.Time
	for _, step := range capSteps {
		first, last := math.Ceil(lo/step), math.Floor(hi/step)
		if first > last {
			continue
		}
		// The multiple of step nearest the center, then its neighbour on
		// the center's other side.
		m := min(max(math.Round(center/step), first), last)
		other := m + 1
		if center < m*step {
			other = m - 1
		}
		for _, c := range []float64{m, other} {
			capMS := int64(c * step)
			if c < first || c > last || tried[capMS] {
				continue
			}
			tried[capMS] = true
			if e := float64(capMS); e*(1-j)-tol <= 0 || e >= limit {
				continue
			}
			q := p
			q.MaxDelay = time.Duration(capMS) * time.Millisecond
			all := true
			for i := range ranges {
				buf = times(i, buf)
				if !Passes(q, buf) {
					all = false
					break
				}
			}
			if all {
				return capMS
			}
		}
	}
	return 0
}

// Passes reports whether the reference reading of Verify(p, times) passes,
// without building its intervals.
func Passes(p Policy, times []time.Time) bool {
	if len(times) < 2 {
		return false
	}
	e := p.Expected(1)
	for k := 1; k < len(times); k++ {
		if !p.check(k, k, e, times[k].Sub(times[k-1])).OK {
			return false
		}
		e = p.Next(e)
	}
	return true
}
