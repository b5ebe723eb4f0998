package infer

import (
	"cmp"
	"math"
	"runtime"
	"slices"
	"sync"
)

// Policy is one schedule a fleet runs, estimated from the intervals of
// every chain it explains pooled together (docs/spec.md §8.4). Times are
// in milliseconds.
type Policy struct {
	// Peers counts the chains it explains best; Ambiguous, those of them
	// that another policy explains too (short chains, mostly).
	Peers, Ambiguous int
	Params
	// FirstJitter is how interval 1 spreads around the initial backoff
	// (twice the median of |interval 1 / initial − 1|): about Jitter when
	// the first backoff is jittered (C-core since 2024, grpc-java), near 0
	// when it is exact (docs/spec.md §4.2).
	FirstJitter float64
	// FirstJittered says interval 1 spreads like the later ones.
	FirstJittered bool
	// StepCorrelation is the correlation of consecutive log steps before
	// the cap, from Steps pairs of steps: −0.5 when each backoff is
	// jittered on its own, 0 when jitter compounds (grpc-js).
	StepCorrelation float64
	Steps           int
	// Compounds says the steps read as compounding jitter: then the
	// multiplier and the jitter are those of the steps.
	Compounds bool
	// Default says the growth and the spread show and every parameter is
	// gRPC's default, within the tolerances of differs; Differs names
	// those that are not.
	Default bool
	Differs []string

	first   Estimate // interval 1's window, before the tolerance
	m       model
	ref     float64
	jitterE float64 // the jitter the windows use: the estimate's high bound, the spec's when undetermined
	stepG   float64 // the mean log step, when it compounds
	expect  []float64
}

// Fleet is the policies a set of chains runs (docs/spec.md §8.4).
type Fleet struct {
	// Policies, most peers first.
	Policies []Policy
	// Of is each chain's policy, an index into Policies, or NoPolicy.
	Of []int
	// Outliers are the chains with an interval that no policy explains,
	// in the order of the chains.
	Outliers []int
}

// NoPolicy is Fleet.Of for a chain no policy explains, or with no
// interval.
const NoPolicy = -1

// The search for policies (docs/spec.md §8.4).
const (
	// maxPolicies bounds the policies a fleet is searched for, and so
	// the passes over its chains.
	maxPolicies = 16
	// seedIntervals is how many intervals a chain needs to seed a policy.
	seedIntervals = 3
	// minPeers is how many chains a policy needs, in a fleet of at least
	// as many chains that can seed one.
	minPeers = 3
	// refineRounds is how many times a policy is estimated again from the
	// chains its last estimate explains.
	refineRounds = 2
	// binInitial and binMultiplier are the widths, in log, of the bins of
	// initial backoff and multiplier in which seeds are counted.
	binInitial    = 0.15
	binMultiplier = 0.08
	binWidest     = 1.25
	// corrCompounds is the step correlation above which jitter reads as
	// compounding, halfway between the two readings; minStepPairs is how
	// many pairs of steps that needs.
	corrCompounds = -0.25
	minStepPairs  = 20
	// jitterSample and refineSample bound the intervals a policy's
	// medians are read from (sampleOf), the last time and while it is
	// refined.
	jitterSample = 1 << 12
	refineSample = 1 << 11
	// refineReads is how many times refineSample intervals a policy's
	// refinement reads at most (refining): the chains it is estimated
	// again from are those it explains among an even sample of the
	// chains not yet placed, so that a large fleet is not read whole
	// for each refinement.
	refineReads = 8
	// maxJitter is the jitter from which a group is no policy: its windows
	// (±50 % and more) would explain almost any chain, and its chains
	// are outliers.
	maxJitter = 0.5
)

// Chains is a fleet's chains as Cluster reads them. Cluster keeps a few
// words of each (brief), not its intervals, and reads each chain again
// for each of its passes, a bounded number (docs/spec.md §8.4), from
// several goroutines at once: Attempts must be safe for concurrent calls.
type Chains interface {
	Len() int
	// Attempts returns chain i's attempts in time order, in buf's array.
	Attempts(i int, buf []Attempt) []Attempt
}

// brief is what Cluster keeps of a chain between its passes: how many
// intervals it has, its largest backoff index, the bin it seeds in, and
// its first interval (its backoff index, length and the attempt's
// duration before it), by which a policy rejects most chains it does not
// explain without reading them again (rejects).
type brief struct {
	intervals, maxK int32
	bin             [2]int32
	k0              int32
	ms0, before0    float32
}

// fleet is the chains Cluster reads and their briefs.
type fleet struct {
	ch     Chains
	briefs []brief
	// kept holds the intervals and held attempts of the chains the first
	// pass read, up to keptPoints of them in all: the later passes read
	// only the others again.
	kept map[int32]keptChain
}

// keptChain is a chain's intervals and held attempts, as pointsOf reads
// them.
type keptChain struct{ pts, held []point }

// keptPoints bounds the intervals and held attempts Cluster keeps between
// its passes, about 32 bytes each: a fleet of up to that many is read
// once, and a larger one keeps that many and reads the rest again for
// each pass, its memory bounded whatever the capture.
const keptPoints = 1 << 18

// scratch is a goroutine's buffers for reading chains.
type scratch struct {
	as        []Attempt
	pts, held []point
}

// points reads chain i's intervals and the attempts the client gave up
// on (pointsOf), in sc's buffers.
func (fl *fleet) points(i int, sc *scratch) (pts, held []point) {
	if k, ok := fl.kept[int32(i)]; ok {
		return k.pts, k.held
	}
	sc.as = fl.ch.Attempts(i, sc.as[:0])
	sc.pts, sc.held, _ = pointsOf(sc.as, sc.pts[:0], sc.held[:0])
	return sc.pts, sc.held
}

// Cluster finds the few policies that explain the chains of ch and places
// each chain in the one that explains it best. A chain that no policy
// explains is an outlier. It fits each chain once (FitChain) and reads
// each chain's intervals a bounded number of times: linear in the
// attempts, in memory a few words a chain.
func Cluster(ch Chains) Fleet {
	n := ch.Len()
	fl := &fleet{ch: ch, briefs: make([]brief, n), kept: map[int32]keptChain{}}
	var mu sync.Mutex
	each(n, func(from, to int) {
		var sc scratch
		// The points this goroutine keeps, in one array, and where each
		// chain's are in it.
		var arena []point
		type at struct{ i, from, pts, held int32 }
		var ats []at
		budget := keptPoints * (to - from) / max(n, 1)
		for i := from; i < to; i++ {
			sc.as = ch.Attempts(i, sc.as[:0])
			f := fitScratch(sc.as, &sc)
			if m := len(f.pts) + len(f.held); m > 0 && len(arena)+m <= budget {
				ats = append(ats, at{int32(i), int32(len(arena)), int32(len(f.pts)), int32(len(f.held))})
				arena = append(append(arena, f.pts...), f.held...)
			}
			b := brief{intervals: int32(f.Intervals), maxK: int32(f.maxK)}
			if len(f.pts) > 0 {
				pt := f.pts[0]
				b.k0, b.ms0, b.before0 = pt.k, float32(pt.ms), float32(pt.before)
			}
			if f.Intervals >= seedIntervals {
				b.bin = binOf(&f)
			}
			fl.briefs[i] = b
		}
		mu.Lock()
		defer mu.Unlock()
		for _, a := range ats {
			p := a.from + a.pts
			fl.kept[a.i] = keptChain{pts: arena[a.from:p:p], held: arena[p : p+a.held : p+a.held]}
		}
	})
	fleet := Fleet{Of: make([]int, n)}
	for i := range fleet.Of {
		fleet.Of[i] = NoPolicy
	}
	seeds, maxK := 0, 0
	for _, b := range fl.briefs {
		if b.intervals >= seedIntervals {
			seeds++
		}
		maxK = max(maxK, int(b.maxK))
	}
	need := max(min(minPeers, seeds), 1)
	taken := make([]bool, n) // placed in a policy, or tried as a seed in vain
	bins, coarse := map[[2]int32][]int{}, map[[2]int32][]int{}
	for len(fleet.Policies) < maxPolicies {
		clear(bins)
		clear(coarse)
		for i, b := range fl.briefs {
			if !taken[i] && b.intervals >= seedIntervals {
				key := b.bin
				bins[key] = append(bins[key], i)
				key[1] = 0
				coarse[key] = append(coarse[key], i)
			}
		}
		// A few chains, their multipliers unsure, may fall in bins of
		// their own: then by initial backoff alone.
		best := fullest(bins)
		if len(best) < need {
			best = fullest(coarse)
		}
		if len(best) < need {
			break
		}
		p, in := fl.estimate(best, false), best
		p.prepare(maxK)
		refining := fl.refining(taken)
		for range refineRounds {
			in = p.explained(fl, refining)
			if len(in) < need {
				break
			}
			p = fl.estimate(in, false)
			p.prepare(maxK)
		}
		if in = p.explained(fl, taken); len(in) < need || p.Jitter.Determined() && p.Jitter.Value >= maxJitter {
			for _, i := range best {
				taken[i] = true
			}
			continue
		}
		for _, i := range in {
			taken[i] = true
		}
		p.Peers = len(in)
		fleet.Policies = append(fleet.Policies, p)
	}
	fleet.place(fl)
	return fleet
}

// binOf is the bin in which a chain seeds: its initial backoff and its
// multiplier (1 when flat, 0 when it does not show or its interval is
// wider than ±binWidest), on log scales.
func binOf(f *Fit) [2]int32 {
	m := int32(0)
	switch {
	case f.Shape == ShapeFlat:
		m = 1
	case f.Multiplier.Determined() && f.Multiplier.High <= f.Multiplier.Low*binWidest*binWidest:
		m = 2 + int32(math.Round(math.Log(f.Multiplier.Value)/binMultiplier))
	}
	return [2]int32{int32(math.Round(math.Log(f.Initial.Value) / binInitial)), m}
}

// fullest is the bin with the most chains, the least key of those.
func fullest(bins map[[2]int32][]int) []int {
	var best []int
	var bestKey [2]int32
	for key, b := range bins {
		if len(b) > len(best) || len(b) == len(best) && cmpKey(key, bestKey) < 0 {
			best, bestKey = b, key
		}
	}
	return best
}

func cmpKey(a, b [2]int32) int {
	if c := cmp.Compare(a[0], b[0]); c != 0 {
		return c
	}
	return cmp.Compare(a[1], b[1])
}

// refining returns, as a set of chains taken, all but an even sample of
// the chains not taken of about refineReads·refineSample intervals, those
// a policy is refined from. A fleet of fewer intervals is refined from
// every chain not taken.
func (fl *fleet) refining(taken []bool) []bool {
	n := 0
	for i, b := range fl.briefs {
		if !taken[i] {
			n += int(b.intervals)
		}
	}
	step := n / (refineReads * refineSample)
	if step <= 1 {
		return taken
	}
	out := make([]bool, len(taken))
	for i := range out {
		out[i] = true
	}
	for i, seen := 0, 0; i < len(taken); i++ {
		if !taken[i] && fl.briefs[i].intervals > 0 {
			if seen%step == 0 {
				out[i] = false
			}
			seen++
		}
	}
	return out
}

// explained returns the chains with an interval, not taken, that p
// explains.
func (p *Policy) explained(fl *fleet, taken []bool) []int {
	ok := make([]bool, len(fl.briefs))
	each(len(fl.briefs), func(from, to int) {
		var sc scratch
		for i := from; i < to; i++ {
			if !taken[i] && fl.briefs[i].intervals > 0 && !p.rejects(&fl.briefs[i]) {
				pts, _ := fl.points(i, &sc)
				_, ok[i] = p.explains(pts, false)
			}
		}
	})
	var in []int
	for i, y := range ok {
		if y {
			in = append(in, i)
		}
	}
	return in
}

// eachBatch is the fewest chains a goroutine of each reads.
const eachBatch = 1024

// each calls work on [0, n) split over the cores: the passes over every
// chain of a fleet, which read the policies and write only their own
// chains' slots.
func each(n int, work func(from, to int)) {
	workers := max(1, min(runtime.GOMAXPROCS(0), n/eachBatch))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() { work(n*w/workers, n*(w+1)/workers) })
	}
	wg.Wait()
}

// rejected reports whether every policy rejects the chain of b.
func (fl *Fleet) rejected(b *brief) bool {
	for j := range fl.Policies {
		if !fl.Policies[j].rejects(b) {
			return false
		}
	}
	return true
}

// place puts each chain with an interval in the policy that explains it
// with the most likelihood (mostLikely), the policy's size as found its prior (the log
// of its peers less the log widths of the windows), estimates each policy
// again from its chains, drops those left with none, and names the
// outliers.
func (fl *Fleet) place(chains *fleet) {
	briefs := chains.briefs
	size := sizes(fl.Policies)
	members := make([][]int, len(fl.Policies))
	ambiguous := make([]int, len(fl.Policies))
	best := make([]int, len(briefs))
	also := make([]bool, len(briefs))
	each(len(briefs), func(from, to int) {
		var sc scratch
		for i := from; i < to; i++ {
			best[i] = NoPolicy
			if briefs[i].intervals == 0 || fl.rejected(&briefs[i]) {
				continue
			}
			pts, _ := chains.points(i, &sc)
			var n int
			best[i], n = mostLikely(fl.Policies, size, pts)
			also[i] = n > 1
		}
	})
	for i, j := range best {
		switch {
		case j != NoPolicy:
			members[j] = append(members[j], i)
			if also[i] {
				ambiguous[j]++
			}
		case briefs[i].intervals > 0:
			fl.Outliers = append(fl.Outliers, i)
		}
	}
	var kept []Policy
	for j, ms := range members {
		if len(ms) == 0 {
			continue
		}
		p := chains.estimate(ms, true)
		p.Peers, p.Ambiguous = len(ms), ambiguous[j]
		for _, i := range ms {
			fl.Of[i] = len(kept)
		}
		kept = append(kept, p)
	}
	order := make([]int, len(kept))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(kept[b].Peers, kept[a].Peers) })
	rank := make([]int, len(kept))
	fl.Policies = make([]Policy, len(kept))
	for r, i := range order {
		rank[i] = r
		fl.Policies[r] = kept[i]
	}
	for i, j := range fl.Of {
		if j != NoPolicy {
			fl.Of[i] = rank[j]
		}
	}
}

// sizes is each policy's prior: the log of its peers.
func sizes(ps []Policy) []float64 {
	size := make([]float64, len(ps))
	for i, p := range ps {
		size[i] = math.Log(float64(p.Peers))
	}
	return size
}

// mostLikely is the policy of ps that explains the chain of pts with the
// most likelihood, size[j] policy j's prior (sizes): the log of its peers
// less the log widths of its windows; NoPolicy when none explains it. n
// counts the policies that do.
func mostLikely(ps []Policy, size []float64, pts []point) (best, n int) {
	best, bestScore := NoPolicy, math.Inf(-1)
	for j := range ps {
		w, ok := ps[j].explains(pts, true)
		if !ok {
			continue
		}
		n++
		if s := size[j] - w; s > bestScore {
			best, bestScore = j, s
		}
	}
	return best, n
}
