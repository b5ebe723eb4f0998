package html

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/report/herd"
	"github.com/backoff-audit/audit/session"
)

// The peer chart. script.js draws the same chart for a row opened in the
// page, from the same numbers: a change here is a change there.
const (
	chartLeft   = 56  // room for the y labels
	chartTop    = 22  // the attempts' time line above the plot
	chartHeight = 140 // the plot
	chartBottom = 18  // the k labels
	chartWidth  = 660 // the plot's width, at most
	chartMinCol = 8   // a column's width, at least
	chartMaxCol = 56  // and at most
	chartRight  = 200 // room for the failures' words
	chartWords  = 9   // failures worded beside the plot, at most
)

// maxShown bounds the intervals (and attempts) a peer's chart and table
// show: a tight loop makes thousands, and its JSON report holds them all.
const maxShown = 200

// chartIv is what the chart draws of one interval.
type chartIv struct {
	measured, expected, lo, hi float64
	ok, reset                  bool
	words                      string // beside a failing point: "early", "late"
	mark                       string // a cross-check disagreement, "" when none
}

// yScale maps ms to the plot's y on a log scale.
type yScale struct{ lo, hi float64 } // log10 of the bounds

func newYScale(ivs []chartIv) yScale {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, iv := range ivs {
		for _, v := range []float64{iv.measured, iv.lo, iv.hi} {
			if v > 0 {
				lo, hi = min(lo, v), max(hi, v)
			}
		}
	}
	if math.IsInf(lo, 0) {
		lo, hi = 1, 1000
	}
	lo, hi = max(lo, 0.01)/1.25, max(hi, 0.01)*1.25
	return yScale{math.Log10(lo), math.Log10(hi)}
}

func (s yScale) y(v float64) float64 {
	l := math.Log10(max(v, math.Pow(10, s.lo)))
	l = min(l, s.hi)
	return chartTop + chartHeight - (l-s.lo)/(s.hi-s.lo)*chartHeight
}

// ticks returns the values to rule: decades, and 2 and 5 times them when
// the plot spans less than two decades.
func (s yScale) ticks() []float64 {
	var out []float64
	steps := []float64{1}
	if s.hi-s.lo < 2 {
		steps = []float64{1, 2, 5}
	}
	for d := math.Floor(s.lo); d <= s.hi; d++ {
		for _, m := range steps {
			v := m * math.Pow(10, d)
			if l := math.Log10(v); l >= s.lo && l <= s.hi {
				out = append(out, v)
			}
		}
	}
	return out
}

func colWidth(n int) float64 {
	return max(chartMinCol, min(chartMaxCol, float64(chartWidth)/float64(max(n, 1))))
}

// appendChart appends a peer's chart: above, its attempts on a time line;
// below, one column per interval, the window a band (hatched when the
// interval failed), the expected value a rule, the measured interval a
// dot, or a cross when it failed, its words beside the plot.
func appendChart(b []byte, times []time.Time, ivs []chartIv) []byte {
	n := len(ivs)
	cw := colWidth(n)
	plotW := float64(n) * cw
	w := chartLeft + plotW + chartRight
	h := float64(chartTop + chartHeight + chartBottom)
	b = append(b, `<svg class="chart" role="img" viewBox="0 0 `...)
	b = appendNum(b, w)
	b = append(b, ' ')
	b = appendNum(b, h)
	b = append(b, `" width="`...)
	b = appendNum(b, w)
	b = append(b, `" height="`...)
	b = appendNum(b, h)
	b = append(b, `">`...)

	// The time line.
	if len(times) > 1 && times[len(times)-1].After(times[0]) {
		span := float64(times[len(times)-1].Sub(times[0]))
		b = append(b, `<path class="tl" d="M`...)
		b = appendNum(b, chartLeft)
		b = append(b, " 8H"...)
		b = appendNum(b, chartLeft+plotW)
		for _, t := range times {
			b = append(b, 'M')
			b = appendNum(b, chartLeft+float64(t.Sub(times[0]))/span*plotW)
			b = append(b, " 3v10"...)
		}
		b = append(b, `"/><text class="lab" x="2" y="12">attempts</text>`...)
	}

	s := newYScale(ivs)
	for _, v := range s.ticks() {
		y := s.y(v)
		b = append(b, `<path class="grid" d="M`...)
		b = appendNum(b, chartLeft)
		b = append(b, ' ')
		b = appendNum(b, y)
		b = append(b, 'H')
		b = appendNum(b, chartLeft+plotW)
		b = append(b, `"/><text class="lab" x="`...)
		b = appendNum(b, chartLeft-4)
		b = append(b, `" y="`...)
		b = appendNum(b, y+3)
		b = append(b, `" text-anchor="end">`...)
		b = append(b, fmtMS(v)...)
		b = append(b, `</text>`...)
	}
	labelEvery := int(math.Ceil(24 / cw))
	worded := 0
	for i, iv := range ivs {
		k := i + 1
		x := chartLeft + (float64(i)+0.5)*cw
		bw := max(cw*0.6, 4)
		b = append(b, `<g class="iv`...)
		if !iv.ok {
			b = append(b, ` bad`...)
		}
		b = append(b, `"><title>`...)
		b = appendTitle(b, k, iv)
		b = append(b, `</title>`...)
		if !iv.reset {
			y1, y2 := s.y(iv.hi), s.y(iv.lo)
			b = append(b, `<rect class="band" x="`...)
			b = appendNum(b, x-bw/2)
			b = append(b, `" y="`...)
			b = appendNum(b, y1)
			b = append(b, `" width="`...)
			b = appendNum(b, bw)
			b = append(b, `" height="`...)
			b = appendNum(b, max(y2-y1, 1))
			b = append(b, `"/><path class="exp" d="M`...)
			b = appendNum(b, x-bw/2)
			b = append(b, ' ')
			b = appendNum(b, s.y(iv.expected))
			b = append(b, 'h')
			b = appendNum(b, bw)
			b = append(b, `"/>`...)
		}
		y := s.y(iv.measured)
		switch {
		case iv.reset:
			b = append(b, `<path class="pt reset" d="M`...)
			b = appendNum(b, x)
			b = append(b, ' ')
			b = appendNum(b, y-4)
			b = append(b, `l4 4-4 4-4-4z"/>`...)
		case iv.ok:
			b = append(b, `<circle class="pt" cx="`...)
			b = appendNum(b, x)
			b = append(b, `" cy="`...)
			b = appendNum(b, y)
			b = append(b, `" r="3.5"/>`...)
		default:
			b = append(b, `<path class="pt x" d="M`...)
			b = appendNum(b, x-4)
			b = append(b, ' ')
			b = appendNum(b, y-4)
			b = append(b, `l8 8m0-8-8 8"/>`...)
			if worded < chartWords {
				b = append(b, `<text class="why" x="`...)
				b = appendNum(b, chartLeft+plotW+10)
				b = append(b, `" y="`...)
				b = appendNum(b, chartTop+10+13*float64(worded))
				b = append(b, `">✗ `...)
				b = strconv.AppendInt(b, int64(k), 10)
				b = append(b, ": "...)
				b = append(b, iv.words...)
				b = append(b, `</text>`...)
			} else if worded == chartWords {
				b = append(b, `<text class="why" x="`...)
				b = appendNum(b, chartLeft+plotW+10)
				b = append(b, `" y="`...)
				b = appendNum(b, chartTop+10+13*float64(worded))
				b = append(b, `">… and more, in the table</text>`...)
			}
			worded++
		}
		if iv.mark != "" {
			b = append(b, `<text class="dis" x="`...)
			b = appendNum(b, x)
			b = append(b, `" y="`...)
			b = appendNum(b, chartTop+10)
			b = append(b, `" text-anchor="middle">≠</text>`...)
		}
		if i%labelEvery == 0 || k == n {
			b = append(b, `<text class="lab" x="`...)
			b = appendNum(b, x)
			b = append(b, `" y="`...)
			b = appendNum(b, h-5)
			b = append(b, `" text-anchor="middle">`...)
			b = strconv.AppendInt(b, int64(k), 10)
			b = append(b, `</text>`...)
		}
		b = append(b, `</g>`...)
	}
	return append(b, `</svg>`...)
}

// appendTitle appends an interval's tooltip.
func appendTitle(b []byte, k int, iv chartIv) []byte {
	b = append(b, "interval "...)
	b = strconv.AppendInt(b, int64(k), 10)
	b = append(b, ": "...)
	b = appendFixed(b, iv.measured, 3)
	b = append(b, " ms"...)
	if iv.reset {
		return append(b, ", after a connection that succeeded: not judged"...)
	}
	b = append(b, ", window "...)
	b = appendRound(b, iv.lo)
	b = append(b, "–"...)
	b = appendRound(b, iv.hi)
	b = append(b, " ms: "...)
	if iv.ok {
		b = append(b, "✓ ok"...)
	} else {
		b = append(b, "✗ "...)
		b = append(b, iv.words...)
	}
	if iv.mark != "" {
		b = append(b, "; ≠ "...)
		b = appendEsc(b, iv.mark)
	}
	return b
}

// appendRateChart appends the herd's attempts over time: one bar per
// bucket, the peak second named.
func appendRateChart(b []byte, h herd.Reading) []byte {
	counts := h.Rate.Counts
	if len(counts) == 0 {
		return b
	}
	const left, top, ph, pw = 56.0, 10.0, 120.0, 720.0
	// The y axis reaches the largest bucket, and with one-second buckets
	// the densest second too (a window that may straddle two buckets):
	// the chart's top is never below the peak its caption names.
	peak := 1
	for _, c := range counts {
		peak = max(peak, c)
	}
	if h.Rate.BucketMS == 1000 {
		peak = max(peak, h.Peak.Count)
	}
	bw := pw / float64(len(counts))
	b = append(b, `<svg id="rate" class="chart" role="img" viewBox="0 0 800 160" width="800" height="160" data-bucket="`...)
	b = strconv.AppendInt(b, h.Rate.BucketMS, 10)
	b = append(b, `" data-c="`...)
	for i, c := range counts {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(c), 10)
	}
	b = append(b, `"><title>attempts per `...)
	b = append(b, fmtMS(float64(h.Rate.BucketMS))...)
	b = append(b, `</title>`...)
	// The y rules: 0, half and the top.
	for _, v := range []int{0, peak / 2, peak} {
		y := top + ph - float64(v)/float64(peak)*ph
		b = append(b, `<path class="grid" d="M`...)
		b = appendNum(b, left)
		b = append(b, ' ')
		b = appendNum(b, y)
		b = append(b, `h720"/><text class="lab" x="52" y="`...)
		b = appendNum(b, y+3)
		b = append(b, `" text-anchor="end">`...)
		b = strconv.AppendInt(b, int64(v), 10)
		b = append(b, `</text>`...)
	}
	b = append(b, `<path class="bars" stroke-width="`...)
	b = appendNum(b, max(bw*0.8, 1))
	b = append(b, `" d="`...)
	for i, c := range counts {
		if c == 0 {
			continue
		}
		b = append(b, 'M')
		b = appendNum(b, left+(float64(i)+0.5)*bw)
		b = append(b, ' ')
		b = appendNum(b, top+ph)
		b = append(b, 'V')
		b = appendNum(b, top+ph-float64(c)/float64(peak)*ph)
	}
	b = append(b, `"/>`...)
	// The x labels: the start, the middle and the end, from the start.
	span := float64(len(counts)) * float64(h.Rate.BucketMS)
	for _, f := range []float64{0, 0.5, 1} {
		b = append(b, `<text class="lab" x="`...)
		b = appendNum(b, left+f*pw)
		b = append(b, `" y="150" text-anchor="middle">+`...)
		b = append(b, fmtMS(f*span)...)
		b = append(b, `</text>`...)
	}
	return append(b, `</svg>`...)
}

// delayEdges are the app-delay histogram's bin edges, in µs: the delays
// span from a few µs on an idle loopback to many ms under load
// (docs/spec.md §6.4).
var delayEdges = []float64{0, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5}

// appendDelayHistogram appends the histogram of the pairs' app delays.
func appendDelayHistogram(b []byte, pairs []session.Pair) []byte {
	if len(pairs) == 0 {
		return b
	}
	bins := make([]int, len(delayEdges))
	for _, p := range pairs {
		us := float64(p.Delay) / float64(time.Microsecond)
		i := len(delayEdges) - 1
		for i > 0 && us < delayEdges[i] {
			i--
		}
		bins[i]++
	}
	top := 1
	for _, c := range bins {
		top = max(top, c)
	}
	const left, ph, bw = 8.0, 80.0, 40.0
	w := left + bw*float64(len(bins)) + 8
	b = append(b, `<svg class="chart hist" role="img" viewBox="0 0 `...)
	b = appendNum(b, w)
	b = append(b, ` 130" width="`...)
	b = appendNum(b, w)
	b = append(b, `" height="130"><title>app delay, SYN to accept, per pair</title>`...)
	for i, c := range bins {
		x := left + float64(i)*bw
		hgt := float64(c) / float64(top) * ph
		b = append(b, `<rect class="bin" x="`...)
		b = appendNum(b, x+3)
		b = append(b, `" y="`...)
		b = appendNum(b, 16+ph-hgt)
		b = append(b, `" width="`...)
		b = appendNum(b, bw-6)
		b = append(b, `" height="`...)
		b = appendNum(b, hgt)
		b = append(b, `"/><text class="lab" x="`...)
		b = appendNum(b, x+bw/2)
		b = append(b, `" y="`...)
		b = appendNum(b, 12+ph-hgt)
		b = append(b, `" text-anchor="middle">`...)
		if c > 0 {
			b = strconv.AppendInt(b, int64(c), 10)
		}
		b = append(b, `</text><text class="lab" x="`...)
		b = appendNum(b, x+bw/2)
		b = append(b, `" y="112" text-anchor="middle">`...)
		b = append(b, usLabel(delayEdges[i])...)
		b = append(b, `</text>`...)
	}
	return append(b, `<text class="lab" x="8" y="126">app delay from (µs, ms): each bar counts the pairs from its label to the next</text></svg>`...)
}

func usLabel(us float64) string {
	if us >= 1000 {
		return strconv.FormatFloat(us/1000, 'f', -1, 64) + "ms"
	}
	return strconv.FormatFloat(us, 'f', -1, 64) + "µs"
}

// appendNum appends v with one decimal, without a trailing ".0": what
// script.js's num writes, String(Math.round(v * 10) / 10), for the
// coordinates of a chart.
func appendNum(b []byte, v float64) []byte {
	r := math.Round(v * 10)
	if math.IsNaN(r) || math.Abs(r) >= 1e15 {
		return strconv.AppendFloat(b, r/10, 'f', 1, 64)
	}
	t := int64(r)
	if t < 0 {
		b = append(b, '-')
		t = -t
	}
	b = strconv.AppendInt(b, t/10, 10)
	if d := t % 10; d != 0 {
		b = append(b, '.', byte('0'+d))
	}
	return b
}

// appendRound appends v rounded to a whole number, halves up, as
// script.js's Math.round does for the same numbers.
func appendRound(b []byte, v float64) []byte {
	return strconv.AppendInt(b, int64(math.Floor(v+0.5)), 10)
}

// appendFixed appends v with prec decimals.
func appendFixed(b []byte, v float64, prec int) []byte {
	return strconv.AppendFloat(b, v, 'f', prec, 64)
}

// stateBandW is the width of a chain's band of channel states.
const stateBandW = 600

// appendStateBand appends the channel's states (backoff.States) as a band
// over the chain's time, one segment per state, its name in a title and
// in a pattern as well as a colour, and a legend of the states it shows.
func appendStateBand(b []byte, states []backoff.State) []byte {
	t0, t1 := states[0].At, states[len(states)-1].At
	span := float64(t1.Sub(t0))
	if span <= 0 {
		span = 1
	}
	x := func(t time.Time) float64 { return chartLeft + float64(t.Sub(t0))/span*stateBandW }
	b = append(b, `<svg class="states" role="img" aria-label="channel states" viewBox="0 0 `...)
	b = appendNum(b, chartLeft+stateBandW+8)
	b = append(b, ` 30" width="`...)
	b = appendNum(b, chartLeft+stateBandW+8)
	b = append(b, `" height="30"><text class="lab" x="2" y="14">states</text>`...)
	for i, st := range states {
		end := t1
		if i+1 < len(states) {
			end = states[i+1].At
		}
		w := max(x(end)-x(st.At), 1)
		b = append(b, `<rect class="st `...)
		b = append(b, strings.ToLower(st.State)...)
		b = append(b, `" x="`...)
		b = appendNum(b, x(st.At))
		b = append(b, `" y="4" width="`...)
		b = appendNum(b, w)
		b = append(b, `" height="12"><title>`...)
		b = append(b, st.State...)
		b = append(b, " at +"...)
		b = append(b, fmtMS(backoff.Millis(st.At.Sub(t0)))...)
		b = append(b, `</title></rect>`...)
	}
	b = append(b, `<text class="lab" x="`...)
	b = appendNum(b, chartLeft)
	b = append(b, `" y="28">CONNECTING ░ · READY █ · TRANSIENT_FAILURE ▒ · IDLE □</text></svg>`...)
	return b
}
