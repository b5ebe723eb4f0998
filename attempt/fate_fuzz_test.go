package attempt

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/backoff-audit/audit/attempt/internal/rec"

	"github.com/backoff-audit/audit/backoff"
	"github.com/google/go-cmp/cmp"
)

// fuzzInput turns bytes into SYNs and segments among a few endpoints, 12
// bytes an event: kind and flags, endpoints, sequence numbers, a time
// step (which may go back).
func fuzzInput(data []byte) (events []any, ordered bool) {
	clients := []netip.AddrPort{fateClient, netip.MustParseAddrPort("[::1]:40000"), netip.MustParseAddrPort("[::ffff:127.0.0.1]:40001")}
	at := trackStart
	ordered = true
	for ; len(data) >= 12; data = data[12:] {
		c := clients[int(data[1])%len(clients)]
		step := time.Duration(int8(data[2])) * time.Millisecond
		if step < 0 {
			ordered = false
		}
		at = at.Add(step)
		seq := uint32(data[3]) | uint32(binary.BigEndian.Uint16(data[4:]))<<8
		ack := uint32(data[6]) | uint32(binary.BigEndian.Uint16(data[7:]))<<8
		if data[0]&0x80 == 0 {
			events = append(events, SYN{Time: at, Src: c, Dst: fateServer, Seq: seq})
			continue
		}
		s := Segment{Time: at, Src: fateServer, Dst: c, Seq: seq, Ack: ack, Flags: data[9], Sent: rec.Code(data[10] % 6).Payload()} // one of the six codes
		if data[0]&0x40 != 0 {
			s.Src, s.Dst = s.Dst, s.Src
		}
		events = append(events, s)
	}
	return events, ordered
}

// FuzzFates feeds any sequence of SYNs and segments to a Tracker as the
// live auditor does (Add) and to a PortTracker as a file read does (push),
// with small batches so that every waiting list fills, and for an input
// of odd length tables of recent attempts of one slot, so that attempts
// leave them all the time: no fault, every Ending is a consistent one,
// and for input in time order both ways give the same endings.
func FuzzFates(f *testing.F) {
	f.Add([]byte{
		0x00, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, // SYN, ISN 1
		0x80, 0, 1, 9, 0, 0, 2, 0, 0, rec.FlagSYN | rec.FlagACK, 0, 0, // SYN-ACK
		0xc0, 0, 1, 2, 0, 0, 10, 0, 0, rec.FlagACK, 1, 0, // client hello
		0x80, 0, 1, 10, 0, 0, 2, 0, 0, rec.FlagRST | rec.FlagACK, 0, 0, // RST from the server
		0x00, 1, 100, 5, 0, 0, 0, 0, 0, 0, 0, 0, // another client's SYN
		0x80, 1, 1, 0, 0, 0, 6, 0, 0, rec.FlagRST | rec.FlagACK, 0, 0, // refused
		0x00, 0, 50, 1, 0, 0, 0, 0, 0, 0, 0, 0, // a retransmission
		0x00, 0, 0x80, 7, 0, 0, 0, 0, 0, 0, 0, 0, // back in time: a reused tuple
	})
	f.Fuzz(func(t *testing.T, data []byte) {
		events, ordered := fuzzInput(data)
		tr, pt := NewTracker(), NewPortTracker()
		tr.SetFatesKnown(true)
		pt.SetFatesKnown(true)
		slots := recentSlots
		if len(data)%2 == 1 {
			slots = 1
		}
		tr.segBatch, tr.recentMax = 3, slots
		for _, e := range events {
			switch e := e.(type) {
			case SYN:
				tr.Add(e)
				pt.Add(e)
				if p := pt.Tracker(fateServer.Port()); p.pushBatch != 5 {
					p.pushBatch, p.segBatch, p.recentMax = 5, 3, slots
				}
			case Segment:
				tr.AddSegment(&e)
				pt.AddSegment(&e)
			}
		}
		got, pushed := tr.List(), pt.Tracker(fateServer.Port()).List()
		if len(got) != len(pushed) {
			t.Fatalf("%d attempts added, %d pushed", len(got), len(pushed))
		}
		for _, a := range append(got, pushed...) {
			checkEnding(t, a.Ending)
		}
		if ordered {
			endings := func(as []Attempt) map[attemptKey]backoff.Ending {
				m := map[attemptKey]backoff.Ending{}
				for _, a := range as {
					m[keyOf(SYN{Src: a.Src, Dst: a.Dst, Seq: a.Seq})] = a.Ending
				}
				return m
			}
			if diff := cmp.Diff(endings(got), endings(pushed)); diff != "" {
				t.Fatalf("added and pushed endings differ (-added +pushed):\n%s", diff)
			}
		}
	})
}

func checkEnding(t *testing.T, e backoff.Ending) {
	t.Helper()
	switch e.Fate {
	case backoff.FateRefused, backoff.FateUnanswered, backoff.FateClosed, backoff.FateAbandoned, backoff.FateOpen:
	default:
		t.Fatalf("fate %q", e.Fate)
	}
	if !e.Fate.Accepted() && e.Accepted != 0 || !e.Fate.Ended() && e.Duration != 0 {
		t.Fatalf("times the fate does not have: %+v", e)
	}
	if rec.CodeOf(e.ClientSent).Payload() != e.ClientSent || rec.CodeOf(e.ServerSent).Payload() != e.ServerSent {
		t.Fatalf("payload names: %+v", e)
	}
}
