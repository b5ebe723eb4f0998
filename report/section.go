package report

import (
	"cmp"
	"encoding/binary"
	"runtime"
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
	s.ps.verify(s.ps.chains, from, to, s.peers[from:to], run, false, &s.tally)
}

// uncount takes back from the mode's tally the evidence of chain i's
// fates.
func (s *Section) uncount(i int) {
	endings := s.ps.chains.Endings(i, nil)
	if endings == nil {
		return
	}
	_, times, _ := s.ps.chains.Times(i, nil)
	s.tally.Add(s.ps.policy, times, endings, -1)
}

// Drop forgets chain i: its source took it back, and hands it over again
// with what came since.
func (s *Section) Drop(i int) {
	if i >= len(s.peers) || s.peers[i].flags&apDead != 0 {
		return
	}
	s.peers[i].flags |= apDead
	s.uncount(i)
}

// Mode is the retry mode the chains' fates show (attempt.ModeTally); ok
// is false when no fate is known.
func (s *Section) Mode() (backoff.RetryMode, bool) { return s.tally.Mode() }

// Peers puts the section in report order, its chains written as verified
// in run (the capture's mode and end). The section is done with after it.
func (s *Section) Peers(run backoff.Run) *Peers {
	ps := &Peers{}
	*ps, s.ps = s.ps, Peers{}
	// Sort keys rather than entries: report order in three words, the
	// entry's position beside them.
	type sortKey struct {
		rank   uint32 // Verdict.Rank, then IPv6 after IPv4
		i      uint32
		hi, lo uint64
	}
	keys := make([]sortKey, 0, len(s.peers))
	for i := range s.peers {
		p := &s.peers[i]
		if p.flags&apDead != 0 {
			continue
		}
		k := sortKey{rank: uint32(p.Verdict().Rank()) << 1, i: uint32(i),
			hi: binary.BigEndian.Uint64(p.addr[:8]), lo: binary.BigEndian.Uint64(p.addr[8:])}
		if p.flags&apIs4 == 0 {
			k.rank |= 1
		}
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y sortKey) int {
		return cmp.Or(cmp.Compare(x.rank, y.rank), cmp.Compare(x.hi, y.hi), cmp.Compare(x.lo, y.lo))
	})
	// The entries into that order where they are, a cycle at a time:
	// a copy of a million peers' index was the peak of a long capture's
	// audit. Dead entries end up beyond the live ones, cut off.
	order := make([]uint32, len(s.peers))
	for j, k := range keys {
		order[j] = k.i
	}
	for j, n := len(keys), 0; n < len(s.peers); n++ {
		if s.peers[n].flags&apDead != 0 {
			order[j] = uint32(n)
			j++
		}
	}
	permute(s.peers, order)
	peers := s.peers
	ps.peers, s.peers = peers[:len(keys)], nil
	// The index is off the Go heap: it goes back once the section does.
	runtime.AddCleanup(ps, func(p []auditPeer) { arena.Free(p) }, peers)
	ps.run = run
	ps.summary = ps.count()
	return ps
}

// permute puts s[order[j]] at j for every j, moving each element once.
func permute[T any](s []T, order []uint32) {
	done := make([]bool, len(s))
	for j := range s {
		if done[j] || order[j] == uint32(j) {
			continue
		}
		// The cycle through j: j takes from order[j], which takes from
		// its own, until the cycle closes at j.
		v := s[j]
		k := j
		for {
			done[k] = true
			from := int(order[k])
			if from == j {
				s[k] = v
				break
			}
			s[k] = s[from]
			k = from
		}
	}
}
