package infer

import "math"

// Shape is the form of the schedule a fit chose (docs/spec.md §8.2).
type Shape string

const (
	// ShapeFlat: one level from interval 1 on; the multiplier is 1.
	ShapeFlat Shape = "flat"
	// ShapeGrowing: the backoff grew up to the last interval; the cap was
	// never reached.
	ShapeGrowing Shape = "growing"
	// ShapeCapped: the backoff grew, then stayed at the cap.
	ShapeCapped Shape = "growing, then capped"
	// ShapeCappedAtOnce: interval 2 is already at the cap, so the
	// multiplier never shows.
	ShapeCappedAtOnce Shape = "capped at interval 2"
)

// kSums holds, for one backoff index k, the count, sum and sum of squares
// of its log intervals (less the profile's reference).
type kSums struct{ n, y, yy float64 }

// profile is what the model fit needs of a set of intervals: their sums by
// backoff index, so that every change point is tried in one pass over k.
type profile struct {
	ref float64 // subtracted from every log interval, for precision
	by  []kSums // index k−1
	n   int
}

// add adds p to the profile, whose by must have room for p.k
// (profileOf).
func (pr *profile) add(p point) {
	if pr.n == 0 {
		pr.ref = p.y
	}
	y := p.y - pr.ref
	s := &pr.by[p.k-1]
	s.n++
	s.y += y
	s.yy += y * y
	pr.n++
}

// profileOf returns a profile with room for backoff indices up to maxK,
// in buf's array when it has room.
func profileOf(maxK int, buf []kSums) profile {
	if maxK > cap(buf) {
		buf = make([]kSums, maxK)
	}
	return profile{by: buf[:maxK]}
}

// shift moves the log intervals of index k by d.
func (pr *profile) shift(k int, d float64) {
	if k > len(pr.by) {
		return
	}
	s := &pr.by[k-1]
	s.yy += 2*d*s.y + s.n*d*d
	s.y += s.n * d
}

// lineSums accumulates the sums a least-squares line of log interval on
// x = k−1 needs.
type lineSums struct{ w, x, xx, y, xy, yy float64 }

func (l *lineSums) add(k int, s kSums) {
	x := float64(k - 1)
	l.w += s.n
	l.x += x * s.n
	l.xx += x * x * s.n
	l.y += s.y
	l.xy += x * s.y
	l.yy += s.yy
}

func (l lineSums) minus(m lineSums) lineSums {
	return lineSums{l.w - m.w, l.x - m.x, l.xx - m.xx, l.y - m.y, l.xy - m.xy, l.yy - m.yy}
}

// level is the mean and the sum of squared deviations.
func (l lineSums) level() (c, sse float64) {
	if l.w == 0 {
		return 0, 0
	}
	c = l.y / l.w
	return c, max(l.yy-l.y*c, 0)
}

// line is the least-squares line: a at k = 1, slope g, the spread of x and
// the sum of squared residuals; ok is false with fewer than two distinct k.
// mean is the mean x, for the error of the line at a given k.
func (l lineSums) mean() float64 { return l.x / l.w }

func (l lineSums) line() (a, g, sxx, sse float64, ok bool) {
	if l.w == 0 {
		return 0, 0, 0, 0, false
	}
	sxx = l.xx - l.x*l.x/l.w
	if sxx < 1e-9 {
		return 0, 0, 0, 0, false
	}
	sxy := l.xy - l.x*l.y/l.w
	syy := l.yy - l.y*l.y/l.w
	g = sxy / sxx
	a = (l.y - g*l.x) / l.w
	return a, g, sxx, max(syy-g*sxy, 0), true
}

// model is one schedule in the spec's family, in logs less the profile's
// reference: a at k = 1, growing by g per attempt up to k = last, then
// level c.
type model struct {
	shape   Shape
	last    int
	a, g, c float64
	sse     float64
	params  int      // continuous parameters: the residuals' lost degrees of freedom
	penalty int      // parameters for the choice, the change point counted
	minDof  float64  // the degrees of freedom the shape needs left
	sxx     float64  // spread of the line's k, for the slope's error
	xbar, w float64  // the line's mean k−1 and its intervals, for its error at a k
	plateau float64  // intervals on the level after the line
	all     lineSums // of every interval, for a flat model's slope
}

// at is the model's log interval at k.
func (m model) at(k int) float64 {
	if m.growing(k) {
		return m.a + float64(k-1)*m.g
	}
	if m.shape == ShapeCappedAtOnce && k == 1 {
		return m.a
	}
	return m.c
}

// lineError is the standard error of the line's value at k, s the
// residuals' standard deviation.
func (m model) lineError(k int, s float64) float64 {
	x := float64(k-1) - m.xbar
	return s * math.Sqrt(1/m.w+x*x/m.sxx)
}

// growing reports whether k is on the model's line, before any cap: a
// growing model's line goes on past its last interval.
func (m model) growing(k int) bool {
	return m.shape == ShapeGrowing || m.shape == ShapeCapped && k <= m.last
}

// noiseFloor is the relative noise below which a fit is exact: timestamps
// are exact to far less, but a client's timer and the send of its SYN are
// not (docs/spec.md §6.4), and without a floor a jitter-free schedule's
// near-zero residuals would make any extra parameter look worth its cost.
const noiseFloor = 0.005

// timerNoise is how far a client's timer and its send put an attempt off
// its schedule, in ms: a few tenths on loopback, now and then a few ms
// (docs/spec.md §6.4).
const timerNoise = 1.0

// noiseOf is the relative noise of an interval of about e ms.
func noiseOf(e float64) float64 { return max(noiseFloor, timerNoise/e) }

// What the choice of a shape asks of the intervals (docs/spec.md §8.2). A
// cap needs two intervals on it and two degrees of freedom left; each
// parameter costs at least minPenalty, more than ln n below 55 intervals:
// on a chain of 5 to 12 intervals, chance then makes a flat schedule with
// ±20 % jitter look growing, or a growing one look capped, a few times in
// a hundred where ln n would let it a few times in ten
// (TestShapeChoice).
const (
	minPlateau = 2
	minPenalty = 4
)

// capSlack is how far the level after the line may lie outside [the
// line's last value, one more step]: noise on a few intervals; a level far
// outside it is not a cap (a cap is reached by growing).
var capSlack = math.Log(1.25)

// choose fits every shape, every change point, to pr in one pass over k,
// and returns the one with the least Bayesian information criterion
// (docs/spec.md §8.2): n·ln(SSE/n) + parameters·max(ln n, minPenalty), SSE
// at least n·noiseFloor². With one interval, or none, it is flat.
func choose(pr *profile) model {
	var tot lineSums
	for k, s := range pr.by {
		tot.add(k+1, s)
	}
	// exp(criterion/n), which orders the shapes as the criterion does
	// without a log for each: the SSE times cost[p], the price of p
	// parameters.
	n := float64(pr.n)
	floor := n * noiseFloor * noiseFloor
	var cost [5]float64
	for p := range cost {
		cost[p] = math.Exp(float64(p) * max(math.Log(n), minPenalty) / n)
	}
	weigh := func(sse float64, penalty, params int, minDof, plateau float64) float64 {
		if n-float64(params) < minDof || plateau > 0 && plateau < minPlateau {
			return math.Inf(1)
		}
		return max(sse, floor) * cost[penalty]
	}
	c, sse := tot.level()
	best := model{shape: ShapeFlat, c: c, a: c, sse: sse, params: 1, penalty: 1, minDof: 1}
	least := weigh(sse, 1, 1, 1, 0)
	var pre lineSums
	for s := 1; s <= len(pr.by); s++ {
		pre.add(s, pr.by[s-1])
		post := tot.minus(pre)
		if s == 1 {
			// Interval 1, then the cap from interval 2 on: above it, or
			// below, since the first backoff is never capped (docs/spec.md
			// §3.2; grpc-go with a zero MaxDelay, §6.3).
			a, sa := pre.level()
			c, sc := post.level()
			if w := weigh(sa+sc, 3, 2, 2, post.w); post.w > 0 && pre.w > 0 && w < least {
				best, least = model{shape: ShapeCappedAtOnce, last: 1, a: a, c: c, sse: sa + sc, params: 2, penalty: 3, minDof: 2, plateau: post.w}, w
			}
			continue
		}
		a, g, sxx, sl, ok := pre.line()
		if !ok || g <= 0 {
			continue
		}
		if post.w == 0 {
			if w := weigh(sl, 2, 2, 1, 0); s == len(pr.by) && w < least {
				best, least = model{shape: ShapeGrowing, last: s, a: a, g: g, sse: sl, params: 2, penalty: 2, minDof: 1, sxx: sxx, xbar: pre.mean(), w: pre.w}, w
			}
			continue
		}
		c, sc := post.level()
		top := a + float64(s-1)*g
		if c < top-capSlack || c > top+g+capSlack {
			continue
		}
		if w := weigh(sl+sc, 4, 3, 2, post.w); w < least {
			best, least = model{shape: ShapeCapped, last: s, a: a, g: g, c: c, sse: sl + sc, params: 3, penalty: 4, minDof: 2, sxx: sxx, xbar: pre.mean(), w: pre.w, plateau: post.w}, w
		}
	}
	best.all = tot
	return best
}
