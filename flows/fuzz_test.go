package flows

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/tlsdec"
)

// FuzzAssembler feeds the Assembler hostile segment sequences: any flags,
// sequence and acknowledgement numbers around a connection's real ones,
// segments lost, repeated and reordered, payloads cut from a real HTTP/2
// exchange or made up, on up to four connections at once, TLS ones read
// through an empty key log. It must never
// panic, never hold more than Options.MaxBuffered bytes after a hole in a
// direction, and hand over at Close every connection it was decoding.
//
// An input is a list of 8-byte records: connection (2 bits) and
// direction (1 bit), TCP flags, a signed offset from the direction's next
// sequence number, a signed offset from the other's for the
// acknowledgement, the payload's length and where it starts in the
// exchange's bytes (or, with the top bit of that byte, in the input after
// the records, in 8-byte steps), and milliseconds since the previous segment.
func FuzzAssembler(f *testing.F) {
	for _, mss := range []int{1, 7, 100, 1448} {
		f.Add(encodeSegs(segments(true, mss)))
		f.Add(encodeSegs(segments(false, mss)))
	}
	segs := segments(true, 50)
	for i := 0; i+1 < len(segs); i += 3 {
		segs[i], segs[i+1] = segs[i+1], segs[i]
	}
	f.Add(encodeSegs(segs))
	// TLS records, a ClientHello's header and the server's answer, laid
	// out in 7-byte segments.
	hello := append([]byte{0x16, 3, 1, 0, 48, 1, 0, 0, 44, 3, 3}, make([]byte, 40)...)
	answer := append([]byte{0x16, 3, 3, 0, 4, 2, 0, 0, 0, 0x17, 3, 3, 0, 20}, make([]byte, 20)...)
	f.Add(encodeSegs(layout(true, 7, [][]byte{hello}, [][]byte{answer})))
	cl, sv := conversation()
	exchange := append(bytes.Join(cl, nil), bytes.Join(sv, nil)...)

	f.Fuzz(func(t *testing.T, data []byte) {
		const maxBuffered = 4 << 10
		handed := 0
		a := NewAssembler(Options{MaxBuffered: maxBuffered, Idle: time.Second, KeyLog: fuzzKeys}, func(Conn) { handed++ })
		nrec := min(len(data)/8, 512)
		extra := data[nrec*8:]
		next := [4][2]uint32{} // next sequence number by connection and direction
		for c := range next {
			next[c] = [2]uint32{1000 * uint32(c+1), 5000 * uint32(c+1)}
		}
		at := t0
		for i := range nrec {
			r := data[i*8 : i*8+8]
			c, d := int(r[0]&3), int(r[0]>>2&1)
			flags := r[1]
			seq := next[c][d] + uint32(int8(r[2]))
			ack := next[c][1-d] + uint32(int8(r[3]))
			n := int(r[4])
			var payload []byte
			if r[5]&0x80 == 0 {
				from := int(r[5]) * 8 % len(exchange)
				payload = exchange[from:min(from+n, len(exchange))]
			} else if from := int(r[5]&0x7f) * 8; from < len(extra) {
				payload = extra[from:min(from+n, len(extra))]
			}
			at = at.Add(time.Duration(binary.BigEndian.Uint16(r[6:])) * time.Millisecond)
			v := fuzzView(c, d == 0, flags, seq, ack, payload, at)
			a.Add(v)
			if int(int8(r[2])) >= 0 {
				next[c][d] = seq + uint32(len(payload))
				if flags&(flagSYN|flagFIN) != 0 {
					next[c][d]++
				}
			}
			for _, fl := range a.conns {
				for d := range fl.dirs {
					if b := fl.dirs[d].pendBytes; b > maxBuffered {
						t.Fatalf("after segment %d a direction holds %d bytes after a hole, more than %d", i, b, maxBuffered)
					}
				}
			}
		}
		// Close hands over every connection being decoded that carried a
		// byte (one that never did, or whose client never spoke, is no
		// HTTP/2 connection to report), and forgets them all.
		before, open := handed, 0
		for _, fl := range a.conns {
			if fl.state != decoding {
				continue
			}
			if r := fl.dec.Report(); r.ClientBytes > 0 || r.ServerBytes > 0 {
				open++
			}
		}
		a.Close()
		if a.Open() != 0 {
			t.Fatalf("Open() = %d after Close", a.Open())
		}
		if handed-before < open {
			t.Fatalf("Close handed over %d connections; %d being decoded had bytes", handed-before, open)
		}
	})
}

// fuzzKeys is an empty key log: a connection whose client's first byte
// is a TLS handshake's goes through the TLS record layer, whose damage the
// fuzzer reaches.
var fuzzKeys, _ = tlsdec.ParseKeyLog(strings.NewReader(""), "fuzz.keylog")

// fuzzView is a segment of connection c (client 10.0.0.2:40000+c, the
// test server) in one direction.
func fuzzView(c int, fromClient bool, flags uint8, seq, ack uint32, payload []byte, at time.Time) *attempt.SegmentView {
	cl := netip.AddrPortFrom(testClient.Addr(), testClient.Port()+uint16(c))
	s := seg{fromClient: fromClient, flags: flags, seq: seq, ack: ack, data: payload}
	v := s.view(at)
	if fromClient {
		v.SrcPort = cl.Port()
	} else {
		v.DstPort = cl.Port()
	}
	return v
}

// encodeSegs writes segs (of connection 0) in FuzzAssembler's record
// format, their payloads after the records.
func encodeSegs(segs []seg) []byte {
	var recs, extra []byte
	next := [2]uint32{1000, 5000}
	for _, s := range segs {
		d := 0
		if !s.fromClient {
			d = 1
		}
		r := make([]byte, 8)
		r[0] = byte(d << 2)
		r[1] = s.flags
		r[2] = byte(int8(max(-128, min(127, int64(s.seq)-int64(next[d])))))
		r[3] = byte(int8(max(-128, min(127, int64(s.ack)-int64(next[1-d])))))
		r[4] = byte(min(len(s.data), 255))
		for len(extra)%8 != 0 {
			extra = append(extra, 0)
		}
		r[5] = 0x80 | byte(min(len(extra)/8, 127))
		binary.BigEndian.PutUint16(r[6:], 1)
		extra = append(extra, s.data...)
		recs = append(recs, r...)
		next[d] = s.seq + uint32(len(s.data))
		if s.flags&(flagSYN|flagFIN) != 0 {
			next[d]++
		}
	}
	return append(recs, extra...)
}
