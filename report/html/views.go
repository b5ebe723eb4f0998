package html

import (
	"fmt"
	"html/template"
	"net/netip"
	"strconv"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/report"
	"github.com/backoff-audit/audit/report/herd"
	"github.com/backoff-audit/audit/session"
)

// herdView is the herd section.
type herdView struct {
	herd.Reading
	Chart     template.HTML
	Offenders []offenderView
	// Bunched counts the attempts bunched; the others spread.
	Bunched int
}

type offenderView struct {
	herd.Offender
	Anchor string
}

func newHerdView(h herd.Reading, anchors map[netip.Addr]string) herdView {
	v := herdView{Reading: h, Chart: template.HTML(appendRateChart(nil, h))}
	for _, o := range h.Offenders {
		v.Offenders = append(v.Offenders, offenderView{o, anchors[o.Peer]})
	}
	for _, s := range h.Spread {
		if s.Bunched {
			v.Bunched++
		}
	}
	return v
}

// checkView is one cross-check: the session's, or one of a record's.
type checkView struct {
	Title string
	C     *session.CrossCheck
	// Anchor is the verified chain's peer, "" when the report holds none.
	Anchor   string
	Hist     template.HTML
	Disagree []disagreeView
	// KernelOnly and ServerOnly are the first maxLone of each; More* count
	// the rest.
	KernelOnly, ServerOnly         []session.Lone
	MoreKernelOnly, MoreServerOnly int
}

type disagreeView struct {
	session.Disagreement
	Link string // to the interval's row, "" when it has none
}

// maxLone bounds the lone attempts a cross-check lists.
const maxLone = 50

// newCheckViews lays out each cross-check of r, and marks the disagreeing
// intervals of the chain it judged in pg.marks.
func newCheckViews(r *report.Parts, pg *page) []checkView {
	var out []checkView
	var buf []attempt.Attempt
	for _, ch := range r.Checks {
		c, peer := ch.Check, ch.Peer
		title := fmt.Sprintf("Session %d: cross-check", ch.Session)
		if ch.Session == 0 {
			title = "Cross-check"
		}
		v := checkView{Title: title, C: c, Hist: template.HTML(appendDelayHistogram(nil, c.Pairs))}
		v.KernelOnly, v.MoreKernelOnly = firstLone(c.KernelOnly)
		v.ServerOnly, v.MoreServerOnly = firstLone(c.ServerOnly)
		intervals := 0
		if peer >= 0 {
			v.Anchor = peerID(peer)
			intervals = len(r.Peers.Report(peer, &buf).Intervals)
		}
		for _, d := range c.Disagreements {
			dv := disagreeView{Disagreement: d}
			if peer >= 0 && d.K >= 1 && d.K <= intervals {
				dv.Link = peerID(peer) + "-i" + strconv.Itoa(d.K)
				if pg.marks[peer] == nil {
					pg.marks[peer] = map[int]string{}
				}
				pg.marks[peer][d.K] = disagreeText(d)
			}
			v.Disagree = append(v.Disagree, dv)
		}
		out = append(out, v)
	}
	return out
}

func firstLone(l []session.Lone) ([]session.Lone, int) {
	if len(l) <= maxLone {
		return l, 0
	}
	return l[:maxLone], len(l) - maxLone
}

// disagreeText is what an interval's row and column say of a
// disagreement: the two verdicts. Its cause is in the cross-check's list.
func disagreeText(d session.Disagreement) string {
	ok := func(b bool) string {
		if b {
			return "✓"
		}
		return "✗"
	}
	return fmt.Sprintf("kernel %s %d ms, server %s %d ms", ok(d.KernelOK), d.KernelMS, ok(d.ServerOK), d.ServerMS)
}
