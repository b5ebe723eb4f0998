package html

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/backoff-audit/audit/internal/text"

	xhtml "golang.org/x/net/html"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/report"
)

var update = flag.Bool("update", false, "rewrite the screenshots in testdata/")

// writePage parses what Write writes of d.
func writePage(t testing.TB, d report.Document) ([]byte, *xhtml.Node) {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b, d); err != nil {
		t.Fatal(err)
	}
	doc, err := xhtml.Parse(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	return b.Bytes(), doc
}

func attr(n *xhtml.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func hasClass(n *xhtml.Node, class string) bool {
	return slices.Contains(strings.Fields(attr(n, "class")), class)
}

// find returns the elements under n for which match holds, in document order.
func find(n *xhtml.Node, match func(*xhtml.Node) bool) []*xhtml.Node {
	var out []*xhtml.Node
	for c := range n.Descendants() {
		if c.Type == xhtml.ElementNode && match(c) {
			out = append(out, c)
		}
	}
	return out
}

func byClass(tag, class string) func(*xhtml.Node) bool {
	return func(n *xhtml.Node) bool { return n.Data == tag && hasClass(n, class) }
}

func nodeText(n *xhtml.Node) string {
	var b strings.Builder
	for c := range n.Descendants() {
		if c.Type == xhtml.TextNode {
			b.WriteString(c.Data)
		}
	}
	return b.String()
}

// peerElement finds the element of the peer at addr.
func peerElement(t *testing.T, doc *xhtml.Node, addr string) *xhtml.Node {
	t.Helper()
	els := find(doc, func(n *xhtml.Node) bool { return hasClass(n, "peer") && attr(n, "data-a") == addr })
	if len(els) != 1 {
		t.Fatalf("%d elements for peer %s, want 1", len(els), addr)
	}
	return els[0]
}

// TestWriteMixed reads back the page of mixedReport: every peer once, the
// failing ones in full with their failing intervals marked and worded,
// the passing ones as rows, the herd's waves and offenders, and the
// cross-check's disagreements on the chain's timeline.
func TestWriteMixed(t *testing.T) {
	r := mixedReport()
	_, doc := writePage(t, r)
	h := r.Peers.Herd(r.Mode)

	ids := map[string]bool{}
	for _, n := range find(doc, func(n *xhtml.Node) bool { return attr(n, "id") != "" }) {
		if id := attr(n, "id"); ids[id] {
			t.Errorf("id %q used twice", id)
		} else {
			ids[id] = true
		}
	}
	for _, a := range find(doc, func(n *xhtml.Node) bool { return n.Data == "a" }) {
		href := attr(a, "href")
		if !strings.HasPrefix(href, "#") || !ids[href[1:]] {
			t.Errorf("link %q to %q: not to an element of the page", nodeText(a), href)
		}
	}

	articles := find(doc, byClass("article", "peer"))
	rows := find(doc, byClass("details", "row"))
	if len(articles) != mixedNotPassed || len(rows) != mixedPeers-mixedNotPassed {
		t.Errorf("%d peers in full, %d as rows; want %d and %d", len(articles), len(rows), mixedNotPassed, mixedPeers-mixedNotPassed)
	}

	early := peerElement(t, doc, mixedEarly)
	if early.Data != "article" || !hasClass(early, "fail") {
		t.Fatalf("peer %s: <%s class=%q>, want an article of class fail", mixedEarly, early.Data, attr(early, "class"))
	}
	for _, row := range find(early, func(n *xhtml.Node) bool { return n.Data == "tr" && attr(n, "id") != "" }) {
		k := strings.TrimPrefix(attr(row, "id"), attr(early, "id")+"-i")
		reasons := find(row, byClass("span", "reason"))
		switch {
		case k == "3" && (!hasClass(row, "bad") || len(reasons) != 1 || nodeText(reasons[0]) != "✗ early: 1500 ms < 1948 ms"):
			t.Errorf("interval 3 of %s: class %q, reason %q; want bad, \"✗ early: 1500 ms < 1948 ms\"", mixedEarly, attr(row, "class"), nodeText(row))
		case k != "3" && (hasClass(row, "bad") || len(reasons) != 0 || !strings.Contains(nodeText(row), "✓ ok")):
			t.Errorf("interval %s of %s: class %q, %q; want ✓ ok", k, mixedEarly, attr(row, "class"), nodeText(row))
		}
	}
	bad := find(early, byClass("g", "bad"))
	why := find(early, byClass("text", "why"))
	if len(bad) != 1 || len(why) != 1 || nodeText(why[0]) != "✗ 3: early: 1500 ms < 1948 ms" {
		t.Errorf("chart of %s: %d failing columns, words %v; want 1, \"✗ 3: early: 1500 ms < 1948 ms\"", mixedEarly, len(bad), why)
	}
	if got := len(find(early, byClass("g", "iv"))); got != 4 {
		t.Errorf("chart of %s: %d columns, want 4", mixedEarly, got)
	}

	// The session's chain: interval 2 failed, intervals 1 and 2 disagree.
	late := peerElement(t, doc, mixedLate)
	if got := len(find(late, byClass("text", "dis"))); got != 2 {
		t.Errorf("chart of %s: %d disagreements marked, want 2", mixedLate, got)
	}
	for _, k := range []string{"1", "2"} {
		row := find(late, func(n *xhtml.Node) bool { return attr(n, "id") == attr(late, "id")+"-i"+k })
		if len(row) != 1 || !strings.Contains(nodeText(row[0]), "≠ kernel") {
			t.Errorf("interval %s of %s: no disagreement in its row", k, mixedLate)
		}
	}
	if got := len(find(doc, byClass("li", "bad"))); got != 2 {
		t.Errorf("%d disagreements listed, want 2", got)
	}

	waves := find(doc, byClass("table", "waves"))
	if len(waves) != 1 {
		t.Fatalf("%d wave tables, want 1", len(waves))
	}
	if got, want := len(find(waves[0], byClass("tr", "bad"))), 3; got != want {
		t.Errorf("%d unexpected waves shown, want %d (attempts 3, 4 and 5 of the herd)", got, want)
	}
	offenders := find(doc, func(n *xhtml.Node) bool {
		return n.Data == "a" && n.Parent.Parent != nil && hasClass(n.Parent.Parent, "offenders")
	})
	if len(offenders) != len(h.Offenders) || len(offenders) == 0 {
		t.Fatalf("%d offenders linked, want %d", len(offenders), len(h.Offenders))
	}
	if el := find(doc, func(n *xhtml.Node) bool { return attr(n, "id") == strings.TrimPrefix(attr(offenders[0], "href"), "#") }); len(el) != 1 ||
		attr(el[0], "data-a") != nodeText(offenders[0]) {
		t.Errorf("offender %s links to %v, not to its chain", nodeText(offenders[0]), el)
	}
}

// TestWriteSmall: a report of few peers gives every peer in full, as the
// text report gives each its table.
func TestWriteSmall(t *testing.T) {
	tr := attempt.NewTracker()
	for i := range report.TablesUpTo {
		addChain(tr, fmt.Sprintf("10.3.0.%d", i+1), fixtureStart.Add(time.Duration(i)*time.Second), msDur(1000), msDur(1700))
	}
	_, doc := writePage(t, report.NewAudit(retryPort.Port(), backoff.DefaultPolicy(), backoff.Run{}, report.Chains(tr.Peers()), attempt.CaptureInfo{}))
	if a, rows := len(find(doc, byClass("article", "peer"))), len(find(doc, byClass("details", "row"))); a != report.TablesUpTo || rows != 0 {
		t.Errorf("%d peers in full, %d rows; want %d and none", a, rows, report.TablesUpTo)
	}
}

// TestWriteEmpty: a report without peers is still a page.
func TestWriteEmpty(t *testing.T) {
	b, doc := writePage(t, report.NewAudit(retryPort.Port(), backoff.DefaultPolicy(), backoff.Run{}, report.Chains(nil), attempt.CaptureInfo{}))
	if len(find(doc, byClass("article", "peer")))+len(find(doc, byClass("details", "row"))) != 0 {
		t.Error("peers on the page of a report without any")
	}
	if !bytes.Contains(b, []byte("No attempts.")) {
		t.Error("the herd section does not say there are no attempts")
	}
}

// TestWriteSelfContained: the page fetches nothing, so that it opens from
// disk anywhere.
func TestWriteSelfContained(t *testing.T) {
	b, doc := writePage(t, mixedReport())
	for _, n := range find(doc, func(*xhtml.Node) bool { return true }) {
		switch n.Data {
		case "link", "img", "iframe", "object", "embed", "base", "audio", "video", "source":
			t.Errorf("<%s> on the page", n.Data)
		}
		for _, a := range n.Attr {
			if a.Key == "src" || a.Key == "srcset" || a.Key == "action" || (a.Key == "href" && !strings.HasPrefix(a.Val, "#")) {
				t.Errorf("<%s %s=%q>: a reference off the page", n.Data, a.Key, a.Val)
			}
		}
	}
	for _, bad := range []string{"http:", "https:", "//cdn", "@import", "fetch(", "XMLHttpRequest", "import(", "WebSocket"} {
		if bytes.Contains(b, []byte(bad)) {
			t.Errorf("the page holds %q", bad)
		}
	}
	for _, m := range regexp.MustCompile(`url\([^)]*\)`).FindAll(b, -1) {
		if string(m) != "url(#hatch)" {
			t.Errorf("the page holds %s", m)
		}
	}
}

// TestWriteEscapes: text from a report (a reason, a signature's detail)
// is escaped wherever it goes: into a peer written in full, and into a
// row's data.
func TestWriteEscapes(t *testing.T) {
	const evil = `<script>alert("x")</script> & 'q'`
	tr := attempt.NewTracker()
	for i := range 2 {
		addChain(tr, fmt.Sprintf("10.4.0.%d", i+1), fixtureStart, msDur(1000), msDur(1700))
	}
	prs := report.NewPeers(backoff.DefaultPolicy(), backoff.Run{}, report.Chains(tr.Peers())).Reports()
	prs[0].Passed, prs[0].Verdict, prs[0].Reason = false, backoff.Failed, evil
	prs[1].Signatures = []backoff.Signature{{Name: "n", Seen: "s", Detail: evil}}
	b := appendFullPeer(nil, 0, 0, &prs[0], nil)
	b = new(formatter).appendRowPeer(b, 1, 1, &prs[1])
	if bytes.Contains(b, []byte("<script>alert")) {
		t.Fatal("the page holds the report's text unescaped")
	}
	doc, err := xhtml.Parse(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	reason := find(peerElement(t, doc, prs[0].Peer.String()), byClass("p", "reason"))
	if len(reason) != 1 || nodeText(reason[0]) != "✗ "+evil {
		t.Errorf("reason reads %v, want %q", reason, "✗ "+evil)
	}
	row := peerElement(t, doc, prs[1].Peer.String())
	var d struct{ X []string }
	if err := json.Unmarshal([]byte(attr(row, "data-d")), &d); err != nil {
		t.Fatalf("data-d of a row: %v", err)
	}
	if want := "signature: n (seen in s): " + evil; len(d.X) != 1 || d.X[0] != want {
		t.Errorf("row's notes %q, want [%q]", d.X, want)
	}
}

// rowData is a row's data-d.
type rowData struct {
	T0   string       `json:"t0"`
	A    [][]any      `json:"a"`
	I    [][7]float64 `json:"i"`
	More int          `json:"more"`
}

// TestRowData: a row's data holds its peer's attempts to the ns and its
// intervals exactly, which the page draws the row from.
func TestRowData(t *testing.T) {
	a := bigAudit(500)
	_, doc := writePage(t, a)
	checked := 0
	for _, p := range a.Peers.Reports() {
		if !p.Passed {
			continue
		}
		row := peerElement(t, doc, p.Peer.String())
		var d rowData
		if err := json.Unmarshal([]byte(attr(row, "data-d")), &d); err != nil {
			t.Fatalf("%s: data-d: %v", p.Peer, err)
		}
		t0, err := time.Parse(time.RFC3339Nano, d.T0)
		if err != nil || !t0.Equal(p.Attempts[0].Time) || len(d.A) != len(p.Attempts) || len(d.I) != len(p.Intervals) {
			t.Fatalf("%s: t0 %s, %d attempts, %d intervals; want %s, %d, %d", p.Peer, d.T0, len(d.A), len(d.I),
				p.Attempts[0].Time.Format(text.TimeLayout), len(p.Attempts), len(p.Intervals))
		}
		for j, at := range p.Attempts {
			off := at.Time.Sub(t0)
			if ms := d.A[j][0].(float64); time.Duration(math.Round(ms*1e6)) != off || d.A[j][1].(float64) != float64(at.SrcPort) {
				t.Errorf("%s attempt %d: %v, want %v from the first, port %d", p.Peer, j+1, d.A[j], off, at.SrcPort)
			}
		}
		for j, iv := range p.Intervals {
			strict := 0.0
			if iv.StrictOK {
				strict = 1
			}
			want := [7]float64{iv.MeasuredMS, iv.ExpectedMS, iv.MinMS, iv.MaxMS, float64(outcomeCode(iv.Outcome)), float64(termCode(iv.Term)), strict}
			if d.I[j] != want {
				t.Errorf("%s interval %d: %v, want %v", p.Peer, iv.K, d.I[j], want)
			}
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no passing peer to check")
	}
}

// TestWriteBig: the page of 10 000 peers stays small: every failing peer
// in full, the others rows.
func TestWriteBig(t *testing.T) {
	if testing.Short() {
		t.Skip("10 000 peers")
	}
	a := bigAudit(10000)
	r := a.Parts()
	b, doc := writePage(t, a)
	t.Logf("10 000 peers: %.2f MB", float64(len(b))/1e6)
	if len(b) > 20e6 {
		t.Errorf("%d bytes, more than 20 MB", len(b))
	}
	notPassed := r.Summary.Peers - r.Summary.Passed
	if got := len(find(doc, byClass("article", "peer"))); got != notPassed || notPassed == 0 {
		t.Errorf("%d peers in full, want the %d that did not pass", got, notPassed)
	}
	if got := len(find(doc, byClass("details", "row"))); got != r.Summary.Passed {
		t.Errorf("%d rows, want %d", got, r.Summary.Passed)
	}
}

// TestWriteCompact: beyond RowsUpTo passing peers, each is a line of
// the compact list's data, not a row, and the page says so.
func TestWriteCompact(t *testing.T) {
	if testing.Short() {
		t.Skip("12 000 peers")
	}
	a := bigAudit(12000)
	r := a.Parts()
	b, doc := writePage(t, a)
	t.Logf("12 000 peers: %.2f MB", float64(len(b))/1e6)
	notPassed := r.Summary.Peers - r.Summary.Passed
	if r.Summary.Passed <= RowsUpTo {
		t.Fatalf("%d passing peers: the test needs more than %d", r.Summary.Passed, RowsUpTo)
	}
	if got := len(find(doc, byClass("article", "peer"))); got != notPassed {
		t.Errorf("%d peers in full, want the %d that did not pass", got, notPassed)
	}
	if got := len(find(doc, byClass("details", "row"))); got != 0 {
		t.Errorf("%d rows, want none", got)
	}
	data := find(doc, func(n *xhtml.Node) bool { return n.Data == "script" && attr(n, "id") == "cdata" })
	if len(data) != 1 || data[0].FirstChild == nil {
		t.Fatalf("%d compact data scripts, want one with text", len(data))
	}
	lines := strings.Split(strings.TrimSpace(data[0].FirstChild.Data), "\n")
	if len(lines) != r.Summary.Passed {
		t.Fatalf("%d lines of compact data, want %d", len(lines), r.Summary.Passed)
	}
	for k, line := range lines {
		f := strings.Split(line, "\t")
		i, err := strconv.Atoi(f[0])
		if len(f) != 6 || err != nil || i < 0 || i >= r.Peers.Len() {
			t.Fatalf("line %d: %q: want 6 fields, the first a peer's position", k, line)
		}
		p := r.Peers.Brief(i)
		want := fmt.Sprintf("%d\t%s\t%d\t%d\t%.2f\t%d", i, p.Peer, p.Attempts, p.Retransmits, p.MaxJitterPct, p.Strict.FirstFailure)
		if line != want || p.Verdict != backoff.Passed {
			t.Fatalf("line %d: %q, want %q of a passing peer (%s)", k, line, want, p.Verdict)
		}
	}
	if !bytes.Contains(b, []byte(fmt.Sprintf("The %d others passed", r.Summary.Passed))) {
		t.Error("the page does not say the passing peers are listed compactly")
	}
}

type failingWriter struct{ n int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.n -= len(p); w.n < 0 {
		return 0, errors.New("disk full")
	}
	return len(p), nil
}

// TestWriteError: a writer's error ends Write with it, wherever it comes.
func TestWriteError(t *testing.T) {
	a := bigAudit(2000)
	var all bytes.Buffer
	if err := Write(&all, a); err != nil {
		t.Fatal(err)
	}
	for _, at := range []int{0, all.Len() / 2, all.Len() - 1} {
		if err := Write(&failingWriter{n: at}, a); err == nil || !strings.Contains(err.Error(), "disk full") {
			t.Errorf("writer failing after %d bytes: error %v, want it to say disk full", at, err)
		}
	}
}

// TestScriptConstants: script.js draws an opened row's chart with the
// geometry svg.go draws a full peer's with.
func TestScriptConstants(t *testing.T) {
	m := regexp.MustCompile(`var LEFT = [^;]*;`).FindString(scriptText)
	want := map[string]int{"LEFT": chartLeft, "TOP": chartTop, "PH": chartHeight, "BOTTOM": chartBottom, "PW": chartWidth,
		"MINCOL": chartMinCol, "MAXCOL": chartMaxCol, "RIGHT": chartRight, "WORDS": chartWords}
	got := map[string]int{}
	for _, kv := range regexp.MustCompile(`([A-Z]+) = (\d+)`).FindAllStringSubmatch(m, -1) {
		got[kv[1]], _ = strconv.Atoi(kv[2])
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("script.js's constants %v, want svg.go's %v", got, want)
	}
}

// TestAttemptFateWired fails once the report's attempts carry their fate
// (docs/spec.md §7.2) and attemptFate does not read it yet.
func TestAttemptFateWired(t *testing.T) {
	typ := reflect.TypeFor[report.AttemptReport]()
	var a report.AttemptReport
	v := reflect.ValueOf(&a).Elem()
	switch {
	case hasField(typ, "Ending"):
		v.FieldByName("Ending").FieldByName("Fate").SetString(string(backoff.FateRefused))
	case hasField(typ, "Fate"):
		v.FieldByName("Fate").SetString(string(backoff.FateRefused))
	default:
		t.Skip("report.AttemptReport carries no fate yet: the page shows none")
	}
	if f, _, ok := attemptFate(a); !ok || f != string(backoff.FateRefused) {
		t.Errorf("attemptFate of a refused attempt = %q, %v; read the fate in fate.go", f, ok)
	}
}

func hasField(t reflect.Type, name string) bool {
	_, ok := t.FieldByName(name)
	return ok
}

func TestAppendClock(t *testing.T) {
	for _, tm := range []time.Time{fixtureStart, fixtureStart.Add(-fixtureStart.Sub(fixtureStart.Truncate(24 * time.Hour))),
		time.Date(2025, 1, 2, 23, 59, 59, 999999999, time.FixedZone("x", 3600)), time.Date(2025, 1, 2, 0, 0, 0, 7, time.UTC)} {
		if got, want := string(appendClock(nil, tm)), tm.UTC().Format("15:04:05.000000000"); got != want {
			t.Errorf("appendClock(%v) = %s, want %s", tm, got, want)
		}
	}
	for _, n := range []int{0, 1, 2} {
		if got, want := string(text.AppendPlural(nil, n, "attempt")), text.Plural(n, "attempt"); got != want {
			t.Errorf("text.AppendPlural(%d) = %q, want %q", n, got, want)
		}
	}
}
