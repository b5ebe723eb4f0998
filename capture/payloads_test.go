package capture

import (
	"encoding/binary"
	"testing"

	"github.com/backoff-audit/audit/attempt"
	"github.com/google/go-cmp/cmp"
	"github.com/gopacket/gopacket/layers"
)

// gotPayload is what Options.Payloads handed out for one segment.
type gotPayload struct {
	Src     string
	Flags   byte
	Payload string
	Len     int
}

// TestReadPayloads: Options.Payloads gets every TCP segment of its ports,
// SYNs and pure ACKs included, with its whole payload (Ethernet padding
// left out, a snap length's cut shown by PayloadLen), in pcap and pcapng,
// on the fast path and off it; segments of other ports, and other
// packets, are not handed out, and the SYNs still reach fn.
func TestReadPayloads(t *testing.T) {
	const cli, srv = "10.0.0.1", "10.0.0.2"
	v4 := func(p []byte) []byte { return ethFrame(0x0800, ipv4Packet(cli, srv, 6, p)) }
	padded := v4(seg(40000, 50051, 7, 1, tcpACK, []byte("ab")))
	padded = append(padded, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0) // Ethernet padding
	cut := v4(seg(40000, 50051, 9, 1, tcpACK, []byte("0123456789")))
	cut = cut[:len(cut)-4] // a snap length
	frames := [][]byte{
		v4(synSeg(40000, 50051, 6)),
		v4(seg(40000, 50051, 7, 1, tcpACK, nil)),
		padded,
		cut,
		ethFrame(0x86dd, ipv6Packet("fd00::1", "fd00::2", 6, seg(40001, 50051, 1, 1, tcpACK|tcpFIN, []byte("v6")))),
		vlanFrame([]uint16{0x8100}, 0x0800, ipv4Packet(srv, cli, 6, seg(50051, 40000, 1, 9, tcpACK, []byte("vlan")))),
		v4(seg(40000, 8080, 1, 1, tcpACK, []byte("other port"))),
		ethFrame(0x0800, ipv4Packet(cli, srv, 17, make([]byte, 12))),
	}
	want := []gotPayload{
		{"10.0.0.1:40000", tcpSYN, "", 0},
		{"10.0.0.1:40000", tcpACK, "", 0},
		{"10.0.0.1:40000", tcpACK, "ab", 2},
		{"10.0.0.1:40000", tcpACK, "012345", 10},
		{"[fd00::1]:40001", tcpACK | tcpFIN, "v6", 2},
		{"10.0.0.2:50051", tcpACK, "vlan", 4},
	}
	var recs []pcapRecord
	ng := new(ngWriter)
	ng.o = binary.LittleEndian
	ng.shb(1, 0).idb(uint16(layers.LinkTypeEthernet), 0, 9, 0)
	for i, f := range frames {
		recs = append(recs, pcapRecord{sec: uint32(i), data: f})
		ng.epb(0, uint64(i)*1e9, f)
	}
	files := map[string][]byte{
		"pcap":   pcapFile(binary.LittleEndian, true, uint32(layers.LinkTypeEthernet), recs...),
		"pcapng": ng.buf,
	}
	for name, data := range files {
		t.Run(name, func(t *testing.T) {
			var got []gotPayload
			opt := Options{PayloadPorts: []uint16{50051}, Payloads: func(v *attempt.SegmentView) {
				s := v.Segment()
				got = append(got, gotPayload{s.Src.String(), v.Flags, string(v.Payload), v.PayloadLen})
			}}
			syns, _, err := readBytes(name, data, opt)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("payloads (-want +got):\n%s", diff)
			}
			if len(syns) != 1 {
				t.Errorf("%d SYNs reached fn, want 1", len(syns))
			}
		})
	}
}
