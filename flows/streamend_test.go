package flows

import (
	"bytes"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/proto"

	"github.com/backoff-audit/audit/h2"
	"github.com/backoff-audit/audit/pb"
)

// calls is a connection that makes two unary ReconnectService calls, Start
// then Stop, each answered with trailers, and then closes.
func calls(t *testing.T) (client, server [][]byte) {
	t.Helper()
	frames := func(write func(fr *http2.Framer)) []byte {
		var b bytes.Buffer
		write(http2.NewFramer(&b, nil))
		return b.Bytes()
	}
	// One encoder a direction, as a peer has: the second call's blocks
	// refer to the first's entries in the dynamic table.
	var cb, sb bytes.Buffer
	cenc, senc := hpack.NewEncoder(&cb), hpack.NewEncoder(&sb)
	block := func(enc *hpack.Encoder, b *bytes.Buffer, kv ...string) []byte {
		b.Reset()
		for i := 0; i < len(kv); i += 2 {
			enc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
		}
		return bytes.Clone(b.Bytes())
	}
	message := func(m proto.Message) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return append([]byte{0, 0, 0, 0, byte(len(b))}, b...)
	}
	call := func(id uint32, method string, req, resp proto.Message) (c, s []byte) {
		c = frames(func(fr *http2.Framer) {
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, EndHeaders: true, BlockFragment: block(cenc, &cb,
				":method", "POST", ":scheme", "http", ":path", method, ":authority", "x", "content-type", "application/grpc")})
			fr.WriteData(id, true, message(req))
		})
		s = frames(func(fr *http2.Framer) {
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, EndHeaders: true,
				BlockFragment: block(senc, &sb, ":status", "200", "content-type", "application/grpc")})
			fr.WriteData(id, false, message(resp))
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, EndHeaders: true, EndStream: true,
				BlockFragment: block(senc, &sb, "grpc-status", "0")})
		})
		return c, s
	}
	startC, startS := call(1, "/grpc.testing.ReconnectService/Start", &pb.ReconnectParams{MaxReconnectBackoffMs: 2000}, &pb.Empty{})
	stopC, stopS := call(3, "/grpc.testing.ReconnectService/Stop", &pb.Empty{}, &pb.ReconnectInfo{Passed: true, BackoffMs: []int32{1000, 1600}})
	client = [][]byte{append([]byte(http2.ClientPreface), frames(func(fr *http2.Framer) { fr.WriteSettings() })...), startC, stopC}
	server = [][]byte{frames(func(fr *http2.Framer) { fr.WriteSettings() }), startS, stopS}
	return client, server
}

// TestAssemblerStreamEnd: each call is handed to Options.StreamEnd as its
// response ends, while the connection is still open, with its request and
// response decoded; the connection is handed to done only at its FINs.
func TestAssemblerStreamEnd(t *testing.T) {
	cl, sv := calls(t)
	segs := layout(true, 1000, cl, sv)
	type ended struct {
		at     int // the index of the segment that ended it
		stream h2.Stream
		conn   Conn
	}
	var got []ended
	var opened []Conn
	doneAt := -1
	i := 0
	a := NewAssembler(Options{
		Ports:     []uint16{testServer.Port()},
		Opened:    func(c Conn) { opened = append(opened, c) },
		StreamEnd: func(c Conn, s *h2.Stream) { got = append(got, ended{at: i, stream: *s, conn: c}) },
	}, func(Conn) { doneAt = i })
	for i = range segs {
		a.Add(segs[i].view(t0))
	}
	a.Close()
	if len(opened) != 1 || !opened[0].SYN || opened[0].Ended != "" {
		t.Fatalf("Opened got %+v, want one connection with its SYN", opened)
	}
	if len(got) != 2 {
		t.Fatalf("StreamEnd called %d times, want 2 (Start, Stop)", len(got))
	}
	start, stop := got[0], got[1]
	if start.stream.Method != "/grpc.testing.ReconnectService/Start" || start.stream.GRPCStatus != "OK" ||
		start.stream.State != h2.StateClosed || start.stream.ReconnectParams == nil || start.stream.ReconnectParams.MaxReconnectBackoffMs != 2000 {
		t.Errorf("first stream: %+v, want Start with max_reconnect_backoff_ms 2000, OK", start.stream)
	}
	if stop.stream.Method != "/grpc.testing.ReconnectService/Stop" || stop.stream.GRPCStatus != "OK" ||
		stop.stream.ReconnectInfo == nil || !stop.stream.ReconnectInfo.Passed || len(stop.stream.ReconnectInfo.BackoffMs) != 2 {
		t.Errorf("second stream: %+v, want Stop answering passed with 2 intervals", stop.stream)
	}
	for _, e := range got {
		if e.conn.Ended != "" || !e.conn.SYN || e.conn.Report.Client != testClient {
			t.Errorf("stream %d: conn %+v, want the open connection of %v", e.stream.ID, e.conn, testClient)
		}
	}
	if !(start.at < stop.at && stop.at < doneAt) {
		t.Errorf("Start ended at segment %d, Stop at %d, the connection at %d: want each call as it ends, before the connection", start.at, stop.at, doneAt)
	}
	if segs[stop.at].flags&flagFIN != 0 {
		t.Errorf("Stop handed at a FIN: want it at its trailers")
	}
}

// TestAssemblerStreamEndMidStream: a connection whose start the capture
// missed is Opened without its SYN, and none of its calls can be decoded:
// their header blocks build on an HPACK table that went by before.
func TestAssemblerStreamEndMidStream(t *testing.T) {
	cl, sv := calls(t)
	segs := layout(true, 1000, cl, sv)
	// From the Stop's request on: the handshake, the preface and Start
	// went by before the capture.
	from := -1
	for i, s := range segs {
		if s.fromClient && len(s.data) > 0 && i > 5 {
			from = i
			break
		}
	}
	var opened []Conn
	var ends []h2.Stream
	var done []Conn
	a := NewAssembler(Options{
		Ports:     []uint16{testServer.Port()},
		Opened:    func(c Conn) { opened = append(opened, c) },
		StreamEnd: func(_ Conn, s *h2.Stream) { ends = append(ends, *s) },
	}, func(c Conn) { done = append(done, c) })
	for _, s := range segs[from:] {
		a.Add(s.view(t0))
	}
	a.Close()
	if len(opened) != 1 || opened[0].SYN {
		t.Fatalf("Opened got %+v, want one connection without its SYN", opened)
	}
	for _, s := range ends {
		if s.Method != "" || s.ReconnectInfo != nil {
			t.Errorf("stream %+v decoded from a connection joined mid-stream", s)
		}
	}
	if len(done) != 1 || findWarning(done[0].Report, h2.WarnNoPreface) == nil {
		t.Fatalf("want the connection with a no_preface warning, got %+v", done)
	}
}
