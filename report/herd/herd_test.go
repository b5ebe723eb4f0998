package herd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/internal/text"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// herdChains makes n peers of attempts each: peer i starts at
// trackStart + start(i) and waits gap(i, k) before attempt k.
func herdChains(n, attempts int, start func(i int) time.Duration, gap func(i, k int) time.Duration) []attempt.Chain {
	dst := netip.MustParseAddrPort("10.0.0.1:50052")
	chains := make([]attempt.Chain, n)
	for i := range chains {
		c := attempt.Chain{Peer: netip.AddrFrom4([4]byte{10, 2, byte(i >> 8), byte(i)})}
		t := trackStart.Add(start(i))
		for k := range attempts {
			if k > 0 {
				t = t.Add(gap(i, k))
			}
			c.Attempts = append(c.Attempts, attempt.Attempt{Time: t, Src: netip.AddrPortFrom(c.Peer, uint16(40000+k)), Dst: dst, Seq: uint32(k)})
		}
		chains[i] = c
	}
	return chains
}

// specGap is the spec's backoff before attempt k: E1 exactly, then
// E_k·U(0.8, 1.2) (docs/spec.md §1.1).
func specGap(r *rand.Rand) func(i, k int) time.Duration {
	p := backoff.DefaultPolicy()
	return func(_, k int) time.Duration {
		e := p.Expected(k)
		if k > 1 {
			e *= 0.8 + 0.4*r.Float64()
		}
		return time.Duration(e * float64(time.Millisecond))
	}
}

// flatGap is a client without jitter: E_k exactly.
func flatGap(_, k int) time.Duration {
	return time.Duration(backoff.DefaultPolicy().Expected(k) * float64(time.Millisecond))
}

func herdOf(chains []attempt.Chain) Reading {
	p := backoff.DefaultPolicy()
	peers := make([]Peer, len(chains))
	for i, c := range chains {
		times := make([]time.Time, len(c.Attempts))
		peers[i] = Peer{Addr: c.Peer, Times: make([]int64, len(c.Attempts))}
		for k, a := range c.Attempts {
			times[k], peers[i].Times[k] = a.Time, a.Time.UnixNano()
		}
		res := backoff.VerifyRun(p, times, backoff.Run{})
		peers[i].Verdict = res.Reference.Verdict
		for _, iv := range res.Intervals {
			if !iv.OK && !res.Reference.Passed {
				peers[i].Failed++
			}
		}
	}
	return Read(peers, p, backoff.RetryMode{})
}

// trackStart is when the peers' attempts begin.
var trackStart = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// requireKeys fails t unless the JSON object v has every key.
func requireKeys(t *testing.T, what string, v any, keys ...string) {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s is %T, want an object", what, v)
	}
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			t.Errorf("%s lacks %q", what, k)
		}
	}
}

// TestHerdRestartWave: 1000 peers whose server restarted, all failing
// within 50 ms, none jittering: every attempt is a wave, the ones after
// interval 2 and on ones the policy's jitter should have spread.
func TestHerdRestartWave(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const n, attempts = 1000, 8
	h := herdOf(herdChains(n, attempts, func(int) time.Duration { return time.Duration(r.IntN(50e6)) }, flatGap))
	if h.Peers != n || h.Attempts != n*attempts || h.Ks != attempts {
		t.Fatalf("peers, attempts, ks = %d, %d, %d, want %d, %d, %d", h.Peers, h.Attempts, h.Ks, n, n*attempts, attempts)
	}
	if len(h.Waves) != attempts {
		t.Fatalf("%d waves, want one per attempt (%d): %+v", len(h.Waves), attempts, h.Waves)
	}
	for _, w := range h.Waves {
		if w.Count != n || w.Share != 1 || w.SpanMS >= 50 {
			t.Errorf("wave %d: %d peers (share %v) within %.1f ms, want all %d within 50 ms", w.K, w.Count, w.Share, w.SpanMS, n)
		}
		if want := w.K < 2; w.Expected != want {
			t.Errorf("wave %d: expected = %v, want %v (policy share %.3f)", w.K, w.Expected, want, w.PolicyShare)
		}
	}
	if h.InWaves != n {
		t.Errorf("in_waves = %d, want %d", h.InWaves, n)
	}
	if len(h.Offenders) != maxOffenders || h.Offenders[0].Waves != attempts-2 {
		t.Errorf("offenders = %+v, want %d, each in %d waves", h.Offenders, maxOffenders, attempts-2)
	}
	for _, s := range h.Spread {
		if s.K >= 2 && (!s.Bunched || s.SDMS > 1) {
			t.Errorf("spread at k=%d: %+v, want bunched with no spread", s.K, s)
		}
	}
	var text bytes.Buffer
	if err := h.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"herd: 1000 peers, 8000 attempts",
		"herd wave at attempt 1: 1000 of 1000 peers (100.0 %)",
		"the peers started together",
		"herd wave at attempt 3: 1000 of 1000 peers (100.0 %)",
		"jitter should have spread these",
		"herd spread at attempt 3: bunched",
		"herd offenders, the peers in a wave the policy's jitter should have prevented (1000) or with a failing interval, worst first: 10.2.0.0 (6 unexpected waves)",
		"15 more in the JSON and HTML reports",
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
}

// TestHerdJitteredRestart: the same restart, every client jittering as the
// spec says. The first attempts and the un-jittered first backoff still
// come together, as the policy itself makes them; the later ones spread as
// widely as the jitter should, and no wave is the clients' fault.
func TestHerdJitteredRestart(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) { testHerdJitteredRestart(t, seed) })
	}
}

func testHerdJitteredRestart(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 4))
	const n, attempts = 1000, 8
	h := herdOf(herdChains(n, attempts, func(int) time.Duration { return time.Duration(r.IntN(50e6)) }, specGap(r)))
	var ks []int
	for _, w := range h.Waves {
		ks = append(ks, w.K)
		if !w.Expected {
			t.Errorf("wave %d not expected: %+v", w.K, w)
		}
	}
	if diff := cmp.Diff([]int{0, 1}, ks); diff != "" {
		t.Errorf("waves at k (-want +got):\n%s", diff)
	}
	if h.InWaves != 0 || len(h.Offenders) != 0 {
		t.Errorf("in_waves %d, offenders %+v; want none", h.InWaves, h.Offenders)
	}
	if len(h.Spread) != attempts-1 {
		t.Fatalf("%d spreads, want %d", len(h.Spread), attempts-1)
	}
	for _, s := range h.Spread {
		switch {
		case s.K == 1 && (s.ExpectedSDMS != 0 || s.SDMS > 1):
			t.Errorf("spread at k=1: %+v, want none expected and none measured", s)
		case s.K >= 2 && (s.Bunched || s.Ratio < 0.9 || s.Ratio > 1.1):
			t.Errorf("spread at k=%d: ratio %.3f (%+v), want about 1", s.K, s.Ratio, s)
		}
	}
}

// TestHerdWellJittered: clients that started apart and jitter make no wave
// at all, even with no jitter on the first backoff.
func TestHerdWellJittered(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	h := herdOf(herdChains(1000, 8, func(int) time.Duration { return time.Duration(r.Int64N(int64(60 * time.Second))) }, specGap(r)))
	if len(h.Waves) != 0 || h.InWaves != 0 {
		t.Errorf("waves %+v, in_waves %d; want none", h.Waves, h.InWaves)
	}
	if h.Peak.Count > 200 {
		t.Errorf("peak %+v: more than a fifth of the attempts in one second", h.Peak)
	}
}

// TestHerdThreshold: a wave needs MinShare of the peers, MinPeers
// of them, and more than the policy's jitter would bring together where
// it spreads the attempt; fewer peers than that make no herd at all.
func TestHerdThreshold(t *testing.T) {
	together := func(n int) func(i int) time.Duration {
		return func(i int) time.Duration {
			if i < n {
				return 0
			}
			return time.Duration(i) * time.Minute // apart, and never overlapping
		}
	}
	tests := []struct {
		name         string
		peers, synch int
		wantWaves    int
	}{
		{"third of 100", 100, 33, 3},
		// Attempt 2 of a fifth is not more than the policy's jitter
		// would bring together (its policy share is 0.22).
		{"fifth of 100", 100, 20, 2},
		{"below a fifth of 100", 100, 19, 0},
		{"all of 10", 10, 10, 3},
		{"9 of 45", 45, 9, 0}, // a fifth, but fewer than MinPeers
		{"too few peers", 9, 9, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := herdOf(herdChains(tt.peers, 3, together(tt.synch), flatGap))
			if len(h.Waves) != tt.wantWaves {
				t.Errorf("%d waves, want %d: %+v", len(h.Waves), tt.wantWaves, h.Waves)
			}
			if wantKs := 3; tt.peers < MinPeers {
				wantKs = 0
				if h.Ks != 0 || len(h.Spread) != 0 {
					t.Errorf("ks %d, spread %+v; want nothing examined", h.Ks, h.Spread)
				}
			} else if h.Ks != wantKs {
				t.Errorf("ks = %d, want %d", h.Ks, wantKs)
			}
		})
	}
}

// TestRate: the series counts every attempt in buckets of whole
// seconds, at most maxBuckets of them, and the peak is the densest
// second wherever it starts.
func TestRate(t *testing.T) {
	tests := []struct {
		name        string
		offsets     []time.Duration
		wantBucket  int64
		wantBuckets int
		wantPeak    Peak
	}{
		{"one second", []time.Duration{0, 300 * time.Millisecond, 999 * time.Millisecond}, 1000, 1, Peak{0, 3}},
		{"peak across buckets", []time.Duration{0, 1500 * time.Millisecond, 1900 * time.Millisecond, 2200 * time.Millisecond, 5 * time.Second},
			1000, 6, Peak{1500, 3}},
		{"three hours", []time.Duration{0, time.Hour, 3 * time.Hour}, 6000, 1801, Peak{0, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := attempt.Chain{Peer: netip.MustParseAddr("10.0.0.2")}
			for _, o := range tt.offsets {
				c.Attempts = append(c.Attempts, attempt.Attempt{Time: trackStart.Add(o)})
			}
			h := herdOf([]attempt.Chain{c})
			if h.Rate.BucketMS != tt.wantBucket || len(h.Rate.Counts) != tt.wantBuckets {
				t.Errorf("bucket %d ms × %d, want %d ms × %d", h.Rate.BucketMS, len(h.Rate.Counts), tt.wantBucket, tt.wantBuckets)
			}
			if len(h.Rate.Counts) > maxBuckets {
				t.Errorf("%d buckets, more than %d", len(h.Rate.Counts), maxBuckets)
			}
			sum := 0
			for _, c := range h.Rate.Counts {
				sum += c
			}
			if sum != len(tt.offsets) {
				t.Errorf("buckets count %d attempts, want %d", sum, len(tt.offsets))
			}
			if h.Peak != tt.wantPeak {
				t.Errorf("peak %+v, want %+v", h.Peak, tt.wantPeak)
			}
		})
	}
}

// TestHerdHangSpread: where attempts hang, each interval is at least the
// connect timeout (docs/spec.md §7.3), so the early intervals, below it,
// are not spread by the jitter; the first above it is.
func TestHerdHangSpread(t *testing.T) {
	p := backoff.DefaultPolicy()
	sds, ok := policySpread(p, backoff.RetryMode{Kind: backoff.ModeHang}, 9)
	if !ok {
		t.Fatal("hang mode: no spread expected")
	}
	// E_k·1.2 < 20 s up to k = 6 (E6 = 10485.76 ms); E7·1.2 = 20132 ms.
	for k := 0; k <= 6; k++ {
		if sds[k] != 0 {
			t.Errorf("k=%d: expected sd %.3f ms, want 0 below the connect timeout", k, sds[k])
		}
	}
	if sds[7] <= 0 || sds[7] >= 50 || sds[8] < 1000 {
		t.Errorf("expected sd at k=7, 8: %.3f, %.3f ms; want a little, then much more", sds[7], sds[8])
	}
	closeSDs, _ := policySpread(p, backoff.RetryMode{}, 3)
	if want := 0.2 * 1600 / math.Sqrt(3); math.Abs(closeSDs[2]-want) > 1e-9 {
		t.Errorf("close mode, k=2: expected sd %.6f ms, want %.6f", closeSDs[2], want)
	}
	if _, ok := policySpread(p, backoff.RetryMode{Kind: backoff.ModeGoaway}, 3); ok {
		t.Error("goaway: spread expected, want none (each success resets the backoff)")
	}
}

// TestMaxUniformVariance checks the variance of max(floor, U(a, b))
// against a numerical integration.
func TestMaxUniformVariance(t *testing.T) {
	for _, floor := range []float64{0, 1280, 1500, 1919, 1920, 5000} {
		a, b := 1280.0, 1920.0
		const steps = 200000
		var m1, m2 float64
		for i := range steps {
			x := max(floor, a+(b-a)*(float64(i)+0.5)/steps)
			m1 += x / steps
			m2 += x * x / steps
		}
		want := m2 - m1*m1
		if got := maxUniformVariance(floor, a, b); math.Abs(got-want) > 1e-3*max(want, 1) {
			t.Errorf("floor %v: variance %.4f, want %.4f", floor, got, want)
		}
	}
}

func TestHerdJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	h := herdOf(herdChains(50, 5, func(int) time.Duration { return time.Duration(r.IntN(20e6)) }, flatGap))
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	requireKeys(t, "herd", doc, "peers", "attempts", "start", "span_ms", "rate", "peak", "ks", "waves", "spread", "in_waves", "offenders")
	if got, want := doc["start"], h.Start.UTC().Format(text.TimeLayout); got != want || !h.Start.After(trackStart) {
		t.Errorf("start = %v, want %v", got, want)
	}
	requireKeys(t, "wave", doc["waves"].([]any)[0], "k", "peers", "count", "share", "at_ms", "span_ms", "policy_share", "expected")
	requireKeys(t, "offender", doc["offenders"].([]any)[0], "peer", "waves", "failed_intervals", "verdict")
	var back Reading
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(h, back, cmpopts.EquateComparable(netip.Addr{})); diff != "" {
		t.Errorf("read back (-want +got):\n%s", diff)
	}

	empty, err := json.Marshal(herdOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"waves":[]`, `"spread":[]`, `"offenders":[]`, `"counts":[]`} {
		if !bytes.Contains(empty, []byte(want)) {
			t.Errorf("empty herd %s lacks %s", empty, want)
		}
	}
}

// Twelve clients of a server that restarted come back at the same moments:
// the first attempts and the un-jittered first backoff together, as the
// policy makes them, and after that still together, as jitter should have
// prevented.
func ExampleReading_WriteText() {
	start := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	var peers []Peer
	for i := range 12 {
		p := Peer{Addr: netip.AddrFrom4([4]byte{10, 0, 1, byte(i + 1)}), Verdict: backoff.Passed}
		t := start.Add(time.Duration(i) * time.Millisecond)
		for _, gap := range []time.Duration{0, 1000 * time.Millisecond, 1600 * time.Millisecond, 2560 * time.Millisecond} {
			t = t.Add(gap)
			p.Times = append(p.Times, t.UnixNano())
		}
		peers = append(peers, p)
	}
	Read(peers, backoff.DefaultPolicy(), backoff.RetryMode{}).WriteText(os.Stdout)
	// Output:
	// herd: 12 peers, 48 attempts over 5.171 s from 2025-01-02T03:04:05.000000000Z; peak 12 attempts in the second from +0.000 s
	// herd wave at attempt 1: 12 of 12 peers (100.0 %) within 11.0 ms from +0.000 s: first attempts: the peers started together, as after a server restart
	// herd wave at attempt 2: 12 of 12 peers (100.0 %) within 11.0 ms from +1.000 s: the policy's jitter does not spread attempt 2 (it would hold 100 % of peers that started together here)
	// herd wave at attempt 3: 12 of 12 peers (100.0 %) within 11.0 ms from +2.600 s: jitter should have spread these: the policy's would hold 22 % here
	// herd wave at attempt 4: 12 of 12 peers (100.0 %) within 11.0 ms from +5.160 s: jitter should have spread these: the policy's would hold 11 % here
	// herd spread at attempt 3: bunched: its time from each peer's first attempt varies by 0.0 ms (sd) across 12 peers, the policy's jitter gives 184.8 ms (0.00×)
	// herd spread at attempt 4: bunched: its time from each peer's first attempt varies by 0.0 ms (sd) across 12 peers, the policy's jitter gives 348.6 ms (0.00×)
	// herd offenders, the peers in a wave the policy's jitter should have prevented (12) or with a failing interval, worst first: 10.0.1.1 (2 unexpected waves), 10.0.1.2 (2 unexpected waves), 10.0.1.3 (2 unexpected waves), 10.0.1.4 (2 unexpected waves), 10.0.1.5 (2 unexpected waves), 7 more in the JSON and HTML reports
}
