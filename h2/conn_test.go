package h2_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/http2"
	"google.golang.org/protobuf/proto"

	"github.com/backoff-audit/audit/h2"
	"github.com/backoff-audit/audit/pb"
)

const (
	startMethod = "/grpc.testing.ReconnectService/Start"
	otherMethod = "/pkg.Svc/Method"
)

func marshal(t testing.TB, m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// after is the client PING every case sends last: decoding moved on when
// it is among the events.
const after = "after..."

func hasPing(r *h2.Report, dir h2.Direction, data string) bool {
	var d [8]byte
	copy(d[:], data)
	for _, e := range r.Events {
		if e.Kind == h2.KindPing && e.Dir == dir && e.Ping == hex.EncodeToString(d[:]) {
			return true
		}
	}
	return false
}

func warningNames(r *h2.Report) []string {
	var n []string
	for _, w := range r.Warnings {
		n = append(n, w.Name)
	}
	return n
}

// TestBadInput feeds inputs no well-behaved stack sends. Each must give its
// named warning and no other, and, unless the case stops the client's
// direction, the client's PING after it must still be decoded.
func TestBadInput(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 1000)
	tests := []struct {
		name  string
		lim   h2.Limits
		build func(w *wire)
		// want are the warnings' names in order; stops says the client's
		// direction stopped; check checks the rest.
		want  []string
		stops bool
		check func(t *testing.T, r *h2.Report)
	}{{
		name: "frame larger than the default SETTINGS_MAX_FRAME_SIZE",
		build: func(w *wire) {
			w.request(1, otherMethod).data(h2.ClientToServer, 1, true, msg(make([]byte, 20000), false))
		},
		want: []string{h2.WarnFrameTooLarge},
		check: func(t *testing.T, r *h2.Report) {
			s := r.Streams[0]
			if !s.MessagesLost || s.RequestMessages != 0 || s.RequestEnd.IsZero() {
				t.Errorf("stream %+v: want its messages lost and its END_STREAM (in the skipped frame's flags) seen", s)
			}
		},
	}, {
		name: "frame size raised by the server's SETTINGS",
		build: func(w *wire) {
			w.settings(h2.ServerToClient, http2.Setting{ID: http2.SettingMaxFrameSize, Val: 32768})
			w.request(1, otherMethod).data(h2.ClientToServer, 1, true, msg(make([]byte, 20000), false))
		},
		check: func(t *testing.T, r *h2.Report) {
			if s := r.Streams[0]; s.RequestMessages != 1 || s.RequestBytes != 20005 {
				t.Errorf("stream %+v: want one message of 20005 bytes", s)
			}
		},
	}, {
		name: "frame larger than Limits.MaxFrameSize",
		lim:  h2.Limits{MaxFrameSize: 20000},
		build: func(w *wire) {
			w.settings(h2.ServerToClient, http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1 << 20})
			w.request(1, otherMethod).data(h2.ClientToServer, 1, false, make([]byte, 30000))
		},
		want: []string{h2.WarnFrameTooLarge},
	}, {
		name: "header list over 64 KiB decoded, HPACK state kept",
		build: func(w *wire) {
			kv := []string{}
			for i := range 100 {
				// Each field fits the 4096-byte table, so the encoder indexes
				// it: the next request refers to the table.
				kv = append(kv, "x-big", string(big[:900+i]))
			}
			w.request(1, otherMethod, kv...)
			w.request(3, otherMethod, "x-big", string(big[:999]))
		},
		want: []string{h2.WarnHeaderList},
		check: func(t *testing.T, r *h2.Report) {
			if s := r.Streams[0]; !s.HeadersLost || s.Method != otherMethod {
				t.Errorf("stream 1 %+v: want its :path (decoded before the limit) and headers lost", s)
			}
			if s := r.Streams[1]; s.HeadersLost || s.Method != otherMethod {
				t.Errorf("stream 3 %+v: want it decoded from the dynamic table the truncated block filled", s)
			}
		},
	}, {
		name: "header value over 64 KiB",
		build: func(w *wire) {
			w.request(1, otherMethod, "x-huge", strings.Repeat("y", 70000))
			w.request(3, otherMethod)
		},
		want: []string{h2.WarnHeaderString},
		check: func(t *testing.T, r *h2.Report) {
			if len(r.Streams) != 2 || !r.Streams[0].HeadersLost || !r.Streams[1].HeadersLost || r.Streams[1].Method != "" {
				t.Errorf("streams %+v: want both opened, their headers lost (HPACK state unknown)", r.Streams)
			}
			if r.Damaged == "" {
				t.Error("not damaged; want the lost header blocks said")
			}
		},
	}, {
		name: "dynamic table size update beyond SETTINGS_HEADER_TABLE_SIZE",
		build: func(w *wire) {
			// 001xxxxx with all x set, then 1<<20 − 31 as a varint
			// (RFC 7541 §5.1, §6.3): a table size update to 1 MiB.
			blk := append([]byte{0x3f}, varint(1<<20-31)...)
			w.headerBlock(h2.ClientToServer, 1, false, append(blk, w.block(h2.ClientToServer, ":path", otherMethod)...))
		},
		want: []string{h2.WarnTableSizeUpdate},
		check: func(t *testing.T, r *h2.Report) {
			if !strings.Contains(r.Warnings[0].Detail, "receiver allows 4096") {
				t.Errorf("detail %q, want the limit named", r.Warnings[0].Detail)
			}
		},
	}, {
		name: "dynamic table size update within the server's SETTINGS_HEADER_TABLE_SIZE",
		build: func(w *wire) {
			w.settings(h2.ServerToClient, http2.Setting{ID: http2.SettingHeaderTableSize, Val: 65536})
			blk := append([]byte{0x3f}, varint(65536-31)...)
			w.headerBlock(h2.ClientToServer, 1, false, append(blk, w.block(h2.ClientToServer, ":path", otherMethod)...))
		},
		check: func(t *testing.T, r *h2.Report) {
			if r.Streams[0].Method != otherMethod {
				t.Errorf("stream %+v: want its :path", r.Streams[0])
			}
		},
	}, {
		name: "gzip bomb",
		build: func(w *wire) {
			w.request(1, startMethod, "grpc-encoding", "gzip")
			w.data(h2.ClientToServer, 1, true, msg(gzipped(w.tb, make([]byte, 8<<20)), true))
		},
		want: []string{h2.WarnMessageTooLarge},
		check: func(t *testing.T, r *h2.Report) {
			if s := r.Streams[0]; s.RequestMessages != 1 || s.ReconnectParams != nil {
				t.Errorf("stream %+v: want the message counted, not decoded", s)
			}
		},
	}, {
		name: "gzip message decoded",
		build: func(w *wire) {
			w.request(1, startMethod, "grpc-encoding", "gzip")
			w.data(h2.ClientToServer, 1, true, msg(gzipped(w.tb, marshal(w.tb, &pb.ReconnectParams{MaxReconnectBackoffMs: 1234})), true))
		},
		check: func(t *testing.T, r *h2.Report) {
			if p := r.Streams[0].ReconnectParams; p == nil || p.MaxReconnectBackoffMs != 1234 {
				t.Errorf("params %+v, want 1234", p)
			}
		},
	}, {
		name: "message over Limits.MaxMessage",
		lim:  h2.Limits{MaxMessage: 1024},
		build: func(w *wire) {
			w.request(1, startMethod).data(h2.ClientToServer, 1, true, msg(make([]byte, 2000), false))
		},
		want: []string{h2.WarnMessageTooLarge},
	}, {
		name: "compressed message without grpc-encoding",
		build: func(w *wire) {
			w.request(1, startMethod).data(h2.ClientToServer, 1, true, msg([]byte{8, 1}, true))
		},
		want: []string{h2.WarnBadMessage},
	}, {
		name: "not gzip",
		build: func(w *wire) {
			w.request(1, startMethod, "grpc-encoding", "gzip").data(h2.ClientToServer, 1, true, msg([]byte("not gzip"), true))
		},
		want: []string{h2.WarnBadMessage},
	}, {
		name: "not a ReconnectParams",
		build: func(w *wire) {
			w.request(1, startMethod).data(h2.ClientToServer, 1, true, msg([]byte{0xff, 0xff}, false))
		},
		want: []string{h2.WarnBadMessage},
	}, {
		name: "PING of 7 bytes",
		build: func(w *wire) {
			w.raw(h2.ClientToServer, frameRaw(7, http2.FramePing, 0, 0, make([]byte, 7)))
		},
		want: []string{h2.WarnMalformedFrame},
	}, {
		name: "DATA on stream 0",
		build: func(w *wire) {
			w.raw(h2.ClientToServer, frameRaw(3, http2.FrameData, 0, 0, []byte("abc")))
		},
		want: []string{h2.WarnMalformedFrame},
	}, {
		name: "header block cut by a PING",
		build: func(w *wire) {
			blk := w.block(h2.ClientToServer, ":path", otherMethod)
			w.frame(h2.ClientToServer, func(fr *http2.Framer) error {
				return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: blk[:1]})
			})
			w.ping(h2.ClientToServer, false, "cut")
			w.request(3, otherMethod)
		},
		want: []string{h2.WarnMalformedFrame},
		check: func(t *testing.T, r *h2.Report) {
			if hasPing(r, h2.ClientToServer, "cut") {
				t.Error("the PING that cut the header block was decoded")
			}
			if len(r.Streams) != 2 || !r.Streams[0].HeadersLost || !r.Streams[1].HeadersLost {
				t.Errorf("streams %+v: want 1 and 3, headers lost", r.Streams)
			}
		},
	}, {
		name: "DATA for a stream never opened",
		build: func(w *wire) {
			w.data(h2.ClientToServer, 9, false, []byte("x")).data(h2.ClientToServer, 9, false, []byte("x"))
		},
		want: []string{h2.WarnUnknownStream},
	}, {
		name: "more open streams than Limits.MaxOpenStreams",
		lim:  h2.Limits{MaxOpenStreams: 2},
		build: func(w *wire) {
			w.request(1, otherMethod).request(3, otherMethod).request(5, otherMethod)
		},
		want: []string{h2.WarnTooManyStreams},
		check: func(t *testing.T, r *h2.Report) {
			if len(r.Streams) != 2 {
				t.Errorf("streams %+v, want 1 and 3 only", r.Streams)
			}
		},
	}, {
		name: "SETTINGS_MAX_FRAME_SIZE out of range",
		build: func(w *wire) {
			w.settings(h2.ServerToClient, http2.Setting{ID: http2.SettingMaxFrameSize, Val: 100})
		},
		want: []string{h2.WarnBadSetting},
	}, {
		name: "gap inside a DATA frame's payload",
		build: func(w *wire) {
			w.request(1, otherMethod)
			w.data(h2.ClientToServer, 1, true, msg(make([]byte, 100), false))
			last := w.steps[len(w.steps)-1].b
			w.steps[len(w.steps)-1].b = last[:30]
			w.gap(h2.ClientToServer, int64(len(last)-30))
		},
		want: []string{h2.WarnGap},
		check: func(t *testing.T, r *h2.Report) {
			if s := r.Streams[0]; !s.MessagesLost || s.RequestEnd.IsZero() {
				t.Errorf("stream %+v: want its messages lost and its END_STREAM seen", s)
			}
			if r.Warnings[0].Stopped || r.Damaged == "" {
				t.Errorf("warning %+v, damaged %q: want decoding to go on, the connection damaged", r.Warnings[0], r.Damaged)
			}
		},
	}, {
		name: "gap between frames",
		build: func(w *wire) {
			w.ping(h2.ClientToServer, false, "before")
			w.gap(h2.ClientToServer, 17)
			w.ping(h2.ServerToClient, false, "server")
		},
		want:  []string{h2.WarnGap},
		stops: true,
		check: func(t *testing.T, r *h2.Report) {
			if !hasPing(r, h2.ClientToServer, "before") || !hasPing(r, h2.ServerToClient, "server") {
				t.Errorf("events %+v: want the PING before the gap and the server's after it", r.Events)
			}
		},
	}, {
		name: "connection ends inside a frame",
		build: func(w *wire) {
			w.raw(h2.ClientToServer, frameRaw(8, http2.FramePing, 0, 0, []byte("abc")))
		},
		want:  []string{h2.WarnTruncated},
		stops: true, // nothing follows the cut frame
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWire(t).start()
			tt.build(w)
			if !strings.Contains(tt.name, "ends inside") {
				w.ping(h2.ClientToServer, false, after)
			}
			r := w.decode(tt.lim)
			if d := cmp.Diff(tt.want, warningNames(r)); d != "" {
				t.Errorf("warnings (-want +got):\n%s\n%+v", d, r.Warnings)
			}
			if got := hasPing(r, h2.ClientToServer, after); got == tt.stops {
				t.Errorf("the last PING decoded: %v, want %v", got, !tt.stops)
			}
			if tt.check != nil {
				tt.check(t, r)
			}
			if _, err := json.Marshal(r); err != nil {
				t.Errorf("marshal the report: %v", err)
			}
		})
	}
}

// varint is v as an HPACK integer continuation (RFC 7541 §5.1), after a
// prefix that was all ones.
func varint(v uint64) []byte {
	var b []byte
	for v >= 128 {
		b = append(b, byte(v%128+128))
		v /= 128
	}
	return append(b, byte(v))
}

// TestStart covers a connection whose start is missing, or not HTTP/2.
func TestStart(t *testing.T) {
	frames := newWire(t).ping(h2.ClientToServer, false, "x").steps[0].b
	tests := []struct {
		name      string
		client    []byte
		server    []byte
		warn      string
		encrypted bool
	}{
		{name: "TLS ClientHello", client: []byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01}, server: []byte{0x16, 0x03, 0x03}, encrypted: true},
		{name: "HTTP/1.1", client: []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), warn: h2.WarnNoPreface},
		{name: "capture starts mid-connection", client: frames, warn: h2.WarnNoPreface},
		{name: "preface, then no SETTINGS", client: append([]byte(http2.ClientPreface), frames...), warn: h2.WarnNoSettings},
		{name: "server's first frame not SETTINGS", client: []byte(http2.ClientPreface), server: frames, warn: h2.WarnNoSettings},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Byte by byte: the preface check must not need it whole.
			c := h2.NewConn(testClient, testServer, h2.Options{})
			for i := range tt.client {
				c.Feed(h2.ClientToServer, testT0, tt.client[i:i+1])
			}
			c.Feed(h2.ServerToClient, testT0, tt.server)
			c.End(testT0.Add(time.Second))
			r := c.Report()
			if r.Encrypted != tt.encrypted || len(r.Events) != 0 {
				t.Errorf("encrypted %v, events %+v; want encrypted %v, no event", r.Encrypted, r.Events, tt.encrypted)
			}
			var want []string
			if tt.warn != "" {
				want = []string{tt.warn}
			}
			if d := cmp.Diff(want, warningNames(r)); d != "" {
				t.Errorf("warnings (-want +got):\n%s", d)
			}
			if (r.Damaged != "") != (tt.warn != "") {
				t.Errorf("damaged %q", r.Damaged)
			}
			if r.Start != testT0 || r.ClientBytes != int64(len(tt.client)) {
				t.Errorf("start %v, client bytes %d; want %v, %d", r.Start, r.ClientBytes, testT0, len(tt.client))
			}
		})
	}
	t.Run("gap before the start", func(t *testing.T) {
		c := h2.NewConn(testClient, testServer, h2.Options{})
		c.Gap(h2.ClientToServer, testT0, 100)
		c.Feed(h2.ClientToServer, testT0, []byte(http2.ClientPreface))
		r := c.Report()
		if len(r.Warnings) != 1 || r.Warnings[0].Name != h2.WarnGap || !r.Warnings[0].Stopped || r.ClientBytes != 124 {
			t.Errorf("warnings %+v, client bytes %d; want the gap, stopped, 124 bytes", r.Warnings, r.ClientBytes)
		}
	})
}

// TestCaps holds a Report's entries to their bounds, whatever the input.
func TestCaps(t *testing.T) {
	w := newWire(t).start()
	var many []http2.Setting
	for i := range 40 {
		many = append(many, http2.Setting{ID: http2.SettingID(0x100 + i), Val: uint32(i)})
	}
	w.settings(h2.ServerToClient, many...)
	long := "/" + strings.Repeat("é", 400) // 801 bytes
	w.request(1, long)
	for id := uint32(3); id <= 2*1001+1; id += 2 {
		w.request(id, otherMethod)
	}
	w.goAway(1, http2.ErrCodeNo, "")
	// Two Start calls whose messages, collected at once, pass MaxMessage.
	w.request(2*1002+1, startMethod).dataFrames(h2.ClientToServer, 2*1002+1, false, msg(make([]byte, 3<<20), false)[:1<<20])
	w.request(2*1003+1, startMethod).dataFrames(h2.ClientToServer, 2*1003+1, false, msg(make([]byte, 3<<20), false)[:1<<20])
	r := w.decode(h2.Limits{})

	var s *h2.Event
	for i := range r.Events {
		if e := &r.Events[i]; e.Kind == h2.KindSettings && e.Dir == h2.ServerToClient && e.MoreSettings > 0 {
			s = e
		}
	}
	if s == nil || len(s.Settings) != 32 || s.MoreSettings != 8 {
		t.Errorf("SETTINGS of 40 parameters: %+v, want 32 kept and 8 counted", s)
	}
	if m := r.Streams[0].Method; m != long[:511]+"…" {
		t.Errorf("method of %d bytes kept as %d bytes %q…, want 511 bytes (a whole é short of 512) and …", len(long), len(m), m[:10])
	}
	g := h2.GoAways(r)
	if len(g) != 1 || len(g[0].GoAway.InFlight) != 1000 || g[0].GoAway.MoreInFlight != 2 {
		t.Fatalf("GOAWAY with 1002 streams open: %d kept, %d counted, want 1000 and 2", len(g[0].GoAway.InFlight), g[0].GoAway.MoreInFlight)
	}
	if !strings.HasSuffix(g[0].Text(), "1002 streams in flight") {
		t.Errorf("text %q, want all 1002 counted", g[0].Text())
	}
	if d := cmp.Diff([]string{h2.WarnMessageTooLarge}, warningNames(r)); d != "" {
		t.Errorf("warnings (-want +got):\n%s", d)
	}
}
