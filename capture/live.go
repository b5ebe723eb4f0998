package capture

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcap"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/backoff-audit/audit/attempt"
)

// Live capture defaults.
const (
	// DefaultLiveBuffer is the kernel ring for a live capture: the slack
	// the reader has while it is descheduled. A frame of the ring takes
	// 240 bytes whatever the packet (the snap length, liveSnapLen, and
	// libpcap's header), on lo each packet takes two (see
	// attempt.LiveStats), and the fate filter keeps each refused SYN's RST
	// as well: 960 bytes a refused SYN on lo, so 64 MiB holds about 70 000
	// of them, 0.7 s at 100 000 SYN/s, and 8 MiB 8 700
	// (BenchmarkLiveRingCapacity). Neither lost a SYN up to 100 000 SYN/s
	// on two shared cores (RELIABILITY.md, "SYNs per second"); the larger
	// ring is the slack of a more loaded machine. The kernel allocates it
	// when the capture opens.
	DefaultLiveBuffer = 64 << 20
	// liveSnapLen keeps every header a segment the filters pass can carry
	// (an Ethernet header with two VLAN tags, 22 bytes, or a cooked one,
	// 20; IPv4 with options, 60; TCP with options, 60) and the first
	// attempt.PayloadBytes of its data, enough to name them
	// (docs/spec.md §7); an IPv6 header, 40 bytes without extension
	// headers (the filter's IPv6 clause passes no other), leaves more.
	liveSnapLen = 22 + 60 + 60 + attempt.PayloadBytes
	// livePoll bounds how long a read waits before Run looks at its
	// context again. Immediate mode delivers each packet as it arrives, so
	// this costs no latency; it only bounds how late a cancellation is seen.
	livePoll = 100 * time.Millisecond
	// maxDrain bounds how long Run reads on after its context ended, should
	// packets keep coming.
	maxDrain = 2 * time.Second
	// flushEvery bounds how stale the capture file is while packets keep
	// coming: it is flushed when a read times out (nothing came for
	// livePoll), when a packet comes this long after the last flush (by
	// the packets' timestamps), and on Close. A flush per packet was one
	// write(2) per SYN, 15 % of `audit live`'s CPU at 50 000 SYN/s.
	flushEvery = 250 * time.Millisecond
	// writeBuffer is the capture file's buffer: about 650 SYNs on lo.
	writeBuffer = 64 << 10
	// WholeSnapLen is the snap length of a capture that keeps whole
	// packets (LiveConfig.Whole): libpcap's largest, as tcpdump's -s 0.
	WholeSnapLen = 262144
	// DefaultWholeBuffer is the kernel ring of a capture that keeps whole
	// packets. In immediate mode libpcap's ring gives every packet a
	// frame of the snap length, bounded by the interface's MTU (on lo,
	// 65536), so a ring holds a few hundred times fewer packets than the
	// retry port's (BenchmarkLiveRingCapacityWhole; RELIABILITY.md,
	// "Sessions, shutdown and record files"). A control port's calls are
	// a few segments each.
	DefaultWholeBuffer = 8 << 20
)

// MaxLivePorts bounds the ports of one live capture: its filter has a
// clause per port.
const MaxLivePorts = 64

// ErrUnknownInterface is wrapped by OpenLive when no such interface exists.
var ErrUnknownInterface = errors.New("unknown interface")

// LiveConfig says what to capture.
type LiveConfig struct {
	// Iface is the interface to capture on, e.g. "lo" ("any" also works,
	// with Linux cooked link headers).
	Iface string
	// Port is the retry port: only SYNs to it are captured, and with
	// Segments the segments of it the fates are read from.
	Port uint16
	// Ports are more ports captured as Port is, on the same handle and
	// ring (`audit watch`), at most MaxLivePorts in all.
	Ports []uint16
	// Segments, when set, makes the capture keep, besides the SYNs to
	// Port, the SYN-ACKs, RSTs, FINs and segments carrying data of Port in
	// both directions (FateFilter), and Run hand each of those to it; the
	// view is valid only during the call. Without it the capture keeps
	// the SYNs alone (SYNFilter).
	Segments func(*attempt.SegmentView)
	// BufferSize is the kernel capture buffer in bytes; 0 means
	// DefaultLiveBuffer.
	BufferSize int
	// Whole keeps whole packets (WholeSnapLen) rather than headers and
	// the first bytes of data, for a port whose bytes are decoded (the
	// control port, docs/spec.md §5.6); it needs Segments. Its ring
	// frames are as large as the snap length (DefaultWholeBuffer), so a
	// port of many SYNs, the retry port, keeps a capture of its own.
	Whole bool
	// Write, when set, receives every captured packet as a pcap file with
	// nanosecond timestamps, which `audit pcap` reads back. OpenLive writes
	// the file header at once. Packets are buffered and flushed whenever
	// the capture is idle for a read timeout, at least every flushEvery
	// while packets come, and by Close, so the file is complete and valid
	// once Run has returned and Close was called, whatever stopped it.
	Write io.Writer
	// File, instead of Write, is a pcapng file this capture shares with
	// others, on an interface of its own: its snap length, its filter,
	// and its packets in capture order (LiveFile). It is written and
	// flushed as Write is; Close flushes it, and the caller closes the
	// writer under it once every capture sharing it is closed.
	File *LiveFile
}

// Live is a libpcap capture of the SYNs to one port. Its timestamps are
// the kernel's, taken when a packet crosses the interface, free of the
// accept-scheduling delay of the server's own list (docs/spec.md §5).
type Live struct {
	h     *pcap.Handle
	port  uint16   // the port, when there is one
	ports *portSet // the ports, when there are more
	iface string
	lt    layers.LinkType
	dec   *Decoder
	ts    string
	segFn func(*attempt.SegmentView)
	view  attempt.SegmentView

	file    *LiveFile // nil without Write or File
	ifIndex int       // this capture's interface in a shared File

	hmu    sync.Mutex // guards closed: libpcap must not be asked after Close
	closed bool
}

// SYNFilter returns the BPF filter for SYN-without-ACK segments to port over
// IPv4 and IPv6. BPF's tcp[...] offsets address IPv4 only (docs/spec.md §5), so
// IPv6 has a clause of its own that reads the TCP header right after a
// fixed 40-byte IPv6 header; a SYN behind extension headers is not matched
// there, which no client of this test sends.
func SYNFilter(port uint16) string {
	return fmt.Sprintf("(tcp dst port %d and tcp[13] & 0x12 == 0x02) or "+
		"(ip6 and ip6[6] == 6 and ip6[42:2] == %d and ip6[53] & 0x12 == 0x02)", port, port)
}

// FateFilter returns the BPF filter for what the fates of the attempts to
// port are read from (docs/spec.md §7), over IPv4 and IPv6: every TCP
// segment to or from port with SYN, RST or FIN set (SYNs, SYN-ACKs,
// resets, closes), or that carries data; a pure ACK does not pass, nor a
// SYN without ACK from port (another program's connection from an
// ephemeral port that happens to be port is no attempt to it). The
// data's length is the IP length less the IP and TCP headers; a
// segment whose IP length is 0 (an offloaded one, captured where it
// leaves) passes, as the length wraps around. As in SYNFilter, the IPv6
// clause reads the TCP header right after a 40-byte IPv6 header: a
// segment behind extension headers does not pass (docs/spec.md §5.5).
func FateFilter(port uint16) string {
	return fmt.Sprintf("(ip and tcp port %d and (tcp[13] & 0x12 != 0x02 or tcp dst port %d) and (tcp[13] & 0x07 != 0 or "+
		"ip[2:2] - ((ip[0] & 0x0f) << 2) - ((tcp[12] & 0xf0) >> 2) != 0)) or "+
		"(ip6 and ip6[6] == 6 and (ip6[40:2] == %d or ip6[42:2] == %d) and (ip6[53] & 0x12 != 0x02 or ip6[42:2] == %d) and (ip6[53] & 0x07 != 0 or "+
		"ip6[4:2] - ((ip6[52] & 0xf0) >> 2) != 0))", port, port, port, port, port)
}

// OpenLive opens a live capture: immediate mode, nanosecond timestamps
// where libpcap offers them, the host clock as timestamp source, a kernel
// buffer sized for bursts, a snap length that keeps headers and the first
// bytes of data, and the SYN filter, or with cfg.Segments the fate filter. Its errors say what to do: a
// permission error wraps os.ErrPermission and names the capabilities; an
// unknown interface wraps ErrUnknownInterface and lists the available ones.
func OpenLive(cfg LiveConfig) (*Live, error) {
	ports, err := cfg.ports()
	if err != nil {
		return nil, err
	}
	if cfg.Iface == "" {
		return nil, fmt.Errorf("open live capture: no interface: %w (available: %s)", ErrUnknownInterface, availableInterfaces())
	}
	if cfg.Whole && cfg.Segments == nil {
		return nil, errors.New("open live capture: whole packets without Segments to hand them to")
	}
	if cfg.Write != nil && cfg.File != nil {
		return nil, errors.New("open live capture: both Write and File: a capture writes one file")
	}
	if cfg.Iface != "any" {
		if _, err := net.InterfaceByName(cfg.Iface); err != nil {
			return nil, fmt.Errorf("open live capture on %q: %w (available: %s)", cfg.Iface, ErrUnknownInterface, availableInterfaces())
		}
	}
	h, ts, err := activate(cfg)
	if err != nil {
		return nil, err
	}
	l := &Live{h: h, port: cfg.Port, iface: cfg.Iface, lt: h.LinkType(), dec: NewDecoder(), ts: ts, segFn: cfg.Segments}
	if len(ports) > 1 {
		l.port, l.ports = 0, new(portSet)
	}
	clauses := make([]string, len(ports))
	for i, p := range ports {
		clauses[i] = SYNFilter(p)
		if l.segFn != nil {
			clauses[i] = FateFilter(p)
			l.dec.watch(p)
		}
		if l.ports != nil {
			l.ports.add(p)
		}
	}
	filter := clauses[0]
	if len(clauses) > 1 {
		filter = "(" + strings.Join(clauses, ") or (") + ")"
	}
	if err := h.SetBPFFilter(filter); err != nil {
		h.Close()
		return nil, fmt.Errorf("set capture filter on %s: %w", cfg.Iface, err)
	}
	switch {
	case cfg.Write != nil:
		l.file, err = newPcapFile(cfg.Write, h.SnapLen(), l.lt)
	case cfg.File != nil:
		l.file = cfg.File
		l.ifIndex, err = l.file.addInterface(ngInterface(cfg, l.lt, filter))
	}
	if err != nil {
		h.Close()
		return nil, err
	}
	return l, nil
}

// ngInterface describes a capture in a shared file. Every interface
// declares the largest snap length, WholeSnapLen, whatever its capture's:
// libpcap (tcpdump) refuses a pcapng file whose interfaces declare
// different ones, and a record shorter than its interface's snap length is
// valid. The retry port's records stay header-only; the description says
// what each interface keeps.
func ngInterface(cfg LiveConfig, lt layers.LinkType, filter string) pcapgo.NgInterface {
	ports, _ := cfg.ports()
	what := fmt.Sprintf("%s, headers and the first %d bytes of data (snap length %d)", portsText(ports), attempt.PayloadBytes, liveSnapLen)
	if cfg.Whole {
		what = fmt.Sprintf("%s, whole packets", portsText(ports))
	}
	return pcapgo.NgInterface{Name: cfg.Iface, Description: what, Filter: filter, OS: runtime.GOOS,
		LinkType: lt, SnapLength: WholeSnapLen, TimestampResolution: 9}
}

// ports returns Port and Ports, each once.
func (c LiveConfig) ports() ([]uint16, error) {
	var ports []uint16
	for _, p := range append([]uint16{c.Port}, c.Ports...) {
		if p == 0 {
			return nil, errors.New("open live capture: port 0")
		}
		if !slices.Contains(ports, p) {
			ports = append(ports, p)
		}
	}
	if len(ports) > MaxLivePorts {
		return nil, fmt.Errorf("open live capture: %d ports: at most %d", len(ports), MaxLivePorts)
	}
	return ports, nil
}

// portsText names ports for a person: "port 50052", "ports 50051, 50052".
func portsText(ports []uint16) string {
	if len(ports) == 1 {
		return fmt.Sprintf("port %d", ports[0])
	}
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = strconv.Itoa(int(p))
	}
	return "ports " + strings.Join(s, ", ")
}

// captures reports whether SYNs to port are the capture's.
func (l *Live) captures(port uint16) bool {
	if l.ports != nil {
		return l.ports.has(port)
	}
	return port == l.port
}

func activate(cfg LiveConfig) (*pcap.Handle, string, error) {
	in, err := pcap.NewInactiveHandle(cfg.Iface)
	if err != nil {
		return nil, "", fmt.Errorf("open live capture on %s: %w", cfg.Iface, err)
	}
	defer in.CleanUp()
	buf, snap := cfg.BufferSize, liveSnapLen
	if cfg.Whole {
		snap = WholeSnapLen
	}
	switch {
	case buf > 0:
	case cfg.Whole:
		buf = DefaultWholeBuffer
	default:
		buf = DefaultLiveBuffer
	}
	steps := []struct {
		what string
		err  error
	}{
		{"snap length", in.SetSnapLen(snap)},
		{"promiscuous mode", in.SetPromisc(false)},
		{"read timeout", in.SetTimeout(livePoll)},
		{"immediate mode", in.SetImmediateMode(true)},
		{"buffer size", in.SetBufferSize(buf)},
	}
	for _, s := range steps {
		if s.err != nil {
			return nil, "", fmt.Errorf("set %s on %s: %w", s.what, cfg.Iface, s.err)
		}
	}
	// The host clock is the clock the server's accept times come from, so
	// the two lists compare; an adapter's clock would not.
	src := "host"
	if host, err := pcap.TimestampSourceFromString("host"); err == nil {
		if slices.Contains(in.SupportedTimestamps(), host) {
			if err := in.SetTimestampSource(host); err != nil {
				src = "default"
			}
		} else if len(in.SupportedTimestamps()) > 0 {
			src = "default"
		}
	}
	h, err := in.Activate() // asks libpcap for nanosecond precision
	if err != nil {
		return nil, "", activateError(cfg.Iface, err)
	}
	res := "microsecond"
	if h.Resolution() == gopacket.TimestampResolutionNanosecond {
		res = "nanosecond"
	}
	return h, fmt.Sprintf("%s clock (kernel timestamp at capture), %s precision", src, res), nil
}

// activateError turns libpcap's activation status into an error a person
// can act on. gopacket does not export the status type, so its text is
// what there is to go by.
func activateError(iface string, err error) error {
	msg := err.Error()
	switch {
	case msg == "Permission Denied" || strings.Contains(msg, "not permitted") || strings.Contains(msg, "ermission"):
		return fmt.Errorf("capture on %s: %w: run as root, or give the binary CAP_NET_RAW and CAP_NET_ADMIN "+
			"(sudo setcap cap_net_raw,cap_net_admin=eip %s)", iface, os.ErrPermission, executable())
	case msg == "No Such Device":
		return fmt.Errorf("capture on %q: %w (available: %s)", iface, ErrUnknownInterface, availableInterfaces())
	case msg == "Interface Not Up":
		return fmt.Errorf("capture on %s: interface is down (ip link set %s up)", iface, iface)
	}
	return fmt.Errorf("capture on %s: %w", iface, err)
}

func executable() string {
	p, err := os.Executable()
	if err != nil {
		return "PATH/TO/audit"
	}
	return p
}

func availableInterfaces() string {
	var names []string
	if devs, err := pcap.FindAllDevs(); err == nil {
		for _, d := range devs {
			names = append(names, d.Name)
		}
	} else if ifs, err := net.Interfaces(); err == nil {
		for _, i := range ifs {
			names = append(names, i.Name)
		}
	}
	if len(names) == 0 {
		return "none found"
	}
	return strings.Join(names, ", ")
}

// Timestamps says which timestamp source and precision the capture uses.
func (l *Live) Timestamps() string { return l.ts }

// Stats returns libpcap's counters. After Close it returns an error.
func (l *Live) Stats() (attempt.LiveStats, error) {
	l.hmu.Lock()
	defer l.hmu.Unlock()
	if l.closed {
		return attempt.LiveStats{}, fmt.Errorf("capture statistics on %s: capture closed", l.iface)
	}
	s, err := l.h.Stats()
	if err != nil {
		return attempt.LiveStats{}, fmt.Errorf("capture statistics on %s: %w", l.iface, err)
	}
	return attempt.LiveStats{
		Received:  uint64(uint32(s.PacketsReceived)),
		Dropped:   uint64(uint32(s.PacketsDropped)),
		IfDropped: uint64(uint32(s.PacketsIfDropped)),
	}, nil
}

// Run reads packets and calls fn with every SYN to the port, and the
// Segments of the config with every other segment it captures, in capture
// order, from the calling goroutine. A packet the decoder could not read is
// reported to skipped (when not nil) with the reason; every packet is
// written to the capture file.
//
// When ctx ends, Run goes on reading until the capture buffer is empty (at
// most maxDrain), so that nothing the kernel captured is lost, and returns
// nil; it also returns nil when Close is called. Any other read error, or a
// write error, ends it; a read error carries libpcap's own reason (such as
// "The interface disappeared").
func (l *Live) Run(ctx context.Context, fn func(attempt.SYN), skipped func(reason string)) error {
	var drainUntil time.Time
	for {
		if ctx.Err() != nil {
			if drainUntil.IsZero() {
				drainUntil = time.Now().Add(maxDrain)
			} else if time.Now().After(drainUntil) {
				return l.flush()
			}
		}
		data, ci, err := l.h.ZeroCopyReadPacketData()
		switch {
		case errors.Is(err, pcap.NextErrorTimeoutExpired):
			if err := l.flush(); err != nil {
				return err
			}
			if ctx.Err() != nil {
				return nil // drained
			}
			continue
		case errors.Is(err, io.EOF): // Close was called
			return nil
		case err != nil:
			err = l.readError(err)
			if ferr := l.flush(); ferr != nil {
				err = errors.Join(err, ferr)
			}
			return err
		}
		if err := l.write(ci, data); err != nil {
			return err
		}
		ip, tcp, skip := l.dec.find(l.lt, data)
		switch {
		case len(tcp) == 0:
		case tcp[13]&(tcpSYN|tcpACK) != tcpSYN: // a segment (watching only)
			l.dec.viewOf(&l.view, ip, tcp, ci.Timestamp.Unix(), int32(ci.Timestamp.Nanosecond()))
			l.segFn(&l.view)
			continue
		case !l.captures(binary.BigEndian.Uint16(tcp[2:])):
			skip = "not to the retry port"
		default:
			syn := synOf(ip, tcp)
			syn.Time = ci.Timestamp
			fn(syn)
			continue
		}
		if skip != "" && skipped != nil {
			skipped(skip)
		}
	}
}

// readError wraps a read error with libpcap's own message: gopacket's
// error is only the status ("Read Error"). The handle is asked under hmu,
// and not at all once Close has freed it.
func (l *Live) readError(err error) error {
	l.hmu.Lock()
	defer l.hmu.Unlock()
	if !l.closed {
		if msg := l.h.Error(); msg != nil && msg.Error() != "" && msg.Error() != err.Error() {
			return fmt.Errorf("read capture on %s: %s (%w)", l.iface, msg, err)
		}
	}
	return fmt.Errorf("read capture on %s: %w", l.iface, err)
}

// write appends a packet to the capture file, if any (LiveFile.write).
func (l *Live) write(ci gopacket.CaptureInfo, data []byte) error {
	if l.file == nil {
		return nil
	}
	ci.InterfaceIndex = l.ifIndex
	return l.file.write(ci, data)
}

// flush writes what the capture file's buffer holds.
func (l *Live) flush() error {
	if l.file == nil {
		return nil
	}
	return l.file.flush()
}

// Close stops the capture, waking a Run that waits for a packet, and
// flushes the capture file. It does not close the file's writer, which is
// the caller's. Close is idempotent.
func (l *Live) Close() error {
	l.hmu.Lock()
	if !l.closed {
		l.closed = true
		l.h.Close()
	}
	l.hmu.Unlock()
	return l.flush()
}
