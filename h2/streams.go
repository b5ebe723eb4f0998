package h2

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/backoff-audit/audit/internal/quote"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// The header blocks and streams of a connection: HPACK fields into
// requests and responses, DATA into messages, each stream from its open to
// its close.

// block is a header block being decoded (HEADERS or PUSH_PROMISE, then
// CONTINUATION frames until END_HEADERS).
type block struct {
	active    bool
	push      bool
	endStream bool
	s         *stream
	size      int
	truncated bool
	f         fields
}

// fields are the header fields a Stream keeps.
type fields struct {
	path, authority, status, timeout, prev, encoding string
	grpcStatus, grpcMessage, pushback                string
	hasStatus, hasGRPCStatus, hasGRPCMessage         bool
}

// stream is the decoding state of an open stream.
type stream struct {
	id uint32
	// idx is the stream's entry in Report.Streams, or -1 when MaxStreams
	// was reached and scratch stands in.
	idx     int
	scratch Stream
	kind    methodKind
	// gotHeaders is set per direction once its first header block ended.
	gotHeaders [2]bool
	ended      [2]bool
	msgs       [2]msgState
}

// headers starts a header block: a request (from the client, on a new
// stream), a response or trailers (from the server).
func (c *Conn) headers(h *half, t time.Time, f *http2.HeadersFrame) {
	id := f.StreamID
	s := c.open[id]
	if h.dir == ClientToServer && s == nil {
		switch {
		case id%2 == 0:
			c.unknown(h, t, id, "HEADERS from the client on an even stream id")
		case id > c.maxStream:
			c.maxStream = id
			s = c.openStream(t, id)
		}
	} else if s == nil && id > c.maxStream {
		c.unknown(h, t, id, "HEADERS for a stream the client never opened")
	}
	h.blk = block{active: true, s: s, endStream: f.StreamEnded()}
	if h.hpackLost && s != nil {
		c.rec(s).HeadersLost = true
	}
	c.fragment(h, t, f.HeaderBlockFragment(), f.HeadersEnded())
}

func (c *Conn) unknown(h *half, t time.Time, id uint32, why string) {
	if id == c.lastUnknown {
		return
	}
	c.lastUnknown = id
	c.warn(Warning{Time: t, Dir: h.dir, Name: WarnUnknownStream, Stream: id, Detail: why + ": ignored"})
}

// fragment decodes a piece of the header block and, at its end, applies
// the block to its stream.
func (c *Conn) fragment(h *half, t time.Time, frag []byte, end bool) {
	if !h.hpackLost {
		_, err := h.hdec.Write(frag)
		if err == nil && end {
			err = h.hdec.Close()
		}
		if err != nil {
			h.hdec.SetEmitEnabled(true)
			name := WarnHPACK
			var de hpack.DecodingError
			switch {
			case errors.Is(err, hpack.ErrStringLength):
				name = WarnHeaderString
			case errors.As(err, &de) && strings.Contains(de.Err.Error(), "table size update too large"):
				name = WarnTableSizeUpdate
			}
			w := Warning{Time: t, Dir: h.dir, Name: name, Detail: err.Error()}
			if name == WarnTableSizeUpdate {
				w.Detail += fmt.Sprintf(" (the receiver allows %d)", h.tableMax)
			}
			if h.blk.s != nil {
				w.Stream = h.blk.s.id
			}
			c.warn(w)
			c.loseHeaders(h, t, name)
			return
		}
	}
	if !end {
		return
	}
	b := h.blk
	h.blk = block{}
	if b.truncated {
		h.hdec.SetEmitEnabled(true)
		w := Warning{Time: t, Dir: h.dir, Name: WarnHeaderList,
			Detail: fmt.Sprintf("header list over %d bytes decoded: the fields past it are ignored", c.lim.MaxHeaderList)}
		if b.s != nil {
			w.Stream = b.s.id
			c.rec(b.s).HeadersLost = true
		}
		c.warn(w)
	}
	if b.push || b.s == nil {
		return
	}
	s := b.s
	if !h.hpackLost {
		c.applyHeaders(s, h.dir, &b.f)
	}
	s.gotHeaders[h.dir] = true
	if b.endStream {
		c.endSide(s, h.dir, t)
	}
}

// emit receives each decoded header field of h's current block.
func (c *Conn) emit(h *half, f hpack.HeaderField) {
	b := &h.blk
	b.size += int(f.Size())
	if b.size > c.lim.MaxHeaderList {
		b.truncated = true
		h.hdec.SetEmitEnabled(false)
		return
	}
	switch f.Name {
	case ":path":
		b.f.path = f.Value
	case ":authority":
		b.f.authority = f.Value
	case ":status":
		b.f.status, b.f.hasStatus = f.Value, true
	case "grpc-timeout":
		b.f.timeout = f.Value
	case "grpc-previous-rpc-attempts":
		b.f.prev = f.Value
	case "grpc-encoding":
		b.f.encoding = f.Value
	case "grpc-status":
		b.f.grpcStatus, b.f.hasGRPCStatus = f.Value, true
	case "grpc-message":
		b.f.grpcMessage, b.f.hasGRPCMessage = f.Value, true
	case "grpc-retry-pushback-ms":
		b.f.pushback = f.Value
	}
}

// applyHeaders copies a header block's fields to the stream: the first
// block of the client is the request, the server's first the response
// headers (or Trailers-Only) and its last the trailers.
func (c *Conn) applyHeaders(s *stream, dir Direction, f *fields) {
	r := c.rec(s)
	if dir == ClientToServer {
		if s.gotHeaders[dir] {
			return // trailers from a client: gRPC has none
		}
		r.Method, r.Authority, r.Timeout, r.RequestEncoding = cut(f.path), cut(f.authority), cut(f.timeout), cut(f.encoding)
		if n, err := strconv.Atoi(f.prev); err == nil && n >= 0 {
			r.PreviousAttempts = n
		}
		s.kind = kindOf(r.Method)
		return
	}
	if !s.gotHeaders[dir] {
		r.ResponseEncoding = cut(f.encoding)
		if n, err := strconv.Atoi(f.status); f.hasStatus && err == nil {
			r.HTTPStatus = n
		}
	}
	if f.hasGRPCStatus {
		r.GRPCStatus = cut(grpcCodeName(f.grpcStatus))
	}
	if f.hasGRPCMessage {
		r.GRPCMessage = cut(percentDecode(f.grpcMessage))
	}
	if f.pushback != "" {
		r.RetryPushback = cut(f.pushback)
	}
}

// data counts a DATA frame's bytes and the gRPC messages in them.
func (c *Conn) data(h *half, t time.Time, f *http2.DataFrame) {
	s := c.open[f.StreamID]
	if s == nil {
		if f.StreamID > c.maxStream {
			c.unknown(h, t, f.StreamID, "DATA for a stream the client never opened")
		}
		return
	}
	p := f.Data()
	if len(p) > 0 {
		h.lastData = t
	}
	r := c.rec(s)
	if h.dir == ClientToServer {
		r.RequestBytes += int64(len(p))
	} else {
		r.ResponseBytes += int64(len(p))
	}
	c.messages(s, h.dir, t, p)
	if f.StreamEnded() {
		c.endSide(s, h.dir, t)
	}
}

func (c *Conn) openStream(t time.Time, id uint32) *stream {
	if len(c.open) >= c.lim.MaxOpenStreams {
		c.warn(Warning{Time: t, Dir: ClientToServer, Name: WarnTooManyStreams, Stream: id,
			Detail: fmt.Sprintf("more than %d streams open at once: stream %d is not followed", c.lim.MaxOpenStreams, id)})
		c.damage("too many streams open at once")
		return nil
	}
	s := &stream{id: id, idx: -1}
	st := Stream{ID: id, Start: t, State: StateOpen}
	if len(c.r.Streams) < c.lim.MaxStreams {
		c.r.Streams = append(c.r.Streams, st)
		s.idx = len(c.r.Streams) - 1
	} else {
		c.r.Dropped.Streams++
		s.scratch = st
	}
	c.open[id] = s
	return s
}

// rec is the stream's entry in the Report.
func (c *Conn) rec(s *stream) *Stream {
	if s.idx < 0 {
		return &s.scratch
	}
	return &c.r.Streams[s.idx]
}

// endSide notes one side's END_STREAM; the stream closes when both ended.
func (c *Conn) endSide(s *stream, dir Direction, t time.Time) {
	if s.ended[dir] {
		return
	}
	s.ended[dir] = true
	r := c.rec(s)
	if dir == ClientToServer {
		r.RequestEnd = t
	} else {
		r.ResponseEnd = t
	}
	if s.ended[0] && s.ended[1] {
		c.closeStream(s, t, StateClosed)
	}
}

// closeStream ends a stream and drops its decoding state.
func (c *Conn) closeStream(s *stream, t time.Time, st StreamState) {
	r := c.rec(s)
	r.End, r.State = t, st
	delete(c.open, s.id)
	for d := range s.msgs {
		c.kept -= s.msgs[d].reserved
	}
	s.msgs = [2]msgState{}
	for d := range c.halves {
		if c.halves[d].blk.s == s {
			// A header block still arriving for it is decoded (the
			// HPACK state needs it) and dropped.
			c.halves[d].blk.s = nil
		}
	}
	if c.streamEnd != nil {
		c.streamEnd(r)
	}
}

// cut keeps at most maxValue bytes of a header value, ending on a whole
// UTF-8 character, and marks the cut.
func cut(s string) string {
	if len(s) <= maxValue {
		return s
	}
	i := maxValue
	for j := 0; j < utf8.UTFMax-1 && i > 0 && !utf8.RuneStart(s[i]); j++ {
		i--
	}
	return s[:i] + "…"
}

// debugText is a GOAWAY's debug data as text: printable UTF-8 as is,
// anything else quoted (quote.Text), at most 1 KiB of it.
func debugText(b []byte) string {
	const maxDebug = 1024
	cut := len(b) > maxDebug
	if cut {
		b = b[:maxDebug]
	}
	s := quote.Text(string(b))
	if cut {
		s += "…"
	}
	return s
}

// percentDecode undoes the percent-encoding of grpc-message
// (PROTOCOL-HTTP2.md, "Responses"); a malformed escape stays as sent.
func percentDecode(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
