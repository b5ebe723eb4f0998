package html

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/internal/text"
	"github.com/backoff-audit/audit/report"
)

// peerBatch is how many peers a goroutine of writePeers formats at a time.
const peerBatch = 256

// writePeers writes every peer of r in report order
// (report.WriteBatches): in full (an article with its notes, chart and
// table) or as a row that the page fills in from its data-d attribute when
// opened.
func writePeers(w *bufio.Writer, r *report.Parts, pg *page) error {
	// data-s is each peer's rank by address, for the page's sort.
	n := r.Peers.Len()
	byAddr := make([]int, n)
	for i := range byAddr {
		byAddr[i] = i
	}
	slices.SortStableFunc(byAddr, func(i, j int) int { return r.Peers.Peer(i).Compare(r.Peers.Peer(j)) })
	rank := make([]int, n)
	for k, i := range byAddr {
		rank[i] = k
	}
	return report.WritePeers(w, r.Peers, func() *formatter { return new(formatter) },
		func(b []byte, f *formatter, i int, peer func() *report.PeerReport) ([]byte, error) {
			switch {
			case pg.full(i):
				return appendFullPeer(b, i, rank[i], peer(), pg.marks[i]), nil
			case pg.Compact > 0:
				return b, nil // a line of the compact list (writeCompact)
			}
			return f.appendRowPeer(b, i, rank[i], peer()), nil
		})
}

// writeCompact writes the compact list's data: a line a peer not written
// in full, of tab-separated fields that script.js reads (cdata):
//
//	position in the report, address, attempts, retransmits,
//	largest |jitter| (%), the strict reading's first failing interval (0: passed)
//
// from the section's index, without reading a chain.
func writeCompact(w *bufio.Writer, r *report.Parts, pg *page) error {
	var b []byte
	for i := range r.Peers.Len() {
		if pg.full(i) {
			continue
		}
		p := r.Peers.Brief(i)
		b = strconv.AppendInt(b[:0], int64(i), 10)
		b = append(b, '\t')
		b = appendAddr(b, p.Peer)
		b = append(b, '\t')
		b = strconv.AppendInt(b, int64(p.Attempts), 10)
		b = append(b, '\t')
		b = strconv.AppendInt(b, int64(p.Retransmits), 10)
		b = append(b, '\t')
		b = appendFixed(b, p.MaxJitterPct, 2)
		b = append(b, '\t')
		b = strconv.AppendInt(b, int64(p.Strict.FirstFailure), 10)
		b = append(b, '\n')
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// formatter holds what one goroutine of writePeers reuses from peer to
// peer: the data text of the windows it met.
type formatter struct {
	// windows holds, by k, the last window of interval k it wrote: a
	// policy's windows depend on k alone, and formatting floats is most of
	// a row's cost.
	windows [maxShown]struct {
		key [3]float64
		b   []byte
	}
}

// appendWindow appends ",expected,min,max" of iv, the i-th interval shown.
func (f *formatter) appendWindow(b []byte, i int, iv *backoff.Interval) []byte {
	w := &f.windows[i]
	key := [3]float64{iv.ExpectedMS, iv.MinMS, iv.MaxMS}
	if w.b != nil && w.key == key {
		return append(b, w.b...)
	}
	start := len(b)
	for _, v := range key {
		b = append(b, ',')
		b = appendJSNum(b, v)
	}
	w.key, w.b = key, append(w.b[:0], b[start:]...)
	return b
}

// appendPeerAttrs appends what sorting and filtering read: the address,
// the verdict, the attempts, the largest |jitter|, the report order and
// the address order.
func appendPeerAttrs(b []byte, i, rank int, p *report.PeerReport) []byte {
	_, class := verdictMark(p.Verdict)
	b = append(b, ` id="`...)
	b = appendPeerID(b, i)
	b = append(b, `" data-a="`...)
	b = appendAddr(b, p.Peer)
	b = append(b, `" data-v="`...)
	b = append(b, class...)
	b = append(b, `" data-n="`...)
	b = strconv.AppendInt(b, int64(len(p.Attempts)), 10)
	b = append(b, `" data-j="`...)
	b = appendFixed(b, maxJitter(p), 2)
	b = append(b, `" data-o="`...)
	b = strconv.AppendInt(b, int64(i), 10)
	b = append(b, `" data-s="`...)
	b = strconv.AppendInt(b, int64(rank), 10)
	return append(b, '"')
}

// appendHeadline appends a peer's first line, as its <h3> or <summary>.
func appendHeadline(b []byte, i int, p *report.PeerReport, link bool) []byte {
	mark, _ := verdictMark(p.Verdict)
	b = append(b, `<span class="mark">`...)
	b = append(b, mark...)
	b = append(b, `</span> `...)
	if link {
		b = append(b, `<a class="addr" href="#`...)
		b = appendPeerID(b, i)
		b = append(b, `">`...)
		b = appendAddr(b, p.Peer)
		b = append(b, `</a>`...)
	} else {
		b = append(b, `<span class="addr">`...)
		b = appendAddr(b, p.Peer)
		b = append(b, `</span>`...)
	}
	b = append(b, ` <span class="vd">`...)
	b = appendEsc(b, string(p.Verdict))
	b = append(b, `</span> · `...)
	b = text.AppendPlural(b, len(p.Attempts), "attempt")
	b = append(b, " · "...)
	b = text.AppendPlural(b, p.Retransmits, "retransmit")
	if p.Verdict != backoff.TooFew {
		b = append(b, " · strict: "...)
		b = appendEsc(b, string(p.Strict.Verdict))
		if p.Strict.FirstFailure > 0 {
			b = append(b, " at interval "...)
			b = strconv.AppendInt(b, int64(p.Strict.FirstFailure), 10)
		}
	}
	if p.ReferencePassed != p.Passed {
		b = append(b, " · the C++ reference would say passed"...)
	}
	if len(p.Intervals) > 0 {
		b = append(b, " · max |jitter| "...)
		b = appendFixed(b, maxJitter(p), 1)
		b = append(b, " %"...)
	}
	return b
}

// appendFullPeer appends peer i in full. marks holds the cross-check's
// disagreements by interval.
func appendFullPeer(b []byte, i, rank int, p *report.PeerReport, marks map[int]string) []byte {
	_, class := verdictMark(p.Verdict)
	b = append(b, `<article class="peer `...)
	b = append(b, class...)
	b = append(b, '"')
	b = appendPeerAttrs(b, i, rank, p)
	b = append(b, `><h3>`...)
	b = appendHeadline(b, i, p, true)
	b = append(b, `</h3>`...)
	if p.Reason != "" {
		b = append(b, `<p class="reason">✗ `...)
		b = appendEsc(b, p.Reason)
		b = append(b, `</p>`...)
	}
	if notes := peerNotes(p); len(notes) > 0 {
		b = append(b, `<ul class="notes">`...)
		for _, n := range notes {
			b = append(b, `<li>`...)
			b = appendEsc(b, n)
			b = append(b, `</li>`...)
		}
		b = append(b, `</ul>`...)
	}
	if len(p.States) > 0 {
		b = appendStateBand(b, p.States)
	}
	ivs := chartIvs(p, marks)
	if len(ivs) > 0 {
		times := make([]time.Time, min(len(p.Attempts), maxShown+1))
		for j := range times {
			times[j] = p.Attempts[j].Time
		}
		b = appendChart(b, times, ivs)
	}
	b = appendTable(b, i, p, ivs)
	return append(b, "</article>\n"...)
}

// appendRowPeer appends peer i as a row that opens on a click; the page
// draws its chart and table from data-d.
func (f *formatter) appendRowPeer(b []byte, i, rank int, p *report.PeerReport) []byte {
	_, class := verdictMark(p.Verdict)
	b = append(b, `<details class="peer row `...)
	b = append(b, class...)
	b = append(b, '"')
	b = appendPeerAttrs(b, i, rank, p)
	b = append(b, ` data-d='`...)
	b = f.appendPeerData(b, p)
	b = append(b, `'><summary>`...)
	b = appendHeadline(b, i, p, false)
	return append(b, "</summary></details>\n"...)
}

// appendPeerData appends what script.js draws an opened row from, as JSON:
//
//	{"t0": first attempt's time,
//	 "a": [[ms from the first attempt (to the ns), source port,
//	        retransmits, fate (when the report has one)], …],
//	 "i": [[measured, expected, min, max (ms, each read back exactly),
//	        outcome (0 ok, 1 early, 2 late), term (0 none, 1 backoff,
//	        2 connect timeout, 3 reset), strict ok (0, 1)], …],
//	 "x": [note, …], "more": attempts not shown}
//
// escaped for a single-quoted attribute.
func (f *formatter) appendPeerData(b []byte, p *report.PeerReport) []byte {
	var t0 time.Time
	if len(p.Attempts) > 0 {
		t0 = p.Attempts[0].Time
	}
	b = append(b, `{"t0":"`...)
	b = t0.UTC().AppendFormat(b, text.TimeLayout)
	b = append(b, `","a":[`...)
	shown := min(len(p.Attempts), maxShown+1)
	for j, a := range p.Attempts[:shown] {
		if j > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = report.AppendMS(b, a.Time.Sub(t0))
		b = append(b, ',')
		b = strconv.AppendUint(b, uint64(a.SrcPort), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(a.Retransmits), 10)
		if f, _, ok := attemptFate(a); ok {
			b = append(b, ',')
			b = appendAttrJSON(b, f)
		}
		b = append(b, ']')
	}
	b = append(b, `],"i":[`...)
	for j := range p.Intervals[:min(len(p.Intervals), maxShown)] {
		iv := &p.Intervals[j]
		if j > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		if ns := int64(iv.Measured); ns != 0 && float64(ns)/1e6 == iv.MeasuredMS {
			b = report.AppendMS(b, time.Duration(ns))
		} else { // a report read back from JSON carries no Measured
			b = appendJSNum(b, iv.MeasuredMS)
		}
		b = f.appendWindow(b, j, iv)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(outcomeCode(iv.Outcome)), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(termCode(iv.Term)), 10)
		if iv.StrictOK {
			b = append(b, ",1]"...)
		} else {
			b = append(b, ",0]"...)
		}
	}
	b = append(b, ']')
	if notes := peerNotes(p); len(notes) > 0 {
		b = append(b, `,"x":[`...)
		for j, n := range notes {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendAttrJSON(b, n)
		}
		b = append(b, ']')
	}
	if more := len(p.Attempts) - shown; more > 0 {
		b = append(b, `,"more":`...)
		b = strconv.AppendInt(b, int64(more), 10)
	}
	return append(b, '}')
}

func outcomeCode(o backoff.Outcome) int {
	switch o {
	case backoff.Early:
		return 1
	case backoff.Late:
		return 2
	}
	return 0
}

func termCode(t backoff.Term) int {
	switch t {
	case backoff.TermBackoff:
		return 1
	case backoff.TermConnectTimeout:
		return 2
	case backoff.TermReset:
		return 3
	}
	return 0
}

// peerNotes are the lines a peer's verdict carries beside its table: its
// signatures (docs/spec.md §7.4), its recovery after a restart and its
// reconnect rate (docs/spec.md §7.3), as the text report words them.
func peerNotes(p *report.PeerReport) []string {
	var out []string
	if p.BegunBefore {
		out = append(out, report.BegunBeforeNote)
	}
	for _, sg := range p.Signatures {
		out = append(out, fmt.Sprintf("signature: %s (seen in %s): %s", sg.Name, sg.Seen, sg.Detail))
	}
	if rc := p.Recovery; rc != nil {
		verdict := "✗ outside it"
		if rc.OK {
			verdict = "✓ ok"
		}
		out = append(out, fmt.Sprintf("recovery: attempt %d came %.0f ms after the port's return; the backoff owed %.0f ms then (window %.0f–%.0f ms): %s",
			rc.Attempt+1, rc.AfterMS, rc.OwedMS, rc.MinMS, rc.MaxMS, verdict))
	}
	if rc := p.Reconnects; rc != nil {
		loop := "it kept backing off"
		if rc.TightLoop {
			loop = "✗ a tight loop: the client reset its backoff after each success"
		}
		out = append(out, fmt.Sprintf("reconnects: %.2f a second, median interval %.0f ms: %s", rc.PerSecond, rc.MedianMS, loop))
	}
	return out
}

// chartIvs is what the chart and the table show of p's intervals.
func chartIvs(p *report.PeerReport, marks map[int]string) []chartIv {
	ivs := make([]chartIv, min(len(p.Intervals), maxShown))
	for j := range ivs {
		iv := &p.Intervals[j]
		ivs[j] = chartIv{measured: iv.MeasuredMS, expected: iv.ExpectedMS, lo: iv.MinMS, hi: iv.MaxMS,
			ok: iv.OK, reset: iv.Term == backoff.TermReset, words: outcomeWords(iv), mark: marks[iv.K]}
	}
	return ivs
}

// outcomeWords says why a failing interval failed: its outcome, its whole
// ms (what the verdict compares, docs/spec.md §3.1) and the bound it
// crossed. script.js words a row's intervals the same way.
func outcomeWords(iv *backoff.Interval) string {
	switch iv.Outcome {
	case backoff.Early:
		return string(appendRound(fmt.Appendf(nil, "early: %d ms < ", iv.BackoffMS), iv.MinMS)) + " ms"
	case backoff.Late:
		return string(appendRound(fmt.Appendf(nil, "late: %d ms > ", iv.BackoffMS), iv.MaxMS)) + " ms"
	}
	return string(iv.Outcome)
}

// appendTable appends a peer's attempts, each with the interval that
// ended at it: its window and verdict, the reason beside a failing one.
func appendTable(b []byte, i int, p *report.PeerReport, ivs []chartIv) []byte {
	fates := false
	for _, a := range p.Attempts {
		if _, _, ok := attemptFate(a); ok {
			fates = true
			break
		}
	}
	marked := false
	for _, iv := range ivs {
		marked = marked || iv.mark != ""
	}
	b = append(b, `<table class="att"><thead><tr><th>#</th><th>time (UTC)</th><th>port</th><th>retr.</th>`...)
	if fates {
		b = append(b, `<th>fate</th>`...)
	}
	b = append(b, `<th>interval</th><th>ms</th><th>expected ms</th><th>window ms</th><th>jitter</th><th>verdict</th>`...)
	if marked {
		b = append(b, `<th>cross-check</th>`...)
	}
	b = append(b, `</tr></thead><tbody>`...)
	shown := min(len(p.Attempts), maxShown+1)
	for j, a := range p.Attempts[:shown] {
		var iv *backoff.Interval
		if j > 0 && j-1 < len(p.Intervals) {
			iv = &p.Intervals[j-1]
		}
		b = append(b, `<tr`...)
		if iv != nil {
			b = append(b, ` id="`...)
			b = appendPeerID(b, i)
			b = append(b, "-i"...)
			b = strconv.AppendInt(b, int64(iv.K), 10)
			b = append(b, '"')
			if !iv.OK {
				b = append(b, ` class="bad"`...)
			}
		}
		b = append(b, `><td>`...)
		b = strconv.AppendInt(b, int64(j+1), 10)
		b = append(b, `</td><td>`...)
		b = appendClock(b, a.Time)
		b = append(b, `</td><td>`...)
		b = strconv.AppendUint(b, uint64(a.SrcPort), 10)
		b = append(b, `</td><td>`...)
		b = strconv.AppendInt(b, int64(a.Retransmits), 10)
		b = append(b, `</td>`...)
		if fates {
			b = append(b, `<td>`...)
			if f, dur, ok := attemptFate(a); ok {
				b = appendEsc(b, f)
				if dur > 0 {
					b = append(b, " after "...)
					b = append(b, fmtMS(dur)...)
				}
			}
			b = append(b, `</td>`...)
		}
		if iv == nil {
			b = append(b, `<td colspan="6" class="note">`...)
			if j == 0 {
				b = append(b, "first attempt, "...)
				b = a.Time.UTC().AppendFormat(b, text.TimeLayout)
			}
			b = append(b, `</td>`...)
		} else {
			b = appendIntervalCells(b, iv)
		}
		if marked {
			b = append(b, `<td class="dis">`...)
			if iv != nil && ivs[iv.K-1].mark != "" {
				b = append(b, "≠ "...)
				b = appendEsc(b, ivs[iv.K-1].mark)
				b = append(b, ` (<a href="#crosscheck">why</a>)`...)
			}
			b = append(b, `</td>`...)
		}
		b = append(b, `</tr>`...)
	}
	b = append(b, `</tbody></table>`...)
	if more := len(p.Attempts) - shown; more > 0 {
		b = append(b, `<p class="more">… `...)
		b = append(b, text.Plural(more, "more attempt")...)
		b = append(b, `, in the JSON report</p>`...)
	}
	return b
}

// appendIntervalCells appends an interval's cells: k, measured, expected,
// window, jitter, verdict.
func appendIntervalCells(b []byte, iv *backoff.Interval) []byte {
	b = append(b, `<td>`...)
	b = strconv.AppendInt(b, int64(iv.K), 10)
	b = append(b, `</td><td>`...)
	b = appendFixed(b, iv.MeasuredMS, 3)
	if iv.Term == backoff.TermReset {
		return append(b, `</td><td colspan="3"></td><td class="vd">○ reset: after a connection that succeeded, not judged</td>`...)
	}
	b = append(b, `</td><td>`...)
	b = appendFixed(b, iv.ExpectedMS, 1)
	b = append(b, `</td><td>`...)
	b = appendFixed(b, iv.MinMS, 1)
	b = append(b, "–"...)
	b = appendFixed(b, iv.MaxMS, 1)
	b = append(b, `</td><td>`...)
	if iv.JitterPct >= 0 {
		b = append(b, '+')
	}
	b = appendFixed(b, iv.JitterPct, 2)
	b = append(b, "\u00a0%</td><td class=\"vd\">"...) // a no-break space: the % never wraps alone
	if iv.OK {
		b = append(b, "✓ ok"...)
	} else {
		b = append(b, `<span class="reason">✗ `...)
		b = appendEsc(b, outcomeWords(iv))
		b = append(b, `</span>`...)
	}
	if iv.Term != "" {
		b = append(b, " (set by the "...)
		b = append(b, iv.Term...)
		b = append(b, ')')
	}
	return append(report.AppendStrictNote(b, *iv), `</td>`...)
}

func maxJitter(p *report.PeerReport) float64 {
	m := 0.0
	for _, iv := range p.Intervals {
		if iv.Term != backoff.TermReset {
			m = max(m, math.Abs(iv.JitterPct))
		}
	}
	return m
}

// appendClock appends t's time of day in UTC to the ns: 15:04:05.000000000.
func appendClock(b []byte, t time.Time) []byte {
	h, m, sec := t.UTC().Clock()
	for _, v := range []int{h, m, sec} {
		b = append(b, byte('0'+v/10), byte('0'+v%10), ':')
	}
	b[len(b)-1] = '.'
	ns := t.Nanosecond()
	for div := 100000000; div > 0; div /= 10 {
		b = append(b, byte('0'+ns/div%10))
	}
	return b
}

// appendEsc appends s escaped for HTML text and attribute values.
func appendEsc(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '&':
			b = append(b, "&amp;"...)
		case '<':
			b = append(b, "&lt;"...)
		case '>':
			b = append(b, "&gt;"...)
		case '"':
			b = append(b, "&#34;"...)
		case '\'':
			b = append(b, "&#39;"...)
		default:
			b = append(b, c)
		}
	}
	return b
}

func appendAddr(b []byte, a netip.Addr) []byte {
	start := len(b)
	b = a.AppendTo(b)
	// A zone may hold any byte: escape the rare address that needs it.
	for _, c := range b[start:] {
		if c == '&' || c == '<' || c == '>' || c == '"' || c == '\'' || c >= utf8.RuneSelf {
			return appendEsc(b[:start], string(b[start:]))
		}
	}
	return b
}

// appendAttrJSON appends s as a JSON string, escaped for the page.
func appendAttrJSON(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always encodes; <, > and & as \u escapes
	return appendEsc(b, string(q))
}

// appendJSNum appends v as a JSON number, the shortest that reads back
// as v: a time in ms from a whole number of ns keeps every ns.
func appendJSNum(b []byte, v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return append(b, '0')
	}
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.AppendInt(b, int64(v), 10)
	}
	return strconv.AppendFloat(b, v, 'f', -1, 64)
}
