package flows

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"time"

	"golang.org/x/net/http2"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/h2"
	"github.com/backoff-audit/audit/internal/quote"
	"github.com/backoff-audit/audit/tlsdec"
)

// Defaults of Options.
const (
	// DefaultIdle is how long a connection may stay silent before it is
	// ended (Options.Idle): longer than any keepalive a gRPC client is
	// allowed by default (grpc-go's server enforces 5 minutes).
	DefaultIdle = 10 * time.Minute
	// DefaultMaxBuffered bounds the out-of-order bytes held per direction
	// (Options.MaxBuffered).
	DefaultMaxBuffered = 1 << 20
)

// Options configure an Assembler.
type Options struct {
	// Ports are the server ports whose connections are decoded, whatever
	// their first bytes. Empty: every connection whose client's first
	// bytes are the HTTP/2 client preface is decoded, and one whose first
	// bytes are a TLS handshake is reported as encrypted; the others are
	// followed only until they end, and not reported.
	Ports []uint16
	// Idle ends a connection no segment came for in this long, by the
	// capture's clock (default DefaultIdle).
	Idle time.Duration
	// MaxBuffered bounds the bytes held per direction after a hole in the
	// sequence: beyond it the hole is declared lost (h2.Conn.Gap) and the
	// bytes after it are decoded (default DefaultMaxBuffered).
	MaxBuffered int
	// Limits bound each connection's decoder.
	Limits h2.Limits
	// Done, when closed, stops ReadFiles where it is reading
	// (capture.Options.Done): the connections read so far are reported.
	Done <-chan struct{}
	// Progress, when a terminal, shows ReadFiles' progress through each
	// file that takes more than a second (capture.ProgressTo).
	Progress io.Writer
	// Opened, when set, is called when a connection's decoding starts,
	// before any of its bytes are decoded. Conn.SYN false means the
	// connection was open before the input began (joined mid-stream): its
	// header blocks cannot be decoded, since the HPACK state they build on
	// went by before the capture. Conn.Ended is "".
	Opened func(Conn)
	// KeyLog, when set, decrypts the connections whose client's first
	// byte is a TLS handshake record (package tlsdec): their application
	// data is decoded as a plaintext connection's bytes are, and Conn.TLS
	// says whether they were decrypted, or why not. Without it such a
	// connection is reported as encrypted (h2.Report.Encrypted).
	KeyLog *tlsdec.KeyLog
	// StreamEnd, when set, is called with each stream of a connection as
	// the stream ends (h2.Options.StreamEnd), while the connection may
	// stay open: a live capture learns of each finished RPC at once. The
	// Stream is valid only during the call; Conn.Ended is "".
	StreamEnd func(Conn, *h2.Stream)
}

// How a connection ended, in Conn.Ended.
const (
	EndedFIN  = "fin"         // both sides sent FIN
	EndedRST  = "rst"         // a side sent RST
	EndedIdle = "idle"        // nothing came for Options.Idle
	EndedOpen = "open at end" // still open where the input ended
	// EndedReused: a new SYN with another initial sequence number came
	// on the same addresses and ports.
	EndedReused = "reused"
)

// Conn is one decoded TCP connection.
type Conn struct {
	// Report is what h2 decoded; its End is the time of the segment that
	// ended the connection, or its last segment.
	Report *h2.Report `json:"report"`
	// SYN is set when the client's SYN is in the input.
	SYN bool `json:"syn"`
	// Ended says how the connection ended (the Ended* constants).
	Ended string `json:"ended"`
	// TLS is what decrypting the connection with Options.KeyLog found;
	// nil when it is not TLS or no key log was given.
	TLS *tlsdec.Status `json:"tls,omitempty"`
	// ISN is the client's initial sequence number, when SYN is set: with
	// the addresses, it names the connection attempt (docs/spec.md §5.2).
	ISN uint32 `json:"-"`
}

// Assembler reassembles the TCP connections of captured segments into
// each connection's two byte streams and decodes them with an h2.Conn,
// the two directions fed in capture order (h2's package doc, "Input").
//
// Segments are added in capture order. An out-of-order segment waits for
// the bytes before it, up to Options.MaxBuffered per direction; a
// retransmission is dropped where it repeats bytes already fed. A hole
// that never fills becomes h2.Conn.Gap, with its size, when the bytes
// after it outgrow the bound, when the other side acknowledges bytes past
// it (the receiver had them; the capture missed them), or when the
// connection ends. A connection ends at FIN from both sides, at RST, or
// after Options.Idle without a segment, and is then handed to the
// callback and forgotten: memory follows the open connections.
//
// An Assembler is not safe for concurrent use.
type Assembler struct {
	opt   Options
	ports map[uint16]bool
	done  func(Conn)
	conns map[flowKey]*flow
	// closed holds when each connection that ended by FIN or RST ended,
	// for lateWindow, at most maxClosed of them (see lateWindow).
	closed map[flowKey]time.Time
	// now is the time of the latest segment; swept the last idle sweep.
	now, swept time.Time
}

// lateWindow is how long after a connection's FIN or RST a segment of its
// addresses and ports without SYN is taken for one of it (bytes in flight
// when the peer reset it, or sent again) and dropped, rather than for a
// connection joined mid-stream, which would be decoded as damaged: Linux
// keeps a closed connection's ports in TIME_WAIT for 60 s. A SYN on them
// starts a new connection at once. At most maxClosed connections are
// remembered at a time, bounding the memory: those closing while as many
// are are not.
const (
	lateWindow = 60 * time.Second
	maxClosed  = 1 << 16
)

// flowKey names a connection whichever way a segment goes: its lower
// endpoint first.
type flowKey struct {
	a, b   [16]byte
	ap, bp uint16
}

// flow is one connection's reassembly state.
type flow struct {
	client, server netip.AddrPort
	// clientIsA says the client is the key's a endpoint.
	clientIsA bool
	state     flowState
	dec       *h2.Conn
	// tls decrypts the connection's bytes for dec, when the key log is
	// given and the client's first byte begins a TLS handshake; fed is
	// set once a byte or a gap went to either.
	tls   *tlsConn
	fed   bool
	isn   uint32
	dirs  [2]stream // by h2.Direction
	syn   bool
	synAt time.Time
	last  time.Time
	// early holds what the server sent before the client's first bytes,
	// while the flow is undecided, up to maxEarly segments.
	early []chunk
	// head is the client's first bytes as delivered, up to headKeep, to
	// tell a retransmission of them from other bytes sent in their place;
	// headDone once no more are kept (headKeep reached, or a hole or a
	// snap length cut them).
	head     []byte
	headDone bool
}

// headKeep bounds the client's first bytes kept per connection: enough
// for the HTTP/2 preface and a TLS record header, which decide what a
// connection is.
const headKeep = 64

// maxEarly bounds the server's segments kept before the client's first
// bytes decide whether a connection is HTTP/2: a server that speaks
// first (SMTP, MySQL) is not.
const maxEarly = 8

type flowState uint8

const (
	undecided flowState = iota // Options.Ports empty, no byte of the client yet
	decoding
	ignored
	// conflicted: ignored, until the client's first bytes came again,
	// different: what it is cannot be told, and it is reported damaged.
	conflicted
)

// stream is one direction's reassembly.
type stream struct {
	// known is set once next is: the SYN's ISN + 1, or the first
	// segment's sequence number when the SYN was not captured; start is
	// that first value of next.
	known       bool
	next, start uint32
	// fed is set once a byte (or a gap) was given to the decoder.
	fed bool
	// fin is set by a FIN, finSeq its sequence number (the stream's end).
	fin    bool
	finSeq uint32
	// pend holds the segments after a hole, in sequence order, with
	// their copied bytes; pendBytes their total.
	pend      []chunk
	pendBytes int
}

// chunk is a segment that waits: n bytes at seq, of which b were
// captured.
type chunk struct {
	seq uint32
	n   int
	t   time.Time
	b   []byte
}

// NewAssembler returns an Assembler that hands each connection, once
// ended, to done: each that carried bytes (a refused attempt, or one
// closed before either side sent a byte, has nothing to decode).
func NewAssembler(opt Options, done func(Conn)) *Assembler {
	if opt.Idle <= 0 {
		opt.Idle = DefaultIdle
	}
	if opt.MaxBuffered <= 0 {
		opt.MaxBuffered = DefaultMaxBuffered
	}
	a := &Assembler{opt: opt, done: done, conns: make(map[flowKey]*flow), closed: make(map[flowKey]time.Time)}
	if len(opt.Ports) > 0 {
		a.ports = make(map[uint16]bool, len(opt.Ports))
		for _, p := range opt.Ports {
			a.ports[p] = true
		}
	}
	return a
}

// Open counts the connections being followed.
func (a *Assembler) Open() int { return len(a.conns) }

// TCP flags.
const (
	flagFIN = 0x01
	flagSYN = 0x02
	flagRST = 0x04
	flagACK = 0x10
)

// seqLess is a < b in sequence space (RFC 9293 §3.4).
func seqLess(a, b uint32) bool { return int32(a-b) < 0 }

// AddSYN adds a SYN that capture.Live hands apart from the other
// segments.
func (a *Assembler) AddSYN(s attempt.SYN) {
	src, dst := s.Src.Addr().As16(), s.Dst.Addr().As16()
	v := attempt.SegmentView{Src: src[:], Dst: dst[:], SrcPort: s.Src.Port(), DstPort: s.Dst.Port(),
		Seq: s.Seq, Flags: flagSYN, Sec: s.Time.Unix(), Nsec: int32(s.Time.Nanosecond())}
	a.Add(&v)
}

// Add reassembles one segment; v is not kept.
func (a *Assembler) Add(v *attempt.SegmentView) {
	if a.ports != nil && !a.ports[v.SrcPort] && !a.ports[v.DstPort] {
		return
	}
	t := time.Unix(v.Sec, int64(v.Nsec))
	a.now = t
	if t.Sub(a.swept) >= a.opt.Idle/8 {
		a.sweep(t)
	}
	k, srcIsA := keyOf(v)
	f := a.conns[k]
	syn := v.Flags&flagSYN != 0
	if f != nil && syn && v.Flags&flagACK == 0 {
		// A SYN on a followed tuple: a retransmission, or a new
		// connection reusing the ports.
		if d := f.dirOf(srcIsA); !f.dirs[d].known || f.dirs[d].next != v.Seq+1 || f.dirs[d].fed {
			a.end(k, f, t, EndedReused)
			f = nil
		}
	}
	if f == nil {
		if !syn && len(v.Payload) == 0 && v.PayloadLen == 0 {
			return // an ACK, FIN or RST of no connection followed
		}
		if at, ok := a.closed[k]; ok {
			if !syn && t.Sub(at) < lateWindow {
				return // late bytes of a connection that ended
			}
			delete(a.closed, k)
		}
		f = a.newFlow(v, srcIsA, t)
		if f == nil {
			return
		}
		a.conns[k] = f
	}
	f.last = t
	d := f.dirOf(srcIsA)
	s := &f.dirs[d]
	if v.Flags&flagRST != 0 {
		a.end(k, f, t, EndedRST)
		return
	}
	if syn {
		if !s.known {
			s.known, s.next, s.start = true, v.Seq+1, v.Seq+1
			if d == h2.ClientToServer {
				f.isn = v.Seq
			}
		}
		return
	}
	if d == h2.ClientToServer && v.PayloadLen > 0 && f.head != nil {
		a.recheck(f, t, v.Seq, v.Payload)
	}
	if f.state == ignored || f.state == conflicted {
		if v.Flags&flagFIN != 0 {
			s.fin = true
			if f.dirs[1-d].fin {
				a.end(k, f, t, EndedFIN)
			}
		}
		return
	}
	if v.Flags&flagACK != 0 {
		a.acked(f, 1-d, v.Ack, t)
	}
	if !s.known {
		s.known, s.next, s.start = true, v.Seq, v.Seq
	}
	seq := v.Seq
	if v.PayloadLen > 0 {
		a.data(f, d, t, seq, v.Payload, v.PayloadLen)
	}
	if v.Flags&flagFIN != 0 && !s.fin {
		s.fin, s.finSeq = true, seq+uint32(v.PayloadLen)
	}
	if f.state == ignored {
		return
	}
	if f.dirs[0].fin && f.dirs[1].fin {
		a.end(k, f, t, EndedFIN)
	}
}

// keyOf returns the key of v's connection and whether v's source is its
// a endpoint.
func keyOf(v *attempt.SegmentView) (flowKey, bool) {
	var k flowKey
	src, dst := addr16(v.Src), addr16(v.Dst)
	if c := bytes.Compare(src[:], dst[:]); c < 0 || c == 0 && v.SrcPort <= v.DstPort {
		k.a, k.ap, k.b, k.bp = src, v.SrcPort, dst, v.DstPort
		return k, true
	}
	k.a, k.ap, k.b, k.bp = dst, v.DstPort, src, v.SrcPort
	return k, false
}

// addr16 is a 4- or 16-byte address as As16 spells it.
func addr16(b []byte) (a [16]byte) {
	if len(b) == 4 {
		a[10], a[11] = 0xff, 0xff
		copy(a[12:], b)
		return a
	}
	copy(a[:], b)
	return a
}

func addrPort(b [16]byte, port uint16) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom16(b).Unmap(), port)
}

// dirOf is the direction of a segment from the key's a endpoint (srcIsA)
// or from b.
func (f *flow) dirOf(srcIsA bool) h2.Direction {
	if srcIsA == f.clientIsA {
		return h2.ClientToServer
	}
	return h2.ServerToClient
}

// newFlow starts following v's connection. The client is the SYN's
// sender, the SYN-ACK's receiver, else the side not on one of
// Options.Ports, else the side that sends the HTTP/2 preface, else the
// side of the higher port.
func (a *Assembler) newFlow(v *attempt.SegmentView, srcIsA bool, t time.Time) *flow {
	srcClient := false
	switch {
	case v.Flags&flagSYN != 0:
		srcClient = v.Flags&flagACK == 0
	case a.ports != nil && a.ports[v.SrcPort] != a.ports[v.DstPort]:
		srcClient = a.ports[v.DstPort]
	case len(v.Payload) > 0 && bytes.HasPrefix([]byte(http2.ClientPreface), v.Payload[:min(len(v.Payload), len(http2.ClientPreface))]):
		srcClient = true
	default:
		srcClient = v.SrcPort > v.DstPort
	}
	f := &flow{clientIsA: srcIsA == srcClient, syn: v.Flags&(flagSYN|flagACK) == flagSYN}
	src, dst := addrPort(addr16(v.Src), v.SrcPort), addrPort(addr16(v.Dst), v.DstPort)
	if srcClient {
		f.client, f.server = src, dst
	} else {
		f.client, f.server = dst, src
	}
	if f.syn {
		f.synAt = t
	}
	if a.ports != nil {
		f.start(a)
	}
	return f
}

// start begins decoding the flow, from its SYN's time when it has one
// (else h2 takes the time of the first bytes).
func (f *flow) start(a *Assembler) {
	f.state = decoding
	opt := h2.Options{Start: f.synAt, Limits: a.opt.Limits}
	if a.opt.StreamEnd != nil {
		opt.StreamEnd = func(s *h2.Stream) { a.opt.StreamEnd(Conn{Report: f.dec.Report(), SYN: f.syn}, s) }
	}
	f.dec = h2.NewConn(f.client, f.server, opt)
	if a.opt.Opened != nil {
		a.opt.Opened(Conn{Report: f.dec.Report(), SYN: f.syn})
	}
}

// data reassembles a segment of n bytes at seq, of which b were captured.
func (a *Assembler) data(f *flow, d h2.Direction, t time.Time, seq uint32, b []byte, n int) {
	s := &f.dirs[d]
	end := seq + uint32(n)
	if !seqLess(s.next, end) {
		return // all of it fed already: a retransmission
	}
	if seqLess(s.next, seq) {
		a.buffer(f, d, t, seq, b, n)
		return
	}
	skip := int(s.next - seq)
	a.deliver(f, d, t, b[min(skip, len(b)):], n-skip)
	a.drain(f, d, t)
}

// deliver feeds the next n bytes of d, of which b were captured (the
// rest, cut by the snap length, is lost).
func (a *Assembler) deliver(f *flow, d h2.Direction, t time.Time, b []byte, n int) {
	s := &f.dirs[d]
	if d == h2.ClientToServer && !f.headDone {
		if int(s.next-s.start) != len(f.head) || len(b) < n {
			f.headDone = true // a hole before, or bytes the capture cut
		} else {
			f.head = append(f.head, b[:min(len(b), headKeep-len(f.head))]...)
			f.headDone = len(f.head) == headKeep
		}
	}
	s.next += uint32(n)
	if f.state == undecided && d == h2.ServerToClient && len(f.early) < maxEarly {
		// A server may send its SETTINGS before the client's preface
		// arrives: kept until the client's first bytes tell.
		f.early = append(f.early, chunk{t: t, n: n, b: bytes.Clone(b)})
		return
	}
	if f.state == undecided {
		a.decide(f, d, t, b)
		if f.state == decoding {
			for _, c := range f.early {
				f.dirs[h2.ServerToClient].fed = true
				f.feed(a, h2.ServerToClient, c.t, c.b)
				if lost := c.n - len(c.b); lost > 0 {
					f.lose(h2.ServerToClient, c.t, int64(lost))
				}
			}
		}
		f.early = nil
	}
	if f.state != decoding {
		return
	}
	s.fed = true
	if len(b) > 0 {
		f.feed(a, d, t, b)
	}
	if lost := n - len(b); lost > 0 {
		f.lose(d, t, int64(lost))
	}
}

// recheck compares a client's segment with the first bytes already
// delivered where the two overlap: the same bytes are a retransmission;
// others are a conflict, since which copy the server read is unknown. A
// connection ignored for its first copy is then reported, damaged; one
// decoded is marked damaged and goes on from the copy decoded.
func (a *Assembler) recheck(f *flow, t time.Time, seq uint32, b []byte) {
	s := &f.dirs[h2.ClientToServer]
	off := int(int32(seq - s.start))
	if off < 0 || off >= len(f.head) {
		return
	}
	first := f.head[off:]
	again := b[:min(len(b), len(first))]
	if bytes.Equal(first[:len(again)], again) {
		return
	}
	detail := fmt.Sprintf("the client's bytes at offset %d were captured twice, different (first %s, then %s): which the server read is unknown",
		off, quote.Text(string(first[:len(again)])), quote.Text(string(again)))
	f.head, f.headDone = nil, true // one conflict is enough to tell
	switch f.state {
	case decoding:
		f.dec.Conflict(h2.ClientToServer, t, 0, detail)
	case undecided, ignored:
		f.drop()
		f.start(a)
		f.state = conflicted
		f.dec.Conflict(h2.ClientToServer, t, int64(len(first)), detail)
	}
}

// decide, with no Options.Ports, decodes a connection whose client's
// first bytes are the HTTP/2 preface or a TLS handshake record, and
// ignores any other.
func (a *Assembler) decide(f *flow, d h2.Direction, t time.Time, b []byte) {
	if d != h2.ClientToServer || len(b) == 0 {
		f.drop() // the server spoke first, and on
		return
	}
	p := http2.ClientPreface
	if bytes.HasPrefix([]byte(p), b[:min(len(b), len(p))]) || len(b) >= 2 && b[0] == 0x16 && b[1] == 0x03 {
		f.start(a)
		return
	}
	f.drop()
}

// drop stops following the flow's bytes; its end is still awaited.
func (f *flow) drop() {
	f.state = ignored
	f.early = nil
	for d := range f.dirs {
		f.dirs[d].pend, f.dirs[d].pendBytes = nil, 0
	}
}

// buffer keeps a segment after a hole, in sequence order; past
// MaxBuffered the hole is declared lost.
func (a *Assembler) buffer(f *flow, d h2.Direction, t time.Time, seq uint32, b []byte, n int) {
	s := &f.dirs[d]
	i, _ := slices.BinarySearchFunc(s.pend, seq, func(c chunk, seq uint32) int {
		switch {
		case seqLess(c.seq, seq):
			return -1
		case c.seq == seq:
			return 0
		}
		return 1
	})
	if i < len(s.pend) && s.pend[i].seq == seq && len(s.pend[i].b) >= n {
		return // a retransmission of a segment that waits
	}
	c := chunk{seq: seq, n: n, t: t, b: bytes.Clone(b)}
	s.pend = slices.Insert(s.pend, i, c)
	s.pendBytes += len(c.b)
	for s.pendBytes > a.opt.MaxBuffered && len(s.pend) > 0 {
		a.gap(f, d, t, s.pend[0].seq)
		a.drain(f, d, t)
	}
}

// gap declares the bytes of d up to seq lost.
func (a *Assembler) gap(f *flow, d h2.Direction, t time.Time, seq uint32) {
	s := &f.dirs[d]
	n := int64(seq - s.next)
	if n <= 0 || int32(seq-s.next) < 0 {
		return
	}
	s.next = seq
	if f.state == undecided {
		f.drop() // its start is lost: nothing tells what it carries
	}
	if f.state != decoding {
		return
	}
	s.fed = true
	f.lose(d, t, n)
}

// drain feeds the waiting segments the stream has reached.
func (a *Assembler) drain(f *flow, d h2.Direction, t time.Time) {
	s := &f.dirs[d]
	for len(s.pend) > 0 && !seqLess(s.next, s.pend[0].seq) {
		c := s.pend[0]
		s.pend[0] = chunk{}
		s.pend = s.pend[1:]
		s.pendBytes -= len(c.b)
		if !seqLess(s.next, c.seq+uint32(c.n)) {
			continue
		}
		skip := int(s.next - c.seq)
		a.deliver(f, d, t, c.b[min(skip, len(c.b)):], c.n-skip)
		if f.state == ignored {
			return
		}
	}
	if len(s.pend) == 0 {
		s.pend = nil
	}
}

// acked notes that the receiver of d acknowledged bytes up to ack: a hole
// before it was captured by no one, so it is declared lost at once.
func (a *Assembler) acked(f *flow, d h2.Direction, ack uint32, t time.Time) {
	s := &f.dirs[d]
	if len(s.pend) == 0 || !s.known || !seqLess(s.next, ack) {
		return
	}
	a.gap(f, d, t, min32seq(ack, s.pend[0].seq))
	a.drain(f, d, t)
}

func min32seq(a, b uint32) uint32 {
	if seqLess(a, b) {
		return a
	}
	return b
}

// end ends a connection: holes left are declared lost, the decoder is
// ended, and the connection handed to done.
func (a *Assembler) end(k flowKey, f *flow, t time.Time, how string) {
	delete(a.conns, k)
	if how == EndedFIN || how == EndedRST {
		a.close(k, t)
	}
	if f.state == undecided && (f.dirs[0].pend != nil || f.dirs[1].pend != nil) {
		// Its client's first bytes never came: nothing tells what it is.
		f.drop()
	}
	if f.state == conflicted {
		// Nothing was fed since the conflict: no hole to declare.
		f.dec.End(t)
		if a.done != nil {
			a.done(Conn{Report: f.dec.Report(), SYN: f.syn, Ended: how})
		}
		return
	}
	if f.state != decoding {
		return
	}
	for d := range f.dirs {
		s := &f.dirs[d]
		for len(s.pend) > 0 {
			a.gap(f, h2.Direction(d), t, s.pend[0].seq)
			a.drain(f, h2.Direction(d), t)
		}
		if s.fin && s.known && seqLess(s.next, s.finSeq) {
			a.gap(f, h2.Direction(d), t, s.finSeq)
		}
	}
	f.dec.End(t)
	var st *tlsdec.Status
	if f.tls != nil {
		st = f.tls.end(t, f.dec.Report())
	}
	if r := f.dec.Report(); r.ClientBytes == 0 && r.ServerBytes == 0 {
		return // refused, or closed before a byte: nothing decoded
	}
	if a.done != nil {
		a.done(Conn{Report: f.dec.Report(), SYN: f.syn, Ended: how, TLS: st, ISN: f.isn})
	}
}

// close remembers that the connection of k ended by FIN or RST at t (see
// lateWindow).
func (a *Assembler) close(k flowKey, t time.Time) {
	if len(a.closed) < maxClosed {
		a.closed[k] = t
	}
}

// sweep ends the connections idle for Options.Idle at now, and forgets
// those closed more than lateWindow before it.
func (a *Assembler) sweep(now time.Time) {
	a.swept = now
	for k, at := range a.closed {
		if now.Sub(at) >= lateWindow {
			delete(a.closed, k)
		}
	}
	var idle []flowKey
	for k, f := range a.conns {
		if now.Sub(f.last) >= a.opt.Idle {
			idle = append(idle, k)
		}
	}
	a.endAll(idle, EndedIdle, func(f *flow) time.Time { return f.last })
}

// endAll ends the connections of keys in the order they started, so that
// done sees them in a stable order.
func (a *Assembler) endAll(keys []flowKey, how string, at func(*flow) time.Time) {
	slices.SortFunc(keys, func(x, y flowKey) int {
		fx, fy := a.conns[x], a.conns[y]
		if c := fx.last.Compare(fy.last); c != 0 {
			return c
		}
		return cmpKey(x, y)
	})
	for _, k := range keys {
		f := a.conns[k]
		a.end(k, f, at(f), how)
	}
}

func cmpKey(x, y flowKey) int {
	if c := bytes.Compare(x.a[:], y.a[:]); c != 0 {
		return c
	}
	if c := bytes.Compare(x.b[:], y.b[:]); c != 0 {
		return c
	}
	return cmp.Or(cmp.Compare(x.ap, y.ap), cmp.Compare(x.bp, y.bp))
}

// Flush ends the connections idle at now (by the capture's clock), as
// Add does now and then; a live capture calls it when packets stop.
func (a *Assembler) Flush(now time.Time) { a.sweep(now) }

// Close ends every connection still open, at the time of its last
// segment, as open at the end of the input.
func (a *Assembler) Close() {
	keys := make([]flowKey, 0, len(a.conns))
	for k := range a.conns {
		keys = append(keys, k)
	}
	a.endAll(keys, EndedOpen, func(f *flow) time.Time { return f.last })
}
