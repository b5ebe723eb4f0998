package testutil

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Seg is one TCP segment of a hand-made capture of one connection from
// 127.0.0.1:40000 (the client) to 127.0.0.1:50051.
type Seg struct {
	FromClient bool
	Flags      uint8
	Seq, Ack   uint32
	Data       []byte
}

// TCP flags of a Seg.
const (
	FIN = 0x01
	SYN = 0x02
	ACK = 0x10
)

// IPv4 is s as an IPv4 packet, checksums left zero (the readers do not
// check them); its TCP source port is at offset 20.
func (s Seg) IPv4() []byte {
	sport, dport := uint16(40000), uint16(50051)
	if !s.FromClient {
		sport, dport = dport, sport
	}
	be := binary.BigEndian
	pkt := []byte{0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 6, 0, 0, 127, 0, 0, 1, 127, 0, 0, 1}
	pkt = be.AppendUint16(be.AppendUint16(pkt, sport), dport)
	pkt = be.AppendUint32(be.AppendUint32(pkt, s.Seq), s.Ack)
	pkt = append(pkt, 5<<4, s.Flags, 0xff, 0xff, 0, 0, 0, 0)
	pkt = append(pkt, s.Data...)
	be.PutUint16(pkt[2:], uint16(len(pkt)))
	return pkt
}

// Conversation lays pieces of bytes out as one TCP connection: the
// handshake, the client's and the server's pieces alternating, a segment
// each, then both FINs.
func Conversation(client, server [][]byte) []Seg {
	const cISN, sISN = 1000, 5000
	cseq, sseq := uint32(cISN+1), uint32(sISN+1)
	out := []Seg{{FromClient: true, Flags: SYN, Seq: cISN},
		{Flags: SYN | ACK, Seq: sISN, Ack: cseq}, {FromClient: true, Flags: ACK, Seq: cseq, Ack: sseq}}
	for i := range max(len(client), len(server)) {
		if i < len(client) {
			out = append(out, Seg{FromClient: true, Flags: ACK, Seq: cseq, Ack: sseq, Data: client[i]})
			cseq += uint32(len(client[i]))
		}
		if i < len(server) {
			out = append(out, Seg{Flags: ACK, Seq: sseq, Ack: cseq, Data: server[i]})
			sseq += uint32(len(server[i]))
		}
	}
	return append(out, Seg{FromClient: true, Flags: FIN | ACK, Seq: cseq, Ack: sseq},
		Seg{Flags: FIN | ACK, Seq: sseq, Ack: cseq + 1})
}

// Pcap is segs as a classic pcap file of raw IPv4 (LINKTYPE_RAW), a
// segment a millisecond.
func Pcap(segs []Seg) []byte {
	le := binary.LittleEndian
	b := le.AppendUint32(nil, 0xa1b2c3d4)
	b = le.AppendUint16(le.AppendUint16(b, 2), 4)
	b = le.AppendUint32(le.AppendUint32(b, 0), 0)
	b = le.AppendUint32(le.AppendUint32(b, 262144), 101) // snaplen, LINKTYPE_RAW
	t0 := time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)
	for i, s := range segs {
		pkt := s.IPv4()
		at := t0.Add(time.Duration(i) * time.Millisecond)
		b = le.AppendUint32(le.AppendUint32(b, uint32(at.Unix())), uint32(at.Nanosecond()/1000))
		b = le.AppendUint32(le.AppendUint32(b, uint32(len(pkt))), uint32(len(pkt)))
		b = append(b, pkt...)
	}
	return b
}

// WriteFile writes b to a file name in a new temporary directory and
// returns its path.
func WriteFile(tb testing.TB, name string, b []byte) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}

// CopyAndLink copies the file src into a new temporary directory and
// makes a symbolic link to the copy beside it, for a test of one file
// named twice: it returns both paths.
func CopyAndLink(tb testing.TB, src string) (file, link string) {
	tb.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		tb.Fatal(err)
	}
	file = WriteFile(tb, filepath.Base(src), b)
	link = filepath.Join(filepath.Dir(file), "link"+filepath.Ext(src))
	if err := os.Symlink(filepath.Base(file), link); err != nil {
		tb.Fatal(err)
	}
	return file, link
}
