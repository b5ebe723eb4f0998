package backoff

import (
	"testing"
	"time"
)

func TestChainEnd(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	last := t0
	fast := DefaultPolicy()
	fast.MinConnectTimeout = 2 * time.Second
	tests := []struct {
		name string
		p    Policy
		n    int
		want time.Duration // after the last attempt
	}{
		// The connect deadline (20 s) outlasts every window up to the cap.
		{"one attempt, the spec's policy", DefaultPolicy(), 1, 20*time.Second + 100*time.Millisecond},
		{"at the cap, the window outlasts it", DefaultPolicy(), 12, 144*time.Second + 100*time.Millisecond},
		{"a million attempts: the cap's", DefaultPolicy(), 1_000_000, 144*time.Second + 100*time.Millisecond},
		// A 2 s connect timeout: 1000 ms × 1.2 is within it, 4096 ms × 1.2 not.
		{"short connect timeout, interval 1", fast, 1, 2*time.Second + 100*time.Millisecond},
		{"short connect timeout, interval 4", fast, 4, 4915200*time.Microsecond + 100*time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ChainEnd(tt.p, tt.n, last).Sub(t0); got != tt.want {
				t.Errorf("ChainEnd = last + %v, want + %v", got, tt.want)
			}
		})
	}
}

// TestChainEndIsTheTail: a chain over by ChainEnd, judged at any time
// after it, fails its hung last attempt as VerifyRun's tail does, and not
// an instant before.
func TestChainEndIsTheTail(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	p := DefaultPolicy()
	times := []time.Time{t0, t0.Add(time.Second), t0.Add(2600 * time.Millisecond)}
	run := Run{Endings: []Ending{{Fate: FateRefused}, {Fate: FateRefused}, {Fate: FateOpen}}}
	end := ChainEnd(p, len(times), times[2])
	for _, tt := range []struct {
		at   time.Time
		tail bool
	}{{end, false}, {end.Add(time.Millisecond), true}} {
		run.End = tt.at
		if got := VerifyRun(p, times, run).Tail != ""; got != tt.tail {
			t.Errorf("judged at ChainEnd%+v: tail %v, want %v", tt.at.Sub(end), got, tt.tail)
		}
	}
}
