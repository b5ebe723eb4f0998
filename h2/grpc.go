package h2

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/backoff-audit/audit/pb"
)

// methodKind is what the decoder does with a method's messages.
type methodKind uint8

const (
	// kindOther: messages are counted, not decoded.
	kindOther methodKind = iota
	// kindStart: the request is a ReconnectParams (docs/spec.md §2.2).
	kindStart
	// kindStop: the response is a ReconnectInfo.
	kindStop
)

func kindOf(path string) methodKind {
	switch path {
	case pb.ReconnectService_Start_FullMethodName:
		return kindStart
	case pb.ReconnectService_Stop_FullMethodName:
		return kindStop
	}
	return kindOther
}

// grpcPrefixLen is the length of a gRPC message's prefix: the compressed
// flag and the big-endian message length (PROTOCOL-HTTP2.md,
// "Length-Prefixed-Message").
const grpcPrefixLen = 5

// msgState splits one side of a stream's DATA into gRPC messages.
type msgState struct {
	prefix  [grpcPrefixLen]byte
	prefixN int
	// left counts the bytes of the current message still to come.
	left uint32
	// keep is set when the current message is to be decoded; body then
	// collects it.
	keep bool
	body []byte
	// reserved is the kept message's length, counted in Conn.kept from its
	// prefix on.
	reserved int
	// lost is set once some DATA was lost: message boundaries are unknown
	// from there.
	lost bool
}

// loseMessages stops counting a stream side's messages: some of its DATA
// was lost.
func (c *Conn) loseMessages(s *stream, dir Direction) {
	c.kept -= s.msgs[dir].reserved
	s.msgs[dir] = msgState{lost: true}
	c.rec(s).MessagesLost = true
}

// messages splits p, the next DATA payload of one side of s, into gRPC
// messages: each is counted, and the one a ReconnectService call carries is
// decoded.
func (c *Conn) messages(s *stream, dir Direction, t time.Time, p []byte) {
	m := &s.msgs[dir]
	if m.lost {
		return
	}
	for len(p) > 0 {
		if m.prefixN < grpcPrefixLen {
			n := copy(m.prefix[m.prefixN:], p)
			m.prefixN += n
			p = p[n:]
			if m.prefixN < grpcPrefixLen {
				return
			}
			m.left = binary.BigEndian.Uint32(m.prefix[1:])
			m.keep = c.wants(s, dir)
			if m.keep && uint64(c.kept)+uint64(m.left) > uint64(c.lim.MaxMessage) {
				m.keep = false
				what := "over"
				if c.kept > 0 {
					what = "with the messages being collected, over"
				}
				c.warn(Warning{Time: t, Dir: dir, Name: WarnMessageTooLarge, Stream: s.id,
					Detail: fmt.Sprintf("a %s message of %d bytes, %s the %d decoded: counted, not decoded", c.rec(s).Method, m.left, what, c.lim.MaxMessage)})
			}
			if m.keep {
				m.reserved = int(m.left)
				c.kept += m.reserved
			}
		}
		n := uint32(min(uint64(m.left), uint64(len(p))))
		if m.keep {
			m.body = append(m.body, p[:n]...)
		}
		m.left -= n
		p = p[n:]
		if m.left == 0 {
			c.kept -= m.reserved
			c.message(s, dir, t, m.keep, m.prefix[0]&1 != 0, m.body)
			m.prefixN, m.keep, m.body, m.reserved = 0, false, nil, 0
		}
	}
}

// wants says whether the next message of a stream side is decoded: the
// first request of a Start, the first response of a Stop.
func (c *Conn) wants(s *stream, dir Direction) bool {
	r := c.rec(s)
	switch {
	case s.kind == kindStart && dir == ClientToServer:
		return r.ReconnectParams == nil
	case s.kind == kindStop && dir == ServerToClient:
		return r.ReconnectInfo == nil
	}
	return false
}

// message counts a complete message and decodes it when it was kept.
func (c *Conn) message(s *stream, dir Direction, t time.Time, keep, compressed bool, body []byte) {
	r := c.rec(s)
	if dir == ClientToServer {
		r.RequestMessages++
	} else {
		r.ResponseMessages++
	}
	if !keep {
		return
	}
	bad := func(format string, a ...any) {
		c.warn(Warning{Time: t, Dir: dir, Name: WarnBadMessage, Stream: s.id,
			Detail: r.Method + ": " + fmt.Sprintf(format, a...)})
	}
	if compressed {
		enc := r.RequestEncoding
		if dir == ServerToClient {
			enc = r.ResponseEncoding
		}
		switch enc {
		case "gzip":
			out, err := c.gunzip(body)
			if err != nil {
				if err == errTooLarge {
					c.warn(Warning{Time: t, Dir: dir, Name: WarnMessageTooLarge, Stream: s.id,
						Detail: fmt.Sprintf("%s: a gzip message of %d bytes inflates past the %d decoded: not decoded", r.Method, len(body), c.lim.MaxMessage)})
					return
				}
				bad("inflate: %v", err)
				return
			}
			body = out
		case "", "identity":
			bad("a compressed message without a grpc-encoding")
			return
		default:
			bad("grpc-encoding %q is not decoded", enc)
			return
		}
	}
	switch s.kind {
	case kindStart:
		var m pb.ReconnectParams
		if err := proto.Unmarshal(body, &m); err != nil {
			bad("unmarshal ReconnectParams: %v", err)
			return
		}
		r.ReconnectParams = &ReconnectParams{MaxReconnectBackoffMs: m.GetMaxReconnectBackoffMs()}
	case kindStop:
		var m pb.ReconnectInfo
		if err := proto.Unmarshal(body, &m); err != nil {
			bad("unmarshal ReconnectInfo: %v", err)
			return
		}
		r.ReconnectInfo = &ReconnectInfo{Passed: m.GetPassed(), BackoffMs: m.GetBackoffMs()}
		if r.ReconnectInfo.BackoffMs == nil {
			r.ReconnectInfo.BackoffMs = []int32{}
		}
	}
}

var errTooLarge = errors.New("message too large")

// gunzip inflates a gzip message, at most Limits.MaxMessage bytes of it.
func (c *Conn) gunzip(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	out, err := io.ReadAll(io.LimitReader(zr, int64(c.lim.MaxMessage)+1))
	if err != nil {
		return nil, err
	}
	if len(out) > c.lim.MaxMessage {
		return nil, errTooLarge
	}
	return out, nil
}
