package session

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/backoff-audit/audit/backoff"
)

// Overlaps reports whether the session could hold attempts seen between
// first and last on port: its time span meets [first, last], and the
// record names port as the retry port or names none.
func (s ServerSession) Overlaps(port uint16, first, last time.Time) bool {
	if s.RetryPort != 0 && s.RetryPort != port {
		return false
	}
	return !s.Start.After(last) && (s.EndTime.IsZero() || !s.EndTime.Before(first))
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
