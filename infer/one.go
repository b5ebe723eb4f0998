package infer

import (
	"fmt"
	"strings"
	"time"

	"github.com/backoff-audit/audit/backoff"
)

// One chain at a time: `audit watch --infer` reads the policies of a
// sample of the chains it judged (Read), and each chain it judges after
// that against them, as it comes, without reading the sample again.

// ReadChain reads one chain that r did not read, its times and fates in
// time order (endings nil when none are known), as Read reads each of its
// own: its fit (FitChain, its attempts read as AttemptsOf reads them); the
// policy of r that explains it with the most likelihood, each policy's
// size its prior, as Cluster places a chain, or, when none does, an
// outlier; and its verdict against that policy. It reads the chain's
// attempts a few times, once per policy of r: linear in the attempts.
func (r *Reading) ReadChain(times []time.Time, endings []backoff.Ending) PeerInference {
	ps := peerPool.Get().(*peerScratch)
	defer peerPool.Put(ps)
	return r.readChain(ps, times, endings, func(f *Fit) (int, bool) { return r.place(f.pts) })
}

// place is the policy of r, from 1, that explains the chain of pts with
// the most likelihood (Fleet.place's score: the log of its peers less the
// log widths of its windows), or outlier when the chain has an interval
// and no policy explains it; a reading of no chain has nothing to hold it
// to.
func (r *Reading) place(pts []point) (policy int, outlier bool) {
	if len(pts) == 0 || r.Policies.Peers == 0 {
		return 0, false
	}
	j, _ := mostLikely(r.fleet, r.size, pts)
	return j + 1, j == NoPolicy
}

// MarshalJSON writes the peer's "inferred" object (docs/spec.md §8.6).
func (p *PeerInference) MarshalJSON() ([]byte, error) { return p.appendJSON(nil), nil }

// Text is the reading in a line: the chain's schedule in a few words, as
// a policy's (PolicyReport.Schedule), or why it is undetermined; the
// policy it runs or that it is an outlier; its verdict against that
// policy.
func (p *PeerInference) Text() string {
	f := &p.Fit
	var b strings.Builder
	if why := f.Initial.Undetermined; why != "" {
		b.WriteString("schedule undetermined (" + why + ")")
	} else {
		q := Policy{Params: f.Params, Differs: f.Compare(GRPCDefault)}
		q.Default = len(q.Differs) == 0 && f.Multiplier.Determined() && f.Jitter.Determined()
		pr := policyReport(0, &q, 1)
		b.WriteString(pr.Schedule())
		if why := f.Multiplier.Undetermined; why != "" {
			b.WriteString(" (multiplier undetermined: " + why + ")")
		}
	}
	switch {
	case p.Policy > 0:
		fmt.Fprintf(&b, "; policy #%d", p.Policy)
	case p.Outlier:
		b.WriteString("; outlier: no policy explains it")
	}
	switch v := p.AgainstPolicy; {
	case v == nil:
	case v.Passed:
		b.WriteString(", passes its windows")
	case v.FirstFailure > 0:
		fmt.Fprintf(&b, ", fails its windows at interval %d", v.FirstFailure)
	default:
		b.WriteString(", fails its windows")
	}
	if v := p.AgainstPolicy; v != nil && len(v.Signatures) > 0 {
		b.WriteString(" (" + strings.Join(v.Signatures, ", ") + ")")
	}
	return b.String()
}
