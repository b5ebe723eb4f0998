package server

import (
	"bytes"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/backoff-audit/audit/internal/testutil"
	"github.com/backoff-audit/audit/session"
)

// logLines returns the lines of log with msg="msg".
func logLines(log, msg string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "msg="+strconv.Quote(msg)) {
			out = append(out, l)
		}
	}
	return out
}

// TestLogNoChainChosen: when no chain was verified, the end line's chain is
// empty, not the zero address's "invalid IP".
func TestLogNoChainChosen(t *testing.T) {
	var log testutil.SyncBuffer
	h := start(t, Config{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	h.startSession(0)
	h.retry("127.0.0.2")
	h.retry("127.0.0.3")
	h.stop()
	if err := h.s.Close(); err != nil {
		t.Fatal(err)
	}
	ended := logLines(log.String(), "session ended")
	if len(ended) != 1 {
		t.Fatalf("%d 'session ended' lines, want 1:\n%s", len(ended), log.String())
	}
	if !strings.Contains(ended[0], `verified_peer="" verified_reason=none`) || strings.Contains(ended[0], "invalid IP") {
		t.Errorf("end line %q: want verified_peer=\"\" with verified_reason=none", ended[0])
	}
}

var countAttr = regexp.MustCompile(` count=(\d+)`)

// TestOutsideConnectionsSummarised: connections outside any session are
// logged as a count, at most one line per period, and what is left is
// logged at Close; the record still has every one of them.
func TestOutsideConnectionsSummarised(t *testing.T) {
	const conns = 20
	tests := []struct {
		name  string
		every time.Duration
		// atClose: the summary is logged only by Close (the period is
		// longer than the test).
		atClose bool
	}{
		{name: "every second", every: 0},
		{name: "last summary at Close", every: time.Hour, atClose: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var log, rec testutil.SyncBuffer
			h := start(t, Config{Record: &rec, Logger: slog.New(slog.NewTextHandler(&log, nil)), outsideEvery: tt.every})
			t0 := time.Now()
			for range conns {
				h.retry("127.0.0.1")
			}
			sum := func() (n, lines int) {
				for _, l := range logLines(log.String(), "connections outside any session") {
					m := countAttr.FindStringSubmatch(l)
					if m == nil {
						t.Fatalf("summary without a count: %q", l)
					}
					v, _ := strconv.Atoi(m[1])
					n += v
					lines++
				}
				return n, lines
			}
			if !tt.atClose {
				// The periodic summary comes without Close.
				h.waitFor("the summary of the connections", func() bool { n, _ := sum(); return n == conns })
			}
			elapsed := time.Since(t0)
			if err := h.s.Close(); err != nil {
				t.Fatal(err)
			}
			n, lines := sum()
			if n != conns {
				t.Errorf("summaries count %d connections, want %d:\n%s", n, conns, log.String())
			}
			// One line per period begun, and one at Close.
			maxLines := 1
			if !tt.atClose {
				maxLines = int(elapsed/outsideLogEvery) + 2
			}
			if lines < 1 || lines > maxLines {
				t.Errorf("%d summary lines over %v, want 1 to %d:\n%s", lines, elapsed, maxLines, log.String())
			}
			if single := logLines(log.String(), "connection outside any session"); len(single) != 0 {
				t.Errorf("%d lines for single connections, want none", len(single))
			}
			events, err := session.ReadRecord(bytes.NewReader(rec.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			if len(events) != conns {
				t.Errorf("record has %d events, want the %d accepts", len(events), conns)
			}
		})
	}
}
