package report

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/infer"
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
	// start is when the capture began, when the section is a capture's
	// (AuditOf): each report says whether its chain may have begun before.
	start time.Time
	// results holds, by chain index, the result of the chains whose
	// intervals fit keptIntervals, so that writing them does not verify
	// them again; the others (nil Intervals) are verified again. A
	// section of chains verified by their caller (VerifiedPeers) holds
	// every result; a streamed one (Section) none.
	results  []backoff.Result
	verified bool
	// fits holds the lower caps failing peers could fit (auditPeer.fit);
	// overflow the reasons of chains that kept a session's maximum of
	// attempts (Overflowed), by chain index.
	fits     []backoff.CapRange
	overflow map[int]string
	summary  Summary
	inferred *infer.Reading // WithInfer
}

// auditPeer is what ordering, counting and a one-line report of a peer
// need, without its attempts and intervals: pointer-free, in 56 bytes, so
// that a section of a million peers is a small index the collector does
// not scan.
type auditPeer struct {
	addr      [16]byte // As16
	index     int32    // of its chain
	attempts  int32
	retrans   int64
	unseen    int32
	first     int32  // the strict reading's first failure
	fit       uint32 // for a failing peer: the lower caps it could fit, fits[fit-1]
	maxJitter float64
	verdict   uint8 // verdictCode
	strict    uint8
	flags     uint8
}

const (
	apIs4 = 1 << iota
	apPassed
	apRefPassed
	apStrictPassed
)

// verdicts are the verdicts a peer's reading takes, by code.
var verdicts = [...]backoff.Verdict{"", backoff.Passed, backoff.Failed, backoff.TooFew, backoff.Overflow, backoff.NotJudged}

func verdictCode(v backoff.Verdict) uint8 {
	for i, w := range verdicts {
		if w == v {
			return uint8(i)
		}
	}
	panic(fmt.Sprintf("report: verdict %q unknown", v))
}

func (p *auditPeer) Addr() netip.Addr {
	if p.flags&apIs4 != 0 {
		return netip.AddrFrom4([4]byte(p.addr[12:]))
	}
	return netip.AddrFrom16(p.addr)
}

func (p *auditPeer) Verdict() backoff.Verdict { return verdicts[p.verdict] }
func (p *auditPeer) passed() bool             { return p.flags&apPassed != 0 }
func (p *auditPeer) Strict() backoff.Reading {
	return backoff.Reading{Passed: p.flags&apStrictPassed != 0, Verdict: verdicts[p.strict], FirstFailure: int(p.first)}
}

// compareAddr orders two peers' addresses as netip.Addr.Compare does:
// IPv4 before IPv6, then by their bytes.
func compareAddr(x, y *auditPeer) int {
	if c := cmp.Compare(y.flags&apIs4, x.flags&apIs4); c != 0 {
		return c
	}
	return bytes.Compare(x.addr[:], y.addr[:])
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
	ps.verify(cs, 0, n, ps.peers, run, true, nil)
	ps.order()
	return ps
}

// verify verifies chains from, to-1 of cs in run into out, one a chain,
// keeping their results (ps.results) within keptIntervals when keep is
// set, and counting their fates' evidence of the retry mode in tally
// when it is not nil. Chains are independent: many are verified on every
// core, each goroutine on its own share.
func (ps *Peers) verify(cs ChainSource, from, to int, out []auditPeer, run backoff.Run, keep bool, tally *attempt.ModeTally) {
	n := to - from
	workers := max(1, min(runtime.GOMAXPROCS(0), n/auditBatch))
	fits := make([][]backoff.CapRange, workers)
	tallies := make([]attempt.ModeTally, workers)
	both, _ := cs.(timesEndings)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			budget, kept := keptIntervals/workers, 0
			var times []time.Time
			var plateau []float64
			var ivs []backoff.Interval
			var ms []int32
			var ends []backoff.Ending
			for i := from + n*w/workers; i < from+n*(w+1)/workers; i++ {
				var addr netip.Addr
				var retrans int
				// A Result holds its Run: a kept one keeps its fates, and
				// the next chain's are new.
				run := run
				if both != nil {
					addr, times, retrans, run.Endings = both.TimesEndings(i, times, ends)
					ends = run.Endings
				} else {
					addr, times, retrans = cs.Times(i, times)
					run.Endings = cs.Endings(i, nil)
				}
				if tally != nil && run.Endings != nil {
					tallies[w].Add(ps.policy, times, run.Endings, 1)
				}
				// Verified again when written in full: keeping every
				// Result would hold every interval, which is what a
				// section avoids.
				res := backoff.VerifyRunInto(ps.policy, times, run, ivs, ms)
				ivs, ms = res.Intervals, res.BackoffMS
				if keep && kept+len(res.Intervals) <= budget {
					kept += len(res.Intervals)
					ps.results[i] = res
					ivs, ms, ends = nil, nil, nil // kept: the next chain's are new
				}
				ap := auditPeerOf(addr, i, len(times), retrans)
				ap.set(res)
				if ap.verdict == verdictCode(backoff.Failed) {
					if fit := backoff.CapRangeOf(ps.policy, res.Intervals, res.Reference.FirstFailure, &plateau); fit != (backoff.CapRange{}) {
						fits[w] = append(fits[w], fit)
						ap.fit = uint32(len(fits[w])) // made global below
					}
				}
				out[i-from] = ap
			}
		})
	}
	wg.Wait()
	// The workers' caps, one list: a worker's fit numbers shift by the
	// caps of the workers before it.
	for w := range workers {
		shift := uint32(len(ps.fits))
		for i := from + n*w/workers; i < from+n*(w+1)/workers; i++ {
			if ap := &out[i-from]; ap.fit != 0 {
				ap.fit += shift
			}
		}
		ps.fits = append(ps.fits, fits[w]...)
		if tally != nil {
			tally.Merge(tallies[w])
		}
	}
}

// chainReaders is a ChainSource that reads chain after chain faster
// through a reader of each goroutine's own (attempt/stream's, which keeps
// what it read of its spill for the chains that follow).
type chainReaders interface {
	ChainReader() func(i int, buf []attempt.Attempt) attempt.Chain
}

// timesEndings is a ChainSource that gives a chain's times and fates in
// one read (attempt.Stream), rather than in two.
type timesEndings interface {
	TimesEndings(i int, buf []time.Time, ends []backoff.Ending) (netip.Addr, []time.Time, int, []backoff.Ending)
}

func auditPeerOf(addr netip.Addr, index, attempts, retrans int) auditPeer {
	ap := auditPeer{addr: addr.As16(), index: int32(index), attempts: int32(attempts), retrans: int64(retrans)}
	if addr.Is4() {
		ap.flags |= apIs4
	}
	return ap
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
		ap := auditPeerOf(c.Peer, i, len(c.Attempts), c.Retransmits())
		ap.set(results[i])
		ps.peers[i] = ap
	}
	ps.summary = ps.count()
	return ps
}

// set takes res's verdict.
func (ap *auditPeer) set(res backoff.Result) {
	ap.verdict, ap.strict = verdictCode(res.Reference.Verdict), verdictCode(res.Strict.Verdict)
	ap.first, ap.maxJitter, ap.unseen = int32(res.Strict.FirstFailure), maxJitter(res.Intervals), int32(res.Unseen)
	ap.flags &^= apPassed | apRefPassed | apStrictPassed
	for _, f := range []struct {
		on   bool
		flag uint8
	}{{res.Reference.Passed, apPassed}, {res.ReferencePassed, apRefPassed}, {res.Strict.Passed, apStrictPassed}} {
		if f.on {
			ap.flags |= f.flag
		}
	}
}

// order sorts the peers into report order and counts them.
func (ps *Peers) order() {
	slices.SortStableFunc(ps.peers, func(x, y auditPeer) int { return peerOrder(&x, &y) })
	ps.summary = ps.count()
}

func (ps *Peers) count() Summary {
	var s Summary
	for i := range ps.peers {
		p := &ps.peers[i]
		s.count(p.passed(), p.Verdict())
		s.Unseen += int(p.unseen)
	}
	return s
}

// result is the result kept of chain index, if any.
func (ps *Peers) result(index int32) (backoff.Result, bool) {
	if int(index) >= len(ps.results) {
		return backoff.Result{}, false
	}
	res := ps.results[index]
	return res, ps.verified || res.Intervals != nil
}

// Overflowed gives the chain of addr the verdict of a session that kept
// its maximum of attempts (session.Overflowed): kept were kept, dropped
// more counted. A section without that chain gains it, with no attempt.
func (ps *Peers) Overflowed(addr netip.Addr, kept, dropped, maxAttempts int) {
	i := slices.IndexFunc(ps.peers, func(p auditPeer) bool { return p.Addr() == addr })
	if i < 0 {
		cs, _ := ps.chains.(Chains)
		ps.chains = append(cs, attempt.Chain{Peer: addr})
		ps.results = append(ps.results, backoff.Result{Policy: ps.policy, BackoffMS: []int32{}, Intervals: []backoff.Interval{}})
		ps.peers = append(ps.peers, auditPeerOf(addr, len(cs), 0, 0))
		i = len(ps.peers) - 1
	}
	res, reason := session.Overflowed(backoff.Result{}, kept, dropped, maxAttempts)
	p := &ps.peers[i]
	if ps.overflow == nil {
		ps.overflow = map[int]string{}
	}
	ps.overflow[int(p.index)] = reason
	p.verdict, p.strict, p.first = verdictCode(res.Reference.Verdict), verdictCode(res.Strict.Verdict), int32(res.Strict.FirstFailure)
	p.flags &^= apPassed | apStrictPassed
	if res.Strict.Passed {
		p.flags |= apStrictPassed
	}
	ps.summary = ps.count()
}

// Len is the number of peers.
func (ps *Peers) Len() int { return len(ps.peers) }

// Summary counts the peers by verdict.
func (ps *Peers) Summary() Summary { return ps.summary }

// Peer is the address of the peer at position i.
func (ps *Peers) Peer(i int) netip.Addr { return ps.peers[i].Addr() }

// Brief is what a line says of a peer, without its attempts.
type Brief struct {
	Peer         netip.Addr
	Attempts     int
	Retransmits  int
	Verdict      backoff.Verdict
	Strict       backoff.Reading
	MaxJitterPct float64 // the largest |jitter_pct| of its intervals
}

// Brief is the line of the peer at position i, from the section's index:
// its chain is not read.
func (ps *Peers) Brief(i int) Brief {
	p := &ps.peers[i]
	return Brief{Peer: p.Addr(), Attempts: int(p.attempts), Retransmits: int(p.retrans), Verdict: p.Verdict(),
		Strict: p.Strict(), MaxJitterPct: p.maxJitter}
}

// Passed reports whether the peer at position i passed.
func (ps *Peers) Passed(i int) bool { return ps.peers[i].passed() }

// Position is the position of the peer of chain index, -1 when none.
func (ps *Peers) Position(index int) int {
	return slices.IndexFunc(ps.peers, func(p auditPeer) bool { return int(p.index) == index })
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
		if keep[p.Addr()] {
			out.peers = append(out.peers, p)
		}
	}
	out.summary = out.count()
	return &out
}

// Report builds the report of the peer at position i; buf is scratch
// space for its chain's attempts.
func (ps *Peers) Report(i int, buf *[]attempt.Attempt) PeerReport {
	sc := reportScratch{attempts: *buf}
	pr := ps.report(i, &sc)
	*buf = sc.attempts
	return pr
}

// reportScratch is the memory that building peers' reports one after the
// other reuses: a report built in it is valid until the next.
type reportScratch struct {
	// chain reads a chain for this scratch's goroutine alone, when the
	// section's source has readers (chainReaders); nil, the source does.
	chain    func(i int, buf []attempt.Attempt) attempt.Chain
	attempts []attempt.Attempt
	reports  []AttemptReport
	times    []time.Time
	endings  []backoff.Ending
	ivs      []backoff.Interval
	ms       []int32
}

// report is Report, built in sc.
func (ps *Peers) report(i int, sc *reportScratch) PeerReport {
	p := &ps.peers[i]
	chain := sc.chain
	if chain == nil {
		chain = ps.chains.Chain
	}
	c := chain(int(p.index), sc.attempts)
	sc.attempts = c.Attempts[:0]
	res, ok := ps.result(p.index)
	if !ok && (len(c.Attempts) >= 2 || res.Reference.Verdict == "") {
		sc.times, sc.endings = sc.times[:0], sc.endings[:0]
		for _, a := range c.Attempts {
			sc.times = append(sc.times, a.Time)
			sc.endings = append(sc.endings, a.Ending)
		}
		run := ps.run
		run.Endings = sc.endings
		res = backoff.VerifyRunInto(ps.policy, sc.times, run, sc.ivs, sc.ms)
		sc.ivs, sc.ms = res.Intervals, res.BackoffMS
	}
	pr := peerReportInto(c, res, sc.reports)
	sc.reports = pr.Attempts
	if reason, ok := ps.overflow[int(p.index)]; ok {
		pr.Passed, pr.Verdict, pr.Strict, pr.Reason = false, p.Verdict(), p.Strict(), reason
	}
	pr.BegunBefore = pr.mayPrecede(ps.start)
	return pr
}

// Verified returns the chain of the peer at position i and its result,
// when the section holds it (always, for VerifiedPeers).
func (ps *Peers) Verified(i int) (attempt.Chain, *backoff.Result) {
	p := &ps.peers[i]
	c := ps.chains.Chain(int(p.index), nil)
	res, ok := ps.result(p.index)
	if !ok {
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
		s  S
		rs reportScratch
		pr PeerReport
		// i is the peer being formatted; report builds its report, made
		// once per goroutine rather than once a peer.
		i      int
		report func() *PeerReport
	}
	state1 := func() *scratch {
		sc := &scratch{s: state()}
		if r, ok := ps.chains.(chainReaders); ok {
			sc.rs.chain = r.ChainReader()
		}
		sc.report = func() *PeerReport {
			sc.pr = ps.report(sc.i, &sc.rs)
			return &sc.pr
		}
		return sc
	}
	return WriteBatches(w, len(ps.peers), writeBatch, state1, func(b []byte, sc *scratch, i int) ([]byte, error) {
		sc.i = i
		return format(b, sc.s, i, sc.report)
	})
}

// WithInfer reads from every chain of the section the policy its client
// runs, and the policies the peers run (infer.Read, docs/spec.md §8), the
// fates read in mode: each peer's JSON then has "inferred", the document
// "policies" after the herd, and its text a last section.
func (ps *Peers) WithInfer(mode backoff.RetryMode) {
	order := make([]int32, len(ps.peers))
	for i := range ps.peers {
		order[i] = ps.peers[i].index
	}
	run := ps.run
	run.Mode = mode
	ps.inferred = infer.Read(order, ps.chains, ps.policy, run)
}

// Inferred is the section's WithInfer reading, nil without it.
func (ps *Peers) Inferred() *infer.Reading { return ps.inferred }
