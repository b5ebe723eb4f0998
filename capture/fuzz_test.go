package capture

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/backoff-audit/audit/attempt"
)

// corpusFrames returns up to perType real frames per link type from the
// capture corpus ($AUDIT_CORPUS; none when it is absent: the fuzzers still have the
// hand-built seeds).
func corpusFrames(perType int) map[layers.LinkType][][]byte {
	out := map[layers.LinkType][][]byte{}
	corpusData(1<<20, func(_ string, data []byte) {
		next := framesOf(data)
		for range 1000 { // bounded: a damaged file may loop in a library reader
			lt, frame, ok := next()
			if !ok {
				break
			}
			if len(out[lt]) < perType {
				out[lt] = append(out[lt], frame)
			}
		}
	})
	return out
}

// framesOf iterates over a file's frames with gopacket's readers.
func framesOf(data []byte) func() (layers.LinkType, []byte, bool) {
	if r, err := pcapgo.NewReader(bytes.NewReader(data)); err == nil {
		return func() (layers.LinkType, []byte, bool) {
			frame, _, err := r.ReadPacketData()
			return r.LinkType(), frame, err == nil
		}
	}
	r, err := pcapgo.NewNgReader(bytes.NewReader(data), pcapgo.NgReaderOptions{WantMixedLinkType: true})
	if err != nil {
		return func() (layers.LinkType, []byte, bool) { return 0, nil, false }
	}
	return func() (layers.LinkType, []byte, bool) {
		frame, ci, err := r.ReadPacketData()
		if err != nil || len(ci.AncillaryData) == 0 {
			return 0, nil, false
		}
		lt, _ := ci.AncillaryData[0].(layers.LinkType)
		return lt, frame, true
	}
}

func FuzzDecode(f *testing.F) {
	for lt, frames := range corpusFrames(8) {
		for _, fr := range frames {
			f.Add(uint16(lt), fr, uint16(443))
		}
	}
	syn4 := ipv4Packet("10.0.0.1", "10.0.0.2", 6, synSeg(1, 2, 3))
	syn6 := ipv6Packet("2001:db8::1", "::ffff:10.0.0.2", 0, append(extHeader(44, 0), append(fragHeader(6, 0, false), synSeg(1, 2, 3)...)...))
	fin4 := ipv4Packet("10.0.0.1", "10.0.0.2", 6, seg(1, 2, 3, 4, flagFIN|flagACK, tlsHello))
	rst6 := ipv6Packet("::1", "::2", 6, seg(2, 1, 3, 4, flagRST|flagACK, nil))
	for _, s := range []struct {
		lt    layers.LinkType
		frame []byte
	}{
		{layers.LinkTypeEthernet, ethFrame(0x0800, fin4)},
		{layers.LinkTypeEthernet, ethFrame(0x86dd, rst6)},
		{layers.LinkTypeLinuxSLL2, sll2Frame(0x0800, fin4)},
		{layers.LinkTypeEthernet, vlanFrame([]uint16{0x88a8, 0x8100}, 0x0800, syn4)},
		{layers.LinkTypeEthernet, ethFrame(0x86dd, syn6)},
		{layers.LinkTypeLinuxSLL, sllFrame(0x0800, syn4)},
		{layers.LinkTypeLinuxSLL2, sll2Frame(0x86dd, syn6)},
		{layers.LinkTypeNull, afFrame(binary.LittleEndian, 30, syn6)},
		{layers.LinkTypeLoop, afFrame(binary.BigEndian, 2, syn4)},
		{linkTypeEnc, encFrame(binary.LittleEndian, 2, syn4)},
		{linkTypePFLog, pflogFrame(24, syn6)},
		{layers.LinkTypeRaw, syn6},
		{layers.LinkTypeIPv4, syn4},
		{layers.LinkTypeIPv6, syn6},
	} {
		f.Add(uint16(s.lt), s.frame, uint16(2))
	}
	d := NewDecoder()
	f.Fuzz(func(t *testing.T, lt16 uint16, frame []byte, port uint16) {
		lt := layers.LinkType(lt16)
		checkSegments(t, d, lt, frame, port)
		syn, ok, skip := d.Decode(lt, frame)
		if ok != (skip == "" && syn.Src.IsValid()) || ok && (!syn.Dst.IsValid() || !syn.Time.IsZero()) {
			t.Fatalf("inconsistent result: ok=%v skip=%q syn=%+v", ok, skip, syn)
		}
		ip, tcp, skip2 := d.findSlow(lt, frame)
		if skip2 != skip || len(tcp) != 0 != ok {
			t.Fatalf("fast path disagrees with the full decode: Decode (%v, %q), full (%v, %q)", ok, skip, len(tcp) != 0, skip2)
		}
		if !ok {
			return
		}
		if tcp[13]&0x12 != 0x02 || tcp[12]>>4 < 5 || len(tcp) < 20 {
			t.Fatalf("not a SYN header: % x", tcp[:min(len(tcp), 20)])
		}
		if syn.Src.Addr().Is4In6() || syn.Dst.Addr().Is4In6() {
			t.Fatalf("mapped address not unmapped: %v", syn)
		}
		if v := ip[0] >> 4; v != 4 && v != 6 {
			t.Fatalf("ip version %d", v)
		}
	})
}

// checkSegments holds a decoder that watches port to plain's results:
// the same SYNs and skip reasons, on the fast path as off it; and what it
// finds besides is a sound segment of the port, which segmentOf reads
// without a fault.
func checkSegments(t *testing.T, plain *Decoder, lt layers.LinkType, frame []byte, port uint16) {
	w := NewDecoder()
	w.watch(port)
	ip, tcp, skip := w.find(lt, frame)
	counted := w.other
	if lt == layers.LinkTypeEthernet {
		// The file readers' fast path takes what find takes, and each
		// frame it is done with is one find counts as other TCP.
		if pt, seg, done := w.plainOtherTCP(frame); done {
			took := pt != nil && w.takes(pt, seg)
			if counted != 1 || skip != "" || took != (len(tcp) != 0) || took && len(pt) != len(tcp) {
				t.Fatalf("watching %d: plainOther (took %v, %d bytes) disagrees with find (%d bytes, %q, counted %d)", port, took, len(pt), len(tcp), skip, counted)
			}
		}
	}
	ip2, tcp2, skip2 := w.findSlow(lt, frame)
	pip, ptcp, pskip := plain.findSlow(lt, frame)
	if skip != skip2 || len(tcp) != len(tcp2) || len(ip) != len(ip2) {
		t.Fatalf("watching %d: the fast path disagrees with the full decode: (%d, %q) against (%d, %q)", port, len(tcp), skip, len(tcp2), skip2)
	}
	if skip != pskip {
		t.Fatalf("watching %d: skip %q, without watching %q", port, skip, pskip)
	}
	if len(ptcp) != 0 && (len(tcp) != len(ptcp) || len(ip) != len(pip)) {
		t.Fatalf("watching %d: a SYN not found as it is without watching", port)
	}
	if len(tcp) == 0 || len(ptcp) != 0 {
		return
	}
	if len(tcp) < 20 || tcp[12]>>4 < 5 || tcp[13]&(flagSYN|flagACK) == flagSYN ||
		binary.BigEndian.Uint16(tcp) != port && binary.BigEndian.Uint16(tcp[2:]) != port ||
		tcp[13]&flagSYN != 0 && binary.BigEndian.Uint16(tcp) != port {
		t.Fatalf("watching %d: not a segment of it: % x", port, tcp[:min(len(tcp), 20)])
	}
	var v attempt.SegmentView
	w.viewOf(&v, ip, tcp, 0, 0)
	s := v.Segment()
	if !s.Src.IsValid() || !s.Dst.IsValid() || s.Src.Addr().Is4In6() || s.Dst.Addr().Is4In6() {
		t.Fatalf("segment addresses: %v %v", s.Src, s.Dst)
	}
	if data, _ := dataOf(ip, tcp); s.Sent != attempt.PayloadOf(data, s.Src.Port() == port) || len(data) > len(tcp) {
		t.Fatalf("segment sent %q from % x", s.Sent, data)
	}
}

// tinySync reads chunks of 1–13 bytes: every record straddles chunks.
func tinySync(r io.Reader, _ int64, _ bool, _ <-chan struct{}) source {
	return &syncSource{r: r, size: 13}
}

// tinyAsync is the overlapping reader with 7-byte chunks.
func tinyAsync(r io.Reader, _ int64, _ bool, _ <-chan struct{}) source {
	return newAsyncSource(r, 7, false, nil)
}

// someAsync is the overlapping reader of a pipe, its chunks what each read
// gives (iotest.OneByteReader: one byte).
func someAsync(r io.Reader, _ int64, _ bool, _ <-chan struct{}) source {
	return newAsyncSource(iotest.OneByteReader(r), 4096, true, nil)
}

// readResult is everything a read reports, for differential checks.
type readResult struct {
	SYNs []gotSYN
	Segs []string
	St   attempt.FileInfo
	Err  string
}

func readAll(data []byte, mk func(io.Reader, int64, bool, <-chan struct{}) source) readResult {
	var r readResult
	opt := Options{Segments: func(v *attempt.SegmentView) {
		s := v.Segment()
		r.Segs = append(r.Segs, fmt.Sprintf("%v %v>%v %d %d %#x %q", s.Time.UnixNano(), s.Src, s.Dst, s.Seq, s.Ack, s.Flags, s.Sent))
	}}
	st, err := readSource("fuzz.pcap", bytes.NewReader(data), int64(len(data)), opt, func(s attempt.SYN) {
		r.SYNs = append(r.SYNs, summarize(s))
	}, mk)
	r.St = st
	if err != nil {
		r.Err = err.Error()
	}
	return r
}

func FuzzReadFile(f *testing.F) {
	le, be := binary.LittleEndian, binary.BigEndian
	frame := ethFrame(0x0800, ipv4Packet("10.0.0.1", "10.0.0.2", 6, synSeg(1, 2, 3)))
	pc := pcapFile(be, true, 1, pcapRecord{sec: 1, frac: 2, data: frame}, pcapRecord{sec: 3, data: frame[:40]})
	ng := &ngWriter{o: le}
	ng.shb(1, 0).idb(1, 0, 0x80|10, 7).epb(0, 5, frame).spb(frame).opb(0, 9, frame).block(77, []byte("x"))
	ng.o = be
	ng.shb(1, 0).idb(113, 64, 9, 0).epb(0, 1, sllFrame(0x86dd, ipv6Packet("::1", "::2", 6, synSeg(4, 5, 6))))
	for _, seed := range [][]byte{pc, ng.buf, gzipBytes(pc), gzipBytes(ng.buf), pcapFile(le, false, 101)} {
		f.Add(seed)
	}
	corpusData(64<<10, func(_ string, data []byte) { f.Add(data) })
	f.Fuzz(func(t *testing.T, data []byte) {
		want := readAll(data, defaultSource)
		if want.St.SYNs != uint64(len(want.SYNs)) {
			t.Fatalf("SYNs = %d, fn saw %d", want.St.SYNs, len(want.SYNs))
		}
		if want.St.Bytes > 0 && len(data) > 0 && want.St.Format != "" && !strings.HasSuffix(want.St.Format, "gzip") && want.St.Bytes > int64(len(data)) {
			t.Fatalf("Bytes = %d from a %d-byte input", want.St.Bytes, len(data))
		}
		if want.Err != "" && !strings.Contains(want.Err, "fuzz.pcap") {
			t.Fatalf("error does not name the file: %s", want.Err)
		}
		for _, w := range want.St.Warnings {
			if !strings.HasPrefix(w, "fuzz.pcap: ") {
				t.Fatalf("warning does not name the file: %q", w)
			}
		}
		if want.St.Truncated && want.Err != "" {
			t.Fatalf("truncated and failed: %s", want.Err)
		}
		// However the stream is cut into chunks, the result is the same.
		for name, mk := range map[string]func(io.Reader, int64, bool, <-chan struct{}) source{"tiny sync": tinySync, "tiny async": tinyAsync, "pipe": someAsync} {
			if diff := cmp.Diff(want, readAll(data, mk)); diff != "" {
				t.Fatalf("%s chunks differ (-default +%s):\n%s", name, name, diff)
			}
		}
	})
}
