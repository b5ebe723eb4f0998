package stream

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/backoff-audit/audit/attempt"

	"github.com/backoff-audit/audit/backoff"
)

// specSYNs are the SYNs of n spec-following peers (the generator's
// -peers capture, in memory): each starts within a minute and retries
// for two, the SYNs in time order.
func specSYNs(n int) []attempt.SYN {
	r := rand.New(rand.NewPCG(1, uint64(n)))
	base := time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)
	srv4 := netip.AddrPortFrom(netip.MustParseAddr("10.0.0.1"), 50052)
	srv6 := netip.AddrPortFrom(netip.MustParseAddr("fd00::1"), 50052)
	var out []attempt.SYN
	for i := range n {
		var src netip.Addr
		dst := srv4
		if i%2 == 0 {
			src = netip.AddrFrom4([4]byte{10, byte(100 + i>>16), byte(i >> 8), byte(i)})
		} else {
			src, dst = netip.AddrFrom16([16]byte{0: 0xfd, 3: 1, 12: byte(i >> 24), 13: byte(i >> 16), 14: byte(i >> 8), 15: byte(i)}), srv6
		}
		t := base.Add(time.Duration(r.Int64N(int64(time.Minute))))
		end := t.Add(2 * time.Minute)
		e := 1000.0
		port := uint16(32768 + r.IntN(20000))
		for k := 0; t.Before(end); k++ {
			out = append(out, attempt.SYN{Time: t, Src: netip.AddrPortFrom(src, port), Dst: dst, Seq: r.Uint32()})
			g := e
			if k > 0 {
				e = min(e*1.6, 120000)
				g = e * (0.8 + 0.4*r.Float64())
			}
			t = t.Add(time.Duration(g * float64(time.Millisecond)))
			port++
		}
	}
	slices.SortFunc(out, func(a, b attempt.SYN) int { return a.Time.Compare(b.Time) })
	return out
}

// BenchmarkStreamAdd feeds a Stream the SYNs of spec-following peers, as
// `audit pcap --port` does with the generator's SYN-only capture, and
// hands every chain over (to no reader).
func BenchmarkStreamAdd(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		syns := specSYNs(n)
		b.Run(fmt.Sprintf("%dpeers", n), func(b *testing.B) {
			for b.Loop() {
				s := New(50052, backoff.DefaultPolicy(), b.TempDir())
				for _, syn := range syns {
					s.Add(syn)
				}
				if err := s.Finish(); err != nil {
					b.Fatal(err)
				}
				s.Close()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(syns)), "ns/attempt.SYN")
		})
	}
}
