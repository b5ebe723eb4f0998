package h2

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// clientPreface is the first bytes a client sends (RFC 9113 §3.4).
const clientPreface = http2.ClientPreface

// tlsHandshake is the first byte of a TLS handshake record (a ClientHello
// or ServerHello), RFC 8446 §5.1.
const tlsHandshake = 0x16

// frameHeaderLen is the fixed length of a frame header (RFC 9113 §4.1).
const frameHeaderLen = 9

// Protocol defaults of RFC 9113 §6.5.2.
const (
	defaultMaxFrameSize   = 16384
	defaultHeaderTableLen = 4096
	maxFrameSizeLimit     = 1<<24 - 1
)

// Limits bound what one Conn holds and keeps. A zero field takes its
// default.
type Limits struct {
	// MaxFrameSize is the largest frame buffered, whatever the peer's
	// SETTINGS_MAX_FRAME_SIZE (default 1<<24-1, the protocol's largest).
	// A larger frame is skipped with WarnFrameTooLarge.
	MaxFrameSize uint32
	// MaxHeaderList is the largest header list decoded, counted as RFC
	// 9113 §6.5.2 counts SETTINGS_MAX_HEADER_LIST_SIZE, and the longest
	// header name or value (default 64 KiB).
	MaxHeaderList int
	// MaxHeaderTable caps the HPACK dynamic table a SETTINGS_HEADER_TABLE_SIZE
	// may allow (default 1 MiB); the protocol's default is 4096.
	MaxHeaderTable uint32
	// MaxMessage is the largest gRPC message decoded, before and after
	// inflating, and the most bytes collected at once for decoding, all
	// streams together (default 4 MiB). Messages are counted whatever
	// their size.
	MaxMessage int
	// MaxOpenStreams bounds the streams followed at once (default 10000).
	MaxOpenStreams int
	// MaxStreams, MaxEvents and MaxWarnings bound what Report keeps
	// (defaults 10000, 20000 and 1000); the rest is counted in Dropped.
	MaxStreams  int
	MaxEvents   int
	MaxWarnings int
}

// DefaultLimits are the limits of a zero Limits.
var DefaultLimits = Limits{
	MaxFrameSize:   maxFrameSizeLimit,
	MaxHeaderList:  64 << 10,
	MaxHeaderTable: 1 << 20,
	MaxMessage:     4 << 20,
	MaxOpenStreams: 10000,
	MaxStreams:     10000,
	MaxEvents:      20000,
	MaxWarnings:    1000,
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.MaxFrameSize == 0 || l.MaxFrameSize > maxFrameSizeLimit {
		l.MaxFrameSize = d.MaxFrameSize
	}
	if l.MaxHeaderList <= 0 {
		l.MaxHeaderList = d.MaxHeaderList
	}
	if l.MaxHeaderTable == 0 {
		l.MaxHeaderTable = d.MaxHeaderTable
	}
	if l.MaxMessage <= 0 {
		l.MaxMessage = d.MaxMessage
	}
	if l.MaxOpenStreams <= 0 {
		l.MaxOpenStreams = d.MaxOpenStreams
	}
	if l.MaxStreams <= 0 {
		l.MaxStreams = d.MaxStreams
	}
	if l.MaxEvents <= 0 {
		l.MaxEvents = d.MaxEvents
	}
	if l.MaxWarnings <= 0 {
		l.MaxWarnings = d.MaxWarnings
	}
	return l
}

// Options configure a Conn.
type Options struct {
	// Start is when the connection began (its SYN's capture time); zero
	// takes the time of the first Feed or Gap.
	Start  time.Time
	Limits Limits
	// StreamEnd, when set, is called with each stream as it ends (both
	// sides sent END_STREAM, or one reset it), while the connection may
	// stay open: a live reader learns of each finished RPC at once, not
	// when the connection ends. The Stream is the Report's entry, final;
	// it is valid only during the call. A stream still open at End is
	// not handed to it.
	StreamEnd func(*Stream)
}

// Conn decodes one TCP connection. Feed it each direction's bytes in
// order, interleaved as captured; Gap where the capture lost bytes; End
// when the connection ends. A Conn is not safe for concurrent use.
type Conn struct {
	// r is on its own, so that a Report kept after End does not keep
	// the decoders.
	r      *Report
	lim    Limits
	halves [2]half
	// open holds the state of the streams not yet ended, by id.
	open map[uint32]*stream
	// maxStream is the highest stream id the client opened; a frame for a
	// lower id that is not open is for a stream that has ended.
	maxStream   uint32
	lastUnknown uint32
	// kept counts the bytes of the messages being collected for decoding
	// (their whole length, from their prefix on), all streams together; it
	// stays within Limits.MaxMessage.
	kept      int
	begun     bool
	ended     bool
	streamEnd func(*Stream)
	// pings tallies each direction's PINGs, kept in Events or not;
	// pastBudget counts the GOAWAYs and RST_STREAMs kept beyond
	// Limits.MaxEvents; calm is set once the server's first GOAWAY
	// ENHANCE_YOUR_CALM came.
	pings      [2]pingTally
	pastBudget int
	calm       bool
}

// half is the decoder of one direction.
type half struct {
	dir Direction
	// preN counts the preface bytes matched (client) or is 1 once the
	// first byte was seen (server); started is set once frames begin.
	preN    int
	started bool
	// first is set until the direction's first frame, which must be
	// SETTINGS (RFC 9113 §3.4).
	first   bool
	stopped bool

	// buf holds the frame being received, header first, when a Feed ended
	// inside it.
	buf []byte
	// skip counts the bytes still to discard of a frame not decoded; when
	// it reaches 0, skipEnd (a stream id, if set) ends that stream's side,
	// as the skipped DATA frame's END_STREAM said.
	skip    uint32
	skipEnd uint32
	// lastData is the time of the last DATA frame with bytes this
	// direction sent (decoded or skipped): a PING its peer sends right
	// after it is a BDP probe (Event.AfterData).
	lastData time.Time

	fr  *http2.Framer
	src frameReader
	// maxFrame is the largest frame the receiver allows this direction
	// (its SETTINGS_MAX_FRAME_SIZE); tableMax the largest HPACK table.
	maxFrame uint32
	tableMax uint32

	hdec *hpack.Decoder
	// hpackLost is set once a header block could not be decoded: the
	// dynamic table is then unknown, so no later block is decoded.
	hpackLost bool
	blk       block
}

// frameReader is the Framer's io.Reader: it reads one complete frame,
// set before each ReadFrame, so the Framer never blocks.
type frameReader struct{ b []byte }

func (r *frameReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

// NewConn returns the decoder of one connection from client to server.
func NewConn(client, server netip.AddrPort, opts Options) *Conn {
	c := &Conn{
		r: &Report{
			Client:  client,
			Server:  server,
			Start:   opts.Start,
			Events:  []Event{},
			Streams: []Stream{},
		},
		lim:       opts.Limits.withDefaults(),
		open:      make(map[uint32]*stream),
		streamEnd: opts.StreamEnd,
	}
	c.begun = !opts.Start.IsZero()
	for d := range c.halves {
		h := &c.halves[d]
		h.dir = Direction(d)
		h.first = true
		h.maxFrame = defaultMaxFrameSize
		h.tableMax = defaultHeaderTableLen
		h.fr = h.newFramer(false)
		h.hdec = hpack.NewDecoder(defaultHeaderTableLen, nil)
		h.hdec.SetMaxStringLength(c.lim.MaxHeaderList)
		h.hdec.SetEmitFunc(func(f hpack.HeaderField) { c.emit(h, f) })
	}
	return c
}

func (h *half) newFramer(allowIllegal bool) *http2.Framer {
	fr := http2.NewFramer(nil, &h.src)
	fr.SetReuseFrames()
	// Frame sizes are checked before a frame reaches the Framer, against
	// the receiver's setting (checkHeader).
	fr.SetMaxReadFrameSize(maxFrameSizeLimit)
	fr.AllowIllegalReads = allowIllegal
	return fr
}

// Report returns the decoded connection so far. It is owned by the Conn:
// later calls change it (open streams in place), and it is final after End.
func (c *Conn) Report() *Report { return c.r }

// Feed decodes b, the next bytes of direction dir, captured at t. Feed
// after End, or with a direction that is neither, does nothing.
func (c *Conn) Feed(dir Direction, t time.Time, b []byte) {
	if dir > ServerToClient || c.ended {
		return
	}
	c.begin(t)
	c.count(dir, int64(len(b)))
	h := &c.halves[dir]
	if !h.started && !h.stopped {
		b = c.preface(h, t, b)
	}
	if h.stopped {
		return
	}
	c.frames(h, t, b)
}

// Gap says that the capture lost the next n bytes of direction dir, noticed
// at t. Decoding of dir goes on only when the gap lies inside the payload
// of a frame whose length is known and whose loss spoils nothing else (a
// DATA frame: that stream's messages are lost); otherwise it stops there.
func (c *Conn) Gap(dir Direction, t time.Time, n int64) {
	if dir > ServerToClient || c.ended || n <= 0 {
		return
	}
	c.begin(t)
	c.count(dir, n)
	h := &c.halves[dir]
	if h.stopped {
		return
	}
	w := Warning{Time: t, Dir: dir, Name: WarnGap}
	switch {
	case !h.started:
		w.Detail = fmt.Sprintf("%d bytes lost at the start of the %s's bytes", n, dir.sender())
	case h.skip > 0 && uint64(n) <= uint64(h.skip):
		h.skip -= uint32(n)
		w.Detail = fmt.Sprintf("%d bytes lost inside a skipped frame", n)
		c.warn(w)
		c.damage(w.Detail)
		c.skipped(h, t)
		return
	case len(h.buf) >= frameHeaderLen && http2.FrameType(h.buf[3]) == http2.FrameData:
		length := frameLen(h.buf)
		rest := uint64(frameHeaderLen) + uint64(length) - uint64(len(h.buf))
		if uint64(n) <= rest {
			id := streamID(h.buf)
			w.Stream = id
			w.Detail = fmt.Sprintf("%d bytes lost inside a DATA frame of stream %d: its messages are not counted from here", n, id)
			c.warn(w)
			c.damage(w.Detail)
			if s := c.open[id]; s != nil {
				c.loseMessages(s, dir)
				if http2.Flags(h.buf[4]).Has(http2.FlagDataEndStream) {
					h.skipEnd = id
				}
			}
			h.skip = uint32(rest - uint64(n))
			h.buf = h.buf[:0]
			c.skipped(h, t)
			return
		}
		w.Detail = fmt.Sprintf("%d bytes lost past the end of a DATA frame", n)
	default:
		w.Detail = fmt.Sprintf("%d bytes lost where a frame header or a frame other than DATA was", n)
	}
	w.Detail += "; the rest of the " + dir.sender() + "'s bytes is not decoded"
	w.Stopped = true
	c.warn(w)
	c.stop(h)
}

// Conflict says that dir's bytes were captured twice at the same place,
// different (a retransmission that is not one), noticed at t: which copy
// the receiver read is unknown, so the connection is damaged, with
// detail as the reason (WarnConflict). Decoding goes on from the copy
// decoded. n counts bytes of dir that were not fed (the copy a caller did
// not decode), so that the connection shows what it carried.
func (c *Conn) Conflict(dir Direction, t time.Time, n int64, detail string) {
	if dir > ServerToClient || c.ended {
		return
	}
	c.begin(t)
	c.count(dir, n)
	c.warn(Warning{Time: t, Dir: dir, Name: WarnConflict, Detail: detail})
	c.damage(detail)
}

// End ends the connection at t: streams still open stay StateOpen, and a
// direction that ended inside a frame gets WarnTruncated. It frees the
// decoding state; only the Report remains.
func (c *Conn) End(t time.Time) {
	if c.ended {
		return
	}
	c.begin(t)
	c.ended = true
	c.r.End = t
	for d := range c.halves {
		h := &c.halves[d]
		if !h.stopped && (len(h.buf) > 0 || h.skip > 0 || h.blk.active || (h.preN > 0 && !h.started)) {
			c.warn(Warning{Time: t, Dir: h.dir, Name: WarnTruncated,
				Detail: "the connection ended inside a frame of the " + h.dir.sender()})
		}
		h.buf, h.fr, h.hdec, h.blk = nil, nil, nil, block{}
	}
	c.open = nil
	if c.r.Dropped.Events > 0 {
		for d := range c.pings {
			c.r.PingTotals = append(c.r.PingTotals, c.pings[d].cadence(Direction(d), c.pings[1-d].acks))
		}
	}
	c.pings = [2]pingTally{}
}

func (c *Conn) begin(t time.Time) {
	if !c.begun {
		c.begun = true
		c.r.Start = t
	}
}

func (c *Conn) count(dir Direction, n int64) {
	if dir == ClientToServer {
		c.r.ClientBytes += n
	} else {
		c.r.ServerBytes += n
	}
}

// preface checks the first bytes of a direction and returns the rest: the
// client's must be the connection preface; either side's TLS record means
// the connection is encrypted.
func (c *Conn) preface(h *half, t time.Time, b []byte) []byte {
	if len(b) == 0 {
		return b
	}
	client := &c.halves[ClientToServer]
	if h.preN == 0 && b[0] == tlsHandshake && (h.dir == ClientToServer || client.preN == 0) {
		c.r.Encrypted = true
		c.stop(&c.halves[0])
		c.stop(&c.halves[1])
		return nil
	}
	if h.dir == ServerToClient {
		h.preN, h.started = 1, true
		return b
	}
	n := min(len(b), len(clientPreface)-h.preN)
	if string(b[:n]) != clientPreface[h.preN:h.preN+n] {
		d := "the client's first bytes are not the HTTP/2 preface: the capture missed the connection's start, or it is not HTTP/2"
		if h.preN == 0 && looksHTTP1(b) {
			d = "the client's first bytes are an HTTP/1.x request, not the HTTP/2 preface"
		}
		c.warn(Warning{Time: t, Dir: h.dir, Name: WarnNoPreface, Detail: d, Stopped: true})
		c.stop(h)
		return nil
	}
	h.preN += n
	if h.preN == len(clientPreface) {
		h.started = true
	}
	return b[n:]
}

func looksHTTP1(b []byte) bool {
	for _, m := range []string{"GET ", "POST ", "PUT ", "HEAD ", "OPTIONS ", "DELETE ", "PATCH ", "CONNECT "} {
		if len(b) >= len(m) && string(b[:len(m)]) == m {
			return true
		}
	}
	return false
}

// stop ends decoding of a direction.
func (c *Conn) stop(h *half) {
	h.stopped = true
	h.buf = nil
	h.blk = block{}
}

func frameLen(hdr []byte) uint32 {
	return uint32(hdr[0])<<16 | uint32(hdr[1])<<8 | uint32(hdr[2])
}

func streamID(hdr []byte) uint32 {
	return binary.BigEndian.Uint32(hdr[5:9]) & (1<<31 - 1)
}

// frames decodes b, the direction's next bytes after its preface. Whole
// frames in b are decoded in place; a frame cut by the end of b is copied
// to h.buf and completed by the next Feed.
func (c *Conn) frames(h *half, t time.Time, b []byte) {
	for len(b) > 0 && !h.stopped {
		if h.skip > 0 {
			n := uint32(min(uint64(h.skip), uint64(len(b))))
			h.skip -= n
			b = b[n:]
			c.skipped(h, t)
			continue
		}
		if len(h.buf) == 0 && len(b) >= frameHeaderLen {
			if !c.checkHeader(h, t, b[:frameHeaderLen]) {
				b = b[frameHeaderLen:]
				continue
			}
			end := frameHeaderLen + int(frameLen(b))
			if len(b) < end {
				h.buf = append(h.buf, b...)
				return
			}
			c.frame(h, t, b[:end])
			b = b[end:]
			continue
		}
		if len(h.buf) < frameHeaderLen {
			n := min(frameHeaderLen-len(h.buf), len(b))
			h.buf = append(h.buf, b[:n]...)
			b = b[n:]
			if len(h.buf) < frameHeaderLen {
				return
			}
			if !c.checkHeader(h, t, h.buf) {
				h.buf = h.buf[:0]
				continue
			}
		}
		end := frameHeaderLen + int(frameLen(h.buf))
		n := min(end-len(h.buf), len(b))
		h.buf = append(h.buf, b[:n]...)
		b = b[n:]
		if len(h.buf) < end {
			return
		}
		c.frame(h, t, h.buf)
		if cap(h.buf) > 4*defaultMaxFrameSize {
			h.buf = nil // do not pin a large frame's buffer on an idle connection
		} else {
			h.buf = h.buf[:0]
		}
	}
}

// skipped ends the skipped frame's stream side once its bytes are passed.
func (c *Conn) skipped(h *half, t time.Time) {
	if h.skip == 0 && h.skipEnd != 0 {
		if s := c.open[h.skipEnd]; s != nil {
			c.endSide(s, h.dir, t)
		}
		h.skipEnd = 0
	}
}

// checkHeader vets a frame header before its payload is buffered. It
// returns false when the frame is not to be decoded: h.skip is then its
// payload length (the frame is skipped), or the direction stopped.
func (c *Conn) checkHeader(h *half, t time.Time, hdr []byte) bool {
	length, typ, id := frameLen(hdr), http2.FrameType(hdr[3]), streamID(hdr)
	if h.first {
		h.first = false
		if typ != http2.FrameSettings {
			c.warn(Warning{Time: t, Dir: h.dir, Name: WarnNoSettings, Stopped: true,
				Detail: fmt.Sprintf("the %s's first frame is %s, not SETTINGS (RFC 9113 §3.4): the capture missed the connection's start, or it is not HTTP/2", h.dir.sender(), typ)})
			c.stop(h)
			return false
		}
	}
	limit := min(h.maxFrame, c.lim.MaxFrameSize)
	if length <= limit {
		return true
	}
	c.warn(Warning{Time: t, Dir: h.dir, Name: WarnFrameTooLarge, Stream: id,
		Detail: fmt.Sprintf("%s frame of %d bytes, larger than the %d the receiver allows: skipped", typ, length, limit)})
	h.skip = length
	switch {
	case typ == http2.FrameData:
		if length > 0 {
			h.lastData = t
		}
		if s := c.open[id]; s != nil {
			c.loseMessages(s, h.dir)
			if http2.Flags(hdr[4]).Has(http2.FlagDataEndStream) {
				h.skipEnd = id
			}
		}
	case typ == http2.FrameHeaders || typ == http2.FrameContinuation || typ == http2.FramePushPromise || h.blk.active:
		c.loseHeaders(h, t, fmt.Sprintf("a skipped %s frame held part of a header block", typ))
	}
	return false
}

// frame decodes one complete frame, header included.
func (c *Conn) frame(h *half, t time.Time, raw []byte) {
	h.src.b = raw
	f, err := h.fr.ReadFrame()
	h.src.b = nil
	if err != nil {
		c.frameError(h, t, raw, err)
		return
	}
	switch f := f.(type) {
	case *http2.DataFrame:
		c.data(h, t, f)
	case *http2.HeadersFrame:
		c.headers(h, t, f)
	case *http2.ContinuationFrame:
		if h.blk.active {
			c.fragment(h, t, f.HeaderBlockFragment(), f.HeadersEnded())
		}
	case *http2.PushPromiseFrame:
		// gRPC never pushes, but the block changes the HPACK state.
		h.blk = block{active: true, push: true}
		c.fragment(h, t, f.HeaderBlockFragment(), f.HeadersEnded())
	case *http2.SettingsFrame:
		c.settings(h, t, f)
	case *http2.PingFrame:
		e := Event{Time: t, Dir: h.dir, Kind: KindPing, Ping: hex.EncodeToString(f.Data[:])}
		if f.IsAck() {
			e.Kind = KindPingAck
		} else if got := c.halves[1-h.dir].lastData; !got.IsZero() && t.Sub(got) <= bdpAfter {
			e.AfterData = true
		}
		c.event(e)
	case *http2.GoAwayFrame:
		g := &GoAway{LastStreamID: f.LastStreamID, Code: errCodeName(f.ErrCode), Debug: debugText(f.DebugData()), InFlight: []uint32{}}
		for id := range c.open {
			g.InFlight = append(g.InFlight, id)
		}
		slices.Sort(g.InFlight)
		if len(g.InFlight) > maxInFlight {
			g.MoreInFlight = len(g.InFlight) - maxInFlight
			g.InFlight = slices.Clip(g.InFlight[:maxInFlight])
		}
		c.event(Event{Time: t, Dir: h.dir, Kind: KindGoAway, GoAway: g})
	case *http2.RSTStreamFrame:
		code := errCodeName(f.ErrCode)
		c.event(Event{Time: t, Dir: h.dir, Kind: KindRSTStream, Stream: f.StreamID, Code: code})
		if s := c.open[f.StreamID]; s != nil {
			c.rec(s).Reset = &Reset{Time: t, Dir: h.dir, Code: code}
			c.closeStream(s, t, StateReset)
		}
	}
}

// frameError notes a frame the Framer rejected. The frame's length is
// known, so the next frame is found; what the frame carried is lost.
func (c *Conn) frameError(h *half, t time.Time, raw []byte, err error) {
	typ, id := http2.FrameType(raw[3]), streamID(raw)
	detail := err.Error()
	if d := h.fr.ErrorDetail(); d != nil {
		detail += ": " + d.Error()
	}
	c.warn(Warning{Time: t, Dir: h.dir, Name: WarnMalformedFrame, Stream: id,
		Detail: fmt.Sprintf("%s frame of %d bytes on stream %d: %s; skipped", typ, frameLen(raw), id, detail)})
	switch {
	case typ == http2.FrameData:
		if s := c.open[id]; s != nil {
			c.loseMessages(s, h.dir)
			if http2.Flags(raw[4]).Has(http2.FlagDataEndStream) {
				c.endSide(s, h.dir, t)
			}
		}
	case typ == http2.FrameHeaders || typ == http2.FrameContinuation || typ == http2.FramePushPromise || h.blk.active:
		c.loseHeaders(h, t, "a header block's frame was malformed")
	}
}

// loseHeaders gives up on the direction's header blocks: the HPACK
// dynamic table is no longer known. The Framer is replaced by one that
// takes frames in any order, since a cut header block would otherwise
// make it reject every later frame.
func (c *Conn) loseHeaders(h *half, t time.Time, why string) {
	if s := h.blk.s; s != nil {
		c.rec(s).HeadersLost = true
	}
	h.blk = block{}
	if h.hpackLost {
		return
	}
	h.hpackLost = true
	h.fr = h.newFramer(true)
	c.damage("the " + h.dir.sender() + "'s header blocks are no longer decoded: " + why)
}

// settings notes a SETTINGS frame and applies what limits the peer.
func (c *Conn) settings(h *half, t time.Time, f *http2.SettingsFrame) {
	if f.IsAck() {
		c.event(Event{Time: t, Dir: h.dir, Kind: KindSettingsAck})
		return
	}
	e := Event{Time: t, Dir: h.dir, Kind: KindSettings, Settings: make([]Setting, 0, min(f.NumSettings(), maxSettings))}
	peer := &c.halves[1-h.dir]
	for i := range f.NumSettings() {
		s := f.Setting(i)
		if len(e.Settings) < maxSettings {
			e.Settings = append(e.Settings, Setting{Name: s.ID.String(), Value: s.Val})
		} else {
			e.MoreSettings++
		}
		if err := s.Valid(); err != nil {
			c.warn(Warning{Time: t, Dir: h.dir, Name: WarnBadSetting,
				Detail: fmt.Sprintf("%s = %d is out of range (%v): ignored", s.ID, s.Val, err)})
			continue
		}
		// A lower value than before is not applied: frames the peer sent
		// before it saw the SETTINGS may still come (RFC 9113 §6.5.3).
		switch s.ID {
		case http2.SettingMaxFrameSize:
			peer.maxFrame = max(peer.maxFrame, s.Val)
		case http2.SettingHeaderTableSize:
			v := min(max(peer.tableMax, s.Val), c.lim.MaxHeaderTable)
			if v > peer.tableMax {
				peer.tableMax = v
				if peer.hdec != nil {
					peer.hdec.SetAllowedMaxDynamicTableSize(v)
				}
			}
		}
	}
	c.event(e)
}

// event keeps e in the Report within Limits.MaxEvents. GOAWAYs and
// RST_STREAMs are findings: beyond the budget they are kept all the same,
// up to as many again. Every PING is tallied, kept or not, and the
// server's first GOAWAY ENHANCE_YOUR_CALM carries the client's PINGs
// before it once some were dropped (TooManyPings).
func (c *Conn) event(e Event) {
	switch {
	case e.Kind == KindPing || e.Kind == KindPingAck:
		c.pings[e.Dir].add(e)
	case e.Kind == KindGoAway && e.Dir == ServerToClient && !c.calm && e.GoAway.Code == http2.ErrCodeEnhanceYourCalm.String():
		c.calm = true
		if c.r.Dropped.Events > 0 {
			p := c.pings[ClientToServer].cadence(ClientToServer, c.pings[ServerToClient].acks)
			e.GoAway.PeerPings = &p
		}
	}
	if len(c.r.Events) >= c.lim.MaxEvents {
		if e.Kind != KindGoAway && e.Kind != KindRSTStream || c.pastBudget >= c.lim.MaxEvents {
			c.r.Dropped.Events++
			return
		}
		c.pastBudget++
	}
	c.r.Events = append(c.r.Events, e)
}

func (c *Conn) warn(w Warning) {
	if w.Stopped {
		c.damage(w.Detail)
	}
	if len(c.r.Warnings) >= c.lim.MaxWarnings {
		c.r.Dropped.Warnings++
		return
	}
	c.r.Warnings = append(c.r.Warnings, w)
}

func (c *Conn) damage(reason string) {
	if c.r.Damaged == "" {
		c.r.Damaged = reason
	}
}
