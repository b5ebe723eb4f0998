package html

import (
	"fmt"
	"html/template"
	"net/netip"
	"strconv"

	"github.com/backoff-audit/audit/report"
	"github.com/backoff-audit/audit/session"
)

// herdView is the herd section.
type herdView struct {
	report.Herd
	Chart     template.HTML
	Offenders []offenderView
	// Bunched counts the attempts bunched; the others spread.
	Bunched int
}

type offenderView struct {
	report.Offender
	Anchor string
}

func newHerdView(h report.Herd, anchors map[netip.Addr]string) herdView {
	v := herdView{Herd: h, Chart: template.HTML(appendRateChart(nil, h))}
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

// newCheckViews finds each cross-check of r, the chain it judged among r's
// peers, and marks that chain's disagreeing intervals in pg.marks.
func newCheckViews(r *report.Report, pg *page) []checkView {
	var out []checkView
	add := func(title string, c *session.CrossCheck, peer int) {
		v := checkView{Title: title, C: c, Hist: template.HTML(appendDelayHistogram(nil, c.Pairs))}
		v.KernelOnly, v.MoreKernelOnly = firstLone(c.KernelOnly)
		v.ServerOnly, v.MoreServerOnly = firstLone(c.ServerOnly)
		if peer >= 0 {
			v.Anchor = peerID(peer)
		}
		for _, d := range c.Disagreements {
			dv := disagreeView{Disagreement: d}
			if peer >= 0 && d.K >= 1 && d.K <= len(r.Peers[peer].Intervals) {
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
	if c := r.CrossCheck; c != nil {
		title := "Cross-check"
		if r.Session != nil {
			title = fmt.Sprintf("Session %d: cross-check", r.Session.Number)
		}
		add(title, c, peerOf(r, c.VerifiedPeer, 0))
	}
	// A record's sessions add their chains to the report's peers in
	// session order, each when the capture holds one of its attempts: the
	// next unclaimed peer of the session's address is its chain.
	next := 0
	for _, s := range r.Sessions {
		peer := -1
		if s.Session.VerifiedPeer != "" && next < len(r.Peers) && r.Peers[next].Peer.String() == s.Session.VerifiedPeer {
			peer, next = next, next+1
		}
		if s.CrossCheck != nil {
			add(fmt.Sprintf("Session %d: cross-check", s.Session.Number), s.CrossCheck, peer)
		}
	}
	return out
}

// peerOf is the index of the first peer of address a from index from, -1
// when there is none.
func peerOf(r *report.Report, a netip.Addr, from int) int {
	for i := from; i < len(r.Peers); i++ {
		if r.Peers[i].Peer == a {
			return i
		}
	}
	return -1
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
