package report

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/backoff-audit/audit/backoff"
	"github.com/google/go-cmp/cmp"
)

// TestTextsPrintWholeMilliseconds: a gap beyond int32 milliseconds keeps
// its saturated value in backoff_ms, the wire's int32, but the reason and
// the log line print what was measured, and say what the verdict used.
func TestTextsPrintWholeMilliseconds(t *testing.T) {
	const day = 24 * time.Hour
	tests := []struct {
		name        string
		gap         time.Duration
		wantBackoff []int32
		wantWhole   int64
		wantReason  string
		wantLog     string
	}{
		{
			name: "30 days", gap: 30 * day,
			wantBackoff: []int32{math.MaxInt32}, wantWhole: 2592000000,
			wantReason: "interval 1: 2592000000 ms is late (judged as 2147483647 ms, the reference's int32 limit; expected 1000 ms, window 700–1300 ms)",
			wantLog:    "retry  1:backoff 2592000.00s,expected backoff   1.00s, jitter 259199900.00%",
		},
		{
			name: "one millisecond past int32", gap: (math.MaxInt32+1)*time.Millisecond + 999*time.Microsecond,
			wantBackoff: []int32{math.MaxInt32}, wantWhole: math.MaxInt32 + 1,
			wantReason: "interval 1: 2147483648 ms is late (judged as 2147483647 ms, the reference's int32 limit; expected 1000 ms, window 700–1300 ms)",
			wantLog:    "retry  1:backoff 2147483.65s,expected backoff   1.00s, jitter 214748264.80%",
		},
		{
			name: "30 days backwards", gap: -30 * day,
			wantBackoff: []int32{math.MinInt32}, wantWhole: -2592000000,
			wantReason: "interval 1: -2592000000 ms is early (judged as -2147483648 ms, the reference's int32 limit; expected 1000 ms, window 700–1300 ms)",
			wantLog:    "retry  1:backoff -2592000.00s,expected backoff   1.00s, jitter -259200100.00%",
		},
		{
			name: "int32 limit itself", gap: math.MaxInt32 * time.Millisecond,
			wantBackoff: []int32{math.MaxInt32}, wantWhole: math.MaxInt32,
			wantReason: "interval 1: 2147483647 ms is late (expected 1000 ms, window 700–1300 ms)",
			wantLog:    "retry  1:backoff 2147483.65s,expected backoff   1.00s, jitter 214748264.70%",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := backoff.Verify(backoff.DefaultPolicy(), chain(tt.gap))
			if diff := cmp.Diff(tt.wantBackoff, r.BackoffMS); diff != "" {
				t.Errorf("BackoffMS (-want +got):\n%s", diff)
			}
			iv := r.Intervals[0]
			if got := iv.WholeMS(); got != tt.wantWhole {
				t.Errorf("WholeMS() = %d, want %d", got, tt.wantWhole)
			}
			if diff := cmp.Diff(tt.wantReason, r.Reason()); diff != "" {
				t.Errorf("Reason() (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantLog, iv.LogLine()); diff != "" {
				t.Errorf("LogLine() (-want +got):\n%s", diff)
			}
		})
	}
}

// TestJitterUsesMeasuredGap: the displayed jitter is the exact gap's, while
// the verdict and the reference's log line keep whole milliseconds
// (docs/spec.md §3.1, §3.6).
func TestJitterUsesMeasuredGap(t *testing.T) {
	tests := []struct {
		name    string
		k       int
		gap     time.Duration
		wantOK  bool
		wantPct string // %+.2f of JitterPct
		wantRow string // the jitter column of the interval table
		wantLog string
	}{
		{name: "1000.827 ms against 1000", k: 1, gap: 1000*time.Millisecond + 827*time.Microsecond, wantOK: true,
			wantPct: "+0.08", wantRow: "   +0.08%",
			wantLog: "retry  1:backoff   1.00s,expected backoff   1.00s, jitter 0.00%"},
		{name: "1180.3 ms against 1000", k: 1, gap: 1180*time.Millisecond + 300*time.Microsecond, wantOK: true,
			wantPct: "+18.03", wantRow: "  +18.03%",
			wantLog: "retry  1:backoff   1.18s,expected backoff   1.00s, jitter 18.00%"},
		{name: "899.5 ms against 1600, early", k: 2, gap: 899*time.Millisecond + 500*time.Microsecond, wantOK: false,
			wantPct: "-43.78", wantRow: "  -43.78%",
			wantLog: "retry  2:backoff   0.90s,expected backoff   1.60s, jitter -43.81%"},
		{name: "1300.999 ms floors to 1300 and passes", k: 1, gap: msd(1300.999), wantOK: true,
			wantPct: "+30.10", wantRow: "  +30.10%",
			wantLog: "retry  1:backoff   1.30s,expected backoff   1.00s, jitter 30.00%"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			iv := backoff.DefaultPolicy().Check(tt.k, tt.gap)
			if iv.OK != tt.wantOK {
				t.Errorf("OK = %v, want %v (the verdict stays on whole ms)", iv.OK, tt.wantOK)
			}
			if got := fmt.Sprintf("%+.2f", iv.JitterPct); got != tt.wantPct {
				t.Errorf("JitterPct = %v (%s), want %s", iv.JitterPct, got, tt.wantPct)
			}
			if row := string(appendIntervalRow(nil, iv)); !strings.Contains(row, tt.wantRow+"  ") {
				t.Errorf("row %q lacks the jitter %q", row, tt.wantRow)
			}
			if got := fmt.Sprintf("%.2f", maxJitter([]backoff.Interval{iv})); got != strings.TrimLeft(tt.wantPct, "+-") {
				t.Errorf("max |jitter| = %s, want %s", got, strings.TrimLeft(tt.wantPct, "+-"))
			}
			b, err := appendIntervalJSON(nil, &iv, nil)
			if err != nil {
				t.Fatal(err)
			}
			var doc struct {
				JitterPct float64 `json:"jitter_pct"`
			}
			if err := json.Unmarshal(b, &doc); err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprintf("%+.2f", doc.JitterPct); got != tt.wantPct {
				t.Errorf("jitter_pct = %v, want %s", doc.JitterPct, tt.wantPct)
			}
			if got := iv.LogLine(); got != tt.wantLog {
				t.Errorf("LogLine() = %q, want %q", got, tt.wantLog)
			}
		})
	}
}

// appendNameJSON writes every name as appendJSONString does, the names
// this package gives and any other string an Ending may hold.
func TestAppendNameJSON(t *testing.T) {
	names := []string{"", "data ", "<data>", "da\"ta", "da\u2028ta", "\xff", "closed by server!", "tls client hellO"}
	for _, f := range []backoff.Fate{backoff.FateUnknown, backoff.FateRefused, backoff.FateUnanswered, backoff.FateClosed, backoff.FateAbandoned, backoff.FateOpen} {
		names = append(names, string(f))
	}
	for _, p := range []backoff.Payload{backoff.PayloadNone, backoff.PayloadTLSClientHello, backoff.PayloadTLSServerHello, backoff.PayloadH2Preface, backoff.PayloadH2Settings, backoff.PayloadOther} {
		names = append(names, string(p))
	}
	for _, s := range names {
		if got, want := string(appendNameJSON(nil, s)), string(appendJSONString(nil, s)); got != want {
			t.Errorf("%q: %s, want %s", s, got, want)
		}
	}
}
