package testutil

import (
	"encoding/binary"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestConversation: each side's sequence numbers run on by the bytes it
// sent, and each segment acknowledges what the other side sent so far.
func TestConversation(t *testing.T) {
	got := Conversation([][]byte{[]byte("ab"), []byte("c")}, [][]byte{[]byte("xyz")})
	want := []Seg{
		{FromClient: true, Flags: SYN, Seq: 1000},
		{Flags: SYN | ACK, Seq: 5000, Ack: 1001},
		{FromClient: true, Flags: ACK, Seq: 1001, Ack: 5001},
		{FromClient: true, Flags: ACK, Seq: 1001, Ack: 5001, Data: []byte("ab")},
		{Flags: ACK, Seq: 5001, Ack: 1003, Data: []byte("xyz")},
		{FromClient: true, Flags: ACK, Seq: 1003, Ack: 5004, Data: []byte("c")},
		{FromClient: true, Flags: FIN | ACK, Seq: 1004, Ack: 5004},
		{Flags: FIN | ACK, Seq: 5004, Ack: 1005},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("segments (-want +got):\n%s", diff)
	}
}

// TestPcap: a file header of raw IPv4, then one record a segment, a
// millisecond apart, each as long as its packet, whose IPv4 length and
// ports are the segment's.
func TestPcap(t *testing.T) {
	segs := []Seg{{FromClient: true, Flags: SYN, Seq: 7}, {Flags: ACK, Seq: 9, Data: []byte("hello")}}
	b := Pcap(segs)
	le, be := binary.LittleEndian, binary.BigEndian
	if le.Uint32(b) != 0xa1b2c3d4 || le.Uint32(b[20:]) != 101 {
		t.Fatalf("file header %x; want pcap, LINKTYPE_RAW", b[:24])
	}
	type record struct {
		Usec, Len, IPLen int
		Sport, Dport     uint16
		Seq              uint32
	}
	var got []record
	for off := 24; off+16 <= len(b); {
		n := int(le.Uint32(b[off+8:]))
		pkt := b[off+16 : off+16+n]
		got = append(got, record{int(le.Uint32(b[off+4:])), n, int(be.Uint16(pkt[2:])), be.Uint16(pkt[20:]), be.Uint16(pkt[22:]), be.Uint32(pkt[24:])})
		off += 16 + n
	}
	want := []record{{0, 40, 40, 40000, 50051, 7}, {1000, 45, 45, 50051, 40000, 9}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
}
