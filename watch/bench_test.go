package watch

import (
	"io"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
)

// BenchmarkWatchFlood: what a Watch spends on each SYN of the SYN-load
// benchmark's flood (.ci/synload.sh): 251 peers, every SYN a new attempt
// refused by an RST, a Tick every 250 ms of packet time.
func BenchmarkWatchFlood(b *testing.B) {
	benchmarkFlood(b, Config{Policy: backoff.DefaultPolicy(), FatesKnown: true}, 0)
}

// BenchmarkWatchFloodInfer is the flood with Config.Infer, the policies
// read every second of packet time rather than every minute. Each peer's
// one chain is judged at its 64th attempt: what --infer adds is each
// judged chain's reading, and this flood judges few.
func BenchmarkWatchFloodInfer(b *testing.B) {
	benchmarkFlood(b, Config{Policy: backoff.DefaultPolicy(), FatesKnown: true, Infer: true, InferEvery: time.Second}, 0)
}

// BenchmarkWatchChains is the flood with every 8th attempt of a peer a
// success (the server's SETTINGS): a chain judged every 8 SYNs, each a
// line (its intervals fail the spec's windows).
func BenchmarkWatchChains(b *testing.B) {
	benchmarkFlood(b, Config{Policy: backoff.DefaultPolicy(), FatesKnown: true}, 8)
}

// BenchmarkWatchChainsInfer is BenchmarkWatchChains with Config.Infer,
// the policies read every second of packet time: each chain's reading
// (its fit, its place among the policies, its verdict against its
// policy, its JSON) and the sample's.
func BenchmarkWatchChainsInfer(b *testing.B) {
	benchmarkFlood(b, Config{Policy: backoff.DefaultPolicy(), FatesKnown: true, Infer: true, InferEvery: time.Second}, 8)
}

// benchmarkFlood feeds w the flood; with succeedEvery, every
// succeedEvery-th attempt of a peer succeeds.
func benchmarkFlood(b *testing.B, cfg Config, succeedEvery int) {
	const peers = 251
	w := New(cfg, io.Discard)
	srcs := make([]netip.Addr, peers)
	for i := range srcs {
		srcs[i] = netip.AddrFrom4([4]byte{127, 77, 0, byte(i + 1)})
	}
	srcs[peers-1] = netip.IPv6Loopback()
	const every = 20 * time.Microsecond // 50 000 SYN/s
	next := t0
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		at := t0.Add(time.Duration(i) * every)
		src := netip.AddrPortFrom(srcs[i%peers], uint16(1024+i/peers%60000))
		seq := uint32(i)
		w.AddSYN(attempt.SYN{Time: at, Src: src, Dst: server, Seq: seq})
		if succeedEvery > 0 && i/peers%succeedEvery == succeedEvery-1 {
			w.AddSegment(&attempt.Segment{Time: at.Add(10 * time.Microsecond), Src: server, Dst: src, Seq: 7, Ack: seq + 1, Flags: 0x12})
			w.AddSegment(&attempt.Segment{Time: at.Add(30 * time.Microsecond), Src: server, Dst: src, Seq: 8, Ack: seq + 1, Flags: 0x18, Sent: backoff.PayloadH2Settings})
		} else {
			w.AddSegment(&attempt.Segment{Time: at.Add(10 * time.Microsecond), Src: server, Dst: src, Ack: seq + 1, Flags: 0x14})
		}
		if at.After(next) {
			w.Tick(at)
			next = at.Add(250 * time.Millisecond)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/SYN")
	if succeedEvery > 0 && b.N > peers*succeedEvery && w.sum.Chains == 0 {
		b.Fatalf("no chain was judged: %+v", w.sum)
	}
}

// BenchmarkWatchReading reads the policies of a port's full sample, of the
// default size and of the largest: what one Tick of `audit watch --infer`
// holds the auditor's loop for, at most once a Tick. The chains are of
// two schedules (100 ms ×2 without jitter, gRPC's default), 6 and 7
// attempts each, refused.
func BenchmarkWatchReading(b *testing.B) {
	for _, n := range []int{DefaultInferSample, MaxInferSample} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			w := New(Config{Policy: backoff.DefaultPolicy(), FatesKnown: true, Infer: true, InferSample: n}, io.Discard)
			ps := w.port(server.Port())
			rng := rand.New(rand.NewPCG(1, 1))
			for i := range n {
				s := []schedule{fast, spec}[i%2]
				var times []time.Time
				var endings []backoff.Ending
				for _, o := range s.offsets(rng) {
					times = append(times, t0.Add(o))
					endings = append(endings, backoff.Ending{Fate: backoff.FateRefused, Duration: 50 * time.Microsecond, RST: true})
				}
				ps.sample.add(sampled{peer: netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), times: times, endings: endings}, n)
			}
			for b.Loop() {
				w.readPolicies(server.Port(), t0)
				w.events = w.events[:0]
			}
			if got := len(ps.reading.Policies.Policies); got != 2 {
				b.Fatalf("%d policies, want 2", got)
			}
		})
	}
}
