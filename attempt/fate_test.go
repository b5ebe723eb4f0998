package attempt

import (
	"fmt"
	"math"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/backoff-audit/audit/attempt/internal/rec"

	"github.com/backoff-audit/audit/backoff"
	"github.com/google/go-cmp/cmp"
)

func TestPayloadOf(t *testing.T) {
	hello := []byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03}
	serverHello := []byte{0x16, 0x03, 0x03, 0x00, 0x7a, 0x02, 0x00, 0x00, 0x76}
	settings := []byte{0x00, 0x00, 0x12, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03}
	tests := []struct {
		name       string
		b          []byte
		fromServer bool
		want       backoff.Payload
	}{
		{"nothing", nil, false, backoff.PayloadNone},
		{"tls client hello", hello, false, backoff.PayloadTLSClientHello},
		{"tls client hello cut to its 6 bytes", hello[:6], false, backoff.PayloadTLSClientHello},
		{"tls client hello cut before its type", hello[:5], false, backoff.PayloadOther},
		{"tls server hello", serverHello, true, backoff.PayloadTLSServerHello},
		{"tls alert is data", []byte{0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28}, true, backoff.PayloadOther},
		{"tls record of version 2.x is data", []byte{0x16, 0x02, 0x00, 0x00, 0x10, 0x01}, false, backoff.PayloadOther},
		{"http/2 preface", []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), false, backoff.PayloadH2Preface},
		{"http/2 preface, 14 bytes", []byte("PRI * HTTP/2.0"), false, backoff.PayloadH2Preface},
		{"http/2 preface cut short", []byte("PRI * HTTP/2"), false, backoff.PayloadOther},
		{"http/2 settings from the server", settings, true, backoff.PayloadH2Settings},
		{"http/2 settings ack", []byte{0, 0, 0, 4, 1, 0, 0, 0, 0}, true, backoff.PayloadH2Settings},
		{"settings header from the client is data", settings, false, backoff.PayloadOther},
		{"settings on a stream is data", []byte{0, 0, 0, 4, 0, 0, 0, 0, 1}, true, backoff.PayloadOther},
		{"settings with other flags is data", []byte{0, 0, 0, 4, 4, 0, 0, 0, 0}, true, backoff.PayloadOther},
		{"headers frame is data", []byte{0, 0, 5, 1, 4, 0, 0, 0, 1}, true, backoff.PayloadOther},
		{"http/1.1 request is data", []byte("GET / HTTP/1.1\r\n"), false, backoff.PayloadOther},
		{"one byte", []byte{0x16}, false, backoff.PayloadOther},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PayloadOf(tt.b, tt.fromServer); got != tt.want {
				t.Errorf("PayloadOf(% x, %v) = %q, want %q", tt.b, tt.fromServer, got, tt.want)
			}
		})
	}
}

// Segments of one attempt, as fateSeg builds them: from the client
// 127.0.0.1:40000 (ISN 1000) to the server 127.0.0.1:50052 (ISN 5000).
var (
	fateClient = netip.MustParseAddrPort("127.0.0.1:40000")
	fateServer = netip.MustParseAddrPort("127.0.0.1:50052")
)

const fateISN, fateServerISN = 1000, 5000

// fateSeg is a segment ms after the first SYN; fromClient picks its
// direction.
func fateSeg(ms float64, fromClient bool, flags uint8, seq, ack uint32, sent backoff.Payload) Segment {
	s := Segment{Time: trackStart.Add(time.Duration(ms * float64(time.Millisecond))), Src: fateServer, Dst: fateClient,
		Seq: seq, Ack: ack, Flags: flags, Sent: sent}
	if fromClient {
		s.Src, s.Dst = fateClient, fateServer
	}
	return s
}

func synAck(ms float64) Segment {
	return fateSeg(ms, false, rec.FlagSYN|rec.FlagACK, fateServerISN, fateISN+1, "")
}

func fms(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

func TestFates(t *testing.T) {
	syn := func(ms float64) SYN {
		return SYN{Time: trackStart.Add(time.Duration(ms * float64(time.Millisecond))), Src: fateClient, Dst: fateServer, Seq: fateISN}
	}
	hello := fateSeg(0.1, true, rec.FlagACK|0x08, fateISN+1, fateServerISN+1, backoff.PayloadTLSClientHello)
	tests := []struct {
		name string
		syns []SYN
		segs []Segment
		want backoff.Ending
	}{
		{
			name: "another attempt between",
			syns: []SYN{syn(0)},
			segs: []Segment{synAck(0.02), {Time: trackAt(1), Src: netip.MustParseAddrPort("10.0.0.1:1"), Dst: fateServer, Flags: rec.FlagSYN},
				fateSeg(2, false, rec.FlagRST|rec.FlagACK, fateServerISN+1, fateISN+1, "")},
			want: backoff.Ending{Fate: backoff.FateClosed, Accepted: fms(0.02), Duration: fms(2), RST: true},
		},
		{
			name: "refused: RST-ACK answers the SYN",
			syns: []SYN{syn(0)},
			segs: []Segment{fateSeg(0.04, false, rec.FlagRST|rec.FlagACK, 0, fateISN+1, "")},
			want: backoff.Ending{Fate: backoff.FateRefused, Duration: fms(0.04), RST: true},
		},
		{
			name: "refused after a retransmission",
			syns: []SYN{syn(0), syn(1000)},
			segs: []Segment{fateSeg(1000.05, false, rec.FlagRST|rec.FlagACK, 0, fateISN+1, "")},
			want: backoff.Ending{Fate: backoff.FateRefused, Duration: fms(1000.05), RST: true},
		},
		{
			name: "an RST that acknowledges another ISN does not refuse",
			syns: []SYN{syn(0)},
			segs: []Segment{fateSeg(0.04, false, rec.FlagRST|rec.FlagACK, 0, 77, "")},
			want: backoff.Ending{Fate: backoff.FateUnanswered},
		},
		{
			name: "unanswered: only retransmissions",
			syns: []SYN{syn(0), syn(1000), syn(3000)},
			want: backoff.Ending{Fate: backoff.FateUnanswered, Duration: fms(3000)},
		},
		{
			name: "closed by server: SYN-ACK, ClientHello, RST from the server",
			syns: []SYN{syn(0)},
			segs: []Segment{synAck(0.02), hello, fateSeg(0.2, false, rec.FlagRST|rec.FlagACK, fateServerISN+1, fateISN+100, "")},
			want: backoff.Ending{Fate: backoff.FateClosed, Accepted: fms(0.02), Duration: fms(0.2), ClientSent: backoff.PayloadTLSClientHello, RST: true},
		},
		{
			name: "closed by server with a FIN; the client's FIN after it does not change it",
			syns: []SYN{syn(0)},
			segs: []Segment{synAck(0.02), fateSeg(0.3, false, rec.FlagFIN|rec.FlagACK, fateServerISN+1, fateISN+1, ""),
				fateSeg(0.4, true, rec.FlagFIN|rec.FlagACK, fateISN+1, fateServerISN+2, "")},
			want: backoff.Ending{Fate: backoff.FateClosed, Accepted: fms(0.02), Duration: fms(0.3)},
		},
		{
			name: "abandoned by client: its FIN first, at its connect timeout",
			syns: []SYN{syn(0)},
			segs: []Segment{synAck(0.02), hello, fateSeg(20000, true, rec.FlagFIN|rec.FlagACK, fateISN+518, fateServerISN+1, "")},
			want: backoff.Ending{Fate: backoff.FateAbandoned, Accepted: fms(0.02), Duration: fms(20000), ClientSent: backoff.PayloadTLSClientHello},
		},
		{
			name: "abandoned by client: its RST answers a late SYN-ACK",
			syns: []SYN{syn(0)},
			segs: []Segment{synAck(1500), fateSeg(1500.01, true, rec.FlagRST, fateISN+1, 0, "")},
			want: backoff.Ending{Fate: backoff.FateAbandoned, Accepted: fms(1500), Duration: fms(1500.01), RST: true},
		},
		{
			name: "open at end",
			syns: []SYN{syn(0)},
			segs: []Segment{synAck(0.02), hello},
			want: backoff.Ending{Fate: backoff.FateOpen, Accepted: fms(0.02), ClientSent: backoff.PayloadTLSClientHello},
		},
		{
			name: "both sides' first bytes: TLS, then HTTP/2 settings",
			syns: []SYN{syn(0)},
			segs: []Segment{synAck(0.02), hello,
				fateSeg(1, false, rec.FlagACK|0x08, fateServerISN+1, fateISN+518, backoff.PayloadTLSServerHello),
				fateSeg(2, false, rec.FlagACK|0x08, fateServerISN+2000, fateISN+600, backoff.PayloadH2Settings),
				fateSeg(3, false, rec.FlagFIN|rec.FlagACK, fateServerISN+2100, fateISN+600, "")},
			want: backoff.Ending{Fate: backoff.FateClosed, Accepted: fms(0.02), Duration: fms(3), ClientSent: backoff.PayloadTLSClientHello, ServerSent: backoff.PayloadTLSServerHello},
		},
		{
			name: "ready in plaintext: the server's first bytes are its SETTINGS",
			syns: []SYN{syn(0)},
			segs: []Segment{synAck(0.02), fateSeg(0.1, true, rec.FlagACK|0x08, fateISN+1, fateServerISN+1, backoff.PayloadH2Preface),
				fateSeg(0.3, false, rec.FlagACK|0x08, fateServerISN+1, fateISN+40, backoff.PayloadH2Settings),
				fateSeg(600, false, rec.FlagFIN|rec.FlagACK, fateServerISN+40, fateISN+90, "")},
			want: backoff.Ending{Fate: backoff.FateClosed, Accepted: fms(0.02), Duration: fms(600), ClientSent: backoff.PayloadH2Preface,
				ServerSent: backoff.PayloadH2Settings, Ready: true, ReadyAfter: fms(0.3)},
		},
		{
			name: "ready inside TLS: the server's data opens the fourth flight",
			syns: []SYN{syn(0)},
			segs: []Segment{synAck(0.02), hello,
				fateSeg(1, false, rec.FlagACK|0x08, fateServerISN+1, fateISN+518, backoff.PayloadTLSServerHello),
				fateSeg(1.1, false, rec.FlagACK|0x08, fateServerISN+1100, fateISN+518, backoff.PayloadOther), // the same flight
				fateSeg(2, true, rec.FlagACK|0x08, fateISN+518, fateServerISN+1500, backoff.PayloadOther),
				fateSeg(2.1, true, rec.FlagACK|0x08, fateISN+580, fateServerISN+1500, backoff.PayloadOther),
				fateSeg(3, false, rec.FlagACK|0x08, fateServerISN+1500, fateISN+700, backoff.PayloadOther),
				fateSeg(4, false, rec.FlagRST|rec.FlagACK, fateServerISN+1600, fateISN+700, "")},
			want: backoff.Ending{Fate: backoff.FateClosed, Accepted: fms(0.02), Duration: fms(4), ClientSent: backoff.PayloadTLSClientHello,
				ServerSent: backoff.PayloadTLSServerHello, Ready: true, ReadyAfter: fms(3), RST: true},
		},
		{
			name: "not ready: a TLS handshake the client ends after the server's flight",
			syns: []SYN{syn(0)},
			segs: []Segment{synAck(0.02), hello,
				fateSeg(1, false, rec.FlagACK|0x08, fateServerISN+1, fateISN+518, backoff.PayloadTLSServerHello),
				fateSeg(2, true, rec.FlagACK|0x08, fateISN+518, fateServerISN+1500, backoff.PayloadOther), // its alert
				fateSeg(2.1, true, rec.FlagFIN|rec.FlagACK, fateISN+540, fateServerISN+1500, ""),
				fateSeg(3, false, rec.FlagACK|0x08, fateServerISN+1500, fateISN+541, backoff.PayloadOther)},
			want: backoff.Ending{Fate: backoff.FateAbandoned, Accepted: fms(0.02), Duration: fms(2.1), ClientSent: backoff.PayloadTLSClientHello,
				ServerSent: backoff.PayloadTLSServerHello},
		},
		{
			name: "a side's bytes not at its ISN+1 are not its first",
			syns: []SYN{syn(0)},
			segs: []Segment{synAck(0.02), fateSeg(0.1, true, rec.FlagACK|0x08, fateISN+300, fateServerISN+1, backoff.PayloadOther),
				fateSeg(0.2, false, rec.FlagACK|0x08, fateServerISN+9, fateISN+1, backoff.PayloadOther)},
			want: backoff.Ending{Fate: backoff.FateOpen, Accepted: fms(0.02)},
		},
		{
			name: "a SYN-ACK that acknowledges another ISN does not accept",
			syns: []SYN{syn(0)},
			segs: []Segment{fateSeg(0.02, false, rec.FlagSYN|rec.FlagACK, fateServerISN, 4242, "")},
			want: backoff.Ending{Fate: backoff.FateUnanswered},
		},
		{
			name: "segments before the SYN belong to no attempt",
			syns: []SYN{syn(10)},
			segs: []Segment{synAck(5), fateSeg(6, false, rec.FlagRST|rec.FlagACK, 0, fateISN+1, "")},
			want: backoff.Ending{Fate: backoff.FateUnanswered},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, batched := range []bool{false, true} {
				tr := NewTracker()
				tr.SetFatesKnown(true)
				if batched { // every segment read on its own, a table of one slot
					tr.segBatch, tr.recentMax = 1, 1
				}
				for _, s := range tt.syns {
					tr.Add(s)
				}
				for _, s := range tt.segs {
					if s.Flags == rec.FlagSYN {
						tr.Add(SYN{Time: s.Time, Src: s.Src, Dst: s.Dst, Seq: s.Seq})
						continue
					}
					tr.AddSegment(&s)
				}
				var got []Attempt
				for _, a := range tr.List() {
					if a.Src == fateClient {
						got = append(got, a)
					}
				}
				if len(got) != 1 {
					t.Fatalf("%d attempts from the client, want 1", len(got))
				}
				if diff := cmp.Diff(tt.want, got[0].Ending); diff != "" {
					t.Errorf("batched %v: Ending (-want +got):\n%s", batched, diff)
				}
			}
		})
	}
}

// Segments read before their SYN, as from rotated files given out of time
// order: when a SYN of their tuple came before them (an earlier file read
// first holds a later attempt of it), they wait for the tracker to be read
// and are then matched in time order; when none came, they are dropped.
func TestFatesSegmentsBeforeTheirSYN(t *testing.T) {
	for _, viaPortTracker := range []bool{false, true} {
		pt := NewPortTracker()
		pt.SetFatesKnown(true)
		pt.Add(SYN{Time: trackAt(5000), Src: fateClient, Dst: fateServer, Seq: 77}) // the later file's attempt
		tr := pt.Tracker(50052)
		if !viaPortTracker {
			tr = NewTracker()
			tr.SetFatesKnown(true)
		}
		add := func(s Segment) { tr.AddSegment(&s) }
		if viaPortTracker {
			add = func(s Segment) { pt.AddSegment(&s) }
		}
		add(fateSeg(0.2, false, rec.FlagRST|rec.FlagACK, fateServerISN+1, fateISN+1, ""))
		add(synAck(0.02))
		if viaPortTracker {
			pt.Add(SYN{Time: trackAt(0), Src: fateClient, Dst: fateServer, Seq: fateISN})
		} else {
			tr.Add(SYN{Time: trackAt(0), Src: fateClient, Dst: fateServer, Seq: fateISN})
		}
		want := backoff.Ending{Fate: backoff.FateClosed, Accepted: fms(0.02), Duration: fms(0.2), RST: true}
		if !viaPortTracker {
			want = backoff.Ending{Fate: backoff.FateUnanswered}
		}
		got := tr.Peers()[0].Attempts[0].Ending
		if got != want {
			t.Errorf("via PortTracker %v: Ending = %+v, want %+v", viaPortTracker, got, want)
		}
	}
}

// A tuple used again with a new ISN: each segment goes to the attempt its
// acknowledgement names, or the latest one before it.
func TestFatesReusedTuple(t *testing.T) {
	for _, slots := range []int{recentSlots, 1} {
		t.Run(fmt.Sprintf("%d slots", slots), func(t *testing.T) { testFatesReusedTuple(t, slots) })
	}
}

func testFatesReusedTuple(t *testing.T, slots int) {
	tr := NewTracker()
	tr.SetFatesKnown(true)
	tr.recentMax = slots
	first := SYN{Time: trackAt(0), Src: fateClient, Dst: fateServer, Seq: 100}
	second := SYN{Time: trackAt(1000), Src: fateClient, Dst: fateServer, Seq: 900}
	third := SYN{Time: trackAt(2600), Src: fateClient, Dst: fateServer, Seq: 1700}
	for _, s := range []SYN{first, second, third} {
		tr.Add(s)
	}
	at := func(ms float64) time.Time { return trackStart.Add(time.Duration(ms * float64(time.Millisecond))) }
	for _, s := range []Segment{
		// The first is refused, late: its RST comes after the second SYN.
		{Time: at(1000.5), Src: fateServer, Dst: fateClient, Ack: 101, Flags: rec.FlagRST | rec.FlagACK},
		// The second is accepted and closed by the server.
		{Time: at(1000.1), Src: fateServer, Dst: fateClient, Seq: 7, Ack: 901, Flags: rec.FlagSYN | rec.FlagACK},
		{Time: at(1000.3), Src: fateServer, Dst: fateClient, Seq: 8, Ack: 901, Flags: rec.FlagFIN | rec.FlagACK},
		// The third: its client bytes and FIN, after a SYN-ACK.
		{Time: at(2600.1), Src: fateServer, Dst: fateClient, Seq: 50, Ack: 1701, Flags: rec.FlagSYN | rec.FlagACK},
		{Time: at(2600.2), Src: fateClient, Dst: fateServer, Seq: 1701, Ack: 51, Flags: rec.FlagACK, Sent: backoff.PayloadH2Preface},
		{Time: at(2700), Src: fateClient, Dst: fateServer, Seq: 1730, Ack: 51, Flags: rec.FlagFIN | rec.FlagACK},
	} {
		tr.AddSegment(&s)
	}
	var got []backoff.Ending
	for _, a := range tr.List() {
		got = append(got, a.Ending)
	}
	want := []backoff.Ending{
		{Fate: backoff.FateRefused, Duration: fms(1000.5), RST: true},
		{Fate: backoff.FateClosed, Accepted: fms(0.1), Duration: fms(0.3)},
		{Fate: backoff.FateAbandoned, Accepted: fms(0.1), Duration: fms(100), ClientSent: backoff.PayloadH2Preface},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Endings (-want +got):\n%s", diff)
	}
}

// Without SetFatesKnown, as for a capture of SYNs only, every Ending is
// the zero one, whatever came; a Chain, List and Peers agree.
func TestFatesUnknown(t *testing.T) {
	tr := NewTracker()
	tr.Add(SYN{Time: trackAt(0), Src: fateClient, Dst: fateServer, Seq: fateISN})
	tr.addSeg(synAck(0.02))
	if got := tr.List()[0].Ending; got != (backoff.Ending{}) {
		t.Errorf("List: Ending = %+v, want the zero Ending", got)
	}
	tr.SetFatesKnown(true)
	want := backoff.Ending{Fate: backoff.FateOpen, Accepted: fms(0.02)}
	if got := tr.List()[0].Ending; got != want {
		t.Errorf("List after SetFatesKnown: Ending = %+v, want %+v", got, want)
	}
	if got := tr.Chains().Chain(0, nil).Attempts[0].Ending; got != want {
		t.Errorf("Chain: Ending = %+v, want %+v", got, want)
	}
	if got := tr.Peers()[0].Attempts[0].Ending; got != want {
		t.Errorf("Peers: Ending = %+v, want %+v", got, want)
	}
}

// An attempt handed to a new tracker with its Ending goes on from it: the
// live auditor rebuilds its tracker between sessions.
func TestFatesAddAttempt(t *testing.T) {
	tr := NewTracker()
	tr.SetFatesKnown(true)
	tr.Add(SYN{Time: trackAt(0), Src: fateClient, Dst: fateServer, Seq: fateISN})
	tr.addSeg(synAck(0.02))
	tr.addSeg(fateSeg(0.1, true, rec.FlagACK|0x08, fateISN+1, fateServerISN+1, backoff.PayloadTLSClientHello))
	held := tr.List()
	tr2 := NewTracker()
	tr2.SetFatesKnown(true)
	for _, a := range held {
		tr2.AddAttempt(a)
	}
	if diff := cmp.Diff(held, tr2.List(), netipOpt); diff != "" {
		t.Errorf("AddAttempt(List()) changed the attempts (-before +after):\n%s", diff)
	}
	tr2.addSeg(fateSeg(20000, true, rec.FlagFIN|rec.FlagACK, fateISN+518, fateServerISN+1, ""))
	want := backoff.Ending{Fate: backoff.FateAbandoned, Accepted: fms(0.02), Duration: fms(20000), ClientSent: backoff.PayloadTLSClientHello}
	if got := tr2.List()[0].Ending; got != want {
		t.Errorf("after its FIN: Ending = %+v, want %+v", got, want)
	}

	// Every fate survives the trip.
	for _, e := range []backoff.Ending{
		{Fate: backoff.FateRefused, Duration: fms(0.04), RST: true},
		{Fate: backoff.FateUnanswered, Duration: fms(3000)},
		{Fate: backoff.FateClosed, Accepted: fms(1), Duration: fms(2), ClientSent: backoff.PayloadH2Preface, ServerSent: backoff.PayloadH2Settings},
		{Fate: backoff.FateAbandoned, Accepted: fms(1), Duration: fms(20000)},
		{Fate: backoff.FateOpen, Accepted: fms(1), ServerSent: backoff.PayloadOther},
	} {
		tr := NewTracker()
		tr.SetFatesKnown(true)
		a := Attempt{Time: trackAt(0), Src: fateClient, Dst: fateServer, Seq: fateISN, Retransmits: 2, Ending: e}
		tr.AddAttempt(a)
		if got := tr.List()[0]; got.Ending != e || got.Retransmits != 2 {
			t.Errorf("AddAttempt(%+v): List has %+v", e, got)
		}
	}
}

// A flood of segments is read as it comes, or waits in batches: what
// waits stays below segBatch, and the fate is that of the first segments.
func TestFatesSegmentsBounded(t *testing.T) {
	tr := NewTracker()
	tr.SetFatesKnown(true)
	tr.segBatch = 1000
	tr.Add(SYN{Time: trackAt(0), Src: fateClient, Dst: fateServer, Seq: fateISN})
	tr.addSeg(synAck(0.02))
	other := netip.MustParseAddrPort("10.0.0.1:1")
	for i := range 100_000 {
		tr.addSeg(fateSeg(1+float64(i), i%2 == 0, rec.FlagRST|rec.FlagACK, fateISN+1, fateServerISN+1, ""))
		// Segments of no attempt wait to be matched, a batch at most.
		tr.addSeg(Segment{Time: trackAt(i), Src: other, Dst: fateServer, Flags: rec.FlagRST})
		if tr.late.n > tr.segBatch {
			t.Fatalf("after %d segments, %d wait; the bound is %d", 2*i+3, tr.late.n, tr.segBatch)
		}
	}
	want := backoff.Ending{Fate: backoff.FateAbandoned, Accepted: fms(0.02), Duration: fms(1), RST: true}
	if got := tr.List()[0].Ending; got != want {
		t.Errorf("Ending = %+v, want %+v", got, want)
	}
	if tr.late.n != 0 {
		t.Errorf("%d segments kept after List", tr.late.n)
	}
}

// The same through pushed SYNs, as a capture file is read: the segments
// read while the SYNs wait go to the fates of the SYNs' attempts.
func TestFatesPushed(t *testing.T) {
	pt := NewPortTracker()
	pt.SetFatesKnown(true)
	other := netip.MustParseAddrPort("127.0.0.1:40001")
	pt.Add(SYN{Time: trackAt(0), Src: fateClient, Dst: fateServer, Seq: fateISN})
	pt.addSeg(synAck(0.02))
	pt.Add(SYN{Time: trackAt(1), Src: other, Dst: fateServer, Seq: 9})
	// A retransmission of the first, then its end.
	pt.Add(SYN{Time: trackAt(2), Src: fateClient, Dst: fateServer, Seq: fateISN})
	pt.addSeg(synAck(2.01)) // the server answers it again
	pt.addSeg(fateSeg(3, true, rec.FlagFIN|rec.FlagACK, fateISN+1, fateServerISN+1, ""))
	pt.addSeg(Segment{Time: trackAt(4), Src: fateServer, Dst: other, Ack: 10, Flags: rec.FlagRST | rec.FlagACK})
	var got []backoff.Ending
	for _, a := range pt.Tracker(50052).Peers()[0].Attempts {
		got = append(got, a.Ending)
	}
	want := []backoff.Ending{{Fate: backoff.FateAbandoned, Accepted: fms(0.02), Duration: fms(3)}, {Fate: backoff.FateRefused, Duration: fms(3), RST: true}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Endings (-want +got):\n%s", diff)
	}
}

// Segments that wait while the SYNs of their attempts wait to be grouped
// too, and fill the waiting list, are read once those SYNs are grouped:
// the attempt, out of a table of one slot, is refused, not unanswered.
func TestFatesLateOfPushed(t *testing.T) {
	tr := NewTracker()
	tr.SetFatesKnown(true)
	tr.watch()
	tr.pushBatch, tr.segBatch, tr.recentMax = 100, 2, 1
	other := netip.MustParseAddrPort("127.0.0.1:40001")
	tr.push(SYN{Time: trackAt(0), Src: fateClient, Dst: fateServer, Seq: fateISN})
	tr.push(SYN{Time: trackAt(1), Src: other, Dst: fateServer, Seq: 9})     // takes the slot
	tr.addSeg(fateSeg(2, false, rec.FlagRST|rec.FlagACK, 0, fateISN+1, "")) // waits
	tr.addSeg(fateSeg(3, false, rec.FlagACK|0x08, 7, fateISN+1, backoff.PayloadOther))
	if tr.pushed.n != 2 || tr.late.n != 2 {
		t.Fatalf("%d SYNs and %d segments wait, want 2 and 2", tr.pushed.n, tr.late.n)
	}
	tr.addSeg(fateSeg(4, true, rec.FlagFIN|rec.FlagACK, fateISN+1, 0, "")) // the list is full
	if tr.pushed.n != 0 {
		t.Errorf("%d SYNs still wait once the segments were read", tr.pushed.n)
	}
	want := []backoff.Ending{{Fate: backoff.FateRefused, Duration: fms(2), RST: true}, {Fate: backoff.FateUnanswered}}
	var got []backoff.Ending
	for _, a := range tr.List() {
		got = append(got, a.Ending)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Endings (-want +got):\n%s", diff)
	}
}

// PortTracker gives a segment to its destination port's tracker, or its
// source port's (the server's segments), and SetFatesKnown to all.
func TestPortTrackerSegments(t *testing.T) {
	pt := NewPortTracker()
	pt.Add(SYN{Time: trackAt(0), Src: fateClient, Dst: fateServer, Seq: fateISN})
	pt.Add(SYN{Time: trackAt(0), Src: fateClient, Dst: netip.MustParseAddrPort("127.0.0.1:443"), Seq: 1})
	pt.addSeg(synAck(0.02))
	pt.addSeg(fateSeg(0.1, true, rec.FlagFIN|rec.FlagACK, fateISN+1, fateServerISN+1, ""))
	pt.SetFatesKnown(true)
	want := backoff.Ending{Fate: backoff.FateAbandoned, Accepted: fms(0.02), Duration: fms(0.1)}
	if got := pt.Tracker(50052).List()[0].Ending; got != want {
		t.Errorf("port 50052: Ending = %+v, want %+v", got, want)
	}
	if got := pt.Tracker(443).List()[0].Ending; got != (backoff.Ending{Fate: backoff.FateUnanswered}) {
		t.Errorf("port 443: Ending = %+v, want unanswered", got)
	}
	if !pt.Tracker(9).FatesKnown() {
		t.Error("the empty tracker of a port without SYNs does not know fates")
	}
}

func TestFateAcceptedEnded(t *testing.T) {
	for _, tt := range []struct {
		f               backoff.Fate
		accepted, ended bool
	}{
		{backoff.FateUnknown, false, false}, {"", false, false}, {backoff.FateRefused, false, true}, {backoff.FateUnanswered, false, true},
		{backoff.FateClosed, true, true}, {backoff.FateAbandoned, true, true}, {backoff.FateOpen, true, false},
	} {
		if tt.f.Accepted() != tt.accepted || tt.f.Ended() != tt.ended {
			t.Errorf("%q: Accepted %v Ended %v, want %v %v", tt.f, tt.f.Accepted(), tt.f.Ended(), tt.accepted, tt.ended)
		}
	}
}

func (t *Tracker) addSeg(s Segment)      { t.AddSegment(&s) }
func (pt *PortTracker) addSeg(s Segment) { pt.AddSegment(&s) }

// The table of recent attempts and the set of tuples start small and grow
// with the attempts, powers of two, up to their bounds; what the table
// held keeps its fate.
func TestFatesTablesGrow(t *testing.T) {
	tr := NewTracker()
	tr.SetFatesKnown(true)
	tr.AddSegment(&Segment{Time: trackAt(0), Src: fateServer, Dst: fateClient, Flags: rec.FlagRST}) // before any SYN: dropped
	tr.Add(SYN{Time: trackAt(0), Src: fateClient, Dst: fateServer, Seq: fateISN})
	tr.addSeg(synAck(0.02))
	if len(tr.recent) != minRecent || len(tr.seen) != minSeen {
		t.Fatalf("one attempt: table %d, set %d; want %d, %d", len(tr.recent), len(tr.seen), minRecent, minSeen)
	}
	for i := range 100_000 {
		cli := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 40000)
		tr.Add(SYN{Time: trackAt(1 + i), Src: cli, Dst: fateServer, Seq: 5})
		for _, n := range []int{len(tr.recent), len(tr.seen)} {
			if n&(n-1) != 0 {
				t.Fatalf("size %d, not a power of two", n)
			}
		}
	}
	if len(tr.recent) != recentSlots || len(tr.seen) != seenSlots {
		t.Errorf("100 001 attempts: table %d, set %d; want %d, %d", len(tr.recent), len(tr.seen), recentSlots, seenSlots)
	}
	if got := tr.List()[0].Ending; got != (backoff.Ending{Fate: backoff.FateOpen, Accepted: fms(0.02)}) {
		t.Errorf("the first attempt's fate: %+v", got)
	}
}

// A fate's times are Unix nanoseconds: timestamps beyond the years an
// int64 holds clamp, never wrap.
func TestStampNanos(t *testing.T) {
	for _, tt := range []struct {
		s    rec.Stamp
		want int64
	}{
		{rec.Stamp{Sec: 1, Nsec: 5}, 1e9 + 5},
		{rec.Stamp{Sec: -1, Nsec: 5}, -1e9 + 5},
		{rec.Stamp{Sec: 1 << 40, Nsec: 0}, math.MaxInt64},
		{rec.Stamp{Sec: -1 << 40, Nsec: 0}, math.MinInt64},
		{rec.Stamp{Sec: math.MaxInt64, Nsec: 999999999}, math.MaxInt64},
	} {
		if got := tt.s.Nanos(); got != tt.want {
			t.Errorf("%+v.Nanos() = %d, want %d", tt.s, got, tt.want)
		}
	}
}

// A SegmentView reads as the Segment it describes: its addresses as a
// packet has them (4 bytes, 16, or an IPv4-mapped 16).
func TestSegmentView(t *testing.T) {
	cli4 := [4]byte{127, 0, 0, 1}
	mapped := netip.AddrFrom4(cli4).As16()
	for _, tt := range []struct {
		name     string
		src, dst []byte
	}{
		{"ipv4", cli4[:], []byte{127, 0, 0, 1}},
		{"ipv4-mapped ipv6", mapped[:], mapped[:]},
	} {
		t.Run(tt.name, func(t *testing.T) {
			byView, bySegment := NewTracker(), NewTracker()
			for _, tr := range []*Tracker{byView, bySegment} {
				tr.SetFatesKnown(true)
				tr.Add(SYN{Time: trackAt(0), Src: fateClient, Dst: fateServer, Seq: fateISN})
			}
			v := SegmentView{Src: tt.dst, Dst: tt.src, SrcPort: fateServer.Port(), DstPort: fateClient.Port(),
				Seq: fateServerISN, Ack: fateISN + 1, Sec: trackStart.Unix(), Nsec: 20000, Flags: rec.FlagSYN | rec.FlagACK}
			s := v.Segment()
			if s.Src != fateServer || s.Dst != fateClient || !s.Time.Equal(trackStart.Add(20*time.Microsecond)) {
				t.Errorf("Segment() = %+v", s)
			}
			byView.AddSegmentView(&v)
			bySegment.AddSegment(&s)
			want := backoff.Ending{Fate: backoff.FateOpen, Accepted: fms(0.02)}
			if a, b := byView.List()[0].Ending, bySegment.List()[0].Ending; a != want || b != want {
				t.Errorf("by view %+v, by segment %+v; want %+v", a, b, want)
			}
		})
	}
	if got := (&SegmentView{Src: []byte{1, 2, 3}}).Segment().Src.Addr(); got.IsValid() {
		t.Errorf("a 3-byte address reads as %v, want the zero Addr", got)
	}
	v6 := netip.MustParseAddr("fd00::1").As16()
	if got, want := rec.WordsOfBytes(v6[:]), rec.WordsOf(netip.MustParseAddr("fd00::1")); got != want {
		t.Errorf("wordsOfBytes = %x, want %x", got, want)
	}
}

// Chains gives each chain's fates in the order of its attempts, as each
// attempt's own record reads (List), whether its attempts came in time
// order or not, every fate and first bytes named as they are; and none
// when the tracker knows no fates.
func TestChainsEndings(t *testing.T) {
	server := netip.MustParseAddrPort("127.0.0.1:50052")
	type seg struct {
		ms         int
		fromClient bool
		flags      uint8
		seq, ack   uint32
		sent       backoff.Payload
	}
	// Peer 10.0.0.1 in time order, peer 10.0.0.2 out of it (a rotated
	// file read late); each attempt ends its own way.
	attempts := []struct {
		ms   int
		peer string
		port uint16
		segs []seg
	}{
		{0, "10.0.0.1", 40000, []seg{{2, false, rec.FlagRST | rec.FlagACK, 0, 101, ""}}},
		{10, "10.0.0.2", 40001, []seg{{12, false, rec.FlagSYN | rec.FlagACK, 7, 101, ""}}},
		{20, "10.0.0.1", 40002, []seg{{22, false, rec.FlagSYN | rec.FlagACK, 7, 101, ""}, {23, false, rec.FlagACK | 0x08, 8, 101, backoff.PayloadH2Settings},
			{25, false, rec.FlagRST | rec.FlagACK, 30, 101, ""}}},
		{5, "10.0.0.2", 40003, []seg{{6, false, rec.FlagSYN | rec.FlagACK, 7, 101, ""}, {7, true, rec.FlagACK | 0x08, 101, 8, backoff.PayloadTLSClientHello},
			{9, true, rec.FlagFIN | rec.FlagACK, 400, 8, ""}}},
		{30, "10.0.0.1", 40004, nil},
	}
	for _, known := range []bool{true, false} {
		tr := NewTracker()
		tr.SetFatesKnown(known)
		for _, a := range attempts {
			cli := netip.AddrPortFrom(netip.MustParseAddr(a.peer), a.port)
			tr.Add(SYN{Time: trackAt(a.ms), Src: cli, Dst: server, Seq: 100})
			for _, g := range a.segs {
				s := Segment{Time: trackAt(g.ms), Src: server, Dst: cli, Seq: g.seq, Ack: g.ack, Flags: g.flags, Sent: g.sent}
				if g.fromClient {
					s.Src, s.Dst = cli, server
				}
				tr.addSeg(s)
			}
		}
		byPeer := map[netip.Addr][]Attempt{}
		for _, a := range tr.List() {
			byPeer[a.Src.Addr()] = append(byPeer[a.Src.Addr()], a)
		}
		cs := tr.Chains()
		if cs.Len() != 2 {
			t.Fatalf("%d chains, want 2", cs.Len())
		}
		seen := map[backoff.Fate]bool{}
		for i := range cs.Len() {
			got := cs.Endings(i, nil)
			if !known {
				if got != nil {
					t.Errorf("fates unknown: chain %d endings %v, want none", i, got)
				}
				continue
			}
			as := byPeer[cs.Chain(i, nil).Peer]
			slices.SortFunc(as, Compare)
			var want []backoff.Ending
			for _, a := range as {
				want = append(want, a.Ending)
				seen[a.Ending.Fate] = true
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("chain %d endings (-List +endings):\n%s", i, diff)
			}
			if diff := cmp.Diff(want, cs.Chain(i, nil).Endings()); diff != "" {
				t.Errorf("chain %d Chain's endings (-List +Chain):\n%s", i, diff)
			}
		}
		if known && len(seen) != 5 {
			t.Errorf("the attempts end in %d ways, want all 5: %v", len(seen), seen)
		}
	}
}

// Retain forgets the attempts it is told to and keeps the others as they
// were read: a kept connection, accepted before, reaches READY when the
// server's SETTINGS come after, which it knows from the server's ISN;
// handed over with its Ending alone (AddAttempt) it would not.
func TestTrackerRetain(t *testing.T) {
	other := netip.MustParseAddrPort("127.0.0.1:40001")
	read := func(hand func(tr *Tracker) *Tracker) []Attempt {
		tr := NewTracker()
		tr.SetFatesKnown(true)
		tr.Add(SYN{Time: trackAt(0), Src: other, Dst: fateServer, Seq: 7})
		tr.Add(SYN{Time: trackAt(1), Src: fateClient, Dst: fateServer, Seq: fateISN})
		tr.Add(SYN{Time: trackAt(2), Src: fateClient, Dst: fateServer, Seq: fateISN}) // a retransmission
		tr.addSeg(fateSeg(2.5, false, rec.FlagSYN|rec.FlagACK, fateServerISN, fateISN+1, ""))
		tr.addSeg(fateSeg(2.6, true, rec.FlagACK|0x08, fateISN+1, fateServerISN+1, backoff.PayloadH2Preface))
		tr = hand(tr)
		tr.addSeg(fateSeg(3, false, rec.FlagACK|0x08, fateServerISN+1, fateISN+25, backoff.PayloadH2Settings))
		return tr.List()
	}
	keepOne := func(a Attempt) bool { return a.Src == fateClient }
	got := read(func(tr *Tracker) *Tracker { tr.Retain(keepOne); return tr })
	want := []Attempt{{Time: trackAt(1), Src: fateClient, Dst: fateServer, Seq: fateISN, Retransmits: 1,
		Ending: backoff.Ending{Fate: backoff.FateOpen, Accepted: fms(1.5), ClientSent: backoff.PayloadH2Preface,
			ServerSent: backoff.PayloadH2Settings, Ready: true, ReadyAfter: fms(2)}}}
	if diff := cmp.Diff(want, got, netipOpt); diff != "" {
		t.Errorf("Retain (-want +got):\n%s", diff)
	}
	// Read in one tracker throughout, the kept attempt is the same.
	whole := read(func(tr *Tracker) *Tracker { return tr })
	if diff := cmp.Diff(whole[1:], got, netipOpt); diff != "" {
		t.Errorf("Retain against one tracker (-one +retained):\n%s", diff)
	}
	// Handed over by its Ending, the server's first bytes are not known
	// for what they are.
	handed := read(func(tr *Tracker) *Tracker {
		u := NewTracker()
		u.SetFatesKnown(true)
		for _, a := range tr.List() {
			if keepOne(a) {
				u.AddAttempt(a)
			}
		}
		return u
	})
	if handed[0].Ending.Ready {
		t.Errorf("AddAttempt: Ending = %+v; the test no longer shows what Retain keeps", handed[0].Ending)
	}
}
