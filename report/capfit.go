package report

import (
	"fmt"
	"time"

	"github.com/backoff-audit/audit/backoff"
)

// FitCap returns the cap, in whole ms, below the policy's, under which
// every failing peer passes (backoff.FitCap), 0 when there is none.
func (a *Peers) FitCap() int64 {
	var ranges []backoff.CapRange
	var failing []int // indexes into a.peers
	for i := range a.peers {
		p := &a.peers[i]
		if p.passed() || p.Verdict() == backoff.TooFew {
			continue
		}
		if p.fit == 0 {
			return 0
		}
		ranges = append(ranges, a.fits[p.fit-1])
		failing = append(failing, i)
	}
	return backoff.FitCap(a.policy, ranges, func(i int, buf []time.Time) []time.Time {
		_, buf, _ = a.chains.Times(int(a.peers[failing[i]].index), buf)
		return buf
	})
}

// CapLine is the sentence that names the cap every failing peer fits
// (FitsCapMS), "" when there is none.
func (s Summary) CapLine() string {
	if s.FitsCapMS <= 0 {
		return ""
	}
	d := time.Duration(s.FitsCapMS) * time.Millisecond
	return fmt.Sprintf("every failing peer fits a cap of %v; the run's cap may be --max_backoff %v", d, d)
}
