package infer

import (
	"math"
	"slices"
	"time"
)

// End is what the wire shows of how an attempt ended (docs/spec.md §7.2),
// as the fit reads it.
type End uint8

const (
	// EndUnknown: nothing after the SYN is known. Read as a failure at
	// once, as the verifier reads an attempt of unknown fate.
	EndUnknown End = iota
	// EndFailed: the attempt failed at once (refused, or closed before the
	// connection succeeded).
	EndFailed
	// EndHung: the attempt hung (no answer, or accepted and silent) and
	// the wire does not show the client giving up on it.
	EndHung
	// EndTimedOut: the attempt hung and the client gave up on it after
	// Attempt.Lasted: its connect deadline.
	EndTimedOut
	// EndSucceeded: the connection succeeded (the server's SETTINGS or TLS
	// ServerHello), so the client's backoff starts anew after it.
	EndSucceeded
)

// Attempt is one connection attempt of a chain.
type Attempt struct {
	// At is when its SYN crossed the interface.
	At  time.Time
	End End
	// Lasted is the time from the SYN to the segment that ended the
	// attempt, when the wire shows one (zero otherwise).
	Lasted time.Duration
}

// point is one interval the fit reads: the k-th backoff of its run.
type point struct {
	k   int32
	run int32 // which run of the chain, from 0
	// ms is the interval, y its log (the scale the fit works in); before
	// is how long the attempt before it lasted when the wire shows it
	// (grpc-go sleeps from the attempt's end, docs/spec.md §4.2), else 0.
	ms, y, before float64
}

// pointsOf reads a chain's attempts, in time order, into the intervals the
// fit reads (docs/spec.md §8.1), appended to pts. A success ends a run: the
// attempt after it starts a new one, whose next interval is backoff 1
// again. An interval after a hung attempt is the connect timeout's as much
// as the backoff's: it is left out, and the run's count goes on. held gets,
// for each attempt the client gave up on, its backoff index and how long
// it lasted. runs counts the runs that gave an interval; each point names
// its run among them.
func pointsOf(as []Attempt, pts, held []point) (_, _ []point, runs int) {
	pts = slices.Grow(pts, len(as))
	k, fresh := int32(1), true
	for i := 0; i+1 < len(as); i++ {
		a := as[i]
		lasted := ms(a.Lasted)
		switch a.End {
		case EndSucceeded:
			k, fresh = 1, true
			continue
		case EndTimedOut:
			held = append(held, point{k: k, ms: lasted})
			k++
			continue
		case EndHung:
			k++
			continue
		}
		d := ms(as[i+1].At.Sub(a.At))
		if d <= 0 {
			// Two SYNs at one instant: no interval to take the log of.
			k++
			continue
		}
		if fresh {
			runs++
			fresh = false
		}
		pts = append(pts, point{k: k, run: int32(runs - 1), ms: d, y: math.Log(d), before: lasted})
		k++
	}
	return pts, held, runs
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
