package h2

import (
	"math"
	"slices"
	"time"
)

// pingTally counts one direction's PINGs, every one decoded, whether or
// not the Report kept its event (Limits.MaxEvents), so that a cadence
// holds whatever the budget: the count, the BDP probes, the first time
// and the least interval exactly; the median interval exactly while there
// are at most maxExactGaps intervals, and beyond from a histogram of
// logarithmic buckets, within half a per cent. It also counts the ACKs the
// direction sent.
type pingTally struct {
	count, probes, acks int
	first, last         time.Time
	min                 time.Duration
	gaps                int // intervals: count − 1
	exact               []time.Duration
	hist                []uint32 // by gapBucket, once exact outgrew maxExactGaps
}

const (
	// maxExactGaps bounds the intervals kept exactly per direction.
	maxExactGaps = 1 << 14
	// Histogram buckets: bucket 0 holds intervals under gapUnit, bucket
	// b ≥ 1 those in [gapUnit·gapRatio^(b−1), gapUnit·gapRatio^b), the
	// last everything above.
	gapUnit    = time.Microsecond
	gapRatio   = 1.01
	gapBuckets = 2600 // gapRatio^2600 µs is over 48 hours
)

func gapBucket(g time.Duration) int {
	if g < gapUnit {
		return 0
	}
	b := int(math.Log(float64(g)/float64(gapUnit))/math.Log(gapRatio)) + 1
	return min(b, gapBuckets-1)
}

// add counts one PING or PING ACK that the tally's direction sent.
func (p *pingTally) add(e Event) {
	switch {
	case e.Kind == KindPingAck:
		p.acks++
		return
	case bdpProbe(e):
		p.probes++
		return
	}
	if p.count > 0 {
		g := e.Time.Sub(p.last)
		if p.gaps == 0 || g < p.min {
			p.min = g
		}
		p.gaps++
		switch {
		case p.hist != nil:
			p.hist[gapBucket(g)]++
		case len(p.exact) < maxExactGaps:
			p.exact = append(p.exact, g)
		default:
			p.hist = make([]uint32, gapBuckets)
			for _, x := range append(p.exact, g) {
				p.hist[gapBucket(x)]++
			}
			p.exact = nil
		}
	} else {
		p.first = e.Time
	}
	p.count++
	p.last = e.Time
}

// cadence is the tally as a Cadence of dir, whose peer sent acks ACKs.
func (p *pingTally) cadence(dir Direction, acks int) Cadence {
	c := Cadence{Dir: dir, Count: p.count, First: p.first, Probes: p.probes, Acks: acks}
	if p.gaps == 0 {
		return c
	}
	c.Min = p.min
	if p.hist == nil {
		c.Median = median(slices.Sorted(slices.Values(p.exact)))
		return c
	}
	// The bucket of the middle interval, read at its geometric middle.
	var seen uint32
	for b, n := range p.hist {
		if seen += n; int(seen) > p.gaps/2 {
			if b == 0 {
				return c
			}
			c.Median = time.Duration(float64(gapUnit) * math.Pow(gapRatio, float64(b)-0.5))
			return c
		}
	}
	return c
}
