package capture

import (
	"bufio"
	"flag"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/backoff-audit/audit/attempt"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

var benchFile = flag.String("capture.benchfile", "", "capture file for BenchmarkReadFile/file (e.g. make bench's 2 M-packet capture)")

// benchFrames is a mix like a busy server's: mostly ACKs and data of
// assorted sizes (mean about 275 bytes, as in make bench's capture), one
// SYN in 64 to the audited port.
func benchFrames() [][]byte {
	sizes := []int{0, 0, 0, 1448, 0, 120, 0, 310, 0, 0, 64, 0, 200, 0, 0, 600}
	var frames [][]byte
	for i := range 64 {
		var seg []byte
		switch {
		case i == 0:
			seg = tcpHeader(40000, 8081, 1234, flagSYN, 10)
		default:
			seg = append(tcpHeader(443, 50000+uint16(i), uint32(i), flagACK, 8), make([]byte, sizes[i%len(sizes)])...)
		}
		if i%3 == 0 {
			frames = append(frames, ethFrame(0x86dd, ipv6Packet("2001:db8::1", "2001:db8::2", 6, seg)))
		} else {
			frames = append(frames, ethFrame(0x0800, ipv4Packet("10.0.0.1", "10.0.0.2", 6, seg)))
		}
	}
	return frames
}

// writeBenchFile writes n packets with gopacket's writers: pcap or pcapng.
func writeBenchFile(tb testing.TB, path string, n int, ng bool) {
	tb.Helper()
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	var write func(gopacket.CaptureInfo, []byte) error
	var flush func() error
	if ng {
		w, err := pcapgo.NewNgWriter(bw, layers.LinkTypeEthernet)
		if err != nil {
			tb.Fatal(err)
		}
		write, flush = w.WritePacket, w.Flush
	} else {
		w := pcapgo.NewWriterNanos(bw)
		if err := w.WriteFileHeader(262144, layers.LinkTypeEthernet); err != nil {
			tb.Fatal(err)
		}
		write, flush = w.WritePacket, func() error { return nil }
	}
	frames := benchFrames()
	t0 := time.Unix(1700000000, 0)
	for i := range n {
		fr := frames[i%len(frames)]
		ci := gopacket.CaptureInfo{Timestamp: t0.Add(time.Duration(i) * time.Microsecond), CaptureLength: len(fr), Length: len(fr)}
		if err := write(ci, fr); err != nil {
			tb.Fatal(err)
		}
	}
	if err := flush(); err != nil {
		tb.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
}

const benchPackets = 200_000 // about 60 MB

func benchPath(b *testing.B, name string, ng bool) (string, int64) {
	b.Helper()
	path := filepath.Join(b.TempDir(), name)
	writeBenchFile(b, path, benchPackets, ng)
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	return path, fi.Size()
}

// BenchmarkReadFile measures the whole file path: open, read, decode,
// filter, deliver. MB/s counts file bytes. pcap/segments also hands the
// segments of the port over (to a callback that does nothing), as a read
// for fates does.
func BenchmarkReadFile(b *testing.B) {
	run := func(b *testing.B, path string, size int64, segments bool) {
		b.SetBytes(size)
		b.ReportAllocs()
		var syns uint64
		opt := Options{Port: 8081}
		if segments {
			opt.Segments = func(*attempt.SegmentView) {}
		}
		for b.Loop() {
			st, err := ReadFile(path, opt, func(attempt.SYN) {})
			if err != nil {
				b.Fatal(err)
			}
			syns = st.SYNs
		}
		b.ReportMetric(float64(syns), "syns/op")
	}
	b.Run("pcap", func(b *testing.B) {
		path, size := benchPath(b, "bench.pcap", false)
		run(b, path, size, false)
	})
	b.Run("pcap/segments", func(b *testing.B) {
		path, size := benchPath(b, "bench.pcap", false)
		run(b, path, size, true)
	})
	b.Run("pcapng", func(b *testing.B) {
		path, size := benchPath(b, "bench.pcapng", true)
		run(b, path, size, false)
	})
	if *benchFile != "" {
		b.Run("file", func(b *testing.B) {
			fi, err := os.Stat(*benchFile)
			if err != nil {
				b.Fatal(err)
			}
			run(b, *benchFile, fi.Size(), false)
		})
	}
}

// BenchmarkPcapgo is the library path ReadFile's pcap reader departs
// from, on the same file: pcapgo.Reader's zero-copy read with our decoder,
// and with gopacket's DecodingLayerParser. It keeps the measured reason for
// the departure (see pcap.go) checkable.
func BenchmarkPcapgo(b *testing.B) {
	path, size := benchPath(b, "bench.pcap", false)
	open := func(b *testing.B) (*os.File, *pcapgo.Reader) {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		r, err := pcapgo.NewReader(bufio.NewReaderSize(f, chunkSize))
		if err != nil {
			b.Fatal(err)
		}
		return f, r
	}
	b.Run("decoder", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		d := NewDecoder()
		for b.Loop() {
			f, r := open(b)
			for {
				data, _, err := r.ZeroCopyReadPacketData()
				if err == io.EOF {
					break
				}
				if err != nil {
					b.Fatal(err)
				}
				d.Decode(r.LinkType(), data)
			}
			f.Close()
		}
	})
	b.Run("DecodingLayerParser", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		var (
			eth   layers.Ethernet
			ip4   layers.IPv4
			ip6   layers.IPv6
			tcp   layers.TCP
			found []gopacket.LayerType
		)
		p := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &ip4, &ip6, &tcp)
		p.IgnoreUnsupported = true
		for b.Loop() {
			f, r := open(b)
			for {
				data, _, err := r.ZeroCopyReadPacketData()
				if err == io.EOF {
					break
				}
				if err != nil {
					b.Fatal(err)
				}
				_ = p.DecodeLayers(data, &found)
				if len(found) == 3 && tcp.SYN && !tcp.ACK {
					_ = netip.AddrPortFrom(netip.Addr{}, uint16(tcp.DstPort))
				}
			}
			f.Close()
		}
	})
}

// BenchmarkPcapgoNg is pcapgo.NgReader with our decoder on the pcapng
// file of BenchmarkReadFile/pcapng: the library path pcapng.go departs from.
func BenchmarkPcapgoNg(b *testing.B) {
	path, size := benchPath(b, "bench.pcapng", true)
	b.SetBytes(size)
	b.ReportAllocs()
	d := NewDecoder()
	for b.Loop() {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		r, err := pcapgo.NewNgReader(bufio.NewReaderSize(f, chunkSize), pcapgo.NgReaderOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for {
			data, _, err := r.ZeroCopyReadPacketData()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			d.Decode(r.LinkType(), data)
		}
		f.Close()
	}
}

// BenchmarkDecode compares the hand decoder with DecodingLayerParser per
// frame (the reason decode.go parses by hand).
func BenchmarkDecode(b *testing.B) {
	frames := benchFrames()
	b.Run("Decoder", func(b *testing.B) {
		b.ReportAllocs()
		d := NewDecoder()
		i := 0
		for b.Loop() {
			d.Decode(layers.LinkTypeEthernet, frames[i%len(frames)])
			i++
		}
	})
	b.Run("DecodingLayerParser", func(b *testing.B) {
		b.ReportAllocs()
		var (
			eth   layers.Ethernet
			ip4   layers.IPv4
			ip6   layers.IPv6
			tcp   layers.TCP
			found []gopacket.LayerType
		)
		p := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &ip4, &ip6, &tcp)
		p.IgnoreUnsupported = true
		i := 0
		for b.Loop() {
			_ = p.DecodeLayers(frames[i%len(frames)], &found)
			i++
		}
	})
}
