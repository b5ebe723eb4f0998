// Package benchcap writes large synthetic h2c captures for the speed
// measurements of flows and `audit h2` (BENCHMARKS.md, "HTTP/2 from the
// wire"): concurrent gRPC server-streaming connections, each a handshake,
// the client's preface and request, the server's 16 KiB DATA frames in
// 1448-byte segments acknowledged every second segment, and FINs. Packets
// are Ethernet, IPv4, TCP, written as pcap with nanosecond timestamps;
// checksums are left zero, which no reader here checks. Where a
// connection's share of Bytes is less than a DATA frame, its server sends
// none: many connections of headers alone, as a fleet of short RPCs makes.
package benchcap

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Config says what to write.
type Config struct {
	// Bytes is about the size of the file.
	Bytes int64
	// Conns is the number of connections, Concurrent how many are open at
	// once (their packets interleaved).
	Conns, Concurrent int
}

const mss = 1448

// Server is the connections' server address and port.
const serverPort = 50051

// Write writes the capture to path and returns its packets.
func Write(path string, cfg Config) (packets int, err error) {
	if cfg.Conns <= 0 || cfg.Concurrent <= 0 || cfg.Bytes <= 0 {
		return 0, fmt.Errorf("benchcap: bytes %d, conns %d, concurrent %d: all must be positive", cfg.Bytes, cfg.Conns, cfg.Concurrent)
	}
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	w := &writer{bw: bufio.NewWriterSize(f, 1<<20), t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	w.header()
	clientBytes, serverHead, trailers := templates()
	// Per connection, the server's DATA frames up to its share of the file.
	per := cfg.Bytes / int64(cfg.Conns)
	frame := dataFrame()
	nframes := int(per / int64(len(frame))) // none: a connection of headers alone
	for base := 0; base < cfg.Conns; base += cfg.Concurrent {
		var cs []*conn
		for i := base; i < min(cfg.Conns, base+cfg.Concurrent); i++ {
			cs = append(cs, &conn{w: w, id: i, cseq: uint32(i) * 7919, sseq: uint32(i) * 104729})
		}
		for _, c := range cs {
			c.open()
			c.send(true, clientBytes)
			c.send(false, serverHead)
		}
		for range nframes {
			for _, c := range cs {
				c.send(false, frame)
			}
		}
		for _, c := range cs {
			c.send(false, trailers)
			c.close()
		}
	}
	if err := w.bw.Flush(); err != nil {
		return 0, err
	}
	return w.packets, f.Close()
}

// templates are the bytes of one connection: the client's preface,
// SETTINGS, request HEADERS and message; the server's SETTINGS, SETTINGS
// ACK and response HEADERS; its trailers.
func templates() (client, server, trailers []byte) {
	var b bytes.Buffer
	fr := http2.NewFramer(&b, nil)
	hdrs := func(enc *hpack.Encoder, hb *bytes.Buffer, fs ...string) []byte {
		hb.Reset()
		for i := 0; i < len(fs); i += 2 {
			enc.WriteField(hpack.HeaderField{Name: fs[i], Value: fs[i+1]})
		}
		return hb.Bytes()
	}
	var chb, shb bytes.Buffer
	cenc, senc := hpack.NewEncoder(&chb), hpack.NewEncoder(&shb)
	b.WriteString(http2.ClientPreface)
	fr.WriteSettings()
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, BlockFragment: hdrs(cenc, &chb,
		":method", "POST", ":scheme", "http", ":path", "/bench.Stream/Pull", ":authority", "10.0.0.1:50051",
		"content-type", "application/grpc", "te", "trailers")})
	fr.WriteData(1, true, []byte{0, 0, 0, 0, 2, 8, 1})
	client = bytes.Clone(b.Bytes())
	b.Reset()
	fr.WriteSettings(http2.Setting{ID: http2.SettingMaxFrameSize, Val: 16384})
	fr.WriteSettingsAck()
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, BlockFragment: hdrs(senc, &shb,
		":status", "200", "content-type", "application/grpc")})
	server = bytes.Clone(b.Bytes())
	b.Reset()
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, EndStream: true, BlockFragment: hdrs(senc, &shb,
		"grpc-status", "0")})
	return client, server, bytes.Clone(b.Bytes())
}

// dataFrame is a 16 KiB DATA frame holding one gRPC message.
func dataFrame() []byte {
	var b bytes.Buffer
	msg := make([]byte, 16384)
	binary.BigEndian.PutUint32(msg[1:], uint32(len(msg)-5))
	http2.NewFramer(&b, nil).WriteData(1, false, msg)
	return b.Bytes()
}

type writer struct {
	bw      *bufio.Writer
	t       time.Time
	packets int
	buf     []byte
}

func (w *writer) header() {
	var h [24]byte
	binary.LittleEndian.PutUint32(h[0:], 0xa1b23c4d)
	binary.LittleEndian.PutUint16(h[4:], 2)
	binary.LittleEndian.PutUint16(h[6:], 4)
	binary.LittleEndian.PutUint32(h[16:], 262144)
	binary.LittleEndian.PutUint32(h[20:], 1)
	w.bw.Write(h[:])
}

// packet writes one TCP segment.
func (w *writer) packet(src, dst [4]byte, sport, dport uint16, seq, ack uint32, flags byte, data []byte) {
	w.t = w.t.Add(2 * time.Microsecond)
	n := 14 + 20 + 20 + len(data)
	b := w.buf[:0]
	b = binary.LittleEndian.AppendUint32(b, uint32(w.t.Unix()))
	b = binary.LittleEndian.AppendUint32(b, uint32(w.t.Nanosecond()))
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	b = append(b, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0x08, 0x00)
	b = append(b, 0x45, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(n-14))
	b = append(b, 0, 0, 0x40, 0, 64, 6, 0, 0)
	b = append(b, src[:]...)
	b = append(b, dst[:]...)
	b = binary.BigEndian.AppendUint16(b, sport)
	b = binary.BigEndian.AppendUint16(b, dport)
	b = binary.BigEndian.AppendUint32(b, seq)
	b = binary.BigEndian.AppendUint32(b, ack)
	b = append(b, 5<<4, flags, 0xff, 0xff, 0, 0, 0, 0)
	b = append(b, data...)
	w.buf = b
	w.bw.Write(b)
	w.packets++
}

type conn struct {
	w          *writer
	id         int
	cseq, sseq uint32
	unacked    int
}

func (c *conn) addrs() (cl, sv [4]byte, cport uint16) {
	cl = [4]byte{10, 1, byte(c.id >> 8), byte(c.id)}
	return cl, [4]byte{10, 0, 0, 1}, uint16(30000 + c.id%30000)
}

func (c *conn) open() {
	cl, sv, cp := c.addrs()
	c.w.packet(cl, sv, cp, serverPort, c.cseq, 0, 0x02, nil)
	c.w.packet(sv, cl, serverPort, cp, c.sseq, c.cseq+1, 0x12, nil)
	c.cseq++
	c.sseq++
	c.w.packet(cl, sv, cp, serverPort, c.cseq, c.sseq, 0x10, nil)
}

// send writes b from the client or the server in segments of mss; the
// client acknowledges every second segment of the server.
func (c *conn) send(fromClient bool, b []byte) {
	cl, sv, cp := c.addrs()
	for len(b) > 0 {
		n := min(len(b), mss)
		if fromClient {
			c.w.packet(cl, sv, cp, serverPort, c.cseq, c.sseq, 0x18, b[:n])
			c.cseq += uint32(n)
		} else {
			c.w.packet(sv, cl, serverPort, cp, c.sseq, c.cseq, 0x18, b[:n])
			c.sseq += uint32(n)
			if c.unacked++; c.unacked == 2 {
				c.unacked = 0
				c.w.packet(cl, sv, cp, serverPort, c.cseq, c.sseq, 0x10, nil)
			}
		}
		b = b[n:]
	}
}

func (c *conn) close() {
	cl, sv, cp := c.addrs()
	c.w.packet(sv, cl, serverPort, cp, c.sseq, c.cseq, 0x11, nil)
	c.w.packet(cl, sv, cp, serverPort, c.cseq, c.sseq+1, 0x11, nil)
	c.w.packet(sv, cl, serverPort, cp, c.sseq+1, c.cseq+1, 0x10, nil)
}
