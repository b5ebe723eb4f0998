package infer

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/backoff-audit/audit/backoff"
)

// TestReadChain reads the policies of 240 chains of three schedules, then
// each of 60 more one at a time: each is placed in the policy of its
// schedule and passes its windows, an irregular chain is an outlier, and a
// chain without an interval is neither; a reading of no chain only fits
// it.
func TestReadChain(t *testing.T) {
	src := threeSchedules()
	const read = 240
	order := make([]int32, read)
	for i := range order {
		order[i] = int32(i)
	}
	r := Read(order, src, backoff.DefaultPolicy(), backoff.Run{})
	// The policy each schedule's chains run, by i%3.
	var policyOf [3]int
	for i := range 3 {
		var in struct{ Policy int }
		if err := json.Unmarshal(src.appendPeer(r, i, i), &in); err != nil || in.Policy == 0 {
			t.Fatalf("chain %d read with the sample: policy %d, %v", i, in.Policy, err)
		}
		policyOf[i] = in.Policy
	}
	type placed struct {
		Policy          int
		Outlier, Passed bool
	}
	for i := read; i < len(src.chains); i++ {
		pi := r.ReadChain(src.chains[i], src.endings[i])
		got := placed{Policy: pi.Policy, Outlier: pi.Outlier, Passed: pi.AgainstPolicy != nil && pi.AgainstPolicy.Passed}
		if diff := cmp.Diff(placed{Policy: policyOf[i%3], Passed: true}, got); diff != "" {
			t.Errorf("chain %d (-want +got):\n%s\n%s", i, diff, pi.Text())
		}
	}

	// Intervals of 50 ms, 3 s, 70 ms, 5 s: no schedule of the family.
	var odd []time.Time
	var endings []backoff.Ending
	at := t0
	for _, d := range []time.Duration{0, 50, 3000, 70, 5000} {
		at = at.Add(d * time.Millisecond)
		odd, endings = append(odd, at), append(endings, backoff.Ending{Fate: backoff.FateRefused})
	}
	one := []time.Time{t0}
	tests := []struct {
		name    string
		r       *Reading
		times   []time.Time
		endings []backoff.Ending
		want    placed
		text    string
	}{
		{"an irregular chain", r, odd, endings, placed{Outlier: true}, "; outlier: no policy explains it"},
		{"one attempt", r, one, endings[:1], placed{}, "schedule undetermined (no interval: fewer than two attempts)"},
		{"a reading of no chain", Read(nil, &memSource{}, backoff.DefaultPolicy(), backoff.Run{}), src.chains[0], src.endings[0], placed{}, " ×1.6"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pi := tt.r.ReadChain(tt.times, tt.endings)
			got := placed{Policy: pi.Policy, Outlier: pi.Outlier, Passed: pi.AgainstPolicy != nil && pi.AgainstPolicy.Passed}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if text := pi.Text(); !strings.Contains(text, tt.text) {
				t.Errorf("text %q lacks %q", text, tt.text)
			}
			b, err := json.Marshal(&pi)
			if err != nil || !json.Valid(b) {
				t.Errorf("JSON %s: %v", b, err)
			}
		})
	}
}
