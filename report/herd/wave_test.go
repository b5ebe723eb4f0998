package herd

import (
	"testing"

	"github.com/backoff-audit/audit/backoff"
)

// TestWaveJudge: a wave read as it goes is judged as NewHerd judges the
// same attempts.
func TestWaveJudge(t *testing.T) {
	p := backoff.DefaultPolicy()
	tests := []struct {
		name         string
		w            Wave
		listed       bool
		wantExpected bool
	}{
		{"first attempts together: a restart", Wave{K: 0, Peers: 12, Count: 12}, true, true},
		{"attempt 3 bunched beyond the jitter", Wave{K: 2, Peers: 40, Count: 30}, true, false},
		{"attempt 3 as spread as the jitter makes it", Wave{K: 2, Peers: 100, Count: 20}, false, true},
		{"too few peers", Wave{K: 2, Peers: 9, Count: 9}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := tt.w
			listed := w.Judge(p, backoff.RetryMode{})
			if listed != tt.listed || w.Expected != tt.wantExpected {
				t.Errorf("listed %v, expected %v (share %.2f, policy share %.2f); want %v, %v", listed, w.Expected, w.Share, w.PolicyShare, tt.listed, tt.wantExpected)
			}
		})
	}
}
