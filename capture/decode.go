package capture

import (
	"encoding/binary"
	"net/netip"
	"strconv"

	"github.com/gopacket/gopacket/layers"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
)

// Skip reasons a Decoder reports. They are constants so that counting them
// costs no allocation; FileStats.Skipped uses them as keys.
const (
	SkipTruncatedLink = "truncated link header"
	SkipTruncatedIP   = "truncated ip header"
	SkipTruncatedTCP  = "truncated tcp header"
	SkipIPVersion     = "ip version does not match link"
	SkipIPv4HeaderLen = "ipv4 header length < 20"
	SkipIPLength      = "ip total length < header length"
	SkipFragment      = "ip fragment"
	SkipExtTruncated  = "truncated ipv6 extension header"
	SkipExtChain      = "ipv6 extension header chain too long"
	SkipTCPOffset     = "tcp data offset < 5"
	SkipTCPBeyond     = "tcp data offset beyond ip payload"
	SkipVLANDepth     = "too many vlan tags"
	// Tunnels a SYN may hide in that we deliberately do not open: the
	// auditor watches the retry port on the server's own interface, where
	// the client's SYN arrives undecorated.
	SkipMPLS   = "tunnel mpls"
	SkipPPPoE  = "tunnel pppoe"
	SkipPBB    = "tunnel 802.1ah pbb"
	SkipFabric = "tunnel cisco fabricpath"
	SkipGRE    = "tunnel gre"
	SkipIPinIP = "tunnel ip-in-ip"
	SkipVXLAN  = "tunnel vxlan"
	SkipGeneve = "tunnel geneve"
)

// Link types gopacket's layers package has no constant for.
const (
	linkTypeRawBSDOS layers.LinkType = 14  // DLT_RAW on BSD/OS
	linkTypeEnc      layers.LinkType = 109 // OpenBSD enc(4)
	linkTypePFLog    layers.LinkType = 117 // OpenBSD pflog(4)
)

// Limits that bound every walk over headers.
const (
	maxVLANTags = 8  // QinQ is 2; Zeek's test suite has 3
	maxIPv6Ext  = 16 // real stacks send fewer than 8
)

// Decoder turns one link-layer frame into a SYN, or, for the fates of the
// attempts (docs/spec.md §7), into one of the other segments of a watched
// port that may tell one. It is shared by the file readers and the live
// source.
//
// It parses headers by hand, bounds-checked, rather than with gopacket's
// DecodingLayerParser: it needs a few fields of a packet, and the flag and
// port tests that reject nearly every packet come before anything else is
// built. BenchmarkDecode measures both on a mix of frames; in a file read
// the parser is the bottleneck (docs/spec.md §6.5).
//
// A Decoder is not safe for concurrent use.
type Decoder struct {
	// linkNames caches "link type N" so an unknown link type allocates its
	// reason once, not per frame. At most 65536 entries.
	linkNames map[layers.LinkType]string
	// ports, when not nil, are the watched ports: find returns, besides
	// SYNs, the segments to or from one of them that the fates are read
	// from (see segment). port is the watched port while there is one,
	// and 0 otherwise: one comparison is cheaper than the set. nports
	// counts them.
	ports  *portSet
	port   uint16
	nports int
	// other counts the TCP segments that are not SYNs, of any port: none
	// in a capture made with a SYN filter.
	other uint64
	// anyTCP makes find return every sound TCP segment, whatever its flags
	// and ports, and count nothing: the decoder of Options.Payloads.
	anyTCP bool
}

// portSet is a set of TCP ports, a bit each.
type portSet [1 << 10]uint64

func (p *portSet) has(port uint16) bool { return p[port>>6]&(1<<(port&63)) != 0 }
func (p *portSet) add(port uint16)      { p[port>>6] |= 1 << (port & 63) }

// watch makes d return the segments of port besides SYNs (see segment).
func (d *Decoder) watch(port uint16) {
	if d.ports == nil {
		d.ports = new(portSet)
	}
	if d.ports.has(port) {
		return
	}
	d.ports.add(port)
	d.nports++
	d.port = 0
	if d.nports == 1 {
		d.port = port
	}
}

// watched reports whether a segment between ports a and b is watched.
func (d *Decoder) watched(a, b uint16) bool {
	if d.port != 0 {
		return a == d.port || b == d.port
	}
	return d.ports != nil && (d.ports.has(a) || d.ports.has(b))
}

// NewDecoder returns a Decoder ready for use.
func NewDecoder() *Decoder {
	return &Decoder{linkNames: make(map[layers.LinkType]string)}
}

// Decode returns ok=false and a skip reason ("" for an ordinary non-SYN
// packet) when the frame is not a SYN. A SYN is a TCP segment with SYN set
// and ACK clear; ECE and CWR may be set (an ECN-setup SYN). syn.Time is left
// zero; the caller sets it. A frame of a link type Decode does not know is
// skipped with the reason "link type N".
func (d *Decoder) Decode(lt layers.LinkType, frame []byte) (syn attempt.SYN, ok bool, skip string) {
	ip, tcp, skip := d.find(lt, frame)
	if len(tcp) == 0 {
		return syn, false, skip
	}
	return synOf(ip, tcp), true, ""
}

// synOf builds the SYN find located.
func synOf(ip, tcp []byte) attempt.SYN {
	src, dst := addrsOf(ip, tcp)
	return attempt.SYN{Src: src, Dst: dst, Seq: binary.BigEndian.Uint32(tcp[4:])}
}

// viewOf fills v with the segment find located, captured at sec, nsec;
// its addresses are slices of ip, and its first bytes are named for the
// side they come from (a watched port's side is the server's).
func (d *Decoder) viewOf(v *attempt.SegmentView, ip, tcp []byte, sec int64, nsec int32) {
	if ip[0]>>4 == 4 {
		v.Src, v.Dst = ip[12:16], ip[16:20]
	} else {
		v.Src, v.Dst = ip[8:24], ip[24:40]
	}
	v.SrcPort, v.DstPort = binary.BigEndian.Uint16(tcp), binary.BigEndian.Uint16(tcp[2:])
	v.Seq, v.Ack, v.Flags = binary.BigEndian.Uint32(tcp[4:]), binary.BigEndian.Uint32(tcp[8:]), tcp[13]
	v.Sec, v.Nsec = sec, nsec
	v.Sent = backoff.PayloadNone
	data, n := dataOf(ip, tcp)
	v.Payload, v.PayloadLen = data, n
	switch {
	case len(data) > 0:
		v.Sent = attempt.PayloadOf(data, d.watched(v.SrcPort, v.SrcPort))
	case n > 0: // bytes the snap length cut off: data all the same
		v.Sent = backoff.PayloadOther
	}
}

func addrsOf(ip, tcp []byte) (src, dst netip.AddrPort) {
	var s, d netip.Addr
	if ip[0]>>4 == 4 {
		s, d = netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20]))
	} else {
		s = netip.AddrFrom16([16]byte(ip[8:24])).Unmap()
		d = netip.AddrFrom16([16]byte(ip[24:40])).Unmap()
	}
	return netip.AddrPortFrom(s, binary.BigEndian.Uint16(tcp)), netip.AddrPortFrom(d, binary.BigEndian.Uint16(tcp[2:]))
}

// dataOf returns the bytes a segment find located carries, as far as they
// were captured: up to the length its IP header declares (a short frame's
// Ethernet padding is not data), or to the end of the frame when it
// declares none; and how many it carries, as declared (the captured
// length when the header declares none).
func dataOf(ip, tcp []byte) (data []byte, n int) {
	doff := int(tcp[12]>>4) * 4
	end := len(tcp)
	off := len(ip) - len(tcp) // of the TCP header in the IP packet
	var declared int
	if ip[0]>>4 == 4 {
		declared = int(binary.BigEndian.Uint16(ip[2:]))
	} else if n := int(binary.BigEndian.Uint16(ip[4:])); n != 0 {
		declared = 40 + n
	}
	n = end - doff
	if declared > 0 {
		n = declared - off - doff
		if declared-off < end {
			end = declared - off
		}
	}
	if doff >= end {
		return nil, max(n, 0)
	}
	return tcp[doff:end], max(n, 0)
}

// find locates a SYN, or a segment of a watched port (see segment): the
// IP header and the TCP header it carries, both non-empty, or a skip
// reason. Its results fit in registers, where a SYN does not: the file
// readers call it, check the port, and build a SYN or a Segment only for
// the few frames that are one.
func (d *Decoder) find(lt layers.LinkType, frame []byte) (ip, tcp []byte, skip string) {
	if lt == layers.LinkTypeEthernet {
		if ihl, seg := plainTCP(frame); ihl > 0 {
			t := frame[14+ihl:]
			if t[13]&(tcpSYN|tcpACK) != tcpSYN {
				d.other++
				if !d.segment(t, seg) {
					return nil, nil, ""
				}
				return frame[14:], t, ""
			}
			// A SYN whose header tcp finds sound; any other takes the
			// full decode, for its skip reason.
			if len(t) >= 20 && (seg < 0 || seg >= 20) {
				if doff := int(t[12]>>4) * 4; doff >= 20 && (seg < 0 || doff <= seg) {
					return frame[14:], t, ""
				}
			}
		}
	}
	return d.findSlow(lt, frame)
}

// plainOther is find's fast path, for the bulk of a capture. For a frame
// of plainTCP that is not a SYN it returns the offset of the TCP header
// in f and the segment's declared length when the frame is of a watched
// port (the caller then asks takes, as find would), or -1 for any other:
// the frame is done with, and the caller counts it as other TCP
// (Decoder.other), as find does, in a register rather than here. Every
// other frame, a SYN included, gets 0 and takes find. It is plainTCP
// written out, without a call, and answers in two registers, not a slice:
// most frames of a capture end here, and BenchmarkReadFile measures what
// each instruction costs.
func (d *Decoder) plainOther(f []byte) (off, seg int) {
	if len(f) < 14+20+14 {
		return 0, 0
	}
	seg = -1
	switch binary.BigEndian.Uint16(f[12:]) {
	case 0x0800:
		vihl := f[14]
		ihl := int(vihl&0x0f) * 4
		total := int(binary.BigEndian.Uint16(f[16:]))
		if vihl>>4 != 4 || ihl < 20 || f[23] != 6 || binary.BigEndian.Uint16(f[20:])&0x3fff != 0 ||
			total != 0 && total < ihl || len(f) < 14+ihl+14 {
			return 0, 0
		}
		off = 14 + ihl
		if total != 0 {
			seg = total - ihl
		}
	case 0x86dd:
		if len(f) < 14+40+14 || f[14]>>4 != 6 || f[14+6] != 6 {
			return 0, 0
		}
		off = 14 + 40
		if n := int(binary.BigEndian.Uint16(f[14+4:])); n != 0 {
			seg = n
		}
	default:
		return 0, 0
	}
	t := f[off : off+14]
	if t[13]&(tcpSYN|tcpACK) == tcpSYN {
		return 0, 0
	}
	if d.watched(binary.BigEndian.Uint16(t), binary.BigEndian.Uint16(t[2:])) {
		return off, seg
	}
	return -1, 0
}

// TCP flags.
const (
	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpRST = 0x04
	tcpACK = 0x10
)

// segment reports whether the TCP header t, not a SYN, of a segment of
// seg bytes as its IP header declares them (-1: undeclared) is one the
// fates are read from: to or from a watched port, with SYN (a SYN-ACK,
// from the watched port), RST or FIN set or carrying bytes, and sound (a
// whole fixed header, a data offset within the segment). A segment that
// fails is not counted as skipped: such segments were never examined
// before the fates were, and the skip counts stay what they were.
func (d *Decoder) segment(t []byte, seg int) bool {
	return d.watched(binary.BigEndian.Uint16(t), binary.BigEndian.Uint16(t[2:])) && d.takes(t, seg)
}

// takes is segment for t to or from a watched port.
//
// A SYN-ACK to a watched port answers a SYN from it, where the port was a
// client's ephemeral port: never one of the attempts the port's SYNs
// opened (docs/spec.md §7.2). Where the retry port is also in the
// ephemeral range (50052 is, on Linux), other connections' SYN-ACKs to it
// were a fifth of what the 2 M-packet bench capture gave the Tracker, each
// read only to be dropped there.
func (d *Decoder) takes(t []byte, seg int) bool {
	return candidate(t, seg) && (t[13]&tcpSYN == 0 || d.watched(binary.BigEndian.Uint16(t), binary.BigEndian.Uint16(t)))
}

// candidate is segment without the ports: whether t, not a SYN, has SYN,
// RST or FIN set or carries bytes, and is sound.
func candidate(t []byte, seg int) bool {
	if len(t) < 20 || seg >= 0 && seg < 20 {
		return false
	}
	doff := int(t[12]>>4) * 4
	if doff < 20 || seg >= 0 && doff > seg {
		return false
	}
	if t[13]&(tcpSYN|tcpRST|tcpFIN) != 0 {
		return true
	}
	if seg < 0 {
		seg = len(t)
	}
	return seg > doff
}

// etherTyped reads past a link header of hdr bytes that carries an
// EtherType at typeAt (Ethernet, Linux cooked v1 and v2).
func (d *Decoder) etherTyped(frame []byte, hdr, typeAt int) (ip, tcp []byte, skip string) {
	if len(frame) < hdr {
		return nil, nil, SkipTruncatedLink
	}
	return d.ether(binary.BigEndian.Uint16(frame[typeAt:]), frame[hdr:])
}

// findSlow is find without the fast path; FuzzDecode checks they agree.
func (d *Decoder) findSlow(lt layers.LinkType, frame []byte) (ip, tcp []byte, skip string) {
	switch lt {
	case layers.LinkTypeEthernet:
		return d.etherTyped(frame, 14, 12)
	case layers.LinkTypeLinuxSLL:
		return d.etherTyped(frame, 16, 14)
	case layers.LinkTypeLinuxSLL2:
		return d.etherTyped(frame, 20, 0)
	case layers.LinkTypeNull:
		// The address family is in the capturing host's byte order, which
		// the file does not record. Families are small numbers, so a value
		// with its low 16 bits clear was written by the other byte order.
		if len(frame) < 4 {
			return nil, nil, SkipTruncatedLink
		}
		return d.family(hostOrderAF(frame), frame[4:])
	case layers.LinkTypeLoop:
		if len(frame) < 4 {
			return nil, nil, SkipTruncatedLink
		}
		return d.family(binary.BigEndian.Uint32(frame), frame[4:])
	case linkTypeEnc:
		// struct enchdr: af (host order), spi, flags.
		if len(frame) < 12 {
			return nil, nil, SkipTruncatedLink
		}
		return d.family(hostOrderAF(frame), frame[12:])
	case linkTypePFLog:
		// struct pfloghdr: length (unpadded) then af; the header is padded
		// to a multiple of 4.
		if len(frame) < 2 || frame[0] < 2 {
			return nil, nil, SkipTruncatedLink
		}
		n := (int(frame[0]) + 3) &^ 3
		if len(frame) < n {
			return nil, nil, SkipTruncatedLink
		}
		return d.family(uint32(frame[1]), frame[n:])
	case layers.LinkTypeRaw, 12, linkTypeRawBSDOS:
		if len(frame) < 1 {
			return nil, nil, SkipTruncatedIP
		}
		switch frame[0] >> 4 {
		case 4:
			return d.ipv4(frame)
		case 6:
			return d.ipv6(frame)
		}
		return nil, nil, SkipIPVersion
	case layers.LinkTypeIPv4:
		return d.ipv4(frame)
	case layers.LinkTypeIPv6:
		return d.ipv6(frame)
	}
	return nil, nil, d.linkName(lt)
}

// plainTCP is the fast path for the bulk of a capture: an untagged
// Ethernet frame carrying a well-formed, unfragmented TCP segment in IPv4
// (no offset, and not a first fragment either, whose declared length is
// not the segment's), or in IPv6 without extension headers, with at least
// the 14 bytes of its header up to the flags. It returns the IP header's
// length (0 for any other frame, which takes the full decode) and the TCP
// segment's length as the IP header declares it (-1: undeclared). The full
// decode would find what find finds from it; a SYN of an unsound TCP
// header takes the full decode, for its skip reason. Measured by
// BenchmarkDecode and BenchmarkReadFile: it halves the per-frame cost.
func plainTCP(f []byte) (ihl, seg int) {
	if len(f) < 14+20+14 {
		return 0, 0
	}
	switch binary.BigEndian.Uint16(f[12:]) {
	case 0x0800:
		vihl := f[14]
		ihl := int(vihl&0x0f) * 4
		total := int(binary.BigEndian.Uint16(f[16:]))
		if vihl>>4 != 4 || ihl < 20 || f[23] != 6 || binary.BigEndian.Uint16(f[20:])&0x3fff != 0 ||
			total != 0 && total < ihl || len(f) < 14+ihl+14 {
			return 0, 0
		}
		if total == 0 {
			return ihl, -1
		}
		return ihl, total - ihl
	case 0x86dd:
		if len(f) < 14+40+14 || f[14]>>4 != 6 || f[14+6] != 6 {
			return 0, 0
		}
		if n := int(binary.BigEndian.Uint16(f[14+4:])); n != 0 {
			return 40, n
		}
		return 40, -1
	}
	return 0, 0
}

func (d *Decoder) linkName(lt layers.LinkType) string {
	name, ok := d.linkNames[lt]
	if !ok {
		name = "link type " + strconv.Itoa(int(lt))
		d.linkNames[lt] = name
	}
	return name
}

// hostOrderAF reads a 4-byte address family written in either byte order.
func hostOrderAF(b []byte) uint32 {
	af := binary.LittleEndian.Uint32(b)
	if af&0xffff == 0 {
		af = binary.BigEndian.Uint32(b)
	}
	return af
}

// family dispatches on a BSD address family: AF_INET is 2 everywhere;
// AF_INET6 is 24 (NetBSD, OpenBSD), 28 (FreeBSD) or 30 (Darwin).
func (d *Decoder) family(af uint32, p []byte) (ip, tcp []byte, skip string) {
	switch af {
	case 2:
		return d.ipv4(p)
	case 24, 28, 30:
		return d.ipv6(p)
	}
	return nil, nil, ""
}

// ether dispatches on an EtherType, stepping over 802.1Q, 802.1ad (QinQ)
// and the older 0x9100/0x9200 tags.
func (d *Decoder) ether(et uint16, p []byte) (ip, tcp []byte, skip string) {
	for range maxVLANTags {
		switch et {
		case 0x0800:
			return d.ipv4(p)
		case 0x86dd:
			return d.ipv6(p)
		case 0x8100, 0x88a8, 0x9100, 0x9200:
			if len(p) < 4 {
				return nil, nil, SkipTruncatedLink
			}
			et, p = binary.BigEndian.Uint16(p[2:]), p[4:]
		case 0x8847, 0x8848:
			return nil, nil, SkipMPLS
		case 0x8864:
			return nil, nil, SkipPPPoE
		case 0x88e7:
			return nil, nil, SkipPBB
		case 0x8903:
			return nil, nil, SkipFabric
		default:
			return nil, nil, ""
		}
	}
	return nil, nil, SkipVLANDepth
}

func (d *Decoder) ipv4(p []byte) (ip, tcp []byte, skip string) {
	if len(p) < 20 {
		return nil, nil, SkipTruncatedIP
	}
	if p[0]>>4 != 4 {
		return nil, nil, SkipIPVersion
	}
	ihl := int(p[0]&0x0f) * 4
	if ihl < 20 {
		return nil, nil, SkipIPv4HeaderLen
	}
	if len(p) < ihl {
		return nil, nil, SkipTruncatedIP
	}
	frag := binary.BigEndian.Uint16(p[6:])
	if frag&0x1fff != 0 {
		return nil, nil, SkipFragment
	}
	// A total length of 0 is what TCP segmentation offload leaves in a
	// locally captured packet: the captured bytes are all there is. A
	// first fragment (more-fragments set) holds only part of the segment.
	payload := -1
	if total := int(binary.BigEndian.Uint16(p[2:])); total != 0 {
		if total < ihl {
			return nil, nil, SkipIPLength
		}
		if frag&0x2000 == 0 {
			payload = total - ihl
		}
	}
	switch p[9] {
	case 6:
	case 4, 41:
		return nil, nil, SkipIPinIP
	case 47:
		return nil, nil, SkipGRE
	case 17:
		return nil, nil, udpTunnel(p[ihl:])
	default:
		return nil, nil, ""
	}
	if ok, skip := d.tcp(p[ihl:], payload); !ok {
		return nil, nil, skip
	}
	return p, p[ihl:], ""
}

func (d *Decoder) ipv6(p []byte) (ip, tcp []byte, skip string) {
	if len(p) < 40 {
		return nil, nil, SkipTruncatedIP
	}
	if p[0]>>4 != 6 {
		return nil, nil, SkipIPVersion
	}
	// A payload length of 0 is a jumbogram or an offloaded segment.
	end := -1
	if n := int(binary.BigEndian.Uint16(p[4:])); n != 0 {
		end = 40 + n
	}
	nh, off := p[6], 40
	for range maxIPv6Ext {
		if end >= 0 && off > end {
			return nil, nil, SkipExtTruncated
		}
		switch nh {
		case 6:
			payload := -1
			if end >= 0 {
				payload = end - off
			}
			if ok, skip := d.tcp(p[off:], payload); !ok {
				return nil, nil, skip
			}
			return p, p[off:], ""
		case 0, 43, 60: // hop-by-hop, routing, destination options
			if len(p) < off+2 {
				return nil, nil, SkipExtTruncated
			}
			nh, off = p[off], off+(int(p[off+1])+1)*8
		case 44: // fragment
			if len(p) < off+8 {
				return nil, nil, SkipExtTruncated
			}
			fo := binary.BigEndian.Uint16(p[off+2:])
			if fo&^7 != 0 {
				return nil, nil, SkipFragment
			}
			if fo&1 != 0 { // more fragments: the segment goes on beyond
				end = -1
			}
			nh, off = p[off], off+8
		case 51: // authentication header: length in 4-byte units, minus 2
			if len(p) < off+2 {
				return nil, nil, SkipExtTruncated
			}
			nh, off = p[off], off+(int(p[off+1])+2)*4
		case 4, 41:
			return nil, nil, SkipIPinIP
		case 47:
			return nil, nil, SkipGRE
		case 17:
			if len(p) < off {
				return nil, nil, SkipExtTruncated
			}
			return nil, nil, udpTunnel(p[off:])
		default:
			return nil, nil, ""
		}
		if len(p) < off {
			return nil, nil, SkipExtTruncated
		}
	}
	return nil, nil, SkipExtChain
}

// udpTunnel names the tunnel a UDP datagram carries, or "".
func udpTunnel(u []byte) string {
	if len(u) < 8 {
		return ""
	}
	switch binary.BigEndian.Uint16(u[2:]) {
	case 4789:
		return SkipVXLAN
	case 6081:
		return SkipGeneve
	}
	return ""
}

// tcp reads a TCP header: a SYN, or another segment find returns (see
// segment). payload is the segment length the IP header declares, or -1
// when it declares none. Capture may cut a segment short (a snap length):
// a SYN whose fixed header is present counts even when its options are
// cut. A header that contradicts itself or the IP header (data offset < 5,
// or longer than the declared segment) does not.
func (d *Decoder) tcp(t []byte, payload int) (ok bool, skip string) {
	if len(t) < 14 {
		return false, SkipTruncatedTCP
	}
	if d.anyTCP {
		return soundTCP(t, payload), ""
	}
	if t[13]&(tcpSYN|tcpACK) != tcpSYN {
		d.other++
		return d.segment(t, payload), ""
	}
	if len(t) < 20 || payload >= 0 && payload < 20 {
		return false, SkipTruncatedTCP
	}
	doff := int(t[12]>>4) * 4
	if doff < 20 {
		return false, SkipTCPOffset
	}
	if payload >= 0 && doff > payload {
		return false, SkipTCPBeyond
	}
	return true, ""
}

// soundTCP reports whether t, a TCP header in a segment of seg bytes as
// its IP header declares them (-1: undeclared), is whole and has a data
// offset within the segment and the capture.
func soundTCP(t []byte, seg int) bool {
	if len(t) < 20 || seg >= 0 && seg < 20 {
		return false
	}
	doff := int(t[12]>>4) * 4
	return doff >= 20 && doff <= len(t) && (seg < 0 || doff <= seg)
}

// anySegment returns the IP and TCP headers of any sound TCP segment,
// or nothing: the decoding of Options.Payloads, made by a Decoder of its
// own (anyTCP), so that the other decoder's counts stay what they were.
func (d *Decoder) anySegment(lt layers.LinkType, frame []byte) (ip, tcp []byte) {
	if lt == layers.LinkTypeEthernet {
		if ihl, seg := plainTCP(frame); ihl > 0 {
			if t := frame[14+ihl:]; soundTCP(t, seg) {
				return frame[14:], t
			}
			return nil, nil
		}
	}
	ip, tcp, _ = d.findSlow(lt, frame)
	return ip, tcp
}
