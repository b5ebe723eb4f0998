package report

import (
	"slices"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/internal/arena"
)

// Section is the peer section of a capture read as it comes
// (attempt.Stream): each chain is verified when it is over and handed
// over, and kept as its entry in a small index, about 56 bytes a peer;
// its attempts and intervals are read back from the source when the
// section is written. What it holds grows with the peers, not with their
// attempts, and the chains still retrying are all a capture's audit
// holds besides.
type Section struct {
	ps    Peers
	tally attempt.ModeTally
	// peers is ps.peers while the chains come, off the Go heap: an index
	// of a million peers that append grew was most of what the collector
	// did, and the copies a fifth of a read's page faults.
	peers []auditPeer
}

// apDead marks the entry of a chain its source took back (Drop).
const apDead = 1 << 7

// NewSection returns an empty section of the chains of src, verified
// against p.
func NewSection(p backoff.Policy, src ChainSource) *Section {
	return &Section{ps: Peers{policy: p, chains: src}}
}

// Add verifies chains from, to-1 of the source (each once, in the order
// they come) in run, whose End is how far the capture had run: past the
// end of each (backoff.ChainEnd), so that a chain's verdict is what it
// will be wherever the capture ends; only the words of a verdict that
// say how long a client waited are written from the capture's end
// (Peers). It counts their fates' evidence of the retry mode too.
func (s *Section) Add(from, to int, run backoff.Run) {
	if to > cap(s.peers) {
		bigger := arena.Make[auditPeer](max(to, 2*cap(s.peers), 1024))
		copy(bigger, s.peers)
		arena.Free(s.peers)
		s.peers = bigger
	}
	s.peers = s.peers[:to]
	s.ps.verify(s.ps.chains, from, to, s.peers[from:to], run, false)
	for i := from; i < to; i++ {
		s.count(i, 1)
	}
}

// count adds the evidence of chain i's fates to the mode's tally, sign
// times.
func (s *Section) count(i, sign int) {
	endings := s.ps.chains.Endings(i, nil)
	if endings == nil {
		return
	}
	_, times, _ := s.ps.chains.Times(i, nil)
	s.tally.Add(s.ps.policy, times, endings, sign)
}

// Drop forgets chain i: its source took it back, and hands it over again
// with what came since.
func (s *Section) Drop(i int) {
	if i >= len(s.peers) || s.peers[i].flags&apDead != 0 {
		return
	}
	s.peers[i].flags |= apDead
	s.count(i, -1)
}

// Mode is the retry mode the chains' fates show (attempt.ModeTally); ok
// is false when no fate is known.
func (s *Section) Mode() (backoff.RetryMode, bool) { return s.tally.Mode() }

// Peers puts the section in report order, its chains written as verified
// in run (the capture's mode and end). The section is done with after it.
func (s *Section) Peers(run backoff.Run) *Peers {
	ps := &s.ps
	live := 0
	for i := range s.peers {
		if s.peers[i].flags&apDead == 0 {
			live++
		}
	}
	ps.peers = make([]auditPeer, 0, live)
	for _, p := range s.peers {
		if p.flags&apDead == 0 {
			ps.peers = append(ps.peers, p)
		}
	}
	arena.Free(s.peers)
	s.peers = nil
	slices.SortFunc(ps.peers, func(x, y auditPeer) int { return peerOrder(&x, &y) })
	ps.run = run
	ps.summary = ps.count()
	out := *ps
	*ps = Peers{}
	return &out
}
