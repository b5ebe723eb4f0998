package infer

import (
	"fmt"
	"math"
)

// Estimate is one parameter of an inferred policy: its value and an
// interval that holds the true value with about 95 % confidence under the
// model (docs/spec.md §8.3), or, when the wire does not determine it, the
// reason.
type Estimate struct {
	Value, Low, High float64
	Undetermined     string
}

// Determined reports whether the estimate has a value.
func (e Estimate) Determined() bool { return e.Undetermined == "" }

func undetermined(why string) Estimate { return Estimate{Undetermined: why} }

// Cap is the inferred MAX_BACKOFF. When the chain never reached its cap
// (it was still growing at its last interval, or flat from the first),
// Reached is false, the Estimate says nothing, and Above is the backoff
// the chain reached: the cap, if any, is at least that.
type Cap struct {
	Estimate
	Reached bool
	Above   float64
}

// Params are the parameters of a schedule as the wire shows them, a
// chain's or a fleet policy's (docs/spec.md §8.3): times in milliseconds.
type Params struct {
	Shape          Shape
	Initial        Estimate
	Multiplier     Estimate
	Jitter         Estimate
	MaxBackoff     Cap
	ConnectTimeout Estimate
}

// Fit is the schedule of the spec's family that best explains one chain
// (docs/spec.md §8).
type Fit struct {
	// Intervals counts the intervals the fit read: those after a hung
	// attempt or a success are left out (pointsOf).
	Intervals int
	// Runs counts the runs of backoff: a success starts a new one.
	Runs int
	// TimedOut counts the attempts the client gave up on after they hung:
	// what shows the connect timeout.
	TimedOut int
	Params

	pts  []point
	held []point
	maxK int // the largest backoff index of pts
}

// fitting is a Fit in the making, with the model it chose: a Fit keeps
// only what it reports and what Cluster reads, for a capture's every
// chain.
type fitting struct {
	*Fit
	m   model
	ref float64 // the profile's reference log
}

// The spec's jitter (docs/spec.md §1.1): what the interval of a chain's
// initial backoff allows when the chain is too short to measure its own.
const specJitter = 0.2

// FitChain fits the spec's family to the attempts of one chain, in time
// order. It reads each attempt once and each backoff index a few times: linear in
// the attempts.
func FitChain(as []Attempt) Fit {
	return fitScratch(as, &scratch{})
}

// fitScratch is FitChain with the fit's intervals in sc's buffers: a Fit
// that Cluster reads once and forgets.
func fitScratch(as []Attempt, sc *scratch) Fit {
	var f Fit
	f.pts, f.held, f.Runs = pointsOf(as, sc.pts[:0], sc.held[:0])
	sc.pts, sc.held = f.pts, f.held
	f.TimedOut = len(f.held)
	(&fitting{Fit: &f}).fit()
	return f
}

// fit estimates every parameter from f.pts and f.held.
func (f *fitting) fit() {
	n := len(f.pts)
	f.Intervals = n
	// The buffers of a chain of the length of an interop run live on the
	// stack (BenchmarkFitChain): fitting every chain of a large capture
	// allocates only the intervals it keeps.
	var byArr [16]kSums
	var stepArr, scratch [32]float64
	for _, p := range f.pts {
		f.maxK = max(f.maxK, int(p.k))
	}
	pr := profileOf(f.maxK, byArr[:])
	for _, p := range f.pts {
		pr.add(p)
	}
	if n == 0 {
		reason := "no interval: fewer than two attempts"
		if len(f.held) > 0 {
			reason = "no interval: every attempt hung or succeeded"
		}
		f.Initial, f.Multiplier, f.Jitter = undetermined(reason), undetermined(reason), undetermined(reason)
		f.MaxBackoff = Cap{Estimate: undetermined(reason)}
		f.ConnectTimeout = f.connectTimeout()
		return
	}
	f.m, f.ref = choose(&pr), pr.ref
	if n > 2 {
		f.Shape = f.m.shape
	}
	dof := n - f.m.params
	switch {
	case n == 1:
		why := "one interval: a flat schedule and a growing one look alike"
		f.Multiplier, f.Jitter, f.MaxBackoff = undetermined(why), undetermined(why), Cap{Estimate: undetermined(why)}
	case n == 2:
		why := "two intervals: growth and jitter look alike"
		f.Multiplier, f.Jitter, f.MaxBackoff = undetermined(why), undetermined(why), Cap{Estimate: undetermined(why)}
	default:
		s := math.Sqrt(max(f.m.sse, float64(n)*noiseFloor*noiseFloor) / float64(max(dof, 1)))
		steps := f.stepsOf(stepArr[:0])
		f.Jitter = f.jitter(dof, steps, scratch[:0])
		f.Multiplier = f.multiplier(dof, s, steps)
		f.MaxBackoff = capOf(f.m, f.ref, dof, s, f.Jitter)
	}
	f.Initial = f.initial(scratch[:0])
	f.ConnectTimeout = f.connectTimeout()
}

// initial reads INITIAL_BACKOFF from interval 1 of each run (their median).
// The spec's first backoff is exact, C-core's since 2024 and grpc-java's
// jittered (docs/spec.md §4.2), and one chain cannot tell which: the
// interval is what either allows: the value divided by 1 ± the chain's
// jitter at its highest (the spec's when it is undetermined; at most
// maxJitter, beyond which no policy is), widened below by the attempt's
// own duration (its mean over the runs: grpc-go sleeps from the attempt's
// end). buf is scratch space.
func (f *fitting) initial(buf []float64) Estimate {
	firsts, before, befores := buf, 0.0, 0
	for _, p := range f.pts {
		if p.k == 1 {
			firsts = append(firsts, p.ms)
			if p.before > 0 {
				before += p.before
				befores++
			}
		}
	}
	if len(firsts) == 0 {
		return undetermined("interval 1 follows a hung attempt")
	}
	v := median(firsts)
	j := specJitter
	if f.Jitter.Determined() {
		j = min(max(f.Jitter.High, noiseFloor), maxJitter)
	}
	e := Estimate{Value: v, Low: v / (1 + j), High: v / (1 - j)}
	if befores > 0 {
		e.Low = min(e.Low, v-before/float64(befores))
	}
	return e
}

// multiplier reads MULTIPLIER from the slope of the log intervals on k
// before the cap (slopeOf): least squares, with the t interval of the
// slope. A chain alone cannot tell whether its jitter compounds (grpc-js,
// docs/spec.md §4.2), so the interval also holds the mean step's t
// interval, the reading of compounding jitter.
func (f *fitting) multiplier(dof int, s float64, st []float64) Estimate {
	e := slopeOf(f.m, f.Intervals, dof, s)
	if !e.Determined() || f.m.shape == ShapeFlat {
		return e
	}
	if len(st) >= 2 {
		mean, sd := meanSD(st)
		h := tQuantile(len(st)-1) * sd / math.Sqrt(float64(len(st)))
		e.Low, e.High = min(e.Low, math.Exp(max(mean-h, 0))), max(e.High, math.Exp(mean+h))
	}
	return e
}

// jitter reads JITTER from the residuals of the intervals after the first
// (the first may be exact): for a uniform jitter ±j, the median of
// |interval / expected − 1| is j/2. The residuals are scaled up for the
// parameters fitted, and the interval is the order statistics' interval of
// the median (medianRanks), joined with that of the steps' residuals, the
// reading of compounding jitter.
func (f *fitting) jitter(dof int, st, buf []float64) Estimate {
	if dof < 2 {
		return undetermined(fmt.Sprintf("too short: %d intervals leave %d to measure the spread", f.Intervals, max(dof, 0)))
	}
	scale := math.Sqrt(float64(f.Intervals) / float64(dof))
	us := buf
	for _, p := range f.pts {
		if p.k >= 2 {
			us = append(us, 2*math.Abs(math.Expm1((p.y-f.ref-f.m.at(int(p.k)))*scale)))
		}
	}
	if len(us) < 3 {
		return undetermined(fmt.Sprintf("too short: %d intervals after the first", len(us)))
	}
	v, lo, hi := medianInterval(us)
	if len(st) >= 3 {
		mean, _ := meanSD(st)
		sc := math.Sqrt(float64(len(st)) / float64(len(st)-1))
		// The residuals of the steps, after us in buf's array: st is
		// the multiplier's too.
		rs := us[len(us):len(us)]
		for _, d := range st {
			rs = append(rs, 2*math.Abs(math.Expm1((d-mean)*sc)))
		}
		_, l, h := medianInterval(rs)
		lo, hi = min(lo, l), max(hi, h)
	}
	if lo <= 2*noiseFloor {
		// As small as the noise of a timer and a send: no jitter.
		lo = 0
	}
	return Estimate{Value: min(v, 1), Low: min(lo, 1), High: min(hi, 1)}
}

// connectTimeout reads the connect timeout from the attempts the client
// gave up on (connectTimeoutOf).
func (f *fitting) connectTimeout() Estimate {
	return connectTimeoutOf(f.held, func(k int) (float64, bool) {
		if f.Intervals < 3 || !f.Jitter.Determined() {
			return 0, false
		}
		return math.Exp(f.m.at(k)+f.ref-logBias(min(f.Jitter.Value, 0.99))) * (1 + f.Jitter.Value), true
	})
}

// stepsOf appends to st the log steps between consecutive intervals of a
// run on the line of the model (before the cap).
func (f *fitting) stepsOf(st []float64) []float64 {
	for i := 1; i < len(f.pts); i++ {
		p, q := f.pts[i-1], f.pts[i]
		if q.run == p.run && q.k == p.k+1 && f.m.growing(int(q.k)) {
			st = append(st, q.y-p.y)
		}
	}
	return st
}

func meanSD(v []float64) (mean, sd float64) {
	for _, x := range v {
		mean += x
	}
	mean /= float64(len(v))
	for _, x := range v {
		sd += (x - mean) * (x - mean)
	}
	if len(v) > 1 {
		sd = math.Sqrt(sd / float64(len(v)-1))
	}
	return mean, sd
}
