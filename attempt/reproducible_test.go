package attempt

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/backoff-audit/audit/attempt/internal/rec"
	"github.com/backoff-audit/audit/backoff"
	"github.com/google/go-cmp/cmp"
)

// The same capture read twice gives the same fates, even where the table
// of recent attempts decides them: here 2 000 clients, more than the
// table has slots, each reusing its tuple with a new ISN while its first
// connection still sends, whose first bytes come after the second SYN.
// Which attempt they go to depends on which tuples share a slot, so that
// slot must not depend on a random seed.
func TestFatesReproducible(t *testing.T) {
	type event struct {
		syn *SYN
		seg *Segment
	}
	var events []event
	at := func(ms float64) time.Time { return trackStart.Add(time.Duration(ms * float64(time.Millisecond))) }
	for c := range 2000 {
		client := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(c >> 8), byte(c), 1}), 40000)
		base := float64(c) * 0.01
		first := SYN{Time: at(base), Src: client, Dst: fateServer, Seq: 100}
		second := SYN{Time: at(base + 30), Src: client, Dst: fateServer, Seq: 9000}
		events = append(events,
			event{syn: &first},
			event{seg: &Segment{Time: at(base + 0.1), Src: fateServer, Dst: client, Seq: 7, Ack: 101, Flags: rec.FlagSYN | rec.FlagACK}},
			event{syn: &second},
			event{seg: &Segment{Time: at(base + 30.1), Src: client, Dst: fateServer, Seq: 101, Ack: 8, Flags: rec.FlagACK, Sent: backoff.PayloadH2Preface}},
		)
	}
	// In time order, as a capture holds them.
	timeOf := func(e event) time.Time {
		if e.syn != nil {
			return e.syn.Time
		}
		return e.seg.Time
	}
	ordered := slices.SortedStableFunc(slices.Values(events), func(a, b event) int { return timeOf(a).Compare(timeOf(b)) })
	read := func() []backoff.Ending {
		tr := NewTracker()
		tr.SetFatesKnown(true)
		for _, e := range ordered {
			if e.syn != nil {
				tr.Add(*e.syn)
			} else {
				tr.AddSegment(e.seg)
			}
		}
		var got []backoff.Ending
		for _, a := range tr.List() {
			got = append(got, a.Ending)
		}
		return got
	}
	want := read()
	for i := range 8 {
		if diff := cmp.Diff(want, read()); diff != "" {
			t.Fatalf("read %d differs from the first (-first +read):\n%s", i+2, diff)
		}
	}
}
