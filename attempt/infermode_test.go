package attempt

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/backoff-audit/audit/backoff"
)

// TestModeTally reads the retry port's mode from a chain's fates as the
// model classes its attempts: a connection that reached READY counts as
// one that succeeded even while it is still open, where an open silent
// one hung; the chain's last attempt, still open, is no evidence.
func TestModeTally(t *testing.T) {
	ready := backoff.Ending{Fate: backoff.FateOpen, Accepted: time.Millisecond, Ready: true, ReadyAfter: 2 * time.Millisecond,
		ClientSent: backoff.PayloadH2Preface, ServerSent: backoff.PayloadH2Settings}
	silent := backoff.Ending{Fate: backoff.FateOpen, Accepted: time.Millisecond}
	closed := backoff.Ending{Fate: backoff.FateClosed, Accepted: time.Millisecond, Duration: 2 * time.Millisecond}
	refused := backoff.Ending{Fate: backoff.FateRefused, RST: true}
	tests := []struct {
		name    string
		endings []backoff.Ending
		want    backoff.RetryMode
		ok      bool
	}{
		{"open after the server's SETTINGS", []backoff.Ending{ready, ready, closed}, backoff.RetryMode{Kind: backoff.ModeSettingsClose}, true},
		{"open and silent", []backoff.Ending{silent, silent, closed}, backoff.RetryMode{Kind: backoff.ModeHang}, true},
		{"closed at once", []backoff.Ending{closed, closed, silent}, backoff.RetryMode{}, true},
		{"refused after READY: an outage", []backoff.Ending{ready, refused, refused}, backoff.RetryMode{Kind: backoff.ModeOutage}, true},
		{"only the last attempt, open", []backoff.Ending{{}, {}, ready}, backoff.RetryMode{}, false},
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var times []time.Time
			for k := range tt.endings {
				times = append(times, t0.Add(time.Duration(k)*time.Second))
			}
			var tally ModeTally
			tally.Add(backoff.DefaultPolicy(), times, tt.endings, 1)
			m, ok := tally.Mode()
			if diff := cmp.Diff(tt.want, m); diff != "" || ok != tt.ok {
				t.Errorf("Mode() ok %v, want %v (-want +got):\n%s", ok, tt.ok, diff)
			}
		})
	}
}
