package h2_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/http2"

	"github.com/backoff-audit/audit/h2"
)

// Past Limits.MaxEvents the findings stay: the GOAWAYs and RST_STREAMs are
// kept, and the PING cadence, the keepalive finding and the ACKs count
// every PING decoded, kept or not; what was dropped is counted.
func TestEventBudgetKeepsFindings(t *testing.T) {
	tests := []struct {
		name      string
		pings     int
		maxEvents int // 0: the default
		resets    int
	}{
		{name: "25 000 PING and ACK pairs, default budget", pings: 25000},
		{name: "past a small budget, with resets", pings: 30, maxEvents: 20, resets: 5},
		{name: "within the budget", pings: 5, resets: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWire(t).start() // 4 events: 2 SETTINGS, 2 ACKs
			for i := range tt.pings {
				data := fmt.Sprintf("%08d", i)
				w.ping(h2.ClientToServer, false, data).ping(h2.ServerToClient, true, data)
			}
			for i := range tt.resets {
				id := uint32(2*i + 1)
				w.request(id, otherMethod).rst(h2.ClientToServer, id, http2.ErrCodeCancel)
			}
			w.goAway(uint32(2*tt.resets-1), http2.ErrCodeEnhanceYourCalm, "too_many_pings")
			r := w.decode(h2.Limits{MaxEvents: tt.maxEvents})

			budget := tt.maxEvents
			if budget == 0 {
				budget = h2.DefaultLimits.MaxEvents
			}
			events := 4 + 2*tt.pings + tt.resets + 1
			var want struct {
				Dropped           int
				GoAways, Resets   int
				Pings, Acks       int
				KeepaliveAfter    int
				Median            time.Duration
				TooManyPingsFound bool
			}
			want.Dropped = max(0, 4+2*tt.pings-budget)
			want.GoAways, want.Resets, want.Pings, want.Acks, want.KeepaliveAfter = 1, tt.resets, tt.pings, tt.pings, tt.pings
			want.Median = 2 * time.Millisecond // a PING every other step, a step a millisecond
			want.TooManyPingsFound = true

			got := want
			got.Dropped = r.Dropped.Events
			got.GoAways, got.Resets = 0, 0
			for _, e := range r.Events {
				switch e.Kind {
				case h2.KindGoAway:
					got.GoAways++
				case h2.KindRSTStream:
					got.Resets++
				}
			}
			p := h2.PingCadence(r, h2.ClientToServer)
			got.Pings, got.Acks = p.Count, p.Acks
			// The median past maxExactGaps comes from buckets 1 % wide.
			got.Median = p.Median.Round(100 * time.Microsecond)
			k, ok := h2.TooManyPings(r)
			got.KeepaliveAfter, got.TooManyPingsFound = k.Pings.Count, ok
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%d events decoded, budget %d (-want +got):\n%s", events, budget, diff)
			}
			problem := false
			for _, f := range h2.Diagnose([]*h2.Report{r}, h2.DiagnoseOptions{}) {
				problem = problem || f.Kind == h2.FindingTooManyPings && f.Problem
			}
			if !problem {
				t.Errorf("Diagnose has no too_many_pings problem")
			}
		})
	}
}
