package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/pcapgo"
)

// Ports of the interop test (docs/spec.md §1) as the fixtures use them.
const (
	controlPort = 50051
	retryPort   = 50052
)

// epoch is the first timestamp of every fixture: fixed, so that the files
// are byte-for-byte reproducible.
var epoch = time.Date(2025, 3, 14, 15, 9, 26, 535897000, time.UTC)

// backoff is the client policy a generated chain follows.
type backoff struct {
	base       time.Duration
	multiplier float64
	jitter     float64 // uniform ±jitter on every backoff after the first
	maxDelay   time.Duration
}

var specBackoff = backoff{base: time.Second, multiplier: 1.6, jitter: 0.2, maxDelay: 120 * time.Second}

// gaps returns n−1 gaps between n attempts of a spec client: the first
// un-jittered, later ones E·U(1−j, 1+j) with E capped before jitter, all
// counted from attempt start, plus the 0.2–0.5 ms a user-space client takes
// to send its SYN.
func (b backoff) gaps(r *rand.Rand, n int) []time.Duration {
	gs := make([]time.Duration, 0, max(n-1, 0))
	e := float64(b.base)
	for k := 1; k < n; k++ {
		g := e
		if k > 1 {
			e = min(e*b.multiplier, float64(b.maxDelay))
			g = e * (1 - b.jitter + 2*b.jitter*r.Float64())
		}
		gs = append(gs, time.Duration(g)+sendDelay(r))
	}
	return gs
}

func sendDelay(r *rand.Rand) time.Duration {
	return 200*time.Microsecond + time.Duration(r.Int64N(int64(300*time.Microsecond)))
}

// chain describes one client's attempts on the retry port.
type chain struct {
	client netip.Addr
	server netip.AddrPort
	start  time.Time
	gaps   []time.Duration
	// retransmit maps an attempt index to the delays after its first SYN at
	// which the kernel sent the SYN again (Linux: 1 s, then 3 s, …).
	retransmit map[int][]time.Duration
}

// packets returns every packet of the chain. Each attempt is what the
// reference's retry port does to a TLS client: handshake, ClientHello, and
// a reset once the server has closed the connection unread.
func (c chain) packets(r *rand.Rand) []packet {
	var ps []packet
	port := uint16(40000 + r.IntN(20000))
	t := c.start
	for i := 0; i <= len(c.gaps); i++ {
		if i > 0 {
			t = t.Add(c.gaps[i-1])
		}
		port += uint16(1 + r.IntN(8))
		ps = append(ps, attempt(r, netip.AddrPortFrom(c.client, port), c.server, t, c.retransmit[i])...)
	}
	return ps
}

var clientHello = bytes.Repeat([]byte{0x16, 0x03, 0x01, 0x00}, 60)

// attempt returns the packets of one connection attempt at t.
func attempt(r *rand.Rand, client, server netip.AddrPort, t time.Time, retransmit []time.Duration) []packet {
	isn, sisn := r.Uint32(), r.Uint32()
	ps := []packet{{ts: t, src: client, dst: server, flags: fSYN, seq: isn}}
	for _, d := range retransmit {
		ps = append(ps, packet{ts: t.Add(d), src: client, dst: server, flags: fSYN, seq: isn})
	}
	t = ps[len(ps)-1].ts
	us := func(n int) time.Time { return t.Add(time.Duration(n+r.IntN(10)) * time.Microsecond) }
	return append(ps,
		packet{ts: us(20), src: server, dst: client, flags: fSYN | fACK, seq: sisn, ack: isn + 1, reply: true},
		packet{ts: us(40), src: client, dst: server, flags: fACK, seq: isn + 1, ack: sisn + 1},
		packet{ts: us(120), src: client, dst: server, flags: fPSH | fACK, seq: isn + 1, ack: sisn + 1, payload: clientHello},
		packet{ts: us(200), src: server, dst: client, flags: fRST | fACK, seq: sisn + 1, ack: isn + 1 + uint32(len(clientHello)), reply: true},
	)
}

// sortPackets orders packets by time; ties keep their order.
func sortPackets(ps []packet) {
	slices.SortStableFunc(ps, func(a, b packet) int { return a.ts.Compare(b.ts) })
}

// fixture is one committed capture.
type fixture struct {
	name  string
	write func(dir, name string) error
}

var (
	lo4     = netip.MustParseAddr("127.0.0.1")
	lo6     = netip.MustParseAddr("::1")
	retry4  = netip.AddrPortFrom(lo4, retryPort)
	retry6  = netip.AddrPortFrom(lo6, retryPort)
	vlanSrv = netip.AddrPortFrom(netip.MustParseAddr("10.1.0.1"), retryPort)
	vlanCli = netip.MustParseAddr("10.1.0.2")
)

// rng returns the fixture's own random source, so that adding a fixture
// never changes another's bytes.
func rng(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5eed)) }

// passing returns the packets of an n-attempt spec chain from client.
func passing(seed uint64, client netip.Addr, server netip.AddrPort, n int) []packet {
	r := rng(seed)
	return chain{client: client, server: server, start: epoch, gaps: specBackoff.gaps(r, n)}.packets(r)
}

// withGaps returns the packets of a chain with the given gaps.
func withGaps(seed uint64, client netip.Addr, server netip.AddrPort, gaps ...time.Duration) []packet {
	r := rng(seed)
	return chain{client: client, server: server, start: epoch, gaps: gaps}.packets(r)
}

func ms(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

// fixtures lists every committed capture. testdata/README.md explains each.
var fixtures = []fixture{
	{"ipv4-ether.pcap", func(dir, name string) error {
		return writePcap(dir, name, linkEthernet, false, passing(1, lo4, retry4, 8))
	}},
	{"ipv4-ether.pcap.gz", func(dir, name string) error {
		var buf bytes.Buffer
		if err := pcapTo(&buf, linkEthernet, false, passing(1, lo4, retry4, 8)); err != nil {
			return err
		}
		return writeGzip(filepath.Join(dir, name), buf.Bytes())
	}},
	{"ipv6-ether-ns.pcap", func(dir, name string) error {
		return writePcap(dir, name, linkEthernet, true, passing(2, lo6, retry6, 8))
	}},
	{"vlan.pcap", func(dir, name string) error {
		return writePcap(dir, name, linkVLAN, true, passing(3, vlanCli, vlanSrv, 7))
	}},
	{"sll.pcap", func(dir, name string) error {
		return writePcap(dir, name, linkSLL, false, passing(4, lo4, retry4, 7))
	}},
	{"sll2.pcap", func(dir, name string) error {
		return writePcap(dir, name, linkSLL2, true, passing(5, lo6, retry6, 7))
	}},
	{"null.pcap", func(dir, name string) error {
		// A C-core client on a Mac resolving localhost: one chain per
		// address family, interleaved (docs/spec.md §6).
		ps := append(passing(6, lo4, retry4, 6), passing(7, lo6, retry6, 6)...)
		return writePcap(dir, name, linkNull, false, ps)
	}},
	{"two-peers.pcapng", func(dir, name string) error {
		ps := append(passing(8, lo4, retry4, 7), passing(9, lo6, retry6, 7)...)
		return writePcapng(dir, name, linkEthernet, ps)
	}},
	{"two-interfaces.pcapng", func(dir, name string) error {
		// Attempts alternate between an Ethernet interface with the
		// default microsecond resolution and a cooked one with
		// nanoseconds: a reader that scales either wrongly breaks the
		// chain.
		ps := passing(10, lo4, retry4, 8)
		iface, last := 0, -1
		for i := range ps {
			if ps[i].flags == fSYN && ps[i].seq != uint32(last) {
				iface = 1 - iface
				last = int(ps[i].seq)
			}
			ps[i].iface = iface
		}
		return writeTwoInterfaces(dir, name, ps)
	}},
	{"retransmit.pcap", func(dir, name string) error {
		// Attempt 4's SYN is lost once and attempt 6's twice; counted as
		// attempts, the retransmissions would fail intervals 4 and 6.
		r := rng(11)
		c := chain{client: lo4, server: retry4, start: epoch, gaps: specBackoff.gaps(r, 8),
			retransmit: map[int][]time.Duration{3: {time.Second}, 5: {time.Second, 3 * time.Second}}}
		return writePcap(dir, name, linkEthernet, true, c.packets(r))
	}},
	{"too-soon.pcap", func(dir, name string) error {
		// Interval 3 is 1500 ms, window 1948–3172.
		return writePcap(dir, name, linkEthernet, true,
			withGaps(12, lo4, retry4, ms(1000.3), ms(1702.5), ms(1500.4), ms(4301.2)))
	}},
	{"too-late.pcap", func(dir, name string) error {
		// Interval 2 is 2200 ms, window 1180–2020.
		return writePcap(dir, name, linkEthernet, true,
			withGaps(13, lo4, retry4, ms(1000.4), ms(2200.1), ms(2690.7)))
	}},
	{"no-cap.pcap", func(dir, name string) error {
		// The client ignores max_reconnect_backoff_ms=2000 and keeps
		// growing: it fails with --max_backoff 2s from interval 3 and
		// passes the default policy.
		r := rng(14)
		return writePcap(dir, name, linkEthernet, true,
			chain{client: lo4, server: retry4, start: epoch, gaps: specBackoff.gaps(r, 7)}.packets(r))
	}},
	{"zero-backoff.pcap", func(dir, name string) error {
		// grpc-go with a zero Backoff.MaxDelay (docs/spec.md §6): one second,
		// then a reconnect storm.
		r := rng(15)
		gaps := []time.Duration{ms(1000.35)}
		for range 8 {
			gaps = append(gaps, sendDelay(r))
		}
		return writePcap(dir, name, linkEthernet, true,
			chain{client: lo4, server: retry4, start: epoch, gaps: gaps}.packets(r))
	}},
	{"two-ports.pcap", func(dir, name string) error {
		// What tcpdump sees without a port filter: the client's Start on
		// the control port, the retry chain, and a DNS lookup.
		r := rng(16)
		ctl := netip.AddrPortFrom(lo4, controlPort)
		ps := attempt(r, netip.AddrPortFrom(lo4, 39999), ctl, epoch.Add(-3*time.Millisecond), nil)
		ps = append(ps, passing(17, lo4, retry4, 6)...)
		dns := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.53"), 53)
		ps = append(ps, packet{ts: epoch.Add(-9 * time.Millisecond), src: netip.AddrPortFrom(lo4, 51515), dst: dns, udp: true, payload: []byte("\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x09localhost\x00\x00\x01\x00\x01")})
		return writePcap(dir, name, linkEthernet, true, ps)
	}},
	{"mixed.pcapng", func(dir, name string) error {
		// Three peers: one passes, one retries too soon, one connects once.
		ps := passing(18, netip.MustParseAddr("127.0.0.2"), retry4, 6)
		ps = append(ps, withGaps(19, netip.MustParseAddr("127.0.0.3"), retry4, ms(1000.2), ms(1600.3), ms(900.5))...)
		ps = append(ps, withGaps(20, netip.MustParseAddr("127.0.0.4"), retry4)...)
		return writePcapng(dir, name, linkEthernet, ps)
	}},
	{"rotated.pcap", writeRotated},
}

// writeRotated writes one chain split over three files the way
// `tcpdump -C 1 -w rotated.pcap` names them: rotated.pcap, rotated.pcap1,
// rotated.pcap2.
func writeRotated(dir, name string) error {
	ps := passing(21, lo4, retry4, 9)
	sortPackets(ps)
	third := (len(ps) + 2) / 3
	for i := 0; i < 3; i++ {
		n := name
		if i > 0 {
			n = fmt.Sprintf("%s%d", name, i)
		}
		part := ps[i*third : min((i+1)*third, len(ps))]
		if err := writePcap(dir, n, linkEthernet, false, part); err != nil {
			return err
		}
	}
	return nil
}

// writeFixtures writes every fixture into dir.
func writeFixtures(dir string) error {
	for _, f := range fixtures {
		if err := f.write(dir, f.name); err != nil {
			return fmt.Errorf("write fixture %s: %w", f.name, err)
		}
	}
	return nil
}

const snaplen = 262144

func writePcap(dir, name string, l link, nanos bool, ps []packet) error {
	var buf bytes.Buffer
	if err := pcapTo(&buf, l, nanos, ps); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name), buf.Bytes(), 0o644)
}

// pcapTo writes ps, sorted by time, as a classic pcap file.
func pcapTo(buf *bytes.Buffer, l link, nanos bool, ps []packet) error {
	sortPackets(ps)
	w := pcapgo.NewWriter(buf)
	if nanos {
		w = pcapgo.NewWriterNanos(buf)
	}
	if err := w.WriteFileHeader(snaplen, l.LinkType()); err != nil {
		return err
	}
	return writeFrames(w, l, ps)
}

// writePcapng writes ps as pcapng with pcapgo's writer; the section and
// interface options are fixed (pcapgo's defaults name the host's OS).
func writePcapng(dir, name string, l link, ps []packet) error {
	sortPackets(ps)
	var buf bytes.Buffer
	w, err := pcapgo.NewNgWriterInterface(&buf,
		pcapgo.NgInterface{Name: "lo", LinkType: l.LinkType(), SnapLength: snaplen, TimestampResolution: 9},
		pcapgo.NgWriterOptions{SectionInfo: pcapgo.NgSectionInfo{Application: "audit capture/internal/gen"}})
	if err != nil {
		return err
	}
	if err := writeFrames(w, l, ps); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name), buf.Bytes(), 0o644)
}

// writeFrames builds each packet's frame for l and writes it to w, a pcap or
// a pcapng writer of pcapgo.
func writeFrames(w interface {
	WritePacket(gopacket.CaptureInfo, []byte) error
}, l link, ps []packet) error {
	b := newBuilder()
	for _, p := range ps {
		data, err := b.frame(l, p)
		if err != nil {
			return err
		}
		ci := gopacket.CaptureInfo{Timestamp: p.ts, CaptureLength: len(data), Length: len(data)}
		if err := w.WritePacket(ci, data); err != nil {
			return err
		}
	}
	return nil
}

// writeGzip compresses data with a zero header (no name, no time), so the
// output depends only on data and the Go version's deflate.
func writeGzip(path string, data []byte) error {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return err
	}
	if _, err := zw.Write(data); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// twoInterfaces describes the interfaces of two-interfaces.pcapng.
var twoInterfaces = []ngInterface{
	{name: "eth0", link: linkEthernet, tsresol: 0}, // option absent: 10^-6
	{name: "any", link: linkSLL, tsresol: 9},
}

func writeTwoInterfaces(dir, name string, ps []packet) error {
	sortPackets(ps)
	var buf bytes.Buffer
	if err := writeNg(&buf, twoInterfaces, ps); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name), buf.Bytes(), 0o644)
}
