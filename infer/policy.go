package infer

import (
	"fmt"
	"math"
)

// estimate pools the intervals of the chains members of fl and fits
// the spec's family to them (docs/spec.md §8.5): the shape by choose, the
// initial backoff as the median of the intervals 1 with the order
// statistics' interval, the jitter from the residuals after interval 1,
// and, when the steps read as compounding, the multiplier and the jitter
// from the steps instead. final asks for the last estimate of a policy,
// which also corrects the slope for exact intervals 1.
//
// While a policy is refined (not final) it is estimated from an even
// sample of its chains; its final estimate fits its shape to every
// interval and reads its medians (intervals 1, the residuals, the steps)
// from a sample (sampleOf). It reads each chain of members once, and
// keeps the intervals of the sample only.
func (fl *fleet) estimate(members []int, final bool) Policy {
	var p Policy
	total, maxK := 0, 0
	for _, i := range members {
		total += int(fl.briefs[i].intervals)
		maxK = max(maxK, int(fl.briefs[i].maxK))
	}
	if !final {
		members = sampled(members, total, false)
	}
	n := 0
	for _, i := range members {
		n += int(fl.briefs[i].intervals)
	}
	sample := sampled(members, n, true)
	pr := profileOf(maxK, nil)
	var sc scratch
	var held, pool []point
	var ends []int
	next := 0 // of sample, a subsequence of members
	for _, i := range members {
		pts, h := fl.points(i, &sc)
		for _, pt := range pts {
			pr.add(pt)
		}
		held = append(held, h...)
		if next < len(sample) && sample[next] == i {
			pool = append(pool, pts...)
			ends = append(ends, len(pool))
			next++
		}
	}
	// The sample's chains, each its intervals.
	chains := make([][]point, len(ends))
	for j, end := range ends {
		start := 0
		if j > 0 {
			start = ends[j-1]
		}
		chains[j] = pool[start:end:end]
	}
	var firsts, befores []float64
	for _, pts := range chains {
		for _, pt := range pts {
			if pt.k == 1 {
				firsts = append(firsts, pt.ms)
				if pt.before > 0 {
					befores = append(befores, pt.before)
				}
			}
		}
	}
	p.m, p.ref = choose(&pr), pr.ref
	if n > 2 {
		p.Shape = p.m.shape
	}
	if len(firsts) > 0 {
		v, lo, hi := medianInterval(firsts)
		p.Initial = Estimate{Value: v, Low: lo, High: hi}
		p.first = p.Initial
		if len(befores) > 0 {
			p.first.Low -= median(befores)
		}
		for i, b := range firsts {
			firsts[i] = 2 * math.Abs(b/v-1)
		}
		p.FirstJitter = median(firsts)
	} else {
		p.Initial = undetermined("every interval 1 follows a hung attempt")
	}
	dof := n - p.m.params
	p.Jitter = p.levelJitter(chains, n, dof)
	if j := p.Jitter; final && j.Determined() && p.Initial.Determined() && p.FirstJitter <= max(2*noiseOf(p.Initial.Value), j.Value/2) {
		// Intervals 1 are exact and the later ones jittered, their mean log
		// logBias below their backoff's: pooled, so many intervals read
		// that as a slope a little flatter, which the longest chains of
		// the policy then fail. Intervals 1 are read as jittered ones
		// would be, and the shape chosen again; the jitter, read from
		// the same residuals but for that bias, stands.
		pr.shift(1, logBias(min(j.Value, 0.99)))
		p.m = choose(&pr)
		dof = n - p.m.params
	}
	s := math.Sqrt(max(p.m.sse, float64(n)*noiseFloor*noiseFloor) / float64(max(dof, 1)))
	// Without jitter, steps correlate as the timer's noise does: nothing
	// compounds.
	p.correlate(chains)
	switch {
	case n <= 2:
		why := "too short: two intervals or fewer"
		p.Multiplier, p.Jitter, p.MaxBackoff = undetermined(why), undetermined(why), Cap{Estimate: undetermined(why)}
	case p.Compounds:
		p.Multiplier, p.Jitter = p.stepReading(chains)
		p.MaxBackoff = capOf(p.m, p.ref, dof, s, p.Jitter)
	default:
		p.Multiplier = slopeOf(p.m, n, dof, s)
		p.MaxBackoff = capOf(p.m, p.ref, dof, s, p.Jitter)
	}
	p.jitterE = specJitter
	if p.Jitter.Determined() {
		p.jitterE = p.Jitter.High
		p.FirstJittered = p.Initial.Determined() && p.FirstJitter > max(2*noiseOf(p.Initial.Value), p.Jitter.Value/2)
	}
	p.ConnectTimeout = connectTimeoutOf(held, func(k int) (float64, bool) {
		if n < 3 || !p.Jitter.Determined() {
			return 0, false
		}
		return p.expected(k) * (1 + p.Jitter.Value), true
	})
	p.Differs = p.Compare(GRPCDefault)
	p.Default = len(p.Differs) == 0 && p.Multiplier.Determined() && p.Jitter.Determined()
	return p
}

// levelJitter reads the jitter from the residuals of the intervals after
// the first of chains (a sample) against the pooled model (n intervals,
// dof degrees of freedom left): twice the median of |interval /
// expected − 1|, the expected value corrected for the jitter's log bias
// as a first reading of the same residuals gives it.
func (p *Policy) levelJitter(chains [][]point, n, dof int) Estimate {
	if dof < 2 {
		return undetermined(fmt.Sprintf("too short: %d intervals leave %d to measure the spread", n, max(dof, 0)))
	}
	scale := math.Sqrt(float64(n) / float64(dof))
	// The log residuals, once; then twice the median of |U − 1|, U each
	// residual with the log bias of the jitter they first read as put
	// back.
	var rs []float64
	for _, pts := range chains {
		for _, pt := range pts {
			if pt.k >= 2 {
				rs = append(rs, (pt.y-p.ref-p.m.at(int(pt.k)))*scale)
			}
		}
	}
	if len(rs) < 3 {
		return undetermined(fmt.Sprintf("too short: %d intervals after the first", len(rs)))
	}
	us := make([]float64, len(rs))
	for i, r := range rs {
		us[i] = 2 * math.Abs(math.Expm1(r))
	}
	bias := logBias(min(median(us), 0.99))
	for i, r := range rs {
		us[i] = 2 * math.Abs(math.Expm1(r+bias))
	}
	v, lo, hi := medianInterval(us)
	if lo <= 2*noiseFloor {
		lo = 0
	}
	return Estimate{Value: min(v, 1), Low: min(lo, 1), High: min(hi, 1)}
}

// sampleOf is how many intervals of a policy an estimate reads at most:
// jitterSample for its final estimate, refineSample while it is refined.
// The median of that many is within about 1 % of all of them, and a
// policy of 10 000 chains is estimated a few times over.
func sampleOf(final bool) int {
	if final {
		return jitterSample
	}
	return refineSample
}

// sampled returns members, or an even sample of them of about
// sampleOf(final) intervals, n being theirs.
func sampled(members []int, n int, final bool) []int {
	step := n / sampleOf(final)
	if step <= 1 {
		return members
	}
	out := make([]int, 0, len(members)/step+1)
	for i := 0; i < len(members); i += step {
		out = append(out, members[i])
	}
	return out
}

// correlate measures the correlation of consecutive log steps before the
// cap, from interval 2 on (interval 1 may be exact), over chains, and
// whether it reads as compounding jitter.
func (p *Policy) correlate(chains [][]point) {
	var sum, n float64
	each := func(f func(d0, d1 float64)) {
		for _, pts := range chains {
			for j := 2; j < len(pts); j++ {
				a, b, c := pts[j-2], pts[j-1], pts[j]
				if a.k >= 2 && a.run == c.run && b.k == a.k+1 && c.k == b.k+1 && p.m.growing(int(c.k)) {
					f(b.y-a.y, c.y-b.y)
				}
			}
		}
	}
	each(func(d0, d1 float64) { sum += d0 + d1; n += 2 })
	if n == 0 {
		return
	}
	g := sum / n
	var cov, v float64
	each(func(d0, d1 float64) {
		cov += (d0 - g) * (d1 - g)
		v += ((d0-g)*(d0-g) + (d1-g)*(d1-g)) / 2
	})
	p.Steps = int(n / 2)
	if v > 0 {
		p.StepCorrelation = cov / v
	}
	p.Compounds = p.Steps >= minStepPairs && p.StepCorrelation > corrCompounds &&
		p.Jitter.Determined() && p.Jitter.Value > 2*noiseFloor
}

// stepReading reads the multiplier and the jitter of compounding jitter:
// each backoff is the last one times the multiplier, jittered, so the log
// steps before the cap are its log multiplier plus the jitter's noise.
func (p *Policy) stepReading(chains [][]point) (mult, jit Estimate) {
	var st []float64
	for _, pts := range chains {
		for j := 1; j < len(pts); j++ {
			a, b := pts[j-1], pts[j]
			if b.run == a.run && b.k == a.k+1 && p.m.growing(int(b.k)) {
				st = append(st, b.y-a.y)
			}
		}
	}
	if len(st) < 3 {
		why := "too few steps before the cap"
		return undetermined(why), undetermined(why)
	}
	mean, sd := meanSD(st)
	p.stepG = mean
	h := tQuantile(len(st)-1) * sd / math.Sqrt(float64(len(st)))
	mult = Estimate{Value: math.Exp(mean), Low: math.Exp(max(mean-h, 0)), High: math.Exp(mean + h)}
	sc := math.Sqrt(float64(len(st)) / float64(len(st)-1))
	for i, d := range st {
		st[i] = 2 * math.Abs(math.Expm1((d-mean)*sc))
	}
	v, lo, hi := medianInterval(st)
	return mult, Estimate{Value: min(v, 1), Low: min(lo, 1), High: min(hi, 1)}
}

// slopeOf reads the multiplier from the slope of model m fitted to n
// intervals: its t interval; 1 for a flat model, with the interval of the
// slope a line would have.
func slopeOf(m model, n, dof int, s float64) Estimate {
	switch m.shape {
	case ShapeCappedAtOnce:
		return undetermined("the level from interval 2 on is the cap: the multiplier that reached it does not show")
	case ShapeFlat:
		_, g, sxx, sse, ok := m.all.line()
		if !ok || n < 3 {
			return Estimate{Value: 1, Low: 1, High: 1}
		}
		half := tQuantile(n-2) * math.Sqrt(max(sse, float64(n)*noiseFloor*noiseFloor)/float64(n-2)/sxx)
		return Estimate{Value: 1, Low: 1, High: math.Exp(max(g+half, 0))}
	}
	if dof < 1 {
		return undetermined(fmt.Sprintf("too short: %d intervals leave no freedom to measure the growth", n))
	}
	half := tQuantile(dof) * s / math.Sqrt(m.sxx)
	return Estimate{Value: math.Exp(m.g), Low: math.Exp(max(m.g-half, 0)), High: math.Exp(m.g + half)}
}

// capOf reads MAX_BACKOFF from model m: the level after the line less the
// jitter's log bias, with the t interval of its mean. When the model never
// stops growing the cap is at least the backoff it reached: the low end of
// the t interval of the line at its last interval; when flat, its level.
func capOf(m model, ref float64, dof int, s float64, jitter Estimate) Cap {
	j := 0.0
	if jitter.Determined() {
		j = min(jitter.Value, 0.99)
	}
	level := func(y float64) float64 { return math.Exp(y + ref - logBias(j)) }
	switch m.shape {
	case ShapeGrowing:
		return Cap{Above: level(m.at(m.last) - tQuantile(max(dof, 1))*m.lineError(m.last, s))}
	case ShapeFlat:
		return Cap{Above: level(m.c)}
	}
	if dof < 1 {
		return Cap{Estimate: undetermined("too short: no freedom left to measure the level"), Reached: true}
	}
	half := tQuantile(dof) * s / math.Sqrt(m.plateau)
	return Cap{Estimate: Estimate{Value: level(m.c), Low: level(m.c - half), High: level(m.c + half)}, Reached: true}
}

// connectTimeoutOf reads the connect timeout from the attempts the client
// gave up on (held: backoff index and duration): each lasted max(timeout,
// its backoff), so those that lasted longer than their backoff could have
// (bound(k), when known) show the timeout itself. The value is their
// median, the interval their range.
func connectTimeoutOf(held []point, bound func(k int) (float64, bool)) Estimate {
	if len(held) == 0 {
		return undetermined("no attempt was seen timing out")
	}
	var ts []float64
	for _, h := range held {
		if b, ok := bound(int(h.k)); ok && h.ms <= b {
			continue
		}
		ts = append(ts, h.ms)
	}
	if len(ts) == 0 {
		return undetermined("each attempt that timed out lasted no longer than its backoff")
	}
	v := median(ts)
	return Estimate{Value: v, Low: ts[0], High: ts[len(ts)-1]}
}

// prepare computes the backoffs the policy expects up to k = maxK, so that
// explains only reads the policy (each runs on every core).
func (p *Policy) prepare(maxK int) {
	p.expect = make([]float64, maxK)
	for k := range p.expect {
		p.expect[k] = p.expectedAt(k + 1)
	}
}

// expected is the backoff the policy expects at k (ms).
func (p *Policy) expected(k int) float64 {
	if k-1 < len(p.expect) {
		return p.expect[k-1]
	}
	return p.expectedAt(k)
}

func (p *Policy) expectedAt(k int) float64 {
	j := 0.0
	if p.Jitter.Determined() {
		j = min(p.Jitter.Value, 0.99)
	}
	return math.Exp(p.m.at(k) + p.ref - logBias(j))
}

// slack is the tolerance on both sides of a window around e (ms): the
// reference's 100 ms for transmission delay (docs/spec.md §3.3), at most
// a tenth of e so that a schedule of milliseconds keeps its shape, plus
// 2 % for the error of the policy's own estimate.
func slack(e float64) float64 { return 0.02*e + min(100, 0.1*e) }

// window is the policy's window for an interval of backoff index k (ms),
// before, for interval 1, the attempt's duration before it.
func (p *Policy) window(k int32, before float64) (lo, hi float64) {
	if k == 1 {
		j1 := max(p.FirstJitter, noiseFloor)
		return p.first.Low*(1-j1) - slack(p.first.Low) - before, p.first.High*(1+j1) + slack(p.first.High)
	}
	e, j := p.expected(int(k)), p.jitterE
	return e*(1-j) - slack(e), e*(1+j) + slack(e)
}

// rejects reports whether p cannot explain the chain of b: its first
// interval lies outside its window, by more than the rounding of the
// brief's float32. A chain's first interval has no interval before it
// that a compounding jitter could be read from, so explains would reject
// it too.
func (p *Policy) rejects(b *brief) bool {
	if !p.Initial.Determined() {
		return true
	}
	if b.intervals == 0 {
		return false
	}
	ms, before := float64(b.ms0), float64(b.before0)
	lo, hi := p.window(b.k0, before)
	tol := 1e-6 * (ms + before + 1)
	return ms < lo-tol || ms > hi+tol
}

// explains reports whether every interval of a chain, pts, lies within the policy's
// window for it and, when weigh asks, the sum of the log widths of those
// windows (the chain's negative log likelihood under the policy's uniform
// jitter, but for a constant). Interval 1 lies within the initial backoff's interval
// widened by the spread of intervals 1 and the slack (less the attempt's
// duration, for grpc-go); a later one within the expected backoff ± the
// jitter's high bound and the slack or, when the policy's jitter
// compounds, within the last interval times the multiplier, so jittered
// and widened (docs/spec.md §7.4).
func (p *Policy) explains(pts []point, weigh bool) (logWidth float64, ok bool) {
	if !p.Initial.Determined() {
		return 0, false
	}
	j := p.jitterE
	// The widths multiplied, their log taken now and then: one log a
	// chain rather than one an interval.
	width := 1.0
	for i, pt := range pts {
		lo, hi := p.window(pt.k, pt.before)
		if pt.ms < lo || pt.ms > hi {
			if !p.Compounds || i == 0 {
				return 0, false
			}
			prev := pts[i-1]
			if prev.run != pt.run || prev.k+1 != pt.k || !p.m.growing(int(pt.k)) {
				return 0, false
			}
			m, t := math.Exp(p.stepG), slack(prev.ms)
			lo, hi = (prev.ms-t)*m*(1-j)-t, (prev.ms+t)*m*(1+j)+t
			if pt.ms < lo || pt.ms > hi {
				return 0, false
			}
		}
		if width *= hi - lo; width > 1e200 {
			logWidth += math.Log(width)
			width = 1
		}
	}
	if !weigh {
		return 0, true
	}
	return logWidth + math.Log(width), true
}

// Schedule is a policy as configured, to hold an inference to: times in
// milliseconds.
type Schedule struct {
	InitialMS, Multiplier, Jitter, MaxBackoffMS float64
}

// GRPCDefault is gRPC's default policy (docs/spec.md §1.1).
var GRPCDefault = Schedule{InitialMS: 1000, Multiplier: 1.6, Jitter: 0.2, MaxBackoffMS: 120000}

// How far an inferred parameter's interval may lie from a schedule's
// value and still be it: the accuracy the fit is held to on a generated
// fleet (docs/spec.md §8.5).
const (
	tolInitial    = 0.10 // relative
	tolMultiplier = 0.08
	tolJitter     = 0.06
	tolCap        = 0.10 // relative
)

// Compare names the parameters whose interval, widened by the tolerances,
// does not hold s's value. A schedule whose cap is at most its initial
// backoff is flat: multiplier 1, no cap. An undetermined parameter differs
// in nothing; a cap never reached differs when what the chain reached is
// above s's.
func (p *Params) Compare(s Schedule) []string {
	if s.MaxBackoffMS <= s.InitialMS {
		s.Multiplier, s.MaxBackoffMS = 1, math.Inf(1)
	}
	within := func(e Estimate, v, rel, abs float64) bool {
		return !e.Determined() || e.Low*(1-rel)-abs <= v && v <= e.High*(1+rel)+abs
	}
	var out []string
	if !within(p.Initial, s.InitialMS, tolInitial, 0) {
		out = append(out, "initial backoff")
	}
	if !within(p.Multiplier, s.Multiplier, 0, tolMultiplier) {
		out = append(out, "multiplier")
	}
	if !within(p.Jitter, s.Jitter, 0, tolJitter) {
		out = append(out, "jitter")
	}
	if c := p.MaxBackoff; c.Reached && !within(c.Estimate, s.MaxBackoffMS, tolCap, 0) || !c.Reached && c.Above > s.MaxBackoffMS*(1+tolCap) {
		out = append(out, "cap")
	}
	return out
}
