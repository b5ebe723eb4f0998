package capture

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcap"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
)

// seg is a TCP segment with flags, sequence numbers and data.
func seg(sport, dport uint16, seq, ack uint32, flags byte, data []byte) []byte {
	t := tcpHeader(sport, dport, seq, flags, 5)
	binary.BigEndian.PutUint32(t[8:], ack)
	return append(t, data...)
}

// tlsHello is the start of a TLS 1.3 ClientHello record as clients send
// it: a handshake record of version 3.1, then handshake type 1.
var tlsHello = []byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03, 7, 7, 7, 7, 7, 7, 7, 7, 7}

// foundSeg is what find returned for a frame, for cmp.
type foundSeg struct {
	Found bool
	Skip  string
	Src   string
	Flags byte
	Sent  backoff.Payload
}

func findSeg(d *Decoder, lt layers.LinkType, frame []byte) foundSeg {
	ip, tcp, skip := d.find(lt, frame)
	if len(tcp) == 0 {
		return foundSeg{Skip: skip}
	}
	var v attempt.SegmentView
	d.viewOf(&v, ip, tcp, 0, 0)
	s := v.Segment()
	return foundSeg{Found: true, Src: s.Src.String(), Flags: s.Flags, Sent: s.Sent}
}

// TestDecodeSegments: a decoder that watches a port finds, besides SYNs,
// the segments the fates are read from, on the fast path and off it, and
// names their first bytes; it finds no other, and counts no skip for one
// that fails its checks.
func TestDecodeSegments(t *testing.T) {
	const cli, srv = "10.0.0.1", "10.0.0.2"
	v4 := func(src, dst string, payload []byte) []byte {
		return ethFrame(0x0800, ipv4Packet(src, dst, 6, payload))
	}
	v6 := func(src, dst string, payload []byte) []byte {
		return ethFrame(0x86dd, ipv6Packet(src, dst, 6, payload))
	}
	fromSrv := foundSeg{Found: true, Src: srv + ":8081"}
	fromCli := foundSeg{Found: true, Src: cli + ":40000"}
	with := func(f foundSeg, flags byte, sent backoff.Payload) foundSeg {
		f.Flags, f.Sent = flags, sent
		return f
	}
	// A segment whose data offset runs past its IP length.
	beyond := v4(srv, cli, seg(8081, 40000, 1, 2, flagRST, nil))
	beyond[14+20+12] = 6 << 4
	// Ethernet pads a short frame to 60 bytes: padding is not data.
	padded := append(v4(cli, srv, seg(40000, 8081, 1, 2, flagACK, nil)), 0, 0, 0, 0, 0, 0)
	// A locally captured, offloaded segment declares no length.
	tso := v4(cli, srv, seg(40000, 8081, 1, 2, flagACK, tlsHello))
	binary.BigEndian.PutUint16(tso[14+2:], 0)
	// A data segment cut by a snap length keeps the bytes it has.
	snapped := v4(cli, srv, seg(40000, 8081, 1, 2, flagACK, []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")))[:14+20+20+14]

	tests := []struct {
		name  string
		lt    layers.LinkType
		frame []byte
		want  foundSeg
	}{
		{"syn-ack from the port", layers.LinkTypeEthernet, v4(srv, cli, seg(8081, 40000, 7, 2, flagSYN|flagACK, nil)), with(fromSrv, flagSYN|flagACK, "")},
		{"rst-ack from the port", layers.LinkTypeEthernet, v4(srv, cli, seg(8081, 40000, 0, 2, flagRST|flagACK, nil)), with(fromSrv, flagRST|flagACK, "")},
		{"fin from the client", layers.LinkTypeEthernet, v4(cli, srv, seg(40000, 8081, 2, 8, flagFIN|flagACK, nil)), with(fromCli, flagFIN|flagACK, "")},
		{"client hello", layers.LinkTypeEthernet, v4(cli, srv, seg(40000, 8081, 2, 8, flagACK|0x08, tlsHello)), with(fromCli, flagACK|0x08, backoff.PayloadTLSClientHello)},
		{"server settings", layers.LinkTypeEthernet, v6("fd00::2", "fd00::1", seg(8081, 40000, 8, 2, flagACK, []byte{0, 0, 0, 4, 0, 0, 0, 0, 0})),
			foundSeg{Found: true, Src: "[fd00::2]:8081", Flags: flagACK, Sent: backoff.PayloadH2Settings}},
		{"offloaded, no IP length", layers.LinkTypeEthernet, tso, with(fromCli, flagACK, backoff.PayloadTLSClientHello)},
		{"cut by the snap length", layers.LinkTypeEthernet, snapped, with(fromCli, flagACK, backoff.PayloadH2Preface)},
		{"off the fast path: vlan", layers.LinkTypeEthernet, vlanFrame([]uint16{0x8100}, 0x0800, ipv4Packet(srv, cli, 6, seg(8081, 40000, 0, 2, flagRST|flagACK, nil))), with(fromSrv, flagRST|flagACK, "")},
		{"off the fast path: linux cooked", layers.LinkTypeLinuxSLL2, sll2Frame(0x0800, ipv4Packet(cli, srv, 6, seg(40000, 8081, 2, 8, flagACK, tlsHello))), with(fromCli, flagACK, backoff.PayloadTLSClientHello)},
		{"off the fast path: ipv6 extension header", layers.LinkTypeRaw, ipv6Packet("fd00::1", "fd00::2", 0, slices.Concat(extHeader(6, 0), seg(40000, 8081, 2, 8, flagFIN|flagACK, nil))),
			foundSeg{Found: true, Src: "[fd00::1]:40000", Flags: flagFIN | flagACK}},
		{"a pure ACK is not one", layers.LinkTypeEthernet, v4(cli, srv, seg(40000, 8081, 2, 8, flagACK, nil)), foundSeg{}},
		{"nor with Ethernet padding", layers.LinkTypeEthernet, padded, foundSeg{}},
		{"nor a segment of another port", layers.LinkTypeEthernet, v4(cli, srv, seg(40000, 443, 2, 8, flagRST, nil)), foundSeg{}},
		{"nor one whose data offset runs past it, and it is no skip", layers.LinkTypeEthernet, beyond, foundSeg{}},
		{"a SYN is still a SYN", layers.LinkTypeEthernet, v4(cli, srv, synSeg(40000, 8081, 1)), with(fromCli, flagSYN, "")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewDecoder()
			d.watch(8081)
			if diff := cmp.Diff(tt.want, findSeg(d, tt.lt, tt.frame)); diff != "" {
				t.Errorf("find (-want +got):\n%s", diff)
			}
			// A decoder that watches nothing finds SYNs alone, with the
			// same skip reasons.
			plain := findSeg(NewDecoder(), tt.lt, tt.frame)
			if tt.want.Flags&(flagSYN|flagACK) == flagSYN {
				return
			}
			if plain.Found || plain.Skip != tt.want.Skip {
				t.Errorf("without watching: %+v, want nothing and skip %q", plain, tt.want.Skip)
			}
		})
	}
}

// TestDecodeOtherTCP: every TCP segment that is not a SYN is counted by
// find, watched or not, and taken by the fast path, whose caller counts
// it (TestReadFileSegments); SYNs and UDP are not.
func TestDecodeOtherTCP(t *testing.T) {
	frames := []struct {
		lt    layers.LinkType
		frame []byte
		other bool
	}{
		{layers.LinkTypeEthernet, ethFrame(0x0800, ipv4Packet("10.0.0.1", "10.0.0.2", 6, seg(1, 2, 3, 4, flagACK, nil))), true},
		{layers.LinkTypeEthernet, ethFrame(0x86dd, ipv6Packet("::1", "::2", 6, seg(1, 2, 3, 4, flagFIN|flagACK, nil))), true},
		{layers.LinkTypeLinuxSLL, sllFrame(0x0800, ipv4Packet("10.0.0.1", "10.0.0.2", 6, seg(1, 2, 3, 4, flagRST, nil))), true},
		{layers.LinkTypeEthernet, ethFrame(0x0800, ipv4Packet("10.0.0.1", "10.0.0.2", 6, synSeg(1, 2, 3))), false},
		{layers.LinkTypeEthernet, ethFrame(0x0800, ipv4Packet("10.0.0.1", "10.0.0.2", 17, udpDatagram(1, 53, []byte("q")))), false},
	}
	for _, watching := range []bool{false, true} {
		d, fast := NewDecoder(), NewDecoder()
		if watching {
			d.watch(2)
			fast.watch(2)
		}
		want, took := uint64(0), uint64(0)
		for _, f := range frames {
			d.find(f.lt, f.frame)
			if f.other {
				want++
			}
			if _, _, done := fast.plainOtherTCP(f.frame); done {
				took++
				if !f.other {
					t.Errorf("plainOther took a frame that is no other TCP")
				}
			}
		}
		if !watching && took == 0 {
			t.Error("plainOther took no frame")
		}
		if d.other != want || fast.other != 0 {
			t.Errorf("watching %v: find counted %d, want %d; plainOther counted %d, want none (its caller counts)", watching, d.other, want, fast.other)
		}
	}
}

// TestDecodeFirstFragment: an IPv4 first fragment (more fragments set,
// no offset) declares the fragment's length, not the segment's: its pure
// ACK, cut where the fragment ends, carries no bytes that can be read, on
// the fast path as off it (FuzzDecode found the fast path reading the
// declared length as the segment's).
func TestDecodeFirstFragment(t *testing.T) {
	// Options (NOPs) to a 36-byte header: a frame long enough for the
	// fast path.
	tcp := append(seg(40000, 2, 3, 4, flagACK, nil), bytes.Repeat([]byte{1}, 16)...)
	tcp[12] = 9 << 4
	p := ipv4Packet("10.0.0.1", "10.0.0.2", 6, tcp)
	binary.BigEndian.PutUint16(p[2:], 1500) // the whole datagram's bytes
	binary.BigEndian.PutUint16(p[6:], 0x2000)
	frame := ethFrame(0x0800, p)
	d := NewDecoder()
	d.watch(2)
	if _, tcp, skip := d.find(layers.LinkTypeEthernet, frame); len(tcp) != 0 || skip != "" {
		t.Errorf("find: a segment of %d bytes, skip %q; want none", len(tcp), skip)
	}
	if tcp, seg, done := d.plainOtherTCP(frame); done && tcp != nil && d.takes(tcp, seg) {
		t.Errorf("plainOther: a candidate of %d declared bytes", seg)
	}
	whole := slices.Clone(frame)
	whole[14+6] = 0 // not a fragment: the fast path's
	if _, _, done := d.plainOtherTCP(whole); !done {
		t.Error("plainOther does not take the frame when it is not a fragment")
	}
	if _, tcp, _ := d.findSlow(layers.LinkTypeEthernet, frame); len(tcp) != 0 {
		t.Errorf("findSlow: a segment of %d bytes", len(tcp))
	}
}

func TestDecodeSegmentsNoAllocs(t *testing.T) {
	d := NewDecoder()
	d.watch(2)
	frame := ethFrame(0x0800, ipv4Packet("10.0.0.1", "10.0.0.2", 6, seg(1, 2, 3, 4, flagACK, tlsHello)))
	var v attempt.SegmentView
	if n := testing.AllocsPerRun(100, func() {
		ip, tcp, _ := d.find(layers.LinkTypeEthernet, frame)
		d.viewOf(&v, ip, tcp, 1, 2)
	}); n != 0 {
		t.Errorf("find and viewOf allocate %v times a segment, want 0", n)
	}
}

// attemptRecords are one connection attempt from 10.0.0.1:40000 to
// 10.0.0.2:port, at seconds base and on: SYN, SYN-ACK, ACK, ClientHello,
// the server's FIN, the client's FIN; with other traffic between.
func attemptRecords(base uint32, port uint16) []pcapRecord {
	const cli, srv = "10.0.0.1", "10.0.0.2"
	at := func(us uint32, src, dst string, payload []byte) pcapRecord {
		return pcapRecord{sec: base, frac: us, data: ethFrame(0x0800, ipv4Packet(src, dst, 6, payload))}
	}
	return []pcapRecord{
		at(0, cli, srv, synSeg(40000, port, 100)),
		at(10, "10.0.0.9", srv, seg(5555, 443, 1, 1, flagACK|0x08, tlsHello)), // another port
		at(20, srv, cli, seg(port, 40000, 900, 101, flagSYN|flagACK, nil)),
		at(30, cli, srv, seg(40000, port, 101, 901, flagACK, nil)),
		at(40, cli, srv, seg(40000, port, 101, 901, flagACK|0x08, tlsHello)),
		at(50, srv, cli, seg(port, 40000, 901, 121, flagFIN|flagACK, nil)),
		at(60, cli, srv, seg(40000, port, 121, 902, flagFIN|flagACK, nil)),
	}
}

// TestReadFileSegments: Options.Segments gets the segments of the port
// that the fates are read from, and nothing of other ports; without a
// port, those of any port a SYN went to before them. FileInfo counts the
// other TCP segments.
func TestReadFileSegments(t *testing.T) {
	type got struct {
		Flags byte
		Sent  backoff.Payload
		Src   string
	}
	recs := attemptRecords(1, 8081)
	// Without a port, a segment of a port no SYN went to yet is not taken.
	early := pcapRecord{sec: 0, data: ethFrame(0x0800, ipv4Packet("10.0.0.2", "10.0.0.1", 6, seg(8081, 39999, 5, 6, flagRST|flagACK, nil)))}
	data := pcapFile(binary.LittleEndian, true, 1, append([]pcapRecord{early}, recs...)...)
	want := []got{
		{flagSYN | flagACK, "", "10.0.0.2:8081"},
		{flagACK | 0x08, backoff.PayloadTLSClientHello, "10.0.0.1:40000"},
		{flagFIN | flagACK, "", "10.0.0.2:8081"},
		{flagFIN | flagACK, "", "10.0.0.1:40000"},
	}
	for _, port := range []uint16{8081, 0} {
		var segs []got
		st, err := readStream("x.pcap", bytes.NewReader(data), int64(len(data)), Options{Port: port, Segments: func(v *attempt.SegmentView) {
			s := v.Segment()
			segs = append(segs, got{s.Flags, s.Sent, s.Src.String()})
		}}, func(attempt.SYN) {})
		if err != nil {
			t.Fatal(err)
		}
		w := want
		if port == 8081 {
			w = append([]got{{flagRST | flagACK, "", "10.0.0.2:8081"}}, want...)
		}
		if diff := cmp.Diff(w, segs); diff != "" {
			t.Errorf("port %d: segments (-want +got):\n%s", port, diff)
		}
		if st.OtherTCP != 7 {
			t.Errorf("port %d: OtherTCP = %d, want 7", port, st.OtherTCP)
		}
	}
}

// TestReadFilesFates: ReadFiles gives every attempt its fate, files given
// in any order; a capture of SYNs only says so and gives none.
func TestReadFilesFates(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, recs ...pcapRecord) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pcapFile(binary.LittleEndian, false, 1, recs...), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	first := attemptRecords(1, 8081)
	// The same tuple again, with new ISNs, and no end: open.
	second := attemptRecords(3, 8081)[:5]
	for _, r := range second {
		tcp := r.data[14+20:]
		field := 4 // the client's seq
		if binary.BigEndian.Uint16(tcp) == 8081 {
			field = 8 // the server's ack
		}
		if binary.BigEndian.Uint16(tcp[2:]) == 443 {
			continue
		}
		binary.BigEndian.PutUint32(tcp[field:], binary.BigEndian.Uint32(tcp[field:])+1000)
	}
	a, b := write("a.pcap", first...), write("b.pcap", second...)
	synOnly := write("syns.pcap", first[0], second[0])
	closed := backoff.Ending{Fate: backoff.FateClosed, Accepted: 20e3, Duration: 50e3, ClientSent: backoff.PayloadTLSClientHello}
	open := backoff.Ending{Fate: backoff.FateOpen, Accepted: 20e3, ClientSent: backoff.PayloadTLSClientHello}
	tests := []struct {
		name  string
		paths []string
		want  []backoff.Ending
	}{
		{"in order", []string{a, b}, []backoff.Ending{closed, open}},
		{"out of order", []string{b, a}, []backoff.Ending{closed, open}},
		{"SYNs only", []string{synOnly}, []backoff.Ending{{}, {}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pt, info, err := ReadFiles(tt.paths, Options{Port: 8081}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if info.SYNOnly != (tt.name == "SYNs only") {
				t.Errorf("SYNOnly = %v", info.SYNOnly)
			}
			var got []backoff.Ending
			for _, c := range pt.Tracker(8081).Peers() {
				for _, a := range c.Attempts {
					got = append(got, a.Ending)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("endings (-want +got):\n%s", diff)
			}
		})
	}
}

// The fate filter runs in libpcap without a capture, so it is checked here
// without privileges, on hand-made frames: what the fates need passes in
// both directions, a pure ACK and other ports do not, nor a SYN from the
// port (another program's, whose ephemeral port is the same number).
func TestFateFilter(t *testing.T) {
	const port = 50052
	v4 := func(sport, dport uint16, flags byte, data []byte) []byte {
		return ethFrame(0x0800, ipv4Packet("127.0.0.1", "127.0.0.1", 6, seg(sport, dport, 1, 2, flags, data)))
	}
	v6 := func(sport, dport uint16, flags byte, data []byte) []byte {
		return ethFrame(0x86dd, ipv6Packet("::1", "::1", 6, seg(sport, dport, 1, 2, flags, data)))
	}
	withOptions := ethFrame(0x0800, ipv4Packet("127.0.0.1", "127.0.0.1", 6, tcpHeader(40000, port, 1, flagACK, 8)))
	tso := v4(40000, port, flagACK, nil)
	binary.BigEndian.PutUint16(tso[14+2:], 0)
	tests := []struct {
		name  string
		frame []byte
		want  bool
	}{
		{"ipv4 syn", v4(40000, port, flagSYN, nil), true},
		{"ipv4 syn-ack", v4(port, 40000, flagSYN|flagACK, nil), true},
		{"ipv4 rst-ack from the port", v4(port, 40000, flagRST|flagACK, nil), true},
		{"ipv4 fin to the port", v4(40000, port, flagFIN|flagACK, nil), true},
		{"ipv4 data to the port", v4(40000, port, flagACK|0x08, tlsHello), true},
		{"ipv4 data from the port", v4(port, 40000, flagACK, []byte{1}), true},
		{"ipv4 pure ack", v4(40000, port, flagACK, nil), false},
		{"ipv4 pure ack with options", withOptions, false},
		{"ipv4 offloaded, no IP length", tso, true},
		{"ipv4 another port", v4(40000, port+1, flagRST, nil), false},
		{"ipv4 syn from the port to another", v4(port, 33115, flagSYN, nil), false},
		{"ipv6 syn", v6(40000, port, flagSYN, nil), true},
		{"ipv6 syn-ack", v6(port, 40000, flagSYN|flagACK, nil), true},
		{"ipv6 rst from the port", v6(port, 40000, flagRST, nil), true},
		{"ipv6 fin to the port", v6(40000, port, flagFIN|flagACK, nil), true},
		{"ipv6 data to the port", v6(40000, port, flagACK, tlsHello), true},
		{"ipv6 data from the port", v6(port, 40000, flagACK, []byte{0, 0, 0, 4, 0, 0, 0, 0, 0}), true},
		{"ipv6 pure ack", v6(40000, port, flagACK, nil), false},
		{"ipv6 another port", v6(40000, port+1, flagFIN, nil), false},
		{"ipv6 syn from the port to another", v6(port, 33115, flagSYN, nil), false},
		{"ipv6 udp to the port", ethFrame(0x86dd, ipv6Packet("::1", "::1", 17, seg(40000, port, 1, 2, flagSYN, nil))), false},
	}
	bpf, err := pcap.NewBPF(layers.LinkTypeEthernet, liveSnapLen, FateFilter(port))
	if err != nil {
		t.Fatalf("compile %q: %v", FateFilter(port), err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ci := gopacket.CaptureInfo{CaptureLength: min(len(tt.frame), liveSnapLen), Length: len(tt.frame)}
			if got := bpf.Matches(ci, tt.frame[:ci.CaptureLength]); got != tt.want {
				t.Errorf("Matches = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestDecoderWatch: one watched port is compared directly, and stays so
// however often it is watched again; a second makes the set decide; port
// 0 is a port like any other.
func TestDecoderWatch(t *testing.T) {
	d := NewDecoder()
	if d.watched(8081, 40000) {
		t.Error("a port watched before any was")
	}
	d.watch(8081)
	d.watch(8081)
	if d.port != 8081 || !d.watched(40000, 8081) || !d.watched(8081, 1) || d.watched(443, 40000) {
		t.Errorf("one port watched: port %d, watched(40000, 8081) %v, watched(443, 40000) %v", d.port, d.watched(40000, 8081), d.watched(443, 40000))
	}
	d.watch(0)
	if d.port != 0 || !d.watched(40000, 8081) || !d.watched(0, 40000) || d.watched(443, 40000) {
		t.Errorf("8081 and 0 watched: port %d, watched(40000, 8081) %v, watched(0, 40000) %v, watched(443, 40000) %v",
			d.port, d.watched(40000, 8081), d.watched(0, 40000), d.watched(443, 40000))
	}
	z := NewDecoder()
	z.watch(0)
	if !z.watched(0, 40000) || z.watched(8081, 40000) {
		t.Error("port 0 alone: not watched as a port")
	}
}

// TestDecodeSYNACKToPort: a SYN-ACK from the watched port is taken, and
// one to it, which answers a SYN from it (the port as a client's
// ephemeral port), is not, on the fast path as off it; other segments to
// the port are.
func TestDecodeSYNACKToPort(t *testing.T) {
	for _, tt := range []struct {
		name       string
		sport, dpt uint16
		flags      byte
		want       bool
	}{
		{"SYN-ACK from the port", 50052, 40000, flagSYN | flagACK, true},
		{"SYN-ACK to the port", 80, 50052, flagSYN | flagACK, false},
		{"RST to the port", 40000, 50052, flagRST | flagACK, true},
		{"FIN from the port", 50052, 40000, flagFIN | flagACK, true},
	} {
		// Options to a 36-byte header: a frame long enough for every path.
		tcp := append(seg(tt.sport, tt.dpt, 3, 4, tt.flags, nil), bytes.Repeat([]byte{1}, 16)...)
		tcp[12] = 9 << 4
		frame := ethFrame(0x0800, ipv4Packet("10.0.0.1", "10.0.0.2", 6, tcp))
		d := NewDecoder()
		d.watch(50052)
		_, got, _ := d.find(layers.LinkTypeEthernet, frame)
		_, slow, _ := d.findSlow(layers.LinkTypeEthernet, frame)
		pt, n, done := d.plainOtherTCP(frame)
		fast := done && pt != nil && d.takes(pt, n)
		if len(got) != 0 != tt.want || len(slow) != 0 != tt.want || fast != tt.want {
			t.Errorf("%s: find %v, findSlow %v, fast path %v; want %v", tt.name, len(got) != 0, len(slow) != 0, fast, tt.want)
		}
	}
}

// plainOtherTCP is plainOther's answer as the TCP header it locates, and
// whether the frame is done with.
func (d *Decoder) plainOtherTCP(f []byte) (tcp []byte, seg int, done bool) {
	off, seg := d.plainOther(f)
	switch {
	case off == 0:
		return nil, 0, false
	case off < 0:
		return nil, 0, true
	}
	return f[off:], seg, true
}
