package report

import (
	"io"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/session"
)

// ChainSource is where a peer section reads its chains: Chains, or an
// attempt.Chains, which gives a chain's times without building its
// attempts. Both are safe for concurrent reads.
type ChainSource interface {
	Len() int
	// Chain returns chain i, in buf's array when it builds one.
	Chain(i int, buf []attempt.Attempt) attempt.Chain
	// Times returns chain i's peer and attempt times (in buf's array) and
	// its retransmits.
	Times(i int, buf []time.Time) (netip.Addr, []time.Time, int)
	// Endings returns chain i's fates in time order (in buf's array), nil
	// when none are known.
	Endings(i int, buf []backoff.Ending) []backoff.Ending
}

// Chains is a slice of chains as a ChainSource.
type Chains []attempt.Chain

func (cs Chains) Len() int                                       { return len(cs) }
func (cs Chains) Chain(i int, _ []attempt.Attempt) attempt.Chain { return cs[i] }
func (cs Chains) Times(i int, buf []time.Time) (netip.Addr, []time.Time, int) {
	c := cs[i]
	retrans := 0
	buf = buf[:0]
	for _, a := range c.Attempts {
		buf = append(buf, a.Time)
		retrans += a.Retransmits
	}
	return c.Peer, buf, retrans
}
func (cs Chains) Endings(i int, _ []backoff.Ending) []backoff.Ending { return cs[i].Endings() }

// Peers is the peer section every document shares: each chain verified
// and its peer put in order, but its PeerReport built only when it is
// written, then dropped. A capture of 10 000 peers is written this way
// instead of holding every peer's attempts and intervals at once, and the
// text, the JSON and the page write the same values.
type Peers struct {
	policy backoff.Policy
	run    backoff.Run // what every chain is verified in (NewPeers)
	chains ChainSource
	peers  []auditPeer // in report order
	// results holds, by chain index, the result of the chains whose
	// intervals fit keptIntervals, so that writing them does not verify
	// them again; the others (nil Intervals) are verified again. A
	// section of chains verified by their caller (VerifiedPeers) holds
	// every result.
	results  []backoff.Result
	verified bool
	summary  Summary
}

// auditPeer is what ordering, counting and a one-line report of a peer
// need, without its attempts and intervals.
type auditPeer struct {
	addr      netip.Addr
	index     int // of its chain
	attempts  int
	retrans   int
	verdict   backoff.Verdict
	passed    bool
	refPassed bool
	strict    backoff.Reading
	maxJitter float64          // the largest |jitter_pct| of its intervals
	fit       backoff.CapRange // for a failing peer: the lower caps it could fit
	unseen    int              // attempts whose answer the capture lacks
	// overflow, when set, is the reason of a session that kept its
	// maximum of attempts (Overflowed): it replaces the verdict.
	overflow string
}

// auditBatch is the number of chains below which verifying them on more
// than one goroutine costs more than it saves.
const auditBatch = 512

// keptIntervals bounds the intervals whose results a section keeps (about
// 100 bytes each) for writing: the chains beyond it are verified again
// when written, so memory stays bounded whatever the capture.
const keptIntervals = 1 << 18

// NewPeers verifies every chain of cs against p in run (backoff.VerifyRun,
// each chain with its own fates) and orders the peers: failing first
// (failed, then too few attempts, then passed), by address within each
// group. It holds cs: adding SYNs to its Tracker before the section is
// written changes what it writes.
func NewPeers(p backoff.Policy, run backoff.Run, cs ChainSource) *Peers {
	n := cs.Len()
	ps := &Peers{policy: p, run: run, chains: cs, peers: make([]auditPeer, n), results: make([]backoff.Result, n)}
	// Chains are independent: a large capture's are verified on every
	// core, each goroutine on its own share of ps.peers.
	workers := max(1, min(runtime.GOMAXPROCS(0), n/auditBatch))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			budget, kept := keptIntervals/workers, 0
			var times []time.Time
			var plateau []float64
			for i := n * w / workers; i < n*(w+1)/workers; i++ {
				ap := auditPeer{index: i}
				ap.addr, times, ap.retrans = cs.Times(i, times)
				ap.attempts = len(times)
				// Each chain in its own fates: a Result holds its Run,
				// so the endings are the chain's own slice.
				run := run
				run.Endings = cs.Endings(i, nil)
				// Verified again when written in full: keeping every
				// Result would hold every interval, which is what a
				// section avoids.
				res := backoff.VerifyRun(p, times, run)
				if kept+len(res.Intervals) <= budget {
					kept += len(res.Intervals)
					ps.results[i] = res
				}
				ap.set(res)
				if ap.verdict == backoff.Failed {
					ap.fit = backoff.CapRangeOf(p, res.Intervals, res.Reference.FirstFailure, &plateau)
				}
				ps.peers[i] = ap
			}
		})
	}
	wg.Wait()
	ps.order()
	return ps
}

// VerifiedPeers is the section of chains their caller verified, each with
// its own policy and run: results[i] is chain i's. It keeps the chains'
// order, which is the caller's (a record's sessions in turn).
func VerifiedPeers(chains []attempt.Chain, results []backoff.Result) *Peers {
	ps := &Peers{chains: Chains(chains), peers: make([]auditPeer, len(chains)), results: results, verified: true}
	if len(results) > 0 {
		ps.policy = results[0].Policy
	}
	for i, c := range chains {
		ap := auditPeer{index: i, addr: c.Peer, attempts: len(c.Attempts), retrans: c.Retransmits()}
		ap.set(results[i])
		ps.peers[i] = ap
	}
	ps.summary = ps.count()
	return ps
}

// set takes res's verdict.
func (ap *auditPeer) set(res backoff.Result) {
	ap.verdict, ap.passed = res.Reference.Verdict, res.Reference.Passed
	ap.refPassed, ap.strict, ap.maxJitter = res.ReferencePassed, res.Strict, maxJitter(res.Intervals)
	ap.unseen = res.Unseen
}

// order sorts the peers into report order and counts them.
func (ps *Peers) order() {
	slices.SortStableFunc(ps.peers, func(x, y auditPeer) int { return peerOrder(x.verdict, x.addr, y.verdict, y.addr) })
	ps.summary = ps.count()
}

func (ps *Peers) count() Summary {
	var s Summary
	for _, p := range ps.peers {
		s.count(p.passed, p.verdict)
		s.Unseen += p.unseen
	}
	return s
}

// Overflowed gives the chain of addr the verdict of a session that kept
// its maximum of attempts (session.Overflowed): kept were kept, dropped
// more counted. A section without that chain gains it, with no attempt.
func (ps *Peers) Overflowed(addr netip.Addr, kept, dropped, maxAttempts int) {
	i := slices.IndexFunc(ps.peers, func(p auditPeer) bool { return p.addr == addr })
	if i < 0 {
		cs, _ := ps.chains.(Chains)
		ps.chains = append(cs, attempt.Chain{Peer: addr})
		ps.results = append(ps.results, backoff.Result{Policy: ps.policy, BackoffMS: []int32{}, Intervals: []backoff.Interval{}})
		ps.peers = append(ps.peers, auditPeer{addr: addr, index: len(cs)})
		i = len(ps.peers) - 1
	}
	res, reason := session.Overflowed(backoff.Result{}, kept, dropped, maxAttempts)
	p := &ps.peers[i]
	p.overflow, p.verdict, p.passed, p.strict = reason, res.Reference.Verdict, false, res.Strict
	ps.summary = ps.count()
}

// Len is the number of peers.
func (ps *Peers) Len() int { return len(ps.peers) }

// Summary counts the peers by verdict.
func (ps *Peers) Summary() Summary { return ps.summary }

// Peer is the address of the peer at position i.
func (ps *Peers) Peer(i int) netip.Addr { return ps.peers[i].addr }

// Passed reports whether the peer at position i passed.
func (ps *Peers) Passed(i int) bool { return ps.peers[i].passed }

// Position is the position of the peer of chain index, -1 when none.
func (ps *Peers) Position(index int) int {
	return slices.IndexFunc(ps.peers, func(p auditPeer) bool { return p.index == index })
}

// Only returns the section of the peers whose address is in addrs
// (IPv4-mapped addresses unmapped), recounted. With no addresses it
// returns ps as is.
func (ps *Peers) Only(addrs ...netip.Addr) *Peers {
	if len(addrs) == 0 {
		return ps
	}
	keep := make(map[netip.Addr]bool, len(addrs))
	for _, a := range addrs {
		keep[a.Unmap()] = true
	}
	out := *ps
	out.peers = nil
	for _, p := range ps.peers {
		if keep[p.addr] {
			out.peers = append(out.peers, p)
		}
	}
	out.summary = out.count()
	return &out
}

// Report builds the report of the peer at position i; buf is scratch
// space for its chain's attempts.
func (ps *Peers) Report(i int, buf *[]attempt.Attempt) PeerReport {
	p := &ps.peers[i]
	c := ps.chains.Chain(p.index, *buf)
	*buf = c.Attempts[:0]
	var pr PeerReport
	if res := ps.results[p.index]; ps.verified || res.Intervals != nil || len(c.Attempts) < 2 && res.Reference.Verdict != "" {
		pr = PeerReportOf(c, res)
	} else {
		run := ps.run
		run.Endings = c.Endings()
		pr = PeerReportOf(c, backoff.VerifyRun(ps.policy, c.Times(), run))
	}
	if p.overflow != "" {
		pr.Passed, pr.Verdict, pr.Strict, pr.Reason = false, p.verdict, p.strict, p.overflow
	}
	return pr
}

// Verified returns the chain of the peer at position i and its result,
// when the section holds it (always, for VerifiedPeers).
func (ps *Peers) Verified(i int) (attempt.Chain, *backoff.Result) {
	p := &ps.peers[i]
	res := ps.results[p.index]
	c := ps.chains.Chain(p.index, nil)
	if !ps.verified && res.Intervals == nil {
		return c, nil
	}
	return c, &res
}

// Reports builds every peer's report, in order: for tests and small
// sections.
func (ps *Peers) Reports() []PeerReport {
	out := make([]PeerReport, len(ps.peers))
	var buf []attempt.Attempt
	for i := range ps.peers {
		out[i] = ps.Report(i, &buf)
	}
	return out
}

// writeBatch is how many peers a goroutine of WritePeers formats at a
// time.
const writeBatch = 256

// WritePeers appends to w what format makes of each peer of ps, in order
// (WriteBatches), each goroutine with its own state. format gets the
// peer's position and a function that builds its report (valid until
// format returns): a peer written in one line needs none.
func WritePeers[S any](w io.Writer, ps *Peers, state func() S, format func(b []byte, s S, i int, report func() *PeerReport) ([]byte, error)) error {
	type scratch struct {
		s   S
		buf []attempt.Attempt
		pr  PeerReport
	}
	return WriteBatches(w, len(ps.peers), writeBatch, func() *scratch { return &scratch{s: state()} },
		func(b []byte, sc *scratch, i int) ([]byte, error) {
			return format(b, sc.s, i, func() *PeerReport {
				sc.pr = ps.Report(i, &sc.buf)
				return &sc.pr
			})
		})
}
