package auditrun

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/internal/infile"
	"github.com/backoff-audit/audit/session"
)

// maxRecordKept bounds the events kept from a record file: those of the
// sessions that may overlap the capture (every line of each), the accepts
// outside sessions within the capture's span, and the start and end lines
// of the other sessions. A server with its default bound of 10 000
// attempts a session writes far fewer for any capture; a record that
// keeps more is not read further.
const maxRecordKept = 1 << 20

// readRecordFor reads a record file for a capture whose attempts span
// first–last (the span of every port's attempts: sessions of another port
// are named later, as outside). It keeps what the audit of those attempts
// can use and counts the rest: accepts outside any session and outside
// the span, and the accepts and restarts of sessions that lie wholly
// outside it. Torn lines are skipped with a warning. When done closes
// (Ctrl-C), the read stops where it is, at once even on a FIFO, and what
// was read is used; a warning says so. warnings are for the report's
// record section; counted says how many events were counted, not kept
// (countedNote words it for that section).
func readRecordFor(path string, done <-chan struct{}, first, last time.Time) (events []session.RecordEvent, warnings []string, counted int, err error) {
	f, err := infile.Open(path, done)
	if errors.Is(err, infile.ErrInterrupted) {
		return nil, []string{fmt.Sprintf("--record %s: read interrupted before its first line: no session read", path)}, 0, nil
	}
	if err != nil {
		return nil, nil, 0, fmt.Errorf("--record: %w", err)
	}
	defer f.Close()
	kf := &recordFilter{first: first, last: last, pending: map[int]*pendingSession{}}
	err = session.ScanRecord(infile.NewReader(f, done), kf.add, func(w string) {
		warnings = append(warnings, fmt.Sprintf("--record %s: %s", path, w))
	})
	if errors.Is(err, infile.ErrInterrupted) {
		warnings = append(warnings, fmt.Sprintf("--record %s: %v: what follows was not read", path, err))
		err = nil
	}
	if err != nil {
		return nil, warnings, 0, fmt.Errorf("--record %s: %w", path, err)
	}
	kf.flush()
	return kf.out, warnings, kf.dropped, nil
}

// countedNote says, for the report's record section, what readRecordFor
// counted and did not keep; "" when nothing.
func countedNote(path string, counted int) string {
	if counted == 0 {
		return ""
	}
	return fmt.Sprintf("--record %s: %d events counted, not kept: accepts outside any session and outside the capture's span, and the accepts of sessions outside it",
		path, counted)
}

// recordFilter keeps, of a record's events in file order, what
// readRecordFor describes. A session's events wait in pending until its
// end tells whether it overlaps the span: one server's sessions run one
// at a time, so they are kept in the file's order.
type recordFilter struct {
	first, last time.Time
	out         []session.RecordEvent
	pending     map[int]*pendingSession // by session number
	held        int                     // events in pending
	dropped     int
}

type pendingSession struct {
	events []session.RecordEvent
	// after: the session starts after the span, so nothing of it but
	// its start and end is kept.
	after bool
}

func (kf *recordFilter) add(e session.RecordEvent) error {
	p := kf.pending[e.Session]
	switch {
	case e.Event == session.EventStart:
		kf.end(e.Session, false) // a server run that ended without closing it
		kf.pending[e.Session] = &pendingSession{events: []session.RecordEvent{e}, after: e.Time.After(kf.last)}
		kf.held++
	case p == nil:
		// Outside any session: an accept (session 0, or of no session
		// started) matters only within the span.
		if e.Event != session.EventAccept || e.Time.Before(kf.first) || e.Time.After(kf.last) {
			kf.dropped++
			return nil
		}
		kf.out = append(kf.out, e)
	case e.Event == session.EventStop || e.Event == session.EventExpire:
		p.events = append(p.events, e)
		kf.held++
		start := p.events[0].Time
		kf.end(e.Session, start.After(kf.last) || e.Time.Before(kf.first))
	case p.after:
		kf.dropped++
		return nil
	default:
		p.events = append(p.events, e)
		kf.held++
	}
	if n := len(kf.out) + kf.held; n > maxRecordKept {
		return fmt.Errorf("more than %d events of sessions that may overlap the capture: not a record of it", maxRecordKept)
	}
	return nil
}

// end keeps a pending session: all of it, or, when it lies outside the
// span, only its start and end lines.
func (kf *recordFilter) end(n int, outside bool) {
	p := kf.pending[n]
	if p == nil {
		return
	}
	delete(kf.pending, n)
	kf.held -= len(p.events)
	if !outside && !p.after {
		kf.out = append(kf.out, p.events...)
		return
	}
	for _, e := range p.events {
		if e.Event == session.EventStart || e.Event == session.EventStop || e.Event == session.EventExpire {
			kf.out = append(kf.out, e)
		} else {
			kf.dropped++
		}
	}
}

// flush keeps the sessions still open at the end of the file, in the
// order they started.
func (kf *recordFilter) flush() {
	open := slices.Collect(maps.Keys(kf.pending))
	slices.SortFunc(open, func(a, b int) int { return kf.pending[a].events[0].Time.Compare(kf.pending[b].events[0].Time) })
	for _, n := range open {
		kf.end(n, false)
	}
}

// captureSpan is the span of the capture's attempts to every port.
func captureSpan(pt *attempt.PortTracker) (first, last time.Time) {
	for _, pc := range pt.Ports() {
		f, l := attemptSpan(pt.Tracker(pc.Port).Peers())
		if first.IsZero() || f.Before(first) {
			first = f
		}
		if l.After(last) {
			last = l
		}
	}
	return first, last
}

// recordRetryPort is the retry port the record's start lines name, when
// they name one the capture has SYNs to, else 0 (the capture's own rule
// then chooses: RetryPort). A capture may hold other programs' SYNs; the
// record says which port its server's was.
func recordRetryPort(events []session.RecordEvent, pt *attempt.PortTracker) uint16 {
	var named []uint16
	for _, e := range events {
		if e.Event == session.EventStart && e.RetryPort != 0 && !slices.Contains(named, e.RetryPort) && pt.Tracker(e.RetryPort).SYNs() > 0 {
			named = append(named, e.RetryPort)
		}
	}
	if len(named) == 1 {
		return named[0]
	}
	return 0
}
