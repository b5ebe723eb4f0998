package capture

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/gopacket/gopacket/layers"
)

// decoded is Decode's result in a form cmp prints readably.
type decoded struct {
	Src, Dst string
	Seq      uint32
	OK       bool
	Skip     string
}

func decodeOne(d *Decoder, lt layers.LinkType, frame []byte) decoded {
	syn, ok, skip := d.Decode(lt, frame)
	got := decoded{OK: ok, Skip: skip, Seq: syn.Seq}
	if ok {
		got.Src, got.Dst = syn.Src.String(), syn.Dst.String()
	}
	if !syn.Time.IsZero() {
		got.Skip += " (time set)"
	}
	return got
}

func TestDecode(t *testing.T) {
	const (
		v4a, v4b = "10.0.0.1", "10.0.0.2"
		v6a, v6b = "2001:db8::1", "2001:db8::2"
	)
	syn4 := ipv4Packet(v4a, v4b, 6, synSeg(40000, 8081, 7))
	syn6 := ipv6Packet(v6a, v6b, 6, synSeg(40000, 8081, 7))
	want4 := decoded{Src: "10.0.0.1:40000", Dst: "10.0.0.2:8081", Seq: 7, OK: true}
	want6 := decoded{Src: "[2001:db8::1]:40000", Dst: "[2001:db8::2]:8081", Seq: 7, OK: true}
	le, be := binary.LittleEndian, binary.BigEndian
	cat := func(parts ...[]byte) []byte { return slices.Concat(parts...) }

	// An IPv4 first fragment (MF set, offset 0) whose SYN options run into
	// the next fragment: the IP payload is shorter than the data offset.
	firstFrag := ipv4Packet(v4a, v4b, 6, tcpHeader(40000, 8081, 7, flagSYN, 10)[:24])
	binary.BigEndian.PutUint16(firstFrag[6:], 0x2000)
	laterFrag := ipv4Packet(v4a, v4b, 6, synSeg(40000, 8081, 7))
	binary.BigEndian.PutUint16(laterFrag[6:], 0x0003)
	ihl4 := slices.Clone(syn4)
	ihl4[0] = 0x44
	totalShort := slices.Clone(syn4)
	binary.BigEndian.PutUint16(totalShort[2:], 12)
	// Data offset 15 (60 bytes) where the IP total length leaves 20.
	beyond := ipv4Packet(v4a, v4b, 6, tcpHeader(40000, 8081, 7, flagSYN, 5))
	beyond[20+12] = 15 << 4
	// A SYN cut by a snap length inside its options still counts.
	snapped := ipv4Packet(v4a, v4b, 6, tcpHeader(40000, 8081, 7, flagSYN, 10))[:20+24]
	tso := slices.Clone(syn4)
	binary.BigEndian.PutUint16(tso[2:], 0)

	var deep []byte // 17 destination-options headers, then TCP
	nh := byte(6)
	for range maxIPv6Ext + 1 {
		deep = append(extHeader(nh, 0), deep...)
		nh = 60
	}

	tests := []struct {
		name  string
		lt    layers.LinkType
		frame []byte
		want  decoded
	}{
		{"ethernet ipv4", layers.LinkTypeEthernet, ethFrame(0x0800, syn4), want4},
		{"ethernet ipv6", layers.LinkTypeEthernet, ethFrame(0x86dd, syn6), want6},
		{"802.1Q", layers.LinkTypeEthernet, vlanFrame([]uint16{0x8100}, 0x0800, syn4), want4},
		{"QinQ 802.1ad", layers.LinkTypeEthernet, vlanFrame([]uint16{0x88a8, 0x8100}, 0x86dd, syn6), want6},
		{"QinQ old 0x9100", layers.LinkTypeEthernet, vlanFrame([]uint16{0x9100, 0x8100}, 0x0800, syn4), want4},
		{"three tags", layers.LinkTypeEthernet, vlanFrame([]uint16{0x88a8, 0x8100, 0x8100}, 0x0800, syn4), want4},
		{"too many tags", layers.LinkTypeEthernet, vlanFrame(slices.Repeat([]uint16{0x8100}, maxVLANTags+1), 0x0800, syn4), decoded{Skip: SkipVLANDepth}},
		{"vlan tag cut", layers.LinkTypeEthernet, ethFrame(0x8100, []byte{0, 1}), decoded{Skip: SkipTruncatedLink}},
		{"ethernet short", layers.LinkTypeEthernet, make([]byte, 13), decoded{Skip: SkipTruncatedLink}},
		{"arp", layers.LinkTypeEthernet, ethFrame(0x0806, make([]byte, 28)), decoded{}},
		{"mpls", layers.LinkTypeEthernet, ethFrame(0x8847, cat([]byte{0, 1, 0x01, 64}, syn4)), decoded{Skip: SkipMPLS}},
		{"pppoe", layers.LinkTypeEthernet, ethFrame(0x8864, make([]byte, 8)), decoded{Skip: SkipPPPoE}},
		{"vxlan", layers.LinkTypeEthernet, ethFrame(0x0800, ipv4Packet(v4a, v4b, 17, udpDatagram(5000, 4789, ethFrame(0x0800, syn4)))), decoded{Skip: SkipVXLAN}},
		{"gre", layers.LinkTypeEthernet, ethFrame(0x0800, ipv4Packet(v4a, v4b, 47, make([]byte, 4))), decoded{Skip: SkipGRE}},
		{"linux sll ipv4", layers.LinkTypeLinuxSLL, sllFrame(0x0800, syn4), want4},
		{"linux sll vlan", layers.LinkTypeLinuxSLL, sllFrame(0x8100, cat([]byte{0, 5, 0x86, 0xdd}, syn6)), want6},
		{"linux sll short", layers.LinkTypeLinuxSLL, make([]byte, 15), decoded{Skip: SkipTruncatedLink}},
		{"linux sll2 ipv6", layers.LinkTypeLinuxSLL2, sll2Frame(0x86dd, syn6), want6},
		{"linux sll2 short", layers.LinkTypeLinuxSLL2, make([]byte, 19), decoded{Skip: SkipTruncatedLink}},
		{"null le inet", layers.LinkTypeNull, afFrame(le, 2, syn4), want4},
		{"null be inet", layers.LinkTypeNull, afFrame(be, 2, syn4), want4},
		{"null le inet6 24", layers.LinkTypeNull, afFrame(le, 24, syn6), want6},
		{"null be inet6 24", layers.LinkTypeNull, afFrame(be, 24, syn6), want6},
		{"null le inet6 28", layers.LinkTypeNull, afFrame(le, 28, syn6), want6},
		{"null be inet6 28", layers.LinkTypeNull, afFrame(be, 28, syn6), want6},
		{"null le inet6 30", layers.LinkTypeNull, afFrame(le, 30, syn6), want6},
		{"null be inet6 30", layers.LinkTypeNull, afFrame(be, 30, syn6), want6},
		{"null other family", layers.LinkTypeNull, afFrame(le, 7, syn4), decoded{}},
		{"null short", layers.LinkTypeNull, []byte{2, 0, 0}, decoded{Skip: SkipTruncatedLink}},
		{"loop inet", layers.LinkTypeLoop, afFrame(be, 2, syn4), want4},
		{"loop inet6", layers.LinkTypeLoop, afFrame(be, 24, syn6), want6},
		{"enc inet", linkTypeEnc, encFrame(le, 2, syn4), want4},
		{"enc inet6 be", linkTypeEnc, encFrame(be, 24, syn6), want6},
		{"pflog inet6", linkTypePFLog, pflogFrame(24, syn6), want6},
		{"pflog short", linkTypePFLog, pflogFrame(2, nil)[:40], decoded{Skip: SkipTruncatedLink}},
		{"raw 101 ipv4", layers.LinkTypeRaw, syn4, want4},
		{"raw 101 ipv6", layers.LinkTypeRaw, syn6, want6},
		{"raw 12", 12, syn6, want6},
		{"raw 14", linkTypeRawBSDOS, syn4, want4},
		{"raw bad version", layers.LinkTypeRaw, cat([]byte{0x50}, syn4[1:]), decoded{Skip: SkipIPVersion}},
		{"raw empty", layers.LinkTypeRaw, nil, decoded{Skip: SkipTruncatedIP}},
		{"ipv4 228", layers.LinkTypeIPv4, syn4, want4},
		{"ipv4 228 carrying ipv6", layers.LinkTypeIPv4, syn6, decoded{Skip: SkipIPVersion}},
		{"ipv6 229", layers.LinkTypeIPv6, syn6, want6},
		{"unknown link type", 147, syn4, decoded{Skip: "link type 147"}},
		{"syn+ack not counted", layers.LinkTypeRaw, ipv4Packet(v4a, v4b, 6, tcpHeader(1, 2, 3, flagSYN|flagACK, 5)), decoded{}},
		{"ack not counted", layers.LinkTypeRaw, ipv4Packet(v4a, v4b, 6, tcpHeader(1, 2, 3, flagACK, 5)), decoded{}},
		{"ecn setup syn counted", layers.LinkTypeRaw, ipv4Packet(v4a, v4b, 6, tcpHeader(40000, 8081, 7, flagSYN|flagECE|flagCWR, 5)), want4},
		{"syn with options", layers.LinkTypeRaw, ipv6Packet(v6a, v6b, 6, tcpHeader(40000, 8081, 7, flagSYN, 10)), want6},
		{"data offset 0", layers.LinkTypeRaw, ipv4Packet(v4a, v4b, 6, tcpHeader(1, 2, 3, flagSYN, 0)), decoded{Skip: SkipTCPOffset}},
		{"data offset 4", layers.LinkTypeRaw, ipv4Packet(v4a, v4b, 6, tcpHeader(1, 2, 3, flagSYN, 4)), decoded{Skip: SkipTCPOffset}},
		{"data offset beyond ip payload", layers.LinkTypeRaw, beyond, decoded{Skip: SkipTCPBeyond}},
		{"syn options cut by snap length", layers.LinkTypeRaw, snapped, want4},
		{"ipv4 total length 0 (offload)", layers.LinkTypeRaw, tso, want4},
		{"truncated tcp before flags", layers.LinkTypeRaw, syn4[:20+13], decoded{Skip: SkipTruncatedTCP}},
		{"truncated tcp after flags", layers.LinkTypeRaw, syn4[:20+16], decoded{Skip: SkipTruncatedTCP}},
		{"truncated ipv4", layers.LinkTypeRaw, syn4[:19], decoded{Skip: SkipTruncatedIP}},
		{"truncated ipv6", layers.LinkTypeRaw, syn6[:39], decoded{Skip: SkipTruncatedIP}},
		{"ipv4 ihl 4", layers.LinkTypeRaw, ihl4, decoded{Skip: SkipIPv4HeaderLen}},
		{"ipv4 total length below header", layers.LinkTypeRaw, totalShort, decoded{Skip: SkipIPLength}},
		{"ipv4 first fragment", layers.LinkTypeRaw, firstFrag, want4},
		{"ipv4 later fragment", layers.LinkTypeRaw, laterFrag, decoded{Skip: SkipFragment}},
		{"udp", layers.LinkTypeRaw, ipv4Packet(v4a, v4b, 17, udpDatagram(53, 53, nil)), decoded{}},
		{"ipv4-mapped ipv6 is the ipv4 peer", layers.LinkTypeRaw, ipv6Packet("::ffff:10.0.0.1", "::ffff:10.0.0.2", 6, synSeg(40000, 8081, 7)), want4},
		{"ipv6 ext chain", layers.LinkTypeRaw, ipv6Packet(v6a, v6b, 0, cat(
			extHeader(43, 1), extHeader(60, 0), fragHeader(51, 0, false), ahHeader(60), extHeader(6, 2), synSeg(40000, 8081, 7))), want6},
		{"ipv6 first fragment", layers.LinkTypeRaw, ipv6Packet(v6a, v6b, 44, cat(fragHeader(6, 0, true), tcpHeader(40000, 8081, 7, flagSYN, 10)[:24])), want6},
		{"ipv6 later fragment", layers.LinkTypeRaw, ipv6Packet(v6a, v6b, 44, cat(fragHeader(6, 1, false), synSeg(1, 2, 3))), decoded{Skip: SkipFragment}},
		{"ipv6 ext cut", layers.LinkTypeRaw, ipv6Packet(v6a, v6b, 0, extHeader(6, 0))[:41], decoded{Skip: SkipExtTruncated}},
		{"ipv6 ext longer than packet", layers.LinkTypeRaw, ipv6Packet(v6a, v6b, 0, extHeader(6, 0))[:40+2], decoded{Skip: SkipExtTruncated}},
		{"ipv6 ext longer than payload length", layers.LinkTypeRaw, cat(ipv6Packet(v6a, v6b, 0, cat([]byte{6, 8}, make([]byte, 6))), make([]byte, 200)), decoded{Skip: SkipExtTruncated}},
		{"ipv6 ext chain too long", layers.LinkTypeRaw, ipv6Packet(v6a, v6b, 60, cat(deep, synSeg(1, 2, 3))), decoded{Skip: SkipExtChain}},
		{"ipv6 no next header", layers.LinkTypeRaw, ipv6Packet(v6a, v6b, 59, nil), decoded{}},
		{"ipv6 in ipv6", layers.LinkTypeRaw, ipv6Packet(v6a, v6b, 41, syn6), decoded{Skip: SkipIPinIP}},
	}
	d := NewDecoder()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, decodeOne(d, tt.lt, tt.frame)); diff != "" {
				t.Errorf("Decode (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeNoAllocs(t *testing.T) {
	d := NewDecoder()
	frames := []struct {
		lt    layers.LinkType
		frame []byte
	}{
		{layers.LinkTypeEthernet, ethFrame(0x0800, ipv4Packet("10.0.0.1", "10.0.0.2", 6, synSeg(1, 2, 3)))},
		{layers.LinkTypeEthernet, ethFrame(0x86dd, ipv6Packet("::1", "::2", 6, tcpHeader(1, 2, 3, flagACK, 5)))},
		{layers.LinkTypeLinuxSLL2, sll2Frame(0x86dd, ipv6Packet("::1", "::2", 0, slices.Concat(extHeader(6, 0), synSeg(1, 2, 3))))},
		{147, make([]byte, 60)},
	}
	d.Decode(147, nil) // the first unknown link type allocates its name once
	for _, f := range frames {
		if n := testing.AllocsPerRun(100, func() { d.Decode(f.lt, f.frame) }); n != 0 {
			t.Errorf("Decode(%v) allocates %v times per frame, want 0", f.lt, n)
		}
	}
}
