package infer

import (
	"cmp"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/backoff-audit/audit/backoff"
)

// AttemptsOf returns a chain's attempts as the fit reads them (docs/spec.md
// §8.1), in buf's array: each attempt reached READY (so the backoff
// starts anew after it), hung (timed out, when the client gave up on it),
// failed at once, or of unknown end, by the class the verifier gives it
// in run under p (backoff.Run.Class). endings are the chain's fates in
// time order, nil when none are known.
func AttemptsOf(p backoff.Policy, run backoff.Run, times []time.Time, endings []backoff.Ending, buf []Attempt) []Attempt {
	buf = buf[:0]
	run.Endings = endings
	for i, t := range times {
		a := Attempt{At: t}
		var e backoff.Ending
		if i < len(endings) {
			e = endings[i]
		}
		if e.Fate.Ended() {
			a.Lasted = e.Duration
		}
		var gap time.Duration
		if i+1 < len(times) {
			gap = times[i+1].Sub(t)
		}
		switch run.Class(i, p, t, gap) {
		case backoff.ClassReady:
			a.End = EndSucceeded
		case backoff.ClassHung:
			a.End = EndHung
			if e.Fate == backoff.FateAbandoned {
				a.End = EndTimedOut
			}
		default:
			if e.Fate != "" && e.Fate != backoff.FateUnknown {
				a.End = EndFailed
			}
		}
		buf = append(buf, a)
	}
	return buf
}

// Source is where Read reads a document's chains, by chain index: their
// client's address, attempt times in time order (in buf's array) and
// retransmits, and their fates (nil when none are known). report's
// ChainSource is one. Read calls it from several goroutines at once.
type Source interface {
	Times(i int, buf []time.Time) (netip.Addr, []time.Time, int)
	Endings(i int, buf []backoff.Ending) []backoff.Ending
}

// timesEndings is a Source that reads a chain's times and fates at once
// (attempt.Stream), rather than in two reads.
type timesEndings interface {
	TimesEndings(i int, buf []time.Time, ends []backoff.Ending) (netip.Addr, []time.Time, int, []backoff.Ending)
}

// chainReader reads chain index of src, its times into buf[:0] and its
// fates into ends[:0] where it can.
type chainReader func(index int, buf []time.Time, ends []backoff.Ending) (netip.Addr, []time.Time, []backoff.Ending)

func readerOf(src Source) chainReader {
	if both, ok := src.(timesEndings); ok {
		return func(index int, buf []time.Time, ends []backoff.Ending) (netip.Addr, []time.Time, []backoff.Ending) {
			addr, times, _, endings := both.TimesEndings(index, buf, ends)
			return addr, times, endings
		}
	}
	return func(index int, buf []time.Time, ends []backoff.Ending) (netip.Addr, []time.Time, []backoff.Ending) {
		addr, times, _ := src.Times(index, buf)
		return addr, times, src.Endings(index, ends)
	}
}

// Reading is what --infer reads of a document's chains (docs/spec.md §8):
// the fleet's policies, and of each chain the policy it runs. It keeps a
// word a chain; a peer's own fit and its verdict against its policy are
// read from its attempts when the peer is written (AppendPeer), so that
// a capture's every chain need not be held.
type Reading struct {
	// Policies is the fleet's section (JSON "policies").
	Policies Policies
	read     chainReader
	policy   backoff.Policy
	run      backoff.Run
	// judges[j] is what the chains of policy j are judged against, when
	// judged[j] (policyOf).
	judges []backoff.Policy
	judged []bool
	// of is, by chain index, the chain's policy from 1, 0 for none, or
	// outlier.
	of []int32
	// fleet is the policies found, which place a chain read later
	// (ReadChain).
	fleet []Policy
	size  []float64 // sizes(fleet)
}

const outlier = -1

// readChains is a document's chains, in the order Read is given them, as
// Cluster reads them.
type readChains struct {
	order  []int32
	read   chainReader
	policy backoff.Policy
	run    backoff.Run
}

func (c *readChains) Len() int { return len(c.order) }

// chainBuf is what a chain is read into, to be let go once read.
type chainBuf struct {
	times   []time.Time
	endings []backoff.Ending
}

var chainPool = sync.Pool{New: func() any { return new(chainBuf) }}

func (c *readChains) Attempts(i int, buf []Attempt) []Attempt {
	cb := chainPool.Get().(*chainBuf)
	_, cb.times, cb.endings = c.read(int(c.order[i]), cb.times, cb.endings)
	buf = AttemptsOf(c.policy, c.run, cb.times, cb.endings, buf)
	chainPool.Put(cb)
	return buf
}

// Read fits the chains of src that order names (chain indices, in report
// order: the fleet's policies do not depend on where each chain was
// stored), finds the fleet's policies (Cluster), and judges each chain
// against its own policy's windows in run under p's tolerance, reading
// its fates as the verdicts do (AttemptsOf).
func Read(order []int32, src Source, p backoff.Policy, run backoff.Run) *Reading {
	run.Endings = nil
	read := readerOf(src)
	r := &Reading{read: read, policy: p, run: run}
	chains := &readChains{order: order, read: read, policy: p, run: run}
	fl := Cluster(chains)
	size := 0
	for _, index := range order {
		size = max(size, int(index)+1)
	}
	r.of = make([]int32, size)
	for i, j := range fl.Of {
		if j != NoPolicy {
			r.of[order[i]] = int32(j + 1)
		}
	}
	for _, i := range fl.Outliers {
		r.of[order[i]] = outlier
	}
	r.judges, r.judged = make([]backoff.Policy, len(fl.Policies)), make([]bool, len(fl.Policies))
	for j := range fl.Policies {
		r.judges[j], r.judged[j] = policyOf(&fl.Policies[j], p)
	}
	r.Policies = r.section(fl, order)
	r.fleet, r.size = fl.Policies, sizes(fl.Policies)
	return r
}

// verdict judges the chain of times and endings against policy j (from
// 1), when it has one to be judged against, its intervals in iv's memory
// (backoff.VerifyRunInto), which it keeps for the next.
func (r *Reading) verdict(j int, times []time.Time, endings []backoff.Ending, iv *intervals) (backoff.Result, bool) {
	if j <= 0 || !r.judged[j-1] {
		return backoff.Result{}, false
	}
	run := r.run
	run.Endings = endings
	res := backoff.VerifyRunInto(r.judges[j-1], times, run, iv.ivs, iv.ms)
	iv.ivs, iv.ms = res.Intervals, res.BackoffMS
	return res, true
}

// intervals is the memory of verdicts read one after the other.
type intervals struct {
	ivs []backoff.Interval
	ms  []int32
}

// section is the report section of fleet fl: each policy, with how many
// of its chains fail its windows and the signatures they carry, and the
// outliers' addresses.
func (r *Reading) section(fl Fleet, order []int32) Policies {
	ps := Policies{Peers: len(order), Policies: make([]PolicyReport, len(fl.Policies)), Outliers: []netip.Addr{}}
	placed := 0
	for j := range fl.Policies {
		ps.Policies[j] = policyReport(j, &fl.Policies[j], len(order))
		placed += fl.Policies[j].Peers
	}
	ps.TooShort = len(order) - placed - len(fl.Outliers)
	for _, i := range fl.Outliers {
		addr, _, _ := r.read(int(order[i]), nil, nil)
		ps.Outliers = append(ps.Outliers, addr)
	}
	// Every chain of a policy judged against it, on every core, each
	// goroutine counting its own.
	type counts struct {
		failed []int
		sigs   [][]SignatureCount
	}
	var mu sync.Mutex
	total := counts{failed: make([]int, len(fl.Policies)), sigs: make([][]SignatureCount, len(fl.Policies))}
	each(len(order), func(from, to int) {
		c := counts{failed: make([]int, len(fl.Policies)), sigs: make([][]SignatureCount, len(fl.Policies))}
		var times []time.Time
		var endings []backoff.Ending
		var iv intervals
		for i := from; i < to; i++ {
			j := fl.Of[i]
			if j == NoPolicy || !r.judged[j] {
				continue
			}
			_, times, endings = r.read(int(order[i]), times, endings)
			res, _ := r.verdict(j+1, times, endings, &iv)
			if !res.Reference.Passed {
				c.failed[j]++
			}
			for _, s := range backoff.Signatures(res) {
				c.sigs[j] = countSignature(c.sigs[j], SignatureCount{Name: s.Name, Seen: s.Seen, Peers: 1})
			}
		}
		mu.Lock()
		defer mu.Unlock()
		for j := range c.failed {
			total.failed[j] += c.failed[j]
			for _, s := range c.sigs[j] {
				total.sigs[j] = countSignature(total.sigs[j], s)
			}
		}
	})
	for j := range ps.Policies {
		p := &ps.Policies[j]
		p.Failed, p.Signatures = total.failed[j], append([]SignatureCount{}, total.sigs[j]...)
		slices.SortStableFunc(p.Signatures, func(a, b SignatureCount) int {
			return cmp.Or(cmp.Compare(b.Peers, a.Peers), cmp.Compare(a.Name, b.Name))
		})
	}
	return ps
}

// countSignature adds s's peers to its count in list.
func countSignature(list []SignatureCount, s SignatureCount) []SignatureCount {
	k := slices.IndexFunc(list, func(c SignatureCount) bool { return c.Name == s.Name })
	if k < 0 {
		return append(list, s)
	}
	list[k].Peers += s.Peers
	return list
}

// noCap is the MAX_BACKOFF of a policy whose chains never reached one.
const noCap = 1000 * time.Hour

func fromMS(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }

// policyOf is the backoff.Policy a chain is judged against when it runs
// fleet policy q: q's estimates, its jitter at its highest as its windows
// read it, and p's tolerance (and connect timeout, where q shows none).
// ok is false when q's initial backoff is undetermined.
func policyOf(q *Policy, p backoff.Policy) (_ backoff.Policy, ok bool) {
	if !q.Initial.Determined() {
		return backoff.Policy{}, false
	}
	p.BaseDelay = fromMS(q.Initial.Value)
	p.Multiplier, p.Jitter, p.MaxDelay = 1, backoff.DefaultJitter, noCap
	if q.Multiplier.Determined() {
		p.Multiplier = max(q.Multiplier.Value, 1)
	}
	if q.Jitter.Determined() {
		p.Jitter = min(q.Jitter.High, 0.99)
	}
	if c := q.MaxBackoff; c.Reached && c.Determined() {
		p.MaxDelay = max(fromMS(c.Value), 1)
		if q.Shape == ShapeCappedAtOnce {
			// Interval 2 at the cap, above interval 1 or below it.
			p.Multiplier = max(c.Value/q.Initial.Value, 1)
		}
	}
	if q.ConnectTimeout.Determined() {
		p.MinConnectTimeout = fromMS(q.ConnectTimeout.Value)
	}
	return p, p.Validate() == nil
}

// peerScratch is what AppendPeer reads a chain into: every peer of a
// large capture is read again when written.
type peerScratch struct {
	times   []time.Time
	endings []backoff.Ending
	as      []Attempt
	sc      scratch
	iv      intervals
}

var peerPool = sync.Pool{New: func() any { return new(peerScratch) }}

// AppendPeer appends the "inferred" object of chain index (PeerInference's
// JSON): its fit and its verdict against its policy, read from its n
// attempts, attempt k's time and fate at(k), in time order (the peer's
// report, written from the chain just read).
func (r *Reading) AppendPeer(b []byte, index, n int, at func(k int) (time.Time, backoff.Ending)) []byte {
	ps := peerPool.Get().(*peerScratch)
	defer peerPool.Put(ps)
	times, endings := ps.times[:0], ps.endings[:0]
	for k := range n {
		t, e := at(k)
		times, endings = append(times, t), append(endings, e)
	}
	ps.times, ps.endings = times, endings
	pi := r.readChain(ps, times, endings, func(*Fit) (int, bool) {
		if index < len(r.of) {
			of := r.of[index]
			return max(0, int(of)), of == outlier
		}
		return 0, false
	})
	return pi.appendJSON(b)
}

// readChain reads a chain of times and fates into ps: its fit, the policy
// policyOf places it in (from 1; 0 for none, outlier when no policy
// explains it), and its verdict against that policy. The fit's intervals
// are ps's: the reading returned does not hold them.
func (r *Reading) readChain(ps *peerScratch, times []time.Time, endings []backoff.Ending, policyOf func(*Fit) (int, bool)) PeerInference {
	ps.as = AttemptsOf(r.policy, r.run, times, endings, ps.as[:0])
	pi := PeerInference{Fit: fitScratch(ps.as, &ps.sc)}
	pi.Policy, pi.Outlier = policyOf(&pi.Fit)
	pi.Fit.pts, pi.Fit.held = nil, nil
	if res, ok := r.verdict(pi.Policy, times, endings, &ps.iv); ok {
		v := &PolicyVerdict{Passed: res.Reference.Passed, FirstFailure: res.Reference.FirstFailure}
		for _, s := range backoff.Signatures(res) {
			v.Signatures = append(v.Signatures, s.Name)
		}
		pi.AgainstPolicy = v
	}
	return pi
}
