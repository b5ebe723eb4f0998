package flows

import (
	"bytes"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/reassembly"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/capture"
	"github.com/backoff-audit/audit/flows/internal/benchcap"
	"github.com/backoff-audit/audit/h2"
)

// benchSegs are the segments of a 64 MB synthetic h2c capture (package
// benchcap; testdata/bench/h2c-64mb.pcap, made when missing), with their
// payloads copied out, read once for every benchmark.
var benchSegs = sync.OnceValues(func() ([]attempt.SegmentView, error) {
	path := filepath.Join("..", "testdata", "bench", "h2c-64mb.pcap")
	if _, err := os.Stat(path); err != nil {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, err
		}
		if _, err := benchcap.Write(path, benchcap.Config{Bytes: 64e6, Conns: 16, Concurrent: 8}); err != nil {
			return nil, err
		}
	}
	var segs []attempt.SegmentView
	_, err := capture.ReadFile(path, capture.Options{Payloads: func(v *attempt.SegmentView) {
		c := *v
		c.Src, c.Dst, c.Payload = bytes.Clone(v.Src), bytes.Clone(v.Dst), bytes.Clone(v.Payload)
		segs = append(segs, c)
	}}, func(attempt.SYN) {})
	return segs, err
})

func payloadBytes(segs []attempt.SegmentView) (n int64) {
	for _, s := range segs {
		n += int64(len(s.Payload))
	}
	return n
}

// BenchmarkAssemble measures reassembly and decoding on the same
// segments: this package's Assembler, and gopacket's reassembly feeding
// the same h2.Conn decoders. MB/s count the TCP payload bytes.
func BenchmarkAssemble(b *testing.B) {
	segs, err := benchSegs()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("flows", func(b *testing.B) {
		b.SetBytes(payloadBytes(segs))
		b.ReportAllocs()
		for b.Loop() {
			conns := 0
			a := NewAssembler(Options{Ports: []uint16{50051}}, func(c Conn) {
				if c.Report.Damaged != "" {
					b.Fatal(c.Report.Damaged)
				}
				conns++
			})
			for i := range segs {
				a.Add(&segs[i])
			}
			a.Close()
			if conns != 16 {
				b.Fatalf("%d connections, want 16", conns)
			}
		}
	})
	b.Run("gopacket", func(b *testing.B) {
		// gopacket's input, built outside the timer as the reader builds
		// SegmentViews outside it for flows.
		type pkt struct {
			net gopacket.Flow
			tcp layers.TCP
			ci  gopacket.CaptureInfo
		}
		pkts := make([]pkt, len(segs))
		for i, s := range segs {
			p := &pkts[i]
			p.net = gopacket.NewFlow(layers.EndpointIPv4, net.IP(s.Src).To4(), net.IP(s.Dst).To4())
			p.tcp = layers.TCP{SrcPort: layers.TCPPort(s.SrcPort), DstPort: layers.TCPPort(s.DstPort), Seq: s.Seq, Ack: s.Ack,
				FIN: s.Flags&flagFIN != 0, SYN: s.Flags&flagSYN != 0, RST: s.Flags&flagRST != 0, ACK: s.Flags&flagACK != 0}
			p.tcp.Payload = s.Payload
			p.ci = gopacket.CaptureInfo{Timestamp: time.Unix(s.Sec, int64(s.Nsec)), Length: len(s.Payload), CaptureLength: len(s.Payload)}
		}
		b.SetBytes(payloadBytes(segs))
		b.ReportAllocs()
		for b.Loop() {
			f := &gpFactory{}
			asm := reassembly.NewAssembler(reassembly.NewStreamPool(f))
			for i := range pkts {
				p := &pkts[i]
				asm.AssembleWithContext(p.net, &p.tcp, &gpContext{p.ci})
			}
			asm.FlushAll()
			if f.done < 16 { // a segment after a FIN opens a stream anew
				b.Fatalf("%d connections, want 16", f.done)
			}
		}
	})
}

type gpContext struct{ ci gopacket.CaptureInfo }

func (c *gpContext) GetCaptureInfo() gopacket.CaptureInfo { return c.ci }

type gpFactory struct{ done int }

func (f *gpFactory) New(netFlow, tcpFlow gopacket.Flow, tcp *layers.TCP, ac reassembly.AssemblerContext) reassembly.Stream {
	src, _ := netip.AddrFromSlice(netFlow.Src().Raw())
	dst, _ := netip.AddrFromSlice(netFlow.Dst().Raw())
	return &gpStream{f: f, dec: h2.NewConn(netip.AddrPortFrom(src, uint16(tcp.SrcPort)), netip.AddrPortFrom(dst, uint16(tcp.DstPort)),
		h2.Options{Start: ac.GetCaptureInfo().Timestamp})}
}

type gpStream struct {
	f    *gpFactory
	dec  *h2.Conn
	last time.Time
	done bool
}

func (s *gpStream) Accept(*layers.TCP, gopacket.CaptureInfo, reassembly.TCPFlowDirection, reassembly.Sequence, *bool, reassembly.AssemblerContext) bool {
	return true
}

func (s *gpStream) ReassembledSG(sg reassembly.ScatterGather, ac reassembly.AssemblerContext) {
	dir, _, _, skip := sg.Info()
	d := h2.ClientToServer
	if dir == reassembly.TCPDirServerToClient {
		d = h2.ServerToClient
	}
	t := ac.GetCaptureInfo().Timestamp
	s.last = t
	if skip > 0 {
		s.dec.Gap(d, t, int64(skip))
	}
	n, _ := sg.Lengths()
	s.dec.Feed(d, t, sg.Fetch(n))
}

func (s *gpStream) ReassemblyComplete(reassembly.AssemblerContext) bool {
	if s.done {
		return true
	}
	s.done = true
	s.dec.End(s.last)
	if s.dec.Report().Damaged != "" {
		panic(s.dec.Report().Damaged)
	}
	s.f.done++
	return true
}
