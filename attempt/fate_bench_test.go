package attempt

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/backoff-audit/audit/attempt/internal/rec"

	"github.com/backoff-audit/audit/backoff"
)

// BenchmarkFates reads the SYNs and segments of 75 000 attempts, as the
// 2 M-packet bench capture holds them (SYN, SYN-ACK, the client's first
// bytes, the server's RST, from 10 000 clients), as `audit pcap` does
// (PortTracker, SYNs pushed, segments as views) and as `audit live` does
// (Tracker.Add, Segments), and reports the cost per attempt beside that of
// the SYNs alone.
func BenchmarkFates(b *testing.B) {
	const attempts = 75_000
	srv := netip.MustParseAddrPort("10.0.0.1:50052")
	type ev struct {
		syn  SYN
		seg  [3]Segment
		view [3]SegmentView
	}
	evs := make([]ev, attempts)
	for i := range evs {
		cli := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 100 + byte(i%10000>>16), byte(i % 10000 >> 8), byte(i % 10000)}), uint16(32768+i/10000*8))
		t := trackStart.Add(time.Duration(i) * 8 * time.Millisecond)
		isn, sisn := uint32(i*7919), uint32(i*104729)
		evs[i] = ev{
			syn: SYN{Time: t, Src: cli, Dst: srv, Seq: isn},
			seg: [3]Segment{
				{Time: t.Add(20 * time.Microsecond), Src: srv, Dst: cli, Seq: sisn, Ack: isn + 1, Flags: rec.FlagSYN | rec.FlagACK},
				{Time: t.Add(120 * time.Microsecond), Src: cli, Dst: srv, Seq: isn + 1, Ack: sisn + 1, Flags: rec.FlagACK | 0x08, Sent: backoff.PayloadTLSClientHello},
				{Time: t.Add(200 * time.Microsecond), Src: srv, Dst: cli, Seq: sisn + 1, Ack: isn + 241, Flags: rec.FlagRST | rec.FlagACK},
			},
		}
		for j, s := range evs[i].seg {
			src, dst := s.Src.Addr().As4(), s.Dst.Addr().As4()
			evs[i].view[j] = SegmentView{Src: src[:], Dst: dst[:], SrcPort: s.Src.Port(), DstPort: s.Dst.Port(),
				Seq: s.Seq, Ack: s.Ack, Sec: s.Time.Unix(), Nsec: int32(s.Time.Nanosecond()), Flags: s.Flags, Sent: s.Sent}
		}
	}
	for _, mode := range []string{"pcap", "live"} {
		for _, segs := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/segments=%v", mode, segs), func(b *testing.B) {
				for b.Loop() {
					var tr *Tracker
					pt := NewPortTracker()
					if mode == "live" {
						tr = NewTracker()
					}
					for i := range evs {
						e := &evs[i]
						if tr != nil {
							tr.Add(e.syn)
						} else {
							pt.Add(e.syn)
						}
						if !segs {
							continue
						}
						for j := range e.seg {
							if tr != nil {
								tr.AddSegment(&e.seg[j])
							} else {
								pt.AddSegmentView(&e.view[j])
							}
						}
					}
					if tr == nil {
						tr = pt.Tracker(srv.Port())
					}
					tr.SetFatesKnown(true)
					tr.Chains()
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/attempts, "ns/attempt")
			})
		}
	}
}
