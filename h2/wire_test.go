package h2_test

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/backoff-audit/audit/h2"
)

// wire builds the two byte streams of a connection frame by frame, with
// x/net's Framer and HPACK encoder, for inputs no real stack sends.
type wire struct {
	tb    testing.TB
	steps []step
	hbuf  [2]bytes.Buffer
	enc   [2]*hpack.Encoder
}

// step is a piece of one direction's bytes, or (gap > 0) bytes lost.
type step struct {
	dir h2.Direction
	b   []byte
	gap int64
}

var (
	testClient = netip.MustParseAddrPort("127.0.0.1:40000")
	testServer = netip.MustParseAddrPort("127.0.0.1:50051")
	testT0     = time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)
)

func newWire(tb testing.TB) *wire {
	w := &wire{tb: tb}
	for d := range w.enc {
		w.enc[d] = hpack.NewEncoder(&w.hbuf[d])
	}
	return w
}

// start is a connection's usual start: the client's preface and SETTINGS,
// the server's SETTINGS, and the ACKs.
func (w *wire) start() *wire {
	w.raw(h2.ClientToServer, []byte(http2.ClientPreface))
	w.settings(h2.ClientToServer)
	w.settings(h2.ServerToClient)
	w.frame(h2.ClientToServer, func(fr *http2.Framer) error { return fr.WriteSettingsAck() })
	return w.frame(h2.ServerToClient, func(fr *http2.Framer) error { return fr.WriteSettingsAck() })
}

func (w *wire) raw(dir h2.Direction, b []byte) *wire {
	w.steps = append(w.steps, step{dir: dir, b: b})
	return w
}

func (w *wire) gap(dir h2.Direction, n int64) *wire {
	w.steps = append(w.steps, step{dir: dir, gap: n})
	return w
}

// frame appends what fn writes with a Framer that writes anything asked.
func (w *wire) frame(dir h2.Direction, fn func(fr *http2.Framer) error) *wire {
	w.tb.Helper()
	var buf bytes.Buffer
	fr := http2.NewFramer(&buf, nil)
	fr.AllowIllegalWrites = true
	if err := fn(fr); err != nil {
		w.tb.Fatal(err)
	}
	return w.raw(dir, buf.Bytes())
}

func (w *wire) settings(dir h2.Direction, s ...http2.Setting) *wire {
	return w.frame(dir, func(fr *http2.Framer) error { return fr.WriteSettings(s...) })
}

func (w *wire) ping(dir h2.Direction, ack bool, data string) *wire {
	var d [8]byte
	copy(d[:], data)
	return w.frame(dir, func(fr *http2.Framer) error { return fr.WritePing(ack, d) })
}

// block encodes name, value pairs with dir's HPACK encoder.
func (w *wire) block(dir h2.Direction, kv ...string) []byte {
	w.tb.Helper()
	w.hbuf[dir].Reset()
	for i := 0; i+1 < len(kv); i += 2 {
		if err := w.enc[dir].WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]}); err != nil {
			w.tb.Fatal(err)
		}
	}
	return bytes.Clone(w.hbuf[dir].Bytes())
}

// headers sends a header block on stream id, split into HEADERS and
// CONTINUATION frames of at most 16384 bytes.
func (w *wire) headers(dir h2.Direction, id uint32, end bool, kv ...string) *wire {
	return w.headerBlock(dir, id, end, w.block(dir, kv...))
}

func (w *wire) headerBlock(dir h2.Direction, id uint32, end bool, blk []byte) *wire {
	const max = 16384
	first := blk[:min(len(blk), max)]
	rest := blk[len(first):]
	w.frame(dir, func(fr *http2.Framer) error {
		return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndStream: end, EndHeaders: len(rest) == 0})
	})
	for len(rest) > 0 {
		frag := rest[:min(len(rest), max)]
		rest = rest[len(frag):]
		w.frame(dir, func(fr *http2.Framer) error { return fr.WriteContinuation(id, len(rest) == 0, frag) })
	}
	return w
}

// request opens stream id with a gRPC request's headers for method.
func (w *wire) request(id uint32, method string, kv ...string) *wire {
	return w.headers(h2.ClientToServer, id, false, append([]string{
		":method", "POST", ":scheme", "http", ":path", method, ":authority", "localhost:50051",
		"content-type", "application/grpc", "te", "trailers"}, kv...)...)
}

// response answers stream id with headers, messages and trailers.
func (w *wire) response(id uint32, grpcStatus string, msgs ...[]byte) *wire {
	w.headers(h2.ServerToClient, id, false, ":status", "200", "content-type", "application/grpc")
	for _, m := range msgs {
		w.data(h2.ServerToClient, id, false, m)
	}
	return w.headers(h2.ServerToClient, id, true, "grpc-status", grpcStatus)
}

func (w *wire) data(dir h2.Direction, id uint32, end bool, p []byte) *wire {
	return w.frame(dir, func(fr *http2.Framer) error { return fr.WriteData(id, end, p) })
}

// dataFrames sends p in DATA frames of at most 16384 bytes.
func (w *wire) dataFrames(dir h2.Direction, id uint32, end bool, p []byte) *wire {
	for len(p) > 16384 {
		w.data(dir, id, false, p[:16384])
		p = p[16384:]
	}
	return w.data(dir, id, end, p)
}

func (w *wire) rst(dir h2.Direction, id uint32, code http2.ErrCode) *wire {
	return w.frame(dir, func(fr *http2.Framer) error { return fr.WriteRSTStream(id, code) })
}

func (w *wire) goAway(last uint32, code http2.ErrCode, debug string) *wire {
	return w.frame(h2.ServerToClient, func(fr *http2.Framer) error { return fr.WriteGoAway(last, code, []byte(debug)) })
}

// frameRaw is a frame built by hand: any length, type, flags and payload.
func frameRaw(length int, typ http2.FrameType, flags http2.Flags, id uint32, payload []byte) []byte {
	b := []byte{byte(length >> 16), byte(length >> 8), byte(length), byte(typ), byte(flags), 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[5:], id)
	return append(b, payload...)
}

// msg is p as one gRPC message; compressed sets the flag.
func msg(p []byte, compressed bool) []byte {
	out := make([]byte, 5, 5+len(p))
	if compressed {
		out[0] = 1
	}
	binary.BigEndian.PutUint32(out[1:], uint32(len(p)))
	return append(out, p...)
}

func gzipped(tb testing.TB, p []byte) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write(p); err != nil {
		tb.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

// feed feeds the steps to c, step i at testT0 + i ms.
func (w *wire) feed(c *h2.Conn) time.Time {
	t := testT0
	for i, s := range w.steps {
		t = testT0.Add(time.Duration(i) * time.Millisecond)
		if s.gap > 0 {
			c.Gap(s.dir, t, s.gap)
		} else {
			c.Feed(s.dir, t, s.b)
		}
	}
	return t
}

// decode feeds the steps to a new Conn, ends it and returns its report.
func (w *wire) decode(lim h2.Limits) *h2.Report {
	c := h2.NewConn(testClient, testServer, h2.Options{Start: testT0, Limits: lim})
	t := w.feed(c)
	c.End(t.Add(time.Millisecond))
	return c.Report()
}

// streams returns the concatenated bytes of each direction (gaps left out).
func (w *wire) streams() (client, server []byte) {
	for _, s := range w.steps {
		if s.dir == h2.ClientToServer {
			client = append(client, s.b...)
		} else {
			server = append(server, s.b...)
		}
	}
	return client, server
}
