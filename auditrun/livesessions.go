package auditrun

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/internal/text"
	"github.com/backoff-audit/audit/session"
)

// How the live auditor places what it captures and what the server tells
// it: each SYN into the running session or outside one, each server event
// into its sessions (session.Fold), and when a session's two lists are
// complete.

func (a *liveAuditor) addSYN(s attempt.SYN) {
	a.packets++
	a.syns++
	a.totalSYNs++
	if a.tr.Retransmit(s) {
		a.m.Retransmit(a.port)
		if !a.cfg.JSON {
			fmt.Fprintf(a.out, "retransmit %s  %-22s (kernel retransmission, not a backoff)\n",
				s.Time.UTC().Format(text.TimeLayout), attempt.UnmapPort(s.Src))
		}
		return
	}
	a.lastSYN = s.Time
	a.m.Attempt(a.port)
	at := attempt.Attempt{Time: s.Time.UTC(), Src: s.Src, Dst: s.Dst, Seq: s.Seq}
	if a.sess == nil && a.sniffOnly() {
		a.number++
		a.sess = newSniffSession(a.number, a.cfg.policy(), a.cfg.Server.Mode, a.cfg.maxAttempts(), at)
	}
	switch {
	case a.sess == nil || !a.sess.contains(at.Time):
		if a.outside >= 2*OutsideKeep {
			a.forgetOutside()
		}
		a.tr.AddAttempt(at)
		a.outside++
		if !a.cfg.JSON {
			fmt.Fprintf(a.out, "attempt %s  %-22s (outside any session)\n", at.Time.UTC().Format(text.TimeLayout), attempt.UnmapPort(at.Src))
		}
	case a.inside >= a.sess.maxAttempts:
		a.sess.dropped++
		if a.sess.dropped == 1 && !a.cfg.JSON { // later ones are only counted: a flood must not flood the output
			fmt.Fprintf(a.out, "attempt %s  %-22s not kept: session %d holds its maximum of %d attempts; "+
				"later ones are counted and the verdict will be %s\n",
				at.Time.UTC().Format(text.TimeLayout), attempt.UnmapPort(at.Src), a.sess.Number, a.sess.maxAttempts, backoff.Overflow)
		}
	default:
		a.tr.AddAttempt(at)
		a.inside++
		if !a.cfg.JSON {
			fmt.Fprintln(a.out, a.sess.attemptLine(at, a.tr.Ending))
		}
	}
}

// forgetOutside forgets the oldest attempts outside any session, keeping
// the newest OutsideKeep of them.
func (a *liveAuditor) forgetOutside() {
	held := a.tr.List()
	var in, out []attempt.Attempt
	for _, at := range held {
		if a.sess != nil && a.sess.contains(at.Time) {
			in = append(in, at)
		} else {
			out = append(out, at)
		}
	}
	slices.SortStableFunc(out, func(x, y attempt.Attempt) int { return x.Time.Compare(y.Time) })
	n := len(out) - OutsideKeep
	a.outsideDropped += n
	a.hold(append(in, out[n:]...))
}

// place sorts the attempts the tracker holds, held, into the open
// session and outside it, as a Start read after their SYNs does. The
// tracker is left as it is unless the session must drop some, past its
// maximum (hold).
func (a *liveAuditor) place(held []attempt.Attempt) {
	in := 0
	for _, at := range held {
		if a.sess.contains(at.Time) {
			in++
		}
	}
	if in > a.sess.maxAttempts {
		a.hold(held)
		return
	}
	a.inside, a.outside = in, len(held)-in
}

// hold keeps of what the auditor holds only attempts: those the open
// session (if any) contains, up to its maximum, and the others outside
// it. Each goes on from what its segments showed (attempt.Tracker.Retain).
func (a *liveAuditor) hold(attempts []attempt.Attempt) {
	type id struct {
		src, dst netip.AddrPort
		seq      uint32
	}
	held := make(map[id]bool, len(attempts))
	for _, at := range attempts {
		held[id{at.Src, at.Dst, at.Seq}] = true
	}
	a.inside, a.outside = 0, 0
	a.tr.Retain(func(at attempt.Attempt) bool {
		switch {
		case !held[id{at.Src, at.Dst, at.Seq}]:
			return false
		case a.sess == nil || !a.sess.contains(at.Time):
			a.outside++
		case a.inside < a.sess.maxAttempts:
			a.inside++
		default:
			a.sess.dropped++
			return false
		}
		return true
	})
}

func (a *liveAuditor) addEvent(e session.RecordEvent) {
	// Wall clock only, as the record file and the capture have it: an
	// in-process time.Now also carries a monotonic reading, which Sub
	// would prefer, and intervals would differ from the record's by ns.
	e.Time = e.Time.Round(0)
	if e.Event == session.EventStart {
		if a.ending {
			a.finish()
		}
		if a.sess != nil { // a start without the end of the last one
			a.sess.cause = session.CauseInterrupted
			a.finish()
		}
	}
	switch a.fold.Add(e) {
	case session.Started:
		a.sess = newServerSession(a.fold.Cur, a.cfg.maxAttempts())
		// Read from the control port, the server's list is Stop's
		// backoff_ms alone.
		a.sess.BackoffOnly = a.ctl != nil
		if !a.cfg.JSON {
			fmt.Fprintf(a.out, "session %d: Start from %s, max_reconnect_backoff_ms %d (%v)\n",
				e.Session, e.Peer, a.sess.Params.MaxReconnectBackoffMS, a.sess.Params.Policy)
		}
		// A record file is read some ms late: SYNs of the session may
		// have come before its Start. They join it, and get their lines.
		if a.outside > 0 {
			held := a.tr.List()
			slices.SortStableFunc(held, func(x, y attempt.Attempt) int { return x.Time.Compare(y.Time) })
			a.place(held)
			for _, at := range held {
				if a.sess.contains(at.Time) && !a.cfg.JSON {
					fmt.Fprintln(a.out, a.sess.attemptLine(at, a.tr.Ending)+"  (its SYN came before the Start was read)")
				}
			}
		}
	case session.Ended:
		if a.sess != nil && !a.ending {
			if a.capEndCause == "" { // a capture error names the end
				a.sess.cause = e.End.Cause
			}
			a.ending = true
		}
	}
}

// caughtUp reports whether the ending session's two lists are complete
// and its attempts' fates told: the capture has delivered a packet from
// after the session's end (it delivers them in time order), every accept
// has its SYN, every SYN inside the session its accept (in the session,
// or just after it ended), and every attempt inside the session has
// ended on the wire, as the server ends those it holds when the session
// ends. A report of a file, read later, reads the same fates. A refused
// SYN never gets an accept, a port may fall silent at the session's end,
// and a client may hold a connection on; the catchUp timer bounds the wait
// for them, and for the lists of a session that kept its maximum, which
// need not hold the same attempts.
func (a *liveAuditor) caughtUp() bool {
	s := a.sess
	if s.dropped > 0 || !a.lastPacket.After(s.EndTime) {
		return false
	}
	held := a.tr.List()
	for _, at := range held {
		if s.contains(at.Time) && at.Ending.Fate == backoff.FateOpen {
			return false
		}
	}
	if s.BackoffOnly {
		// Its list names no address: caught up once the kernel holds as
		// many attempts in the session as the list has.
		n := 0
		for _, at := range held {
			if s.contains(at.Time) {
				n++
			}
		}
		return s.End != nil && len(s.End.BackoffMS) > 0 && n > len(s.End.BackoffMS)
	}
	syns, accepts := map[netip.AddrPort]bool{}, map[netip.AddrPort]bool{}
	for _, at := range held {
		syns[attempt.UnmapPort(at.Src)] = true
	}
	for _, acc := range append(slices.Clone(s.Accepts), s.Late...) {
		accepts[attempt.UnmapPort(acc.Peer)] = true
	}
	for _, acc := range s.Accepts {
		if !syns[attempt.UnmapPort(acc.Peer)] {
			return false
		}
	}
	for _, at := range held {
		if s.contains(at.Time) && !accepts[attempt.UnmapPort(at.Src)] {
			return false
		}
	}
	return true
}
