package capture

import (
	"encoding/binary"
	"net/netip"
)

// Builders for hand-made frames: each returns a fresh slice.

const (
	flagFIN = 0x01
	flagSYN = 0x02
	flagRST = 0x04
	flagACK = 0x10
	flagECE = 0x40
	flagCWR = 0x80
)

// tcpHeader is a TCP header with data offset doff (in 4-byte words) and
// doff*4-20 bytes of NOP options when doff > 5.
func tcpHeader(sport, dport uint16, seq uint32, flags byte, doff int) []byte {
	n := max(20, doff*4)
	t := make([]byte, n)
	binary.BigEndian.PutUint16(t[0:], sport)
	binary.BigEndian.PutUint16(t[2:], dport)
	binary.BigEndian.PutUint32(t[4:], seq)
	t[12] = byte(doff) << 4
	t[13] = flags
	binary.BigEndian.PutUint16(t[14:], 64240)
	for i := 20; i < n; i++ {
		t[i] = 1 // NOP
	}
	return t
}

func synSeg(sport, dport uint16, seq uint32) []byte {
	return tcpHeader(sport, dport, seq, flagSYN, 5)
}

// ipv4Packet wraps payload in an IPv4 header (IHL 5) with a correct total
// length.
func ipv4Packet(src, dst string, proto byte, payload []byte) []byte {
	p := make([]byte, 20, 20+len(payload))
	p[0] = 0x45
	binary.BigEndian.PutUint16(p[2:], uint16(20+len(payload)))
	p[8] = 64
	p[9] = proto
	s, d := netip.MustParseAddr(src).As4(), netip.MustParseAddr(dst).As4()
	copy(p[12:], s[:])
	copy(p[16:], d[:])
	return append(p, payload...)
}

// ipv6Packet wraps payload (which may start with extension headers) in an
// IPv6 header whose next header is nh.
func ipv6Packet(src, dst string, nh byte, payload []byte) []byte {
	p := make([]byte, 40, 40+len(payload))
	p[0] = 0x60
	binary.BigEndian.PutUint16(p[4:], uint16(len(payload)))
	p[6] = nh
	p[7] = 64
	s, d := netip.MustParseAddr(src).As16(), netip.MustParseAddr(dst).As16()
	copy(p[8:], s[:])
	copy(p[24:], d[:])
	return append(p, payload...)
}

// extHeader is a generic IPv6 extension header (hop-by-hop, routing,
// destination options) of 8*(units+1) bytes.
func extHeader(next byte, units int) []byte {
	h := make([]byte, 8*(units+1))
	h[0], h[1] = next, byte(units)
	if len(h) > 2 {
		h[2] = 1 // PadN
		h[3] = byte(len(h) - 4)
	}
	return h
}

// fragHeader is an IPv6 fragment header; offset in 8-byte units.
func fragHeader(next byte, offset uint16, more bool) []byte {
	h := make([]byte, 8)
	h[0] = next
	v := offset << 3
	if more {
		v |= 1
	}
	binary.BigEndian.PutUint16(h[2:], v)
	binary.BigEndian.PutUint32(h[4:], 0xdeadbeef)
	return h
}

// ahHeader is an authentication header with a 12-byte ICV (24 bytes).
func ahHeader(next byte) []byte {
	h := make([]byte, 24)
	h[0], h[1] = next, 4 // (4+2)*4 = 24
	return h
}

func ethFrame(et uint16, payload []byte) []byte {
	f := make([]byte, 14, 14+len(payload))
	copy(f, []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11})
	binary.BigEndian.PutUint16(f[12:], et)
	return append(f, payload...)
}

// vlanFrame is an Ethernet frame with the given tag EtherTypes, outermost
// first, before inner EtherType et.
func vlanFrame(tags []uint16, et uint16, payload []byte) []byte {
	if len(tags) == 0 {
		return ethFrame(et, payload)
	}
	var b []byte
	for i, tpid := range tags {
		if i == 0 {
			continue
		}
		b = binary.BigEndian.AppendUint16(b, uint16(i)) // TCI: VLAN id i
		b = binary.BigEndian.AppendUint16(b, tpid)
	}
	b = binary.BigEndian.AppendUint16(b, 100)
	b = binary.BigEndian.AppendUint16(b, et)
	return ethFrame(tags[0], append(b, payload...))
}

func sllFrame(proto uint16, payload []byte) []byte {
	f := make([]byte, 16, 16+len(payload))
	binary.BigEndian.PutUint16(f[0:], 0) // to us
	binary.BigEndian.PutUint16(f[2:], 1) // ARPHRD_ETHER
	binary.BigEndian.PutUint16(f[4:], 6)
	binary.BigEndian.PutUint16(f[14:], proto)
	return append(f, payload...)
}

func sll2Frame(proto uint16, payload []byte) []byte {
	f := make([]byte, 20, 20+len(payload))
	binary.BigEndian.PutUint16(f[0:], proto)
	binary.BigEndian.PutUint32(f[4:], 2) // ifindex
	binary.BigEndian.PutUint16(f[8:], 1)
	f[11] = 6
	return append(f, payload...)
}

// afFrame prefixes payload with a 4-byte address family in the given order.
func afFrame(o binary.AppendByteOrder, af uint32, payload []byte) []byte {
	f := o.AppendUint32(nil, af)
	return append(f, payload...)
}

func encFrame(o binary.AppendByteOrder, af uint32, payload []byte) []byte {
	f := o.AppendUint32(nil, af)
	f = append(f, 0, 0, 0x10, 0x01, 0, 0, 0, 0) // spi, flags
	return append(f, payload...)
}

// pflogFrame builds OpenBSD's 61-byte pfloghdr, padded to 64.
func pflogFrame(af byte, payload []byte) []byte {
	f := make([]byte, 64, 64+len(payload))
	f[0], f[1] = 61, af
	return append(f, payload...)
}

// udpDatagram is a UDP header to dport followed by payload.
func udpDatagram(sport, dport uint16, payload []byte) []byte {
	u := make([]byte, 8, 8+len(payload))
	binary.BigEndian.PutUint16(u[0:], sport)
	binary.BigEndian.PutUint16(u[2:], dport)
	binary.BigEndian.PutUint16(u[4:], uint16(8+len(payload)))
	return append(u, payload...)
}
