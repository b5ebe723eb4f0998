package auditrun

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/session"
	"github.com/google/go-cmp/cmp"
)

// What a record keeps for a capture spanning 10:00–10:10: every line of a
// session that overlaps it, the start and end lines of the others, the
// accepts outside sessions within the span; the rest is counted.
func TestRecordFilter(t *testing.T) {
	at := func(min int) time.Time {
		return time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC).Add(time.Duration(min) * time.Minute)
	}
	peer := netip.MustParseAddrPort("127.0.0.1:40000")
	ev := func(kind session.EventKind, id, min int) session.RecordEvent {
		e := session.RecordEvent{Event: kind, Time: at(min), Session: id, Peer: peer}
		switch kind {
		case session.EventStart:
			e.Params = &session.SessionParams{Policy: backoff.DefaultPolicy()}
		case session.EventStop:
			e.End = &session.SessionEnd{Cause: session.CauseStop}
		}
		return e
	}
	name := func(e session.RecordEvent) string {
		return fmt.Sprintf("%s %d @%d", e.Event, e.Session, int(e.Time.Sub(at(0)).Minutes()))
	}
	tests := []struct {
		name    string
		events  []session.RecordEvent
		kept    []string
		counted int
	}{
		{name: "a session before, one over, one after the span",
			events: []session.RecordEvent{
				ev(session.EventStart, 1, -20), ev(session.EventAccept, 1, -19), ev(session.EventStop, 1, -18),
				ev(session.EventAccept, 0, -15), ev(session.EventAccept, 0, 1),
				ev(session.EventStart, 2, 2), ev(session.EventAccept, 2, 3), ev(session.EventAccept, 2, 30), ev(session.EventStop, 2, 31),
				ev(session.EventStart, 3, 40), ev(session.EventAccept, 3, 41), ev(session.EventStop, 3, 42),
			},
			kept: []string{"start 1 @-20", "stop 1 @-18", "accept 0 @1",
				"start 2 @2", "accept 2 @3", "accept 2 @30", "stop 2 @31", "start 3 @40", "stop 3 @42"},
			counted: 3},
		{name: "sessions open at the end, a server run that never closed one",
			events: []session.RecordEvent{
				ev(session.EventStart, 1, 1), ev(session.EventAccept, 1, 2),
				ev(session.EventStart, 1, 5), ev(session.EventAccept, 1, 6), ev(session.EventAccept, 7, 6),
			},
			// An open session is kept at the end: after what came outside
			// sessions meanwhile (here an accept of no session started).
			kept:    []string{"start 1 @1", "accept 1 @2", "accept 7 @6", "start 1 @5", "accept 1 @6"},
			counted: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kf := &recordFilter{first: at(0), last: at(10), pending: map[int]*pendingSession{}}
			for _, e := range tt.events {
				if err := kf.add(e); err != nil {
					t.Fatal(err)
				}
			}
			kf.flush()
			var kept []string
			for _, e := range kf.out {
				kept = append(kept, name(e))
			}
			if diff := cmp.Diff(tt.kept, kept); diff != "" {
				t.Errorf("kept (-want +got):\n%s", diff)
			}
			if kf.dropped != tt.counted {
				t.Errorf("%d counted, want %d", kf.dropped, tt.counted)
			}
		})
	}
}
