package main

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// link is how a frame is wrapped below IP.
type link int

const (
	linkEthernet link = iota
	linkVLAN          // Ethernet with one 802.1Q tag
	linkSLL           // Linux cooked v1 (tcpdump -i any before libpcap 1.10)
	linkSLL2          // Linux cooked v2
	linkNull          // BSD loopback: a 4-byte address family in host order
)

// LinkType is the pcap link type of frames built for l.
func (l link) LinkType() layers.LinkType {
	switch l {
	case linkSLL:
		return layers.LinkTypeLinuxSLL
	case linkSLL2:
		return layers.LinkTypeLinuxSLL2
	case linkNull:
		return layers.LinkTypeNull
	}
	return layers.LinkTypeEthernet
}

// TCP flags of a segment.
const (
	fFIN = 1 << iota
	fSYN
	fRST
	fPSH
	fACK
)

// packet is one segment or datagram before framing.
type packet struct {
	ts       time.Time
	src, dst netip.AddrPort
	udp      bool
	flags    int
	seq, ack uint32
	payload  []byte
	reply    bool // sent by the server (sets the Ethernet addresses)
	iface    int  // pcapng interface index
}

// builder frames packets with gopacket's serializers, reusing its layers and
// buffer so that the benchmark writer allocates nothing per packet.
type builder struct {
	buf   gopacket.SerializeBuffer
	opts  gopacket.SerializeOptions
	eth   layers.Ethernet
	dot1q layers.Dot1Q
	ip4   layers.IPv4
	ip6   layers.IPv6
	tcp   layers.TCP
	udp   layers.UDP
	ipID  uint16
	stack []gopacket.SerializableLayer
}

var (
	clientMAC = net.HardwareAddr{0x02, 0x42, 0xac, 0x11, 0x00, 0x02}
	serverMAC = net.HardwareAddr{0x02, 0x42, 0xac, 0x11, 0x00, 0x01}
	// synOptions are those a Linux client sends: MSS, SACK permitted,
	// timestamps, window scale.
	synOptions = []layers.TCPOption{
		{OptionType: layers.TCPOptionKindMSS, OptionLength: 4, OptionData: []byte{0xff, 0xd7}},
		{OptionType: layers.TCPOptionKindSACKPermitted, OptionLength: 2},
		{OptionType: layers.TCPOptionKindTimestamps, OptionLength: 10, OptionData: make([]byte, 8)},
		{OptionType: layers.TCPOptionKindNop},
		{OptionType: layers.TCPOptionKindWindowScale, OptionLength: 3, OptionData: []byte{7}},
	}
)

func newBuilder() *builder {
	return &builder{
		buf:   gopacket.NewSerializeBufferExpectedSize(64, 1600),
		opts:  gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		stack: make([]gopacket.SerializableLayer, 0, 5),
	}
}

// frame returns p framed for l. The slice is valid until the next call.
func (b *builder) frame(l link, p packet) ([]byte, error) {
	v4 := p.src.Addr().Is4()
	if v4 != p.dst.Addr().Is4() {
		return nil, fmt.Errorf("frame %v > %v: mixed address families", p.src, p.dst)
	}
	ethType := layers.EthernetTypeIPv4
	if !v4 {
		ethType = layers.EthernetTypeIPv6
	}
	b.stack = b.stack[:0]
	switch l {
	case linkEthernet, linkVLAN:
		b.eth = layers.Ethernet{SrcMAC: clientMAC, DstMAC: serverMAC, EthernetType: ethType}
		if p.reply {
			b.eth.SrcMAC, b.eth.DstMAC = serverMAC, clientMAC
		}
		b.stack = append(b.stack, &b.eth)
		if l == linkVLAN {
			b.eth.EthernetType = layers.EthernetTypeDot1Q
			b.dot1q = layers.Dot1Q{VLANIdentifier: 100, Type: ethType}
			b.stack = append(b.stack, &b.dot1q)
		}
	}
	proto := layers.IPProtocolTCP
	if p.udp {
		proto = layers.IPProtocolUDP
	}
	var network gopacket.NetworkLayer
	if v4 {
		b.ipID++
		b.ip4 = layers.IPv4{
			Version: 4, IHL: 5, TTL: 64, Id: b.ipID, Flags: layers.IPv4DontFragment, Protocol: proto,
			SrcIP: p.src.Addr().AsSlice(), DstIP: p.dst.Addr().AsSlice(),
		}
		b.stack = append(b.stack, &b.ip4)
		network = &b.ip4
	} else {
		b.ip6 = layers.IPv6{
			Version: 6, HopLimit: 64, NextHeader: proto,
			SrcIP: p.src.Addr().AsSlice(), DstIP: p.dst.Addr().AsSlice(),
		}
		b.stack = append(b.stack, &b.ip6)
		network = &b.ip6
	}
	if p.udp {
		b.udp = layers.UDP{SrcPort: layers.UDPPort(p.src.Port()), DstPort: layers.UDPPort(p.dst.Port())}
		if err := b.udp.SetNetworkLayerForChecksum(network); err != nil {
			return nil, err
		}
		b.stack = append(b.stack, &b.udp)
	} else {
		b.tcp = layers.TCP{
			SrcPort: layers.TCPPort(p.src.Port()), DstPort: layers.TCPPort(p.dst.Port()),
			Seq: p.seq, Ack: p.ack, Window: 65483,
			FIN: p.flags&fFIN != 0, SYN: p.flags&fSYN != 0, RST: p.flags&fRST != 0,
			PSH: p.flags&fPSH != 0, ACK: p.flags&fACK != 0,
		}
		if p.flags&fSYN != 0 {
			b.tcp.Options = synOptions
		}
		if err := b.tcp.SetNetworkLayerForChecksum(network); err != nil {
			return nil, err
		}
		b.stack = append(b.stack, &b.tcp)
	}
	b.stack = append(b.stack, gopacket.Payload(p.payload))
	if err := gopacket.SerializeLayers(b.buf, b.opts, b.stack...); err != nil {
		return nil, fmt.Errorf("serialize %v > %v: %w", p.src, p.dst, err)
	}
	switch l {
	case linkSLL:
		h, err := b.buf.PrependBytes(16)
		if err != nil {
			return nil, err
		}
		binary.BigEndian.PutUint16(h[0:], 0)   // LINUX_SLL_HOST
		binary.BigEndian.PutUint16(h[2:], 772) // ARPHRD_LOOPBACK
		binary.BigEndian.PutUint16(h[4:], 6)
		copy(h[6:14], make([]byte, 8))
		binary.BigEndian.PutUint16(h[14:], uint16(ethType))
	case linkSLL2:
		h, err := b.buf.PrependBytes(20)
		if err != nil {
			return nil, err
		}
		binary.BigEndian.PutUint16(h[0:], uint16(ethType))
		binary.BigEndian.PutUint16(h[2:], 0) // reserved
		binary.BigEndian.PutUint32(h[4:], 1) // ifindex of lo
		binary.BigEndian.PutUint16(h[8:], 772)
		h[10] = 0 // LINUX_SLL_HOST
		h[11] = 6
		copy(h[12:20], make([]byte, 8))
	case linkNull:
		h, err := b.buf.PrependBytes(4)
		if err != nil {
			return nil, err
		}
		af := uint32(2) // AF_INET
		if !v4 {
			af = 30 // AF_INET6 on macOS (24 on NetBSD/OpenBSD, 28 on FreeBSD)
		}
		binary.LittleEndian.PutUint32(h, af) // host order of a little-endian Mac
	}
	return b.buf.Bytes(), nil
}
