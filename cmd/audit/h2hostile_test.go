package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// capSeg is one TCP segment of a hand-made capture of one connection,
// 127.0.0.1:40000 → 127.0.0.1:50051.
type capSeg struct {
	fromClient bool
	flags      uint8
	seq, ack   uint32
	data       []byte
}

// TCP flags of capSeg.
const (
	tcpFIN = 0x01
	tcpSYN = 0x02
	tcpACK = 0x10
)

// rawIPv4 is s as an IPv4 packet (checksums left zero: nothing checks
// them).
func rawIPv4(s capSeg) []byte {
	src, dst, sport, dport := [4]byte{127, 0, 0, 1}, [4]byte{127, 0, 0, 1}, uint16(40000), uint16(50051)
	if !s.fromClient {
		sport, dport = dport, sport
	}
	pkt := []byte{0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 6, 0, 0}
	pkt = append(append(pkt, src[:]...), dst[:]...)
	pkt = binary.BigEndian.AppendUint16(pkt, sport)
	pkt = binary.BigEndian.AppendUint16(pkt, dport)
	pkt = binary.BigEndian.AppendUint32(pkt, s.seq)
	pkt = binary.BigEndian.AppendUint32(pkt, s.ack)
	pkt = append(pkt, 5<<4, s.flags, 0xff, 0xff, 0, 0, 0, 0)
	pkt = append(pkt, s.data...)
	binary.BigEndian.PutUint16(pkt[2:], uint16(len(pkt)))
	return pkt
}

// writeFile writes b to a file name in a new directory and returns its
// path.
func writeFile(t *testing.T, name string, b []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// writeTCPCapture writes segs as a pcap of raw IPv4 (LINKTYPE_RAW), a
// segment a millisecond, and returns its path.
func writeTCPCapture(t *testing.T, segs []capSeg) string {
	t.Helper()
	le := binary.LittleEndian
	b := le.AppendUint32(nil, 0xa1b2c3d4)
	b = le.AppendUint16(b, 2)
	b = le.AppendUint16(b, 4)
	b = le.AppendUint32(b, 0)
	b = le.AppendUint32(b, 0)
	b = le.AppendUint32(b, 262144)
	b = le.AppendUint32(b, 101) // LINKTYPE_RAW
	t0 := time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)
	for i, s := range segs {
		pkt := rawIPv4(s)
		at := t0.Add(time.Duration(i) * time.Millisecond)
		b = le.AppendUint32(b, uint32(at.Unix()))
		b = le.AppendUint32(b, uint32(at.Nanosecond()/1000))
		b = le.AppendUint32(b, uint32(len(pkt)))
		b = le.AppendUint32(b, uint32(len(pkt)))
		b = append(b, pkt...)
	}
	return writeFile(t, "conn.pcap", b)
}

// tcpConversation lays pieces of bytes out as one TCP connection: the
// handshake, the client's and the server's pieces alternating, a segment
// each, then both FINs.
func tcpConversation(client, server [][]byte) []capSeg {
	const cISN, sISN = 1000, 5000
	cseq, sseq := uint32(cISN+1), uint32(sISN+1)
	out := []capSeg{{fromClient: true, flags: tcpSYN, seq: cISN},
		{flags: tcpSYN | tcpACK, seq: sISN, ack: cseq}, {fromClient: true, flags: tcpACK, seq: cseq, ack: sseq}}
	for i := range max(len(client), len(server)) {
		if i < len(client) {
			out = append(out, capSeg{fromClient: true, flags: tcpACK, seq: cseq, ack: sseq, data: client[i]})
			cseq += uint32(len(client[i]))
		}
		if i < len(server) {
			out = append(out, capSeg{flags: tcpACK, seq: sseq, ack: cseq, data: server[i]})
			sseq += uint32(len(server[i]))
		}
	}
	return append(out, capSeg{fromClient: true, flags: tcpFIN | tcpACK, seq: cseq, ack: sseq},
		capSeg{flags: tcpFIN | tcpACK, seq: sseq, ack: cseq + 1})
}

// frames returns the bytes write writes with a Framer.
func frames(write func(fr *http2.Framer)) []byte {
	var b bytes.Buffer
	write(http2.NewFramer(&b, nil))
	return b.Bytes()
}

// A connection with more events than the decoder keeps: 25 000 PING and
// ACK pairs, then the server's GOAWAY ENHANCE_YOUR_CALM too_many_pings.
// The GOAWAY and the keepalive finding stay, the PINGs are all counted,
// the verdict is a problem, and what was dropped is said.
func TestH2EventBudget(t *testing.T) {
	client := [][]byte{[]byte(http2.ClientPreface), frames(func(fr *http2.Framer) { fr.WriteSettings() })}
	server := [][]byte{frames(func(fr *http2.Framer) { fr.WriteSettings() })}
	const pings = 25000
	for i := range pings {
		var d [8]byte
		binary.BigEndian.PutUint64(d[:], uint64(i))
		client = append(client, frames(func(fr *http2.Framer) { fr.WritePing(false, d) }))
		server = append(server, frames(func(fr *http2.Framer) { fr.WritePing(true, d) }))
	}
	server = append(server, frames(func(fr *http2.Framer) { fr.WriteGoAway(0, http2.ErrCodeEnhanceYourCalm, []byte("too_many_pings")) }))
	capFile := writeTCPCapture(t, tcpConversation(client, server))

	code, stdout, stderr := runAudit(t, "h2", capFile)
	for _, want := range []string{
		"server GOAWAY ENHANCE_YOUR_CALM",
		fmt.Sprintf("client PINGs: %d, %d ACKed", pings, pings),
		"the server answered GOAWAY ENHANCE_YOUR_CALM too_many_pings after 25000",
		"not kept past the decoder's limits: 30002 events",
		"verdict: 1 problem",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	if code != exitFail {
		t.Errorf("exit %d, want %d (too_many_pings is a problem); stderr %s", code, exitFail, stderr)
	}
	if t.Failed() {
		t.Logf("report:\n%s", stdout)
	}
	code, stdout, _ = runAudit(t, "h2", "--format", "json", capFile)
	if code != exitFail || !strings.Contains(stdout, `"dropped": {`) || !strings.Contains(stdout, `"events": 30002`) {
		t.Errorf("JSON: exit %d, want %d and the dropped events counted", code, exitFail)
	}
}

// A captured :path made of terminal escapes and a fake verdict line is
// printed quoted, escapes written out, never raw: the text holds no
// control character but its newlines, and one verdict line.
func TestH2QuotesCapturedStrings(t *testing.T) {
	const evil = "/x\x1b[2J\x1b]0;owned\a\r\nverdict: no problem found"
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", evil}, {":authority", "x"}, {"content-type", "application/grpc"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	client := [][]byte{[]byte(http2.ClientPreface), frames(func(fr *http2.Framer) {
		fr.WriteSettings()
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true})
	})}
	server := [][]byte{frames(func(fr *http2.Framer) {
		fr.WriteSettings()
		fr.WriteRSTStream(1, http2.ErrCodeRefusedStream)
		fr.WriteGoAway(0, http2.ErrCodeNo, []byte("bye\x1b[2J"))
	})}
	_, stdout, _ := runAudit(t, "h2", writeTCPCapture(t, tcpConversation(client, server)))
	if i := strings.IndexFunc(stdout, func(r rune) bool { return r != '\n' && (r < 0x20 || r == 0x7f) }); i >= 0 {
		t.Errorf("the text holds control character %q at %d:\n%q", stdout[i], i, stdout)
	}
	for _, want := range []string{`RPCs: "/x\x1b[2J\x1b]0;owned\a\r\nverdict: no problem found" ×1`, `(/x\x1b[2J`} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the text lacks %s:\n%s", want, stdout)
		}
	}
	if n := strings.Count(stdout, "\nverdict: "); n != 1 {
		t.Errorf("%d verdict lines; want 1:\n%s", n, stdout)
	}
}

// A client's first segment captured twice with different bytes (other
// bytes first, the real preface after) is shown as a damaged connection,
// with the reason, and is a problem: never "0 connections".
func TestH2RetransmitDiffers(t *testing.T) {
	client := [][]byte{[]byte(http2.ClientPreface), frames(func(fr *http2.Framer) { fr.WriteSettings() })}
	server := [][]byte{frames(func(fr *http2.Framer) { fr.WriteSettings() })}
	segs := tcpConversation(client, server)
	// segs[3] is the preface at the client's ISN+1: other bytes first.
	other := segs[3]
	other.data = bytes.Repeat([]byte("x"), len(other.data))
	segs = append(segs[:3], append([]capSeg{other}, segs[3:]...)...)
	code, stdout, stderr := runAudit(t, "h2", writeTCPCapture(t, segs))
	for _, want := range []string{"1 connection in", "1 damaged",
		"damaged: the client's bytes at offset 0 were captured twice, different (first xxxx", "which the server read is unknown"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the report lacks %q:\n%s", want, stdout)
		}
	}
	if code != exitFail {
		t.Errorf("exit %d, want %d (a damaged connection); stderr %s", code, exitFail, stderr)
	}
}
