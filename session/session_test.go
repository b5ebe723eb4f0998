package session

import (
	"net/netip"
	"testing"
	"time"

	"github.com/backoff-audit/audit/backoff"
	"github.com/google/go-cmp/cmp"
)

// TestFold holds the server's reading of its events: an accept it marked
// overflow is counted, never kept; accepts of session 0 after an end are
// late for it, at most MaxLate; an end or a restart of another session,
// and a second end, change nothing.
func TestFold(t *testing.T) {
	params := &SessionParams{MaxReconnectBackoffMS: 2000, Policy: backoff.ReferencePolicy(2000)}
	caller := netip.MustParseAddrPort("127.0.0.1:40000")
	end := &SessionEnd{Cause: CauseStop, Verdict: backoff.Overflow, Attempts: 2, Dropped: 1, VerifiedPeer: xClient}
	events := []struct {
		e    RecordEvent
		want Change
	}{
		{RecordEvent{Event: EventAccept, Time: at(-10), Peer: netip.AddrPortFrom(xClient, 39000)}, Outside},
		{RecordEvent{Event: EventStart, Time: at(0), Session: 1, Peer: caller, Params: params}, Started},
		{RecordEvent{Event: EventAccept, Time: at(10), Session: 1, Peer: netip.AddrPortFrom(xClient, 40001)}, Kept},
		{RecordEvent{Event: EventRestart, Time: at(15), Session: 2}, Ignored},
		{RecordEvent{Event: EventRestart, Time: at(15), Session: 1}, Back},
		{RecordEvent{Event: EventAccept, Time: at(20), Session: 1, Peer: netip.AddrPortFrom(xClient, 40002)}, Kept},
		{RecordEvent{Event: EventAccept, Time: at(25), Session: 1, Peer: netip.AddrPortFrom(xClient, 40003), Overflow: true}, Overflow},
		{RecordEvent{Event: EventExpire, Time: at(28), Session: 2, End: end}, Ignored},
		{RecordEvent{Event: EventStop, Time: at(30), Session: 1, Peer: caller, End: end}, Ended},
		{RecordEvent{Event: EventExpire, Time: at(31), Session: 1, End: end}, Ignored},
		{RecordEvent{Event: EventAccept, Time: at(32), Peer: netip.AddrPortFrom(xClient, 40004)}, Late},
		{RecordEvent{Event: EventAccept, Time: at(33), Session: 1, Peer: netip.AddrPortFrom(xClient, 40005)}, Outside},
	}
	var f Fold
	for i, ev := range events {
		if got := f.Add(ev.e); got != ev.want {
			t.Errorf("event %d (%s of session %d): %v, want %v", i, ev.e.Event, ev.e.Session, got, ev.want)
		}
	}
	want := &Session{Number: 1, Start: at(0), Peer: caller, Params: *params, End: end, EndTime: at(30), Back: at(15),
		Accepts: []Accept{acc(xClient, 40001, 10), acc(xClient, 40002, 20)}, Late: []Accept{acc(xClient, 40004, 32)}}
	if diff := cmp.Diff(want, f.Cur, xopts); diff != "" {
		t.Errorf("session (-want +got):\n%s", diff)
	}
	if f.Outside != 2 {
		t.Errorf("Outside = %d, want 2", f.Outside)
	}
	for range MaxLate + 10 {
		f.Add(RecordEvent{Event: EventAccept, Time: at(40), Peer: netip.AddrPortFrom(xOther, 1)})
	}
	if len(f.Cur.Late) != MaxLate || f.Outside != 2+11 {
		t.Errorf("after %d more late accepts: %d kept late, %d outside; want %d and %d", MaxLate+10, len(f.Cur.Late), f.Outside, MaxLate, 13)
	}
}

// TestRunOfAControlPortSession: a session read from a control port has no
// events of its retry port, so its mode's schedule places them; one whose
// server recorded them keeps the server's.
func TestRunOfAControlPortSession(t *testing.T) {
	restart := SessionParams{Mode: backoff.RetryMode{Kind: backoff.ModeRestart, Down: 3 * time.Second}}
	end := xt0.Add(10 * time.Second)
	recorded := xt0.Add(3100 * time.Millisecond)
	tests := []struct {
		name     string
		s        Session
		wantBack time.Time
	}{
		{name: "control port", s: Session{Start: xt0, EndTime: end, Params: restart, BackoffOnly: true}, wantBack: xt0.Add(3 * time.Second)},
		{name: "control port, ended first", s: Session{Start: xt0, EndTime: xt0.Add(2 * time.Second), Params: restart, BackoffOnly: true}},
		{name: "record", s: Session{Start: xt0, EndTime: end, Params: restart, Back: recorded}, wantBack: recorded},
		{name: "record, ended first", s: Session{Start: xt0, EndTime: end, Params: restart}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.s.Run(); !got.Back.Equal(tt.wantBack) || !got.Down.IsZero() || got.Mode != restart.Mode || !got.End.Equal(tt.s.EndTime) {
				t.Errorf("Run() = %+v; want back %v", got, tt.wantBack)
			}
		})
	}
}
