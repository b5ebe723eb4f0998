package watch

import (
	"io"
	"net/netip"
	"testing"
	"time"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
)

// BenchmarkWatchFlood: what a Watch spends on each SYN of the SYN-load
// benchmark's flood (.ci/synload.sh): 251 peers, every SYN a new attempt
// refused by an RST, a Tick every 250 ms of packet time.
func BenchmarkWatchFlood(b *testing.B) {
	const peers = 251
	w := New(Config{Policy: backoff.DefaultPolicy(), FatesKnown: true}, io.Discard)
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
		w.AddSYN(attempt.SYN{Time: at, Src: src, Dst: server, Seq: uint32(i)})
		w.AddSegment(&attempt.Segment{Time: at.Add(10 * time.Microsecond), Src: server, Dst: src, Ack: uint32(i) + 1, Flags: 0x14})
		if at.After(next) {
			w.Tick(at)
			next = at.Add(250 * time.Millisecond)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/SYN")
}
