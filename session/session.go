package session

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
)

// Session is one session of a ReconnectService, as its events tell it: its
// Start, the connections the server kept while it ran, and how it ended.
// The server builds its own from the events it writes, and every reading
// of a record file, of a live server or of a control port builds its
// sessions the same way, with Fold.
type Session struct {
	Number int
	// Start is the time of the Start event; Peer its caller.
	Start  time.Time
	Peer   netip.AddrPort
	Params SessionParams
	// RetryPort is the server's retry port, 0 when the record does not
	// name it.
	RetryPort uint16
	// Accepts is the session's list, every address, in arrival order: the
	// connections the server kept. One it marked overflow (past its
	// maximum) is counted in End.Dropped, never kept, and so here.
	Accepts []Accept
	// End is the stop or expire outcome, nil while the session is open;
	// EndTime its time.
	End     *SessionEnd
	EndTime time.Time
	// Late holds the connections accepted after the session ended and
	// before the next one started (session 0 in the record), at most
	// MaxLate of them.
	Late []Accept
	// Down is when the retry port stopped serving (the down event of
	// ModeOutage), Back when it listened again (the restart event of
	// ModeRestart and ModeOutage); zero otherwise.
	Down, Back time.Time
	// BackoffOnly is set for a session read from the server's control
	// port: its list is only its Stop's End.BackoffMS, with no Accepts, and
	// its verified peer is chosen from the kernel's attempts
	// (ChoosePeerFromKernel).
	BackoffOnly bool
}

// Open reports whether the session has not ended.
func (s *Session) Open() bool { return s.End == nil }

// MaxLate bounds Session.Late: the connections of session 0 that follow a
// session's end are the ones its Stop raced, a handful; a server that goes
// on accepting outside any session must not grow a reader's memory.
const MaxLate = 1024

// Change says what Fold.Add did with an event.
type Change uint8

const (
	Ignored  Change = iota // an event of no session Fold follows (a stale number, a second end)
	Started                // a Start began Fold.Cur; the session before it, if any, is done
	Kept                   // an accept joined Fold.Cur's list
	Overflow               // an accept the server marked overflow: counted by the server, not kept
	Late                   // an accept of session 0 just after Fold.Cur ended
	Outside                // an accept of no session, counted in Fold.Outside
	Ended                  // a stop or expire ended Fold.Cur
	Back                   // a restarted retry port listened again
	Down                   // the retry port stopped serving (outage)
)

// Fold folds a server's events into its sessions, as the server kept them
// (docs/spec.md §4.1): a Start begins a session, an accept of the running
// session joins its list unless the server marked it overflow, an accept of
// session 0 after a session's end is late for it, a stop or expire ends it.
// The server applies it to the events it writes; `audit live` to the
// events of its in-process server, of a followed record file or of a
// control port; `audit pcap --record` to a record file. The zero Fold is
// ready.
type Fold struct {
	// Cur is the session the last Start began, open or ended; nil before
	// the first Start.
	Cur *Session
	// Outside counts the accepts that belonged to no session and were not
	// late for one.
	Outside int
}

// Add applies e and says what it changed.
func (f *Fold) Add(e RecordEvent) Change {
	cur := f.Cur
	switch e.Event {
	case EventStart:
		s := &Session{Number: e.Session, Start: e.Time, Peer: e.Peer, RetryPort: e.RetryPort}
		if e.Params != nil {
			s.Params = *e.Params
		}
		f.Cur = s
		return Started
	case EventAccept:
		a := Accept{Peer: e.Peer, Time: e.Time}
		switch {
		case cur != nil && cur.Open() && e.Session != 0 && e.Session == cur.Number && e.Overflow:
			return Overflow
		case cur != nil && cur.Open() && e.Session != 0 && e.Session == cur.Number:
			cur.Accepts = append(cur.Accepts, a)
			return Kept
		case cur != nil && !cur.Open() && e.Session == 0 && len(cur.Late) < MaxLate:
			cur.Late = append(cur.Late, a)
			return Late
		}
		f.Outside++
		return Outside
	case EventStop, EventExpire:
		if cur != nil && cur.Open() && e.Session == cur.Number {
			cur.End, cur.EndTime = e.End, e.Time
			return Ended
		}
	case EventRestart:
		if cur != nil && cur.Open() && e.Session == cur.Number {
			cur.Back = e.Time
			return Back
		}
	case EventDown:
		if cur != nil && cur.Open() && e.Session == cur.Number {
			cur.Down = e.Time
			return Down
		}
	}
	return Ignored
}

// Sessions folds events into every session they hold, in start order.
func Sessions(events []RecordEvent) []Session {
	var started []*Session
	var f Fold
	for _, e := range events {
		if f.Add(e) == Started {
			started = append(started, f.Cur)
		}
	}
	out := make([]Session, len(started))
	for i, s := range started {
		out[i] = *s
	}
	return out
}

// CrossCheck cross-checks the session's list against the kernel's
// attempts: its accepts by peer ip and port, or for a BackoffOnly session
// its backoff_ms interval by interval.
func (s *Session) CrossCheck(in CrossInput, kernel []attempt.Attempt) CrossCheck {
	if s.BackoffOnly {
		var b []int32
		if s.End != nil {
			b = s.End.BackoffMS
		}
		return NewBackoffCrossCheck(in, kernel, b)
	}
	return NewCrossCheck(in, kernel, s.Accepts)
}

// VerifiedPeer is the address whose attempts the server verifies: the one its
// outcome names or, for a session still open, the rule the server applies
// (docs/spec.md §4): the Start caller's address if anything came from it, else
// the only address that connected, else none.
func (s *Session) VerifiedPeer() netip.Addr {
	if s.End != nil {
		return s.End.VerifiedPeer
	}
	var connected []netip.Addr
	for _, a := range s.Accepts {
		if addr := a.Peer.Addr().Unmap(); !slices.Contains(connected, addr) {
			connected = append(connected, addr)
		}
	}
	if len(connected) == 0 {
		return netip.Addr{} // nothing to verify yet
	}
	chain, _ := ChooseVerifiedPeer(s.Peer.Addr(), connected)
	return chain
}

// Input describes the session for NewCrossCheck.
func (s *Session) Input(captureStart time.Time, lost uint64) CrossInput {
	return CrossInput{
		Policy: s.Params.Policy, VerifiedPeer: s.VerifiedPeer(),
		Start: s.Start, End: s.EndTime,
		CaptureStart: captureStart, Lost: lost,
		Late: s.Late,
		Run:  s.Run(),
	}
}

// Run is what the session's chains are judged in: its retry mode, its end,
// and when its retry port went down and came back. A session read from a
// control port has no events of its port: its mode's schedule places them
// (backoff.RetryMode.Schedule).
func (s *Session) Run() backoff.Run {
	r := backoff.Run{Mode: s.Params.Mode, End: s.EndTime, Down: s.Down, Back: s.Back}
	if s.BackoffOnly && r.Down.IsZero() && r.Back.IsZero() {
		r.Down, r.Back = s.Params.Mode.Schedule(s.Start, s.EndTime)
	}
	return r
}

// Overlaps reports whether the session could hold attempts seen between
// first and last on port: its time span meets [first, last], and the
// record names port as the retry port or names none.
func (s *Session) Overlaps(port uint16, first, last time.Time) bool {
	if s.RetryPort != 0 && s.RetryPort != port {
		return false
	}
	return !s.Start.After(last) && (s.EndTime.IsZero() || !s.EndTime.Before(first))
}

// SplitAttempts hands every attempt to one session: the session it falls
// in, else the next session to start after it, else the last session.
// sessions must be in start order; the result has one list per session.
func SplitAttempts(sessions []Session, attempts []attempt.Attempt) [][]attempt.Attempt {
	out := make([][]attempt.Attempt, len(sessions))
	if len(sessions) == 0 {
		return out
	}
	for _, a := range attempts {
		i := slices.IndexFunc(sessions, func(s Session) bool { return InSession(a.Time, s.Start, s.EndTime) })
		if i < 0 {
			i = slices.IndexFunc(sessions, func(s Session) bool { return s.Start.After(a.Time) })
		}
		if i < 0 {
			i = len(sessions) - 1
		}
		out[i] = append(out[i], a)
	}
	return out
}

// The rules of a session, which the server, the live auditor and the
// offline cross-check all apply (docs/spec.md §4).

// ChooseVerifiedPeer says whose attempts a session verifies: the address that
// called Start when anything came from it (or nothing came at all), else
// the only address that connected, else none. connected lists the
// addresses that connected, in order of first connection.
func ChooseVerifiedPeer(start netip.Addr, connected []netip.Addr) (netip.Addr, VerifiedReason) {
	start = start.Unmap()
	switch {
	case len(connected) == 0 || slices.Contains(connected, start):
		return start, VerifiedStartPeer
	case len(connected) == 1:
		return connected[0], VerifiedSolePeer
	}
	return netip.Addr{}, VerifiedNone
}

// InSession reports whether t falls in a session that started at start and
// ended at end (a zero end: still open), bounds included.
func InSession(t, start, end time.Time) bool {
	return !t.Before(start) && (end.IsZero() || !t.After(end))
}

// Overflowed gives r the verdict of a session that kept its maximum of
// attempts and only counted the rest: its list is incomplete, so no
// reading of it can pass. The reason says so.
func Overflowed(r backoff.Result, kept, dropped, maxAttempts int) (backoff.Result, string) {
	r.Reference = backoff.Reading{Verdict: backoff.Overflow}
	r.Strict = backoff.Reading{Verdict: backoff.Overflow}
	return r, fmt.Sprintf("too many attempts: %d kept, %d more dropped (max attempts %d)", kept, dropped, maxAttempts)
}

// Causes that end a session its server did not end, beside the record's
// (CauseStop, CauseTimeout, CauseClosed). The two errors are followed by
// ": " and the error.
const (
	CauseIdle         = "idle"              // no server side: no SYN for the idle time
	CauseInterrupted  = "interrupted"       // Ctrl-C, SIGTERM, or the next Start came first
	CauseCaptureError = "capture error"     // the capture failed (interface gone, disk full)
	CauseRecordError  = "record error"      // the followed record file could not be read
	CauseNoEnd        = "end of the record" // read offline: the record holds no stop or expire line for it
)
