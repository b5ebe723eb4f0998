// Package html writes an audit report as one self-contained HTML
// page: the summary, the herd (herd.Reading), each cross-check, and every
// peer's attempts against the windows of docs/spec.md §3 (or of the retry
// mode's model, docs/spec.md §7.3). CSS, SVG and a little script are
// inline; the page fetches nothing, so it opens from disk, and it reads
// without colour (marks, words and patterns carry every verdict) and
// prints on A4.
//
// A large report stays small and quick: failing peers are written in
// full, passing peers as one row each whose chart and table the page
// draws from a compact data attribute when the row is opened
// (BenchmarkWrite measures both against the JSON report).
package html

import (
	"bufio"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"net/netip"
	"strconv"
	"time"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/internal/outfile"
	"github.com/backoff-audit/audit/internal/text"
	"github.com/backoff-audit/audit/report"
	"github.com/backoff-audit/audit/report/herd"
)

var (
	//go:embed page.html.tmpl
	pageText string
	//go:embed style.css
	styleText string
	//go:embed script.js
	scriptText string

	pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
		"ms":     fmtMS,
		"pct":    func(f float64) string { return fmt.Sprintf("%.1f %%", f*100) },
		"secs":   func(ms float64) string { return fmt.Sprintf("%.3f s", ms/1000) },
		"plural": text.Plural,
		"utc":    func(t time.Time) string { return t.UTC().Format(text.TimeLayout) },
		"dur":    func(d time.Duration) string { return d.String() },
		"inc":    func(i int) int { return i + 1 },
		"int":    func(n uint64) int { return int(n) },
		"float":  func(n int64) float64 { return float64(n) },
		"style":  func() template.CSS { return template.CSS(styleText) },
		"script": func() template.JS { return template.JS(scriptText) },
	}).Parse(pageText))
)

// Write writes d as one HTML page, with the herd reading of its peers (its
// own when it has one).
func Write(w io.Writer, d report.Document) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	r := d.Parts()
	h := r.Peers.Herd(r.Mode)
	if r.Herd != nil {
		h = *r.Herd
	}
	pg := newPage(&r, h)
	if err := pageTemplate.ExecuteTemplate(bw, "head", pg); err != nil {
		return fmt.Errorf("write html report: %w", err)
	}
	if err := writePeers(bw, &r, pg); err != nil {
		return fmt.Errorf("write html report: %w", err)
	}
	if err := pageTemplate.ExecuteTemplate(bw, "mid", pg); err != nil {
		return fmt.Errorf("write html report: %w", err)
	}
	if pg.Compact > 0 {
		if err := writeCompact(bw, &r, pg); err != nil {
			return fmt.Errorf("write html report: %w", err)
		}
	}
	if err := pageTemplate.ExecuteTemplate(bw, "tail", pg); err != nil {
		return fmt.Errorf("write html report: %w", err)
	}
	return bw.Flush()
}

// page is what the templates read.
type page struct {
	R       *report.Parts
	Pass    bool
	Line    string // the summary line
	CapLine string
	Mode    string
	Drops   []string
	// Warnings are the capture's, and the record's.
	Warnings []string
	Herd     herdView
	Checks   []checkView
	// Policies is the policies the peers run, with --infer; nil without.
	Policies *policiesView
	// Full counts the peers written in full; the others are rows, or
	// beyond RowsUpTo of them, Compact lines.
	Full       int
	Compact    int
	TablesUpTo int
	RowsUpTo   int
	// The herd's rules, in words.
	MinPeers         int
	WaveRule, Window string
	Anchors          map[netip.Addr]string // the first peer of each address
	// marks holds, per peer index, the cross-check's disagreements by
	// interval k.
	marks map[int]map[int]string
}

func newPage(r *report.Parts, h herd.Reading) *page {
	pg := &page{R: r, Pass: r.Summary.PassedAll, Line: r.Summary.String(), CapLine: r.Summary.CapLine(),
		Mode: r.Mode.String(), Warnings: r.Capture.Warnings(), Anchors: map[netip.Addr]string{},
		marks: map[int]map[int]string{}, TablesUpTo: report.TablesUpTo, RowsUpTo: RowsUpTo, MinPeers: herd.MinPeers,
		WaveRule: fmt.Sprintf("%.0f %% of the peers that made it, and at least %d peers,", herd.MinShare*100, herd.MinPeers),
		Window:   fmtMS(float64(herd.Window) / 1e6)}
	for i := range r.Peers.Len() {
		if p := r.Peers.Peer(i); pg.Anchors[p] == "" {
			pg.Anchors[p] = peerID(i)
		}
	}
	if r.Record != nil {
		pg.Warnings = append(pg.Warnings, r.Record.Warnings...)
	}
	if l := r.Live; l != nil {
		pg.Drops = append(pg.Drops, l.StatsLine())
	}
	if s := r.Session; s != nil {
		if s.Dropped > 0 {
			pg.Drops = append(pg.Drops, fmt.Sprintf("%d more attempts than the session's maximum of %d were counted, not kept: the verdict is %s",
				s.Dropped, s.MaxAttempts, backoff.Overflow))
		}
		if s.OutsideDropped > 0 {
			pg.Drops = append(pg.Drops, fmt.Sprintf("%d older attempts outside any session were counted, not kept", s.OutsideDropped))
		}
	}
	pg.Herd = newHerdView(h, pg.Anchors)
	pg.Policies = newPoliciesView(r.Peers.Inferred(), pg.Anchors)
	pg.Checks = newCheckViews(r, pg)
	for i := range r.Peers.Len() {
		if pg.full(i) {
			pg.Full++
		}
	}
	if rows := r.Peers.Len() - pg.Full; rows > RowsUpTo {
		pg.Compact = rows
	}
	return pg
}

// RowsUpTo is the number of passing peers up to which each is a row that
// opens to its chart; beyond it, each is a line of a compact list that
// the page draws a page at a time, and its attempts are in the JSON
// report. A page of 100 000 rows was 137 MB and took Chromium minutes to
// open (TestBrowserHuge measures the compact page).
const RowsUpTo = 10_000

// full reports whether peer i is written in full: every peer of a small
// report (as the text report gives each its table, report.TablesUpTo),
// every peer that did not pass, and every chain a cross-check marks.
func (pg *page) full(i int) bool {
	return pg.R.Peers.Len() <= report.TablesUpTo || !pg.R.Peers.Passed(i) || pg.marks[i] != nil
}

// peerID is the id of peer i's element: "p-" and its index in the report.
func peerID(i int) string { return string(appendPeerID(nil, i)) }

func appendPeerID(b []byte, i int) []byte { return strconv.AppendInt(append(b, "p-"...), int64(i), 10) }

// verdictMark is a verdict's mark and class: ✓ passed, ✗ failed, and !
// for any other failing verdict (too few attempts, too many).
func verdictMark(v backoff.Verdict) (mark, class string) {
	switch v {
	case backoff.Passed:
		return "✓", "pass"
	case backoff.Failed:
		return "✗", "fail"
	}
	return "!", "few"
}

// fmtMS writes a duration in ms for a person: "850 ms", "1.6 s", "120 s".
func fmtMS(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%.4g s", v/1000)
	case v >= 1:
		return fmt.Sprintf("%.4g ms", v)
	}
	return fmt.Sprintf("%.3g ms", v)
}

// WriteFile writes the page to path as internal/outfile writes every
// output: a regular file is replaced through a temporary file beside it,
// renamed over path once complete, so a reader (a browser reloading the
// page that `audit live` rewrites at each session's end) never sees half a
// page and a failed write leaves what was there; a device or a FIFO is
// written in place; a symbolic link is followed.
func WriteFile(path string, d report.Document) error {
	err := outfile.Write(path, func(w io.Writer) error { return Write(w, d) })
	if err != nil {
		return fmt.Errorf("write page: %w", err)
	}
	return nil
}
