package report

import (
	"time"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/report/herd"
)

// Herd reads the herd of the section's peers, in the retry mode m,
// without building their reports.
func (a *Peers) Herd(m backoff.RetryMode) herd.Reading {
	hp := make([]herd.Peer, len(a.peers))
	var buf []time.Time
	for i := range a.peers {
		p := &a.peers[i]
		_, times, _ := a.chains.Times(int(p.index), buf)
		h := herd.Peer{Addr: p.Addr(), Verdict: p.Verdict(), Times: make([]int64, len(times))}
		for j, t := range times {
			h.Times[j] = t.UnixNano()
		}
		if !p.passed() {
			res, ok := a.result(p.index)
			if !ok {
				run := a.run
				run.Endings = a.chains.Endings(int(p.index), nil)
				res = backoff.VerifyRun(a.policy, times, run)
			}
			for _, iv := range res.Intervals {
				if !iv.OK {
					h.Failed++
				}
			}
		}
		hp[i] = h
		buf = times[:0]
	}
	return herd.Read(hp, a.policy, m)
}
