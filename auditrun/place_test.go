package auditrun

import (
	"io"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/session"
)

// TestFateAcrossALateStart: a record file is read some ms late, so an
// attempt's SYN and first segments may come before its session's Start is
// read. Placed in the session then, the attempt's fate reads on from
// where its segments were: the server's first bytes, which only a
// segment at the server's ISN+1 names, and the flights of a TLS handshake
// that make it READY, are what they would have been with the Start read
// at once.
func TestFateAcrossALateStart(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	client := netip.MustParseAddrPort("127.0.0.1:40000")
	server := netip.MustParseAddrPort("127.0.0.1:50052")
	const isn, serverISN = 100, 500
	const syn, ack = 0x02, 0x10
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	seg := func(n int, fromClient bool, seq, acked uint32, flags uint8, sent backoff.Payload) liveItem {
		src, dst := server, client
		if fromClient {
			src, dst = client, server
		}
		return liveItem{kind: itemSegment, syn: attempt.SYN{Time: ms(n), Src: src, Dst: dst, Seq: seq}, ack: acked, flags: flags, sent: sent}
	}
	// A TLS handshake that completes, then data both ways: READY.
	items := []liveItem{
		{kind: itemSYN, syn: attempt.SYN{Time: ms(0), Src: client, Dst: server, Seq: isn}},
		seg(1, false, serverISN, isn+1, syn|ack, ""),
		seg(2, true, isn+1, serverISN+1, ack, backoff.PayloadTLSClientHello),
		seg(3, false, serverISN+1, isn+300, ack, backoff.PayloadTLSServerHello),
		seg(4, true, isn+300, serverISN+2000, ack, backoff.PayloadOther),
		seg(5, false, serverISN+2000, isn+400, ack, backoff.PayloadOther),
	}
	start := session.RecordEvent{Event: session.EventStart, Time: t0.Add(-time.Millisecond), Session: 1,
		Peer: netip.MustParseAddrPort("127.0.0.1:39999"), Params: &session.SessionParams{Policy: backoff.DefaultPolicy()}}
	fate := func(startAfter int) backoff.Ending {
		a := &liveAuditor{cfg: Config{Attach: true, Record: "record.jsonl", JSON: true}, tr: newTracker(),
			out: io.Discard, errOut: io.Discard, skipped: map[string]uint64{}}
		for i := range items {
			if i == startAfter {
				a.addEvent(start)
			}
			a.handle(&items[i])
		}
		if a.sess == nil || a.inside != 1 || a.outside != 0 {
			t.Fatalf("Start read after %d items: session %v, %d attempts inside, %d outside; want 1 inside", startAfter, a.sess, a.inside, a.outside)
		}
		return a.tr.Ending(attempt.Attempt{Src: client, Dst: server, Seq: isn})
	}
	want := fate(0)
	if !want.Ready || want.ServerSent != backoff.PayloadTLSServerHello {
		t.Fatalf("fate with the Start read first: %+v; want READY, the server's hello", want)
	}
	for after := 1; after < len(items); after++ {
		if diff := cmp.Diff(want, fate(after)); diff != "" {
			t.Errorf("the Start read after %d items (-read first +read late):\n%s", after, diff)
		}
	}
}
