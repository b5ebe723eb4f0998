package html_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/backoff-audit/audit/report/html"
)

// TestBrowserSummaryAgainstJSON: what the page's summary says is what the
// report's values say. The capture row counts the files read, or says the
// packets were captured live; the files table has no blank cell; a jitter
// never wraps apart from its %; the rate chart's top is not below the peak
// its caption names.
func TestBrowserSummaryAgainstJSON(t *testing.T) {
	tb := newTab(t, 520, 1400) // narrow: wrapping shows
	r := html.MixedReport()
	tb.open(t, writePage(t, r))
	capRow := eval[string](t, tb, `[...document.querySelectorAll("table.kv tr")].find(tr => tr.cells[0] && tr.cells[0].textContent === "capture").cells[1].textContent`)
	if want := fmt.Sprintf("%d packets in 1 file, ", r.Capture.Packets); !strings.HasPrefix(capRow, want) {
		t.Errorf("capture row %q, want it to begin %q", capRow, want)
	}
	blank := eval[[]string](t, tb, `[...document.querySelectorAll("table.files tr")].filter(tr => [...tr.cells].some(c => c.textContent.trim() === "")).map(tr => tr.textContent)`)
	if len(blank) != 0 {
		t.Errorf("files table rows with a blank cell: %q", blank)
	}
	// Every jitter cell of the open interval tables lays out on one line.
	wrapped := eval[[]string](t, tb, `(() => {
		document.querySelectorAll("details.peer").forEach(d => d.open = true);
		return [...document.querySelectorAll("td")].filter(c => /^[+-][0-9.]+\s%$/.test(c.textContent)).filter(c => {
			const r = document.createRange(); r.selectNodeContents(c); return r.getClientRects().length > 1;
		}).map(c => c.textContent);
	})()`)
	if len(wrapped) != 0 {
		t.Errorf("jitter cells wrapped: %q", wrapped)
	}

	// Read live, the same session has packets and no file.
	r.Capture.Files = nil
	tb.open(t, writePage(t, r))
	capRow = eval[string](t, tb, `[...document.querySelectorAll("table.kv tr")].find(tr => tr.cells[0] && tr.cells[0].textContent === "capture").cells[1].textContent`)
	if want := fmt.Sprintf("%d packets captured live, ", r.Capture.Packets); !strings.HasPrefix(capRow, want) || strings.Contains(capRow, "0 files") {
		t.Errorf("capture row of a live session %q, want it to begin %q", capRow, want)
	}

	// The herd's rate chart: one-second buckets, a peak second that
	// straddles two of them.
	a := html.BigAudit(300).WithHerd()
	tb.open(t, writePage(t, a))
	top := eval[string](t, tb, `[...document.querySelectorAll("#rate text.lab[text-anchor=end]")].map(e => +e.textContent).reduce((x, y) => Math.max(x, y), 0).toString()`)
	caption := eval[string](t, tb, `[...document.querySelectorAll("#herd p")].map(p => p.textContent).find(s => s.includes("Peak:")) || ""`)
	peak := 0
	if _, after, ok := strings.Cut(caption, "Peak: "); ok {
		peak, _ = strconv.Atoi(strings.Fields(after)[0])
	}
	topN, _ := strconv.Atoi(top)
	if peak == 0 || topN < peak {
		t.Errorf("rate chart's top %s below the caption's peak %d (%q)", top, peak, caption)
	}
}
