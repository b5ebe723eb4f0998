package herd

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/internal/text"
)

// The herd reading: how a capture's peers reconnect together. Jitter is in
// the spec so that clients that lost a server at the same moment do not
// come back at the same moment (docs/spec.md §1.1: every backoff after the
// first is drawn within ±JITTER of its value). When a server restarts, all
// its clients fail at once and their attempt k falls, without jitter, at
// the same instant for every one: a wave. The reading finds the waves,
// measures how far jitter spread each attempt across peers against how
// far the policy's jitter would, and names the peers that joined the
// waves jitter should have prevented.

// Bounds of the herd reading.
const (
	// Window is the width of a wave: attempts within it arrive "at the
	// same moment".
	Window = 100 * time.Millisecond
	// MinPeers is the fewest peers that make a herd: an attempt k is
	// examined only when at least this many peers made it, and a wave holds
	// at least this many.
	MinPeers = 10
	// MinShare is the least share of the peers making attempt k that a
	// wave holds.
	MinShare = 0.2
	// maxBuckets bounds the attempts-per-second series: its buckets
	// grow by whole seconds so that a capture of any length has at most
	// this many.
	maxBuckets = 2000
	// maxK bounds the attempts examined per peer: a tight loop makes
	// thousands, and its first ones show the pattern.
	maxK = 128
	// maxOffenders bounds the offenders listed; textOffenders those
	// the text names.
	maxOffenders  = 20
	textOffenders = 5
	// bunched: a spread below this share of the policy's is bunched.
	bunched = 0.5
	// above: a wave is more than the policy's jitter explains when it
	// holds this many times the share the jitter gives.
	above = 1.5
	// unspread: the policy does not spread an attempt when its jitter
	// would hold this share of peers that started together in one window.
	unspread = 0.5
)

// Reading is the herd reading of a set of peers. Times are in ms from
// Start, the first attempt of any peer.
type Reading struct {
	// Peers counts the peers with at least one attempt; Attempts their
	// attempts.
	Peers    int       `json:"peers"`
	Attempts int       `json:"attempts"`
	Start    time.Time `json:"start"`
	// SpanMS is the time from the first attempt to the last.
	SpanMS float64 `json:"span_ms"`
	// Rate is the attempts of every peer over time.
	Rate Rate `json:"rate"`
	// Peak is the densest second.
	Peak Peak `json:"peak"`
	// Ks is how many attempts per peer were examined for waves and
	// spread: k = 0 … Ks−1, those at least MinPeers peers made, at
	// most maxK.
	Ks int `json:"ks"`
	// Waves lists, by k, the attempts that at least MinShare of the
	// peers making them (and at least MinPeers) made within
	// Window of one another: those more than the policy's jitter
	// explains, and those the policy does not spread at all (attempt 0,
	// and attempt 1 after the un-jittered first backoff).
	Waves []Wave `json:"waves"`
	// Spread says, for each k ≥ 1 examined, how widely t_k − t_0 varies
	// across peers against how widely the policy's jitter would make it
	// vary. Empty in the modes where each connection succeeds and resets
	// the backoff (docs/spec.md §7.3): there is no k-th backoff to spread.
	Spread []Spread `json:"spread"`
	// InWaves counts the peers in at least one wave the policy's jitter
	// should have prevented (a wave not Expected).
	InWaves int `json:"in_waves"`
	// Offenders are the peers in the most unexpected waves, then failing
	// the most intervals; at most maxOffenders.
	Offenders []Offender `json:"offenders"`
}

// Rate is a series of attempt counts: Counts[i] attempts in
// [Start + i·BucketMS, Start + (i+1)·BucketMS). BucketMS is a whole number
// of seconds, the smallest that keeps the series within maxBuckets.
type Rate struct {
	BucketMS int64 `json:"bucket_ms"`
	Counts   []int `json:"counts"`
}

// Peak is the second with the most attempts: [AtMS, AtMS + 1000).
type Peak struct {
	AtMS  float64 `json:"at_ms"`
	Count int     `json:"count"`
}

// Wave is attempt k (0 for the first attempt, k for the one after
// interval k) made by many peers at the same moment.
type Wave struct {
	K int `json:"k"`
	// Peers counts the peers that made attempt k; Count those of them
	// whose attempt k lies in the window [AtMS, AtMS + Window), the
	// densest there is. Share is Count/Peers.
	Peers int     `json:"peers"`
	Count int     `json:"count"`
	Share float64 `json:"share"`
	AtMS  float64 `json:"at_ms"`
	// SpanMS is the time from the first attempt in the window to the last.
	SpanMS float64 `json:"span_ms"`
	// PolicyShare is the share that the policy's jitter alone would put in
	// the densest window, had every peer made attempt 0 at the same moment:
	// 1 where the policy does not jitter (attempt 0, and attempt 1 after
	// the un-jittered first backoff, docs/spec.md §1.1).
	PolicyShare float64 `json:"policy_share"`
	// Expected says the policy's jitter explains the wave: Share is below
	// above × PolicyShare. Such a wave comes from peers that started
	// together (a restart), not from a client that fails to jitter.
	Expected bool `json:"expected"`
}

// Spread compares the spread of t_k − t_0 across peers with what the
// policy's jitter gives.
type Spread struct {
	K     int `json:"k"`
	Peers int `json:"peers"`
	// SDMS is the standard deviation of t_k − t_0 across the peers that
	// made attempt k; ExpectedSDMS what the policy's jitter gives it, each
	// backoff drawn uniformly within ±JITTER (docs/spec.md §1.1) and, in
	// a mode where attempts hang, each interval at least the connect
	// timeout (docs/spec.md §7.3).
	SDMS         float64 `json:"sd_ms"`
	ExpectedSDMS float64 `json:"expected_sd_ms"`
	// Ratio is SDMS / ExpectedSDMS, 0 when ExpectedSDMS is 0; Bunched says
	// the peers are bunched: Ratio below bunched where the policy
	// spreads them.
	Ratio   float64 `json:"ratio"`
	Bunched bool    `json:"bunched"`
}

// Offender is a peer in the herd's waves, or failing its intervals.
type Offender struct {
	Peer netip.Addr `json:"peer"`
	// Waves counts the unexpected waves (not Expected) the peer was in.
	Waves int `json:"waves"`
	// Failed counts its failing intervals.
	Failed  int             `json:"failed_intervals"`
	Verdict backoff.Verdict `json:"verdict"`
}

// Peer is what the reading needs of one peer: its address, its attempts'
// times (Unix ns, in time order), its failing intervals and its verdict.
type Peer struct {
	Addr    netip.Addr
	Times   []int64
	Failed  int
	Verdict backoff.Verdict
}

// attemptAt is peer's attempt at t (Unix ns).
type attemptAt struct {
	t    int64
	peer int32
}

// Read is the herd reading of peers held to policy p in retry mode m.
func Read(peers []Peer, p backoff.Policy, m backoff.RetryMode) Reading {
	h := Reading{Waves: []Wave{}, Spread: []Spread{}, Offenders: []Offender{}, Rate: Rate{BucketMS: 1000, Counts: []int{}}}
	var all []int64
	maxLen := 0
	for _, hp := range peers {
		if len(hp.Times) == 0 {
			continue
		}
		h.Peers++
		all = append(all, hp.Times...)
		maxLen = max(maxLen, len(hp.Times))
	}
	h.Attempts = len(all)
	if len(all) == 0 {
		return h
	}
	slices.Sort(all)
	start := all[0]
	h.Start = time.Unix(0, start).UTC()
	h.SpanMS = nsMS(all[len(all)-1] - start)
	h.Rate = rateOf(all)
	h.Peak = peakOf(all)

	// byK[k] holds attempt k of every peer that made it; k is examined
	// while at least MinPeers peers made it.
	reached := make([]int, maxLen)
	for _, hp := range peers {
		for k := range hp.Times {
			reached[k]++
		}
	}
	for h.Ks < min(maxLen, maxK) && reached[h.Ks] >= MinPeers {
		h.Ks++
	}
	byK := make([][]attemptAt, h.Ks)
	for k := range byK {
		byK[k] = make([]attemptAt, 0, reached[k])
	}
	for i, hp := range peers {
		for k := 0; k < len(hp.Times) && k < h.Ks; k++ {
			byK[k] = append(byK[k], attemptAt{hp.Times[k], int32(i)})
		}
	}

	sds, spread := policySpread(p, m, h.Ks)
	waves := make([]int, len(peers)) // unexpected waves per peer
	for k, at := range byK {
		slices.SortFunc(at, func(a, b attemptAt) int { return cmp.Compare(a.t, b.t) })
		w, from := densest(at)
		w.K = k
		w.AtMS = nsMS(at[from].t - start)
		if w.judge(sds[k]) {
			h.Waves = append(h.Waves, w)
			if !w.Expected {
				for _, a := range at[from : from+w.Count] {
					waves[a.peer]++
				}
			}
		}
		if k > 0 && spread {
			h.Spread = append(h.Spread, spreadOf(peers, at, k, sds[k]))
		}
	}

	var offenders []Offender
	for i, hp := range peers {
		if waves[i] > 0 {
			h.InWaves++
		}
		if waves[i] > 0 || hp.Failed > 0 {
			offenders = append(offenders, Offender{Peer: hp.Addr, Waves: waves[i], Failed: hp.Failed, Verdict: hp.Verdict})
		}
	}
	slices.SortFunc(offenders, func(a, b Offender) int {
		return cmp.Or(-cmp.Compare(a.Waves, b.Waves), -cmp.Compare(a.Failed, b.Failed),
			cmp.Compare(a.Verdict.Rank(), b.Verdict.Rank()), a.Peer.Compare(b.Peer))
	})
	h.Offenders = append(h.Offenders, offenders[:min(len(offenders), maxOffenders)]...)
	return h
}

func nsMS(ns int64) float64 { return float64(ns) / 1e6 }

// judge sets w's Share, PolicyShare and Expected from its Peers and Count,
// sd being the spread the policy's jitter gives its attempt, and reports
// whether the herd reading lists it. A wave the jitter explains is listed
// only where the policy does not spread the attempt at all: elsewhere it
// is the jitter's own unevenness.
func (w *Wave) judge(sd float64) bool {
	w.Share = float64(w.Count) / float64(max(w.Peers, 1))
	w.PolicyShare = policyShare(sd)
	w.Expected = w.Share < above*w.PolicyShare
	return w.Count >= MinPeers && w.Share >= MinShare && (!w.Expected || w.PolicyShare >= unspread)
}

// rateOf counts the sorted times all by bucket of whole seconds.
func rateOf(all []int64) Rate {
	span := all[len(all)-1] - all[0]
	secs := span/int64(time.Second) + 1
	bucket := (secs + maxBuckets - 1) / maxBuckets // whole seconds
	bucketNS := bucket * int64(time.Second)
	counts := make([]int, span/bucketNS+1)
	for _, t := range all {
		counts[(t-all[0])/bucketNS]++
	}
	return Rate{BucketMS: bucket * 1000, Counts: counts}
}

// peakOf finds the densest second of the sorted times all.
func peakOf(all []int64) Peak {
	var pk Peak
	i := 0
	for j, t := range all {
		for t-all[i] >= int64(time.Second) {
			i++
		}
		if n := j - i + 1; n > pk.Count {
			pk = Peak{AtMS: nsMS(all[i] - all[0]), Count: n}
		}
	}
	return pk
}

// densest finds the Window holding the most of the sorted attempts at:
// the wave's counts, and the index of its first attempt.
func densest(at []attemptAt) (Wave, int) {
	w := Wave{Peers: len(at)}
	from, i := 0, 0
	for j := range at {
		for at[j].t-at[i].t >= int64(Window) {
			i++
		}
		if n := j - i + 1; n > w.Count {
			w.Count, from = n, i
			w.SpanMS = nsMS(at[j].t - at[i].t)
		}
	}
	w.Share = float64(w.Count) / float64(len(at))
	return w, from
}

// policySpread returns, for k < ks, the standard deviation in ms that the
// policy's jitter gives t_k − t_0: the sum of independent intervals, the
// first un-jittered (docs/spec.md §1.1), each later one E·U(1−J, 1+J), and
// at least the connect timeout after an attempt that hung (docs/spec.md
// §7.3). In the modes where each connection succeeds, the backoff resets
// and the client comes back at once (docs/spec.md §7.3): nothing spreads
// the attempts, every deviation is 0 and spread is false.
func policySpread(p backoff.Policy, m backoff.RetryMode, ks int) (sds []float64, spread bool) {
	sds = make([]float64, ks)
	if m.Succeeds() {
		return sds, false
	}
	floor := 0.0
	if m.Hangs() {
		floor = backoff.Millis(p.MinConnectTimeout)
	}
	variance, e := 0.0, p.Expected(1)
	for k := 1; k < ks; k++ {
		if k > 1 {
			variance += maxUniformVariance(floor, e*(1-p.Jitter), e*(1+p.Jitter))
		}
		sds[k] = math.Sqrt(variance)
		e = p.Next(e)
	}
	return sds, true
}

// maxUniformVariance is the variance of max(floor, X), X uniform on [a, b].
func maxUniformVariance(floor, a, b float64) float64 {
	switch {
	case b <= a || floor >= b:
		return 0
	case floor <= a:
		return (b - a) * (b - a) / 12
	}
	below := (floor - a) / (b - a) // the chance that X < floor
	mean := below*floor + (b*b-floor*floor)/(2*(b-a))
	square := below*floor*floor + (b*b*b-floor*floor*floor)/(3*(b-a))
	return max(square-mean*mean, 0)
}

// policyShare is the share of peers that started together which the
// policy's jitter, of standard deviation sd ms, puts in the densest
// Window: the peak density of a normal of that deviation (a sum of
// uniform backoffs is close to one; a single uniform is flatter) times the
// window, at most 1.
func policyShare(sd float64) float64 {
	if sd <= 0 {
		return 1
	}
	return min(1, backoff.Millis(Window)/(math.Sqrt(2*math.Pi)*sd))
}

// spreadOf measures the spread of t_k − t_0 over the peers whose attempt k
// is in at.
func spreadOf(peers []Peer, at []attemptAt, k int, expected float64) Spread {
	var sum, sum2 float64
	for _, a := range at {
		d := nsMS(a.t - peers[a.peer].Times[0])
		sum += d
		sum2 += d * d
	}
	n := float64(len(at))
	mean := sum / n
	s := Spread{K: k, Peers: len(at), SDMS: math.Sqrt(max(sum2/n-mean*mean, 0)), ExpectedSDMS: expected}
	if expected > 0 {
		s.Ratio = s.SDMS / expected
		s.Bunched = s.Ratio < bunched
	}
	return s
}

// readingJSON is Reading with its start written as the reports write times.
type readingJSON struct {
	Peers     int        `json:"peers"`
	Attempts  int        `json:"attempts"`
	Start     text.Time  `json:"start"`
	SpanMS    float64    `json:"span_ms"`
	Rate      Rate       `json:"rate"`
	Peak      Peak       `json:"peak"`
	Ks        int        `json:"ks"`
	Waves     []Wave     `json:"waves"`
	Spread    []Spread   `json:"spread"`
	InWaves   int        `json:"in_waves"`
	Offenders []Offender `json:"offenders"`
}

// MarshalJSON writes {"peers","attempts","start","span_ms","rate":
// {"bucket_ms","counts"},"peak":{"at_ms","count"},"ks","waves":[{"k",
// "peers","count","share","at_ms","span_ms","policy_share","expected"}],
// "spread":[{"k","peers","sd_ms","expected_sd_ms","ratio","bunched"}],
// "in_waves","offenders":[{"peer","waves","failed_intervals","verdict"}]},
// the start in TimeLayout; lists are [] when empty, never null.
func (h Reading) MarshalJSON() ([]byte, error) {
	j := readingJSON{h.Peers, h.Attempts, text.Time(h.Start), h.SpanMS, h.Rate, h.Peak, h.Ks,
		h.Waves, h.Spread, h.InWaves, h.Offenders}
	if j.Waves == nil {
		j.Waves = []Wave{}
	}
	if j.Spread == nil {
		j.Spread = []Spread{}
	}
	if j.Offenders == nil {
		j.Offenders = []Offender{}
	}
	if j.Rate.Counts == nil {
		j.Rate.Counts = []int{}
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (h *Reading) UnmarshalJSON(b []byte) error {
	var j readingJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*h = Reading{j.Peers, j.Attempts, time.Time(j.Start), j.SpanMS, j.Rate, j.Peak, j.Ks,
		j.Waves, j.Spread, j.InWaves, j.Offenders}
	return nil
}

// Note says in words why a wave came: what a person reads beside it.
func (w Wave) Note() string {
	switch {
	case w.K == 0:
		return "first attempts: the peers started together, as after a server restart"
	case w.Expected:
		return fmt.Sprintf("the policy's jitter does not spread attempt %d (it would hold %.0f %% of peers that started together here)", w.K+1, w.PolicyShare*100)
	}
	return fmt.Sprintf("jitter should have spread these: the policy's would hold %.0f %% here", w.PolicyShare*100)
}

// WriteText writes the herd reading for a person: a line on the attempts
// over time, one per wave, one per bunched attempt and one summing up the
// others' spread, and the offenders.
func (h Reading) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	if h.Attempts == 0 {
		fmt.Fprintln(bw, "herd: no attempts")
		return bw.Flush()
	}
	fmt.Fprintf(bw, "herd: %s, %s over %.3f s from %s; peak %s in the second from +%.3f s\n",
		text.Plural(h.Peers, "peer"), text.Plural(h.Attempts, "attempt"), h.SpanMS/1000,
		h.Start.UTC().Format(text.TimeLayout), text.Plural(h.Peak.Count, "attempt"), h.Peak.AtMS/1000)
	if h.Ks == 0 {
		fmt.Fprintf(bw, "herd: fewer than %d peers made any attempt: no waves or spread to read\n", MinPeers)
		return bw.Flush()
	}
	for _, wv := range h.Waves {
		fmt.Fprintf(bw, "herd wave at attempt %d: %d of %d peers (%.1f %%) within %.1f ms from +%.3f s: %s\n",
			wv.K+1, wv.Count, wv.Peers, wv.Share*100, wv.SpanMS, wv.AtMS/1000, wv.Note())
	}
	if len(h.Waves) == 0 {
		fmt.Fprintf(bw, "herd: no wave: no attempt made by %d %% of the peers within %v\n", int(MinShare*100), Window)
	}
	lo, hi, others := math.Inf(1), math.Inf(-1), 0
	for _, s := range h.Spread {
		switch {
		case s.Bunched:
			fmt.Fprintf(bw, "herd spread at attempt %d: bunched: its time from each peer's first attempt varies by %.1f ms (sd) across %s, the policy's jitter gives %.1f ms (%.2f×)\n",
				s.K+1, s.SDMS, text.Plural(s.Peers, "peer"), s.ExpectedSDMS, s.Ratio)
		case s.ExpectedSDMS > 0:
			lo, hi, others = min(lo, s.Ratio), max(hi, s.Ratio), others+1
		}
	}
	if others > 0 {
		fmt.Fprintf(bw, "herd spread: %s spread %.2f–%.2f× as widely as the policy's jitter would\n",
			text.Plural(others, "other attempt"), lo, hi)
	}
	if len(h.Offenders) > 0 {
		var parts []string
		for _, o := range h.Offenders[:min(len(h.Offenders), textOffenders)] {
			var what []string
			if o.Waves > 0 {
				what = append(what, text.Plural(o.Waves, "unexpected wave"))
			}
			if o.Failed > 0 {
				what = append(what, text.Plural(o.Failed, "failing interval"))
			}
			parts = append(parts, fmt.Sprintf("%s (%s)", o.Peer, strings.Join(what, ", ")))
		}
		if more := len(h.Offenders) - len(parts); more > 0 {
			parts = append(parts, fmt.Sprintf("%d more in the JSON and HTML reports", more))
		}
		fmt.Fprintf(bw, "herd offenders, the peers in a wave the policy's jitter should have prevented (%d) or with a failing interval, worst first: %s\n",
			h.InWaves, strings.Join(parts, ", "))
	}
	return bw.Flush()
}
