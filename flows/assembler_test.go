package flows

import (
	"bytes"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/h2"
)

var (
	t0         = time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	testClient = netip.MustParseAddrPort("10.0.0.2:40000")
	testServer = netip.MustParseAddrPort("10.0.0.1:50051")
)

// seg is a synthetic segment.
type seg struct {
	fromClient bool
	flags      uint8
	seq, ack   uint32
	data       []byte
	// n, when above len(data), is the segment's declared length (a snap
	// length cut it).
	n int
}

func (s seg) view(at time.Time) *attempt.SegmentView {
	c, sv := testClient.Addr().As4(), testServer.Addr().As4()
	v := &attempt.SegmentView{Src: c[:], Dst: sv[:], SrcPort: testClient.Port(), DstPort: testServer.Port(),
		Seq: s.seq, Ack: s.ack, Flags: s.flags, Sec: at.Unix(), Nsec: int32(at.Nanosecond()),
		Payload: s.data, PayloadLen: max(s.n, len(s.data))}
	if !s.fromClient {
		v.Src, v.Dst, v.SrcPort, v.DstPort = v.Dst, v.Src, v.DstPort, v.SrcPort
	}
	return v
}

// conversation is the bytes of a short gRPC-less HTTP/2 exchange: the
// client's preface, SETTINGS, a request and PINGs, the server's SETTINGS,
// PING ACKs and a GOAWAY.
func conversation() (client, server [][]byte) {
	frames := func(write func(fr *http2.Framer)) []byte {
		var b bytes.Buffer
		write(http2.NewFramer(&b, nil))
		return b.Bytes()
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":path", Value: "/pkg.S/M"},
		{Name: ":scheme", Value: "http"}, {Name: ":authority", Value: "x"}, {Name: "content-type", Value: "application/grpc"}} {
		enc.WriteField(f)
	}
	client = append(client, []byte(http2.ClientPreface), frames(func(fr *http2.Framer) { fr.WriteSettings() }))
	server = append(server, frames(func(fr *http2.Framer) { fr.WriteSettings() }))
	client = append(client, frames(func(fr *http2.Framer) {
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true})
		fr.WriteData(1, true, bytes.Repeat([]byte{0, 0, 0, 0, 100}, 1)) // an empty... prefix only
	}))
	for i := range 4 {
		client = append(client, frames(func(fr *http2.Framer) { fr.WritePing(false, [8]byte{byte(i)}) }))
		server = append(server, frames(func(fr *http2.Framer) { fr.WritePing(true, [8]byte{byte(i)}) }))
	}
	server = append(server, frames(func(fr *http2.Framer) { fr.WriteGoAway(1, http2.ErrCodeNo, []byte("max_age")) }))
	return client, server
}

// segments lays the conversation out as a TCP connection: handshake,
// the pieces alternating, FINs. Large pieces are cut in segments of mss.
func segments(withSYN bool, mss int) []seg {
	cl, sv := conversation()
	return layout(withSYN, mss, cl, sv)
}

// layout lays pieces of bytes out as a TCP connection: handshake, the
// client's and the server's pieces alternating, FINs.
func layout(withSYN bool, mss int, cl, sv [][]byte) []seg {
	const cISN, sISN = 1000, 5000
	var out []seg
	cseq, sseq := uint32(cISN+1), uint32(sISN+1)
	if withSYN {
		out = append(out, seg{fromClient: true, flags: flagSYN, seq: cISN},
			seg{flags: flagSYN | flagACK, seq: sISN, ack: cseq}, seg{fromClient: true, flags: flagACK, seq: cseq, ack: sseq})
	}
	put := func(fromClient bool, b []byte) {
		for len(b) > 0 {
			n := min(len(b), mss)
			s := seg{fromClient: fromClient, flags: flagACK, data: b[:n]}
			if fromClient {
				s.seq, s.ack = cseq, sseq
				cseq += uint32(n)
			} else {
				s.seq, s.ack = sseq, cseq
				sseq += uint32(n)
			}
			out = append(out, s)
			b = b[n:]
		}
	}
	for i := range max(len(cl), len(sv)) {
		if i < len(cl) {
			put(true, cl[i])
		}
		if i < len(sv) {
			put(false, sv[i])
		}
	}
	out = append(out, seg{fromClient: true, flags: flagFIN | flagACK, seq: cseq, ack: sseq},
		seg{flags: flagFIN | flagACK, seq: sseq, ack: cseq + 1}, seg{fromClient: true, flags: flagACK, seq: cseq + 1, ack: sseq + 1})
	return out
}

// run assembles segs, one a millisecond, and returns the connections.
func run(t *testing.T, opt Options, segs []seg) []Conn {
	t.Helper()
	var got []Conn
	a := NewAssembler(opt, func(c Conn) { got = append(got, c) })
	for i, s := range segs {
		a.Add(s.view(t0.Add(time.Duration(i) * time.Millisecond)))
	}
	a.Close()
	if a.Open() != 0 {
		t.Errorf("Open() = %d after Close", a.Open())
	}
	return got
}

// kinds summarises a report for comparison: its events' kinds and
// directions, its streams' methods, its warnings' names.
func kinds(r *h2.Report) []string {
	var out []string
	for _, e := range r.Events {
		out = append(out, fmt.Sprintf("%s %s", e.Dir, e.Kind))
	}
	for _, s := range r.Streams {
		out = append(out, "stream "+s.Method)
	}
	for _, w := range r.Warnings {
		out = append(out, "warning "+w.Name)
	}
	return out
}

func TestAssemblerOrders(t *testing.T) {
	base := segments(true, 7)
	want := run(t, Options{Ports: []uint16{50051}}, base)
	if len(want) != 1 || want[0].Report.Damaged != "" || want[0].Ended != EndedFIN || !want[0].SYN {
		t.Fatalf("in order: %+v", want)
	}
	if n := len(want[0].Report.Events); n < 10 {
		t.Fatalf("in order: %d events, want the whole conversation", n)
	}
	swap := func(s []seg, i, j int) []seg {
		s = append([]seg(nil), s...)
		s[i], s[j] = s[j], s[i]
		return s
	}
	dup := func(s []seg, i, at int) []seg {
		out := append([]seg(nil), s[:at]...)
		out = append(out, s[i])
		return append(out, s[at:]...)
	}
	reverseClient := func(s []seg) []seg {
		// Every client data segment after the handshake, in reverse
		// order. The server acknowledges only what it received: no ACK
		// of its may pass bytes the capture has not shown yet.
		var idx []int
		for i, x := range s {
			if x.fromClient && len(x.data) > 0 {
				idx = append(idx, i)
			}
		}
		out := append([]seg(nil), s...)
		for k := range idx {
			out[idx[k]] = s[idx[len(idx)-1-k]]
		}
		for i := range out {
			if !out[i].fromClient && out[i].flags&flagSYN == 0 {
				out[i].flags &^= flagACK
			}
		}
		return out
	}
	// overlap inserts, after the client's data segment i, one that
	// repeats its last 3 bytes and all of the next.
	overlap := func(s []seg, i int) []seg {
		j := i + 1
		for !s[j].fromClient || len(s[j].data) == 0 {
			j++
		}
		x := seg{fromClient: true, flags: flagACK, seq: s[j].seq - 3,
			data: append(append([]byte(nil), s[i].data[len(s[i].data)-3:]...), s[j].data...)}
		return dup(append(append([]seg(nil), s[:i+1]...), append([]seg{x}, s[i+1:]...)...), j+1, j+2)
	}
	tests := []struct {
		name string
		segs []seg
	}{
		{"two swapped", swap(base, 4, 6)},
		{"client segments reversed", reverseClient(base)},
		{"retransmitted", dup(dup(base, 5, 9), 3, 12)},
		{"retransmission overlapping", overlap(base, 4)},
		{"SYN repeated", dup(base, 0, 2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := run(t, Options{Ports: []uint16{50051}}, tt.segs)
			if len(got) != 1 {
				t.Fatalf("%d connections, want 1", len(got))
			}
			if d := got[0].Report.Damaged; d != "" {
				t.Errorf("damaged: %s", d)
			}
			// Bytes held back are fed when the hole fills, so the two
			// directions' events may interleave otherwise.
			if diff := cmp.Diff(kinds(want[0].Report), kinds(got[0].Report), cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
				t.Errorf("(-in order +got):\n%s", diff)
			}
		})
	}
}

func TestAssemblerLoss(t *testing.T) {
	base := segments(true, 7)
	// The client's 10th data segment lost for good: everything after it
	// waits until the connection ends, then the gap is declared.
	var lost []seg
	k := 0
	lostAt := -1
	for i, s := range base {
		if s.fromClient && len(s.data) > 0 {
			k++
			if k == 10 {
				lostAt = i
				continue
			}
		}
		lost = append(lost, s)
	}
	t.Run("hole never filled", func(t *testing.T) {
		// Without the server's ACKs past the hole, so that only the end
		// declares it.
		var noAck []seg
		for _, s := range lost {
			if !s.fromClient && s.flags&flagSYN == 0 {
				s.flags &^= flagACK
			}
			noAck = append(noAck, s)
		}
		got := run(t, Options{Ports: []uint16{50051}}, noAck)
		r := got[0].Report
		if r.Damaged == "" {
			t.Fatalf("not damaged; warnings %v", kinds(r))
		}
		gap := findWarning(r, h2.WarnGap)
		if gap == nil || gap.Dir != h2.ClientToServer || gap.Detail == "" {
			t.Fatalf("no client gap warning: %v", r.Warnings)
		}
		if want := fmt.Sprintf("%d bytes lost", len(base[lostAt].data)); !bytes.Contains([]byte(gap.Detail), []byte(want)) {
			t.Errorf("gap %q, want %q", gap.Detail, want)
		}
	})
	t.Run("acknowledged past the hole", func(t *testing.T) {
		got := run(t, Options{Ports: []uint16{50051}}, lost)
		r := got[0].Report
		gap := findWarning(r, h2.WarnGap)
		if gap == nil {
			t.Fatalf("no gap warning: %v", r.Warnings)
		}
		// The server's ACK of the bytes after the hole comes right after
		// them, long before the connection ends.
		if end := t0.Add(time.Duration(len(lost)-1) * time.Millisecond); !gap.Time.Before(end.Add(-5 * time.Millisecond)) {
			t.Errorf("gap declared at %v, want well before the end %v", gap.Time, end)
		}
	})
	t.Run("bounded buffer", func(t *testing.T) {
		got := run(t, Options{Ports: []uint16{50051}, MaxBuffered: 20}, func() []seg {
			var out []seg
			for _, s := range lost {
				if !s.fromClient && s.flags&flagSYN == 0 {
					s.flags &^= flagACK
				}
				out = append(out, s)
			}
			return out
		}())
		r := got[0].Report
		gap := findWarning(r, h2.WarnGap)
		if gap == nil {
			t.Fatalf("no gap warning: %v", r.Warnings)
		}
		if end := t0.Add(time.Duration(len(lost)-1) * time.Millisecond); !gap.Time.Before(end.Add(-5 * time.Millisecond)) {
			t.Errorf("gap declared at %v, want once 20 bytes waited", gap.Time)
		}
	})
	t.Run("snap length", func(t *testing.T) {
		cut := append([]seg(nil), base...)
		s := &cut[lostAt]
		s.n, s.data = len(s.data), s.data[:2]
		got := run(t, Options{Ports: []uint16{50051}}, cut)
		if findWarning(got[0].Report, h2.WarnGap) == nil {
			t.Errorf("no gap for the bytes the snap length cut: %v", kinds(got[0].Report))
		}
	})
}

func findWarning(r *h2.Report, name string) *h2.Warning {
	for i := range r.Warnings {
		if r.Warnings[i].Name == name {
			return &r.Warnings[i]
		}
	}
	return nil
}

func TestAssemblerNoSYN(t *testing.T) {
	base := segments(true, 7)
	t.Run("handshake missing, start kept", func(t *testing.T) {
		got := run(t, Options{Ports: []uint16{50051}}, base[3:])
		if len(got) != 1 || got[0].SYN || got[0].Report.Damaged != "" {
			t.Fatalf("got %+v", got)
		}
		if got[0].Report.Client != testClient {
			t.Errorf("client %v, want %v", got[0].Report.Client, testClient)
		}
	})
	t.Run("start missing", func(t *testing.T) {
		got := run(t, Options{Ports: []uint16{50051}}, base[8:])
		if len(got) != 1 || findWarning(got[0].Report, h2.WarnNoPreface) == nil {
			t.Fatalf("want a connection damaged with no_preface, got %+v", got)
		}
	})
	t.Run("start missing, no port given", func(t *testing.T) {
		if got := run(t, Options{}, base[8:]); len(got) != 0 {
			t.Fatalf("want the connection ignored, got %d", len(got))
		}
	})
	t.Run("detected without ports", func(t *testing.T) {
		got := run(t, Options{}, base)
		if len(got) != 1 || got[0].Report.Damaged != "" || len(got[0].Report.Events) < 10 {
			t.Fatalf("got %+v", got)
		}
		if !got[0].Report.Start.Equal(t0) {
			t.Errorf("start %v, want the SYN's %v", got[0].Report.Start, t0)
		}
	})
	t.Run("server speaks first", func(t *testing.T) {
		// grpc-go's server sends its SETTINGS as soon as it accepts.
		segs := append([]seg(nil), base[:3]...)
		var rest []seg
		for _, x := range base[3:] {
			if !x.fromClient && len(x.data) > 0 && x.seq < 5010 {
				segs = append(segs, x)
			} else {
				rest = append(rest, x)
			}
		}
		got := run(t, Options{}, append(segs, rest...))
		if len(got) != 1 || got[0].Report.Damaged != "" || len(got[0].Report.Events) < 10 {
			t.Fatalf("got %+v", got)
		}
		if e := got[0].Report.Events[0]; e.Dir != h2.ServerToClient || e.Kind != h2.KindSettings {
			t.Errorf("first event %s %s, want the server's SETTINGS", e.Dir, e.Kind)
		}
	})
	t.Run("not HTTP/2", func(t *testing.T) {
		segs := append([]seg(nil), base...)
		for i := range segs {
			if segs[i].fromClient && len(segs[i].data) > 0 {
				segs[i].data = []byte("GET / HTTP/1.1\r\n")[:len(segs[i].data)]
				break
			}
		}
		if got := run(t, Options{}, segs); len(got) != 0 {
			t.Fatalf("want nothing, got %d", len(got))
		}
	})
	t.Run("TLS", func(t *testing.T) {
		segs := append([]seg(nil), base...)
		for i := range segs {
			if segs[i].fromClient && len(segs[i].data) > 0 {
				segs[i].data = append([]byte{0x16, 0x03, 0x01}, segs[i].data[3:]...)
				break
			}
		}
		got := run(t, Options{}, segs)
		if len(got) != 1 || !got[0].Report.Encrypted {
			t.Fatalf("want one encrypted connection, got %+v", got)
		}
	})
}

func TestAssemblerRST(t *testing.T) {
	base := segments(true, 7)
	segs := append(append([]seg(nil), base[:12]...), seg{flags: flagRST, seq: 0})
	got := run(t, Options{Ports: []uint16{50051}}, segs)
	if len(got) != 1 || got[0].Ended != EndedRST {
		t.Fatalf("got %+v", got)
	}
}

// Many connections, each idle after its first segments: the assembler
// holds only those that are not idle yet.
func TestAssemblerIdleBound(t *testing.T) {
	const conns, idle = 5000, time.Second
	var ended int
	a := NewAssembler(Options{Ports: []uint16{50051}, Idle: idle}, func(Conn) { ended++ })
	peak := 0
	base := segments(true, 1000)
	for i := range conns {
		at := t0.Add(time.Duration(i) * 10 * time.Millisecond)
		for j, s := range base[:5] { // handshake and the first bytes, no end
			v := s.view(at.Add(time.Duration(j) * time.Microsecond))
			port := uint16(10000 + i)
			if s.fromClient {
				v.SrcPort = port
			} else {
				v.DstPort = port
			}
			a.Add(v)
		}
		peak = max(peak, a.Open())
	}
	// 1 s idle at 100 connections a second, swept every idle/8.
	if limit := 100 + 100/8 + 2; peak > limit {
		t.Errorf("peak %d connections open, want at most %d", peak, limit)
	}
	a.Close()
	if ended != conns {
		t.Errorf("%d connections handed out, want %d", ended, conns)
	}
}

// A reused tuple: a new SYN with another ISN ends the connection before.
func TestAssemblerReuse(t *testing.T) {
	base := segments(true, 100)
	again := append([]seg(nil), base[:6]...)
	for i := range again {
		again[i].seq += 1 << 20
		again[i].ack += 1 << 20
	}
	got := run(t, Options{Ports: []uint16{50051}}, append(append([]seg(nil), base[:6]...), again...))
	if len(got) != 2 || got[0].Ended != EndedReused {
		t.Fatalf("got %d connections: %+v", len(got), got)
	}
}

// TestAssemblerLate: bytes of a connection that ended by RST or FIN (in
// flight when the server reset it, or sent again) are not a new
// connection joined mid-stream, which would read as damaged; a SYN on the
// same ports is a new connection at once, and past lateWindow bytes
// without SYN are a connection joined mid-stream again.
func TestAssemblerLate(t *testing.T) {
	base := segments(true, 7)
	var inFlight seg // the first client bytes after the RST below
	for _, s := range base[12:] {
		if s.fromClient && len(s.data) > 0 {
			inFlight = s
			break
		}
	}
	rst := append(append([]seg(nil), base[:12]...), seg{flags: flagRST, seq: 0})
	fin := append([]seg(nil), base...)
	resent := fin[len(fin)-4] // the last bytes before the FINs
	reopened := segments(true, 7)
	for _, tt := range []struct {
		name  string
		segs  []seg
		gap   time.Duration // before the last segment
		conns int
	}{
		{"bytes in flight after RST", append(rst, inFlight), time.Millisecond, 1},
		{"bytes sent again after both FINs", append(fin, resent), time.Millisecond, 1},
		{"a new connection on the same ports", append(fin, reopened...), time.Millisecond, 2},
		{"bytes after the window", append(rst, inFlight), lateWindow, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []Conn
			a := NewAssembler(Options{Ports: []uint16{50051}}, func(c Conn) { got = append(got, c) })
			at := t0
			for i, s := range tt.segs {
				if i == len(tt.segs)-1 {
					at = at.Add(tt.gap)
				}
				a.Add(s.view(at))
				at = at.Add(time.Millisecond)
			}
			a.Close()
			if len(got) != tt.conns {
				t.Fatalf("%d connections, want %d: %+v", len(got), tt.conns, got)
			}
			for i, c := range got {
				if mid := tt.conns == 2 && i == 1 && tt.gap == lateWindow; (c.Report.Damaged != "") != mid {
					t.Errorf("connection %d damaged %q; want damaged only when joined mid-stream", i, c.Report.Damaged)
				}
			}
		})
	}
}

// A client whose first bytes are captured twice, different, hides
// nothing: whichever copy came first, the connection is reported damaged,
// with the reason; the same bytes again are a plain retransmission.
func TestAssemblerRetransmitDiffers(t *testing.T) {
	cl, sv := conversation()
	garbage := []byte("GET / HTTP/1.1\r\nHost: x\r\n") // as long as the preface's first piece
	segs := layout(true, 1400, cl, sv)
	// segs[3] is the client's first piece, the preface, at ISN+1.
	first := segs[3]
	other := first
	other.data = garbage[:len(first.data)]
	insert := func(s seg) []seg {
		out := append([]seg(nil), segs[:3]...)
		return append(append(out, s), segs[3:]...)
	}
	tests := []struct {
		name    string
		opt     Options
		segs    []seg
		damaged bool
		rpcs    int // streams decoded
	}{
		{name: "other bytes, then the preface", segs: insert(other), damaged: true},
		{name: "other bytes, then the preface, port given", opt: Options{Ports: []uint16{testServer.Port()}}, segs: insert(other), damaged: true},
		{name: "the preface, then other bytes", segs: append(append([]seg(nil), segs[:4]...), append([]seg{other}, segs[4:]...)...), damaged: true, rpcs: 1},
		{name: "the preface twice", segs: insert(first), rpcs: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := run(t, tt.opt, tt.segs)
			if len(got) != 1 {
				t.Fatalf("%d connections, want 1", len(got))
			}
			r := got[0].Report
			// The first reason stays the connection's: with a port given,
			// the other bytes were decoded first and found no preface.
			w := findWarning(r, h2.WarnConflict)
			conflict := w != nil && strings.HasPrefix(w.Detail, "the client's bytes at offset 0 were captured twice, different")
			if (r.Damaged != "") != tt.damaged || conflict != tt.damaged {
				t.Errorf("damaged %q, warning %+v; want damaged, with the conflict's warning: %v", r.Damaged, w, tt.damaged)
			}
			if len(r.Streams) != tt.rpcs {
				t.Errorf("%d streams decoded, want %d", len(r.Streams), tt.rpcs)
			}
		})
	}
}
