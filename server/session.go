package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"time"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/session"
)

// Session is the full record of a finished session.
type Session struct {
	ID int
	// Peer called Start.
	Peer    netip.AddrPort
	Params  session.SessionParams
	Started time.Time
	Ended   time.Time
	// Accepts are the connections the session kept, from every address, in
	// the order they arrived; at most Config.MaxAttempts (End.Dropped more
	// were only counted).
	// Accepts' times are the server's timestamps, taken after accept (and
	// after Config.BeforeStamp).
	Accepts []session.Accept
	// End is the outcome as written to the record: verdict, the chosen
	// chain and why, the foreign chains with their counts.
	End session.SessionEnd
	// Result is backoff.VerifyRun over the verified peer's chain
	// (End.VerifiedPeer) in the session's mode, with Endings and Back; its
	// Reference reading is Verdict Overflow when End.Dropped > 0.
	Result backoff.Result

	// The mode is Params.Mode; the fields below say what it did
	// (docs/spec.md §7.1).

	// Endings, in the modes that hold connections (hang, settings-close,
	// goaway, outage), is how each of the verified peer's kept attempts
	// ended, in the order of Times(End.VerifiedPeer):
	// backoff.FateAbandoned when the client closed the held connection,
	// Duration the time from the accept stamp to the server seeing the
	// close; backoff.FateClosed when the server closed it (the handshake
	// of settings-close and goaway done or failed), or closed it at once
	// because MaxHeld or MaxHandshakes connections were held;
	// backoff.FateOpen, in hang mode, when it was still held at the
	// session's end (Duration zero), and in the other modes no Fate, which
	// the mode reads. Ready says the connection reached READY (the
	// server's SETTINGS went out; in outage, its TLS handshake completed),
	// ReadyAfter when. ClientSent names, in hang mode, the first bytes the
	// client sent on it. The server sees no SYN, so Accepted is zero. Nil
	// in the other modes.
	Endings []backoff.Ending
	// Down, in outage mode, is when the retry port stopped serving; Back,
	// in restart and outage modes, when it listened again; zero when the
	// session ended first.
	Down, Back time.Time
	// NotHeld counts the connections the mode would have held (hang) or
	// handshaken (settings-close, goaway) but closed at once, because
	// Config.MaxHeld or Config.MaxHandshakes were reached.
	NotHeld int
	// Abandoned counts, in hang mode, the held connections the client
	// closed before the session ended (of every peer).
	Abandoned int
	// Handshakes counts, in the settings-close and goaway modes, the
	// connections that got the server's SETTINGS (TLS and the client's
	// preface complete); HandshakeErrors those that failed before it,
	// timed out or were cut by the session's end.
	Handshakes, HandshakeErrors int
}

// Times returns the accept times of one address's chain, in order.
func (s Session) Times(addr netip.Addr) []time.Time {
	var ts []time.Time
	for _, a := range s.Accepts {
		if a.Peer.Addr() == addr {
			ts = append(ts, a.Time)
		}
	}
	return ts
}

func (s *Session) clone() Session {
	c := *s
	c.Accepts = slices.Clone(s.Accepts)
	c.End.BackoffMS = slices.Clone(s.End.BackoffMS)
	c.End.Foreign = slices.Clone(s.End.Foreign)
	c.Result.Intervals = slices.Clone(s.Result.Intervals)
	c.Result.BackoffMS = slices.Clone(s.Result.BackoffMS)
	c.Endings = slices.Clone(s.Endings)
	return c
}

// running is the running session; it is guarded by Server.mu.
type running struct {
	Session
	// chains holds, per address, its kept attempts and the last one's time,
	// for the per-interval log; order is the order of first connection.
	chains map[netip.Addr]*chainState
	order  []netip.Addr
	done   chan struct{} // closed when the session ends
	// endings, in the modes that hold connections, is every kept
	// attempt's ending, by its index in Accepts.
	endings []backoff.Ending
}

// chainState is one address's chain as the log judges it, an interval a
// line as each connection arrives: the model (backoff.Judge) in the
// session's mode, as the verdict judges the chain.
type chainState struct {
	n int
	// last is the index in Accepts of the chain's last attempt.
	last  int
	judge backoff.Judge
}

// run is what the session's chains are judged in: the mode, and when its
// retry port went down and came back.
func (s *Session) run() backoff.Run {
	return backoff.Run{Mode: s.Params.Mode, Down: s.Down, Back: s.Back}
}

// accepted records one retry connection and logs its interval. It returns
// the connection's entry among the held ones when the session's mode keeps
// it open, nil when it is to be closed at once.
func (s *Server) accepted(peer netip.AddrPort) *heldConn {
	s.mu.Lock()
	// Stamped under the lock, so a Stop cannot slip between the stamp and
	// the choice of session and file an accept of session N under N+1.
	// Wall clock only: the record file carries wall time, and a reader that
	// re-verifies it must get the server's backoff_ms to the millisecond;
	// with the monotonic reading kept, an interval could differ by a few ns
	// and so, at a boundary, by a whole millisecond.
	t := s.now().Round(0)
	sess := s.cur
	e := session.RecordEvent{Event: session.EventAccept, Time: t, Peer: peer}
	var iv *backoff.Interval
	if sess != nil {
		e.Session = sess.ID
		// The server marks an accept past its maximum overflow; the fold
		// of the event (emitLocked) keeps the others in sess.Accepts.
		if len(sess.Accepts) >= s.cfg.MaxAttempts {
			sess.End.Dropped++
			e.Overflow = true
		} else {
			ch := sess.chains[peer.Addr()]
			if ch == nil {
				ch = &chainState{judge: backoff.Judge{Policy: sess.Params.Policy, Run: sess.run()}}
				sess.chains[peer.Addr()] = ch
				sess.order = append(sess.order, peer.Addr())
			}
			// How the chain's last attempt ended, where the mode holds
			// connections and so knows: as the verdict reads it.
			var prev backoff.Ending
			if ch.n > 0 && ch.last < len(sess.endings) {
				prev = sess.endings[ch.last]
			}
			if v, _, ok := ch.judge.Next(t, prev); ok {
				iv = &v
			}
			ch.n, ch.last = ch.n+1, len(sess.Accepts) // its index once kept
		}
	}
	var startAddr netip.Addr
	var dropped int
	var mode backoff.RetryMode
	var hc *heldConn
	firstFull := false // the first connection the bound on held ones closed at once
	kick := false
	if sess != nil {
		if !e.Overflow {
			var full bool
			hc, full = s.holdLocked(sess, peer, t)
			firstFull = full && sess.NotHeld == 1
		}
		startAddr, dropped, mode = sess.Peer.Addr(), sess.End.Dropped, sess.Params.Mode
	} else {
		s.outside++
		s.outsidePeer = peer
		if kick = s.outside == 1; kick {
			s.outsideSince = time.Now()
		}
	}
	s.emitLocked(e)

	if firstFull { // later ones are only counted
		s.log.Warn("connection closed at once: the retry port holds its maximum of connections",
			"session", e.Session, "peer", peer.String(), "retry_mode", s.mode.String(),
			"max_held", s.cfg.MaxHeld, "max_handshakes", s.cfg.MaxHandshakes)
	}
	switch {
	case sess == nil:
		if kick { // the first since the last summary: one is due
			select {
			case s.outsideKick <- struct{}{}:
			default:
			}
		}
	case e.Overflow:
		if dropped == 1 { // later ones are only counted: a flood must not flood the log
			s.log.Warn("connection not kept: the session holds its maximum of attempts; the verdict will be overflow",
				"session", e.Session, "peer", peer.String(), "max_attempts", s.cfg.MaxAttempts)
		}
	case iv != nil && !mode.ServerSeesAll():
		// The attempts the port refused are not in the list: which
		// interval of the chain this is, and so its window, is unknown.
		s.log.Info(iv.LogLine(), "session", e.Session, "peer", peer.String(),
			"judged", false, "from_start_addr", peer.Addr() == startAddr)
	case iv != nil:
		s.log.Info(iv.LogLine(), "session", e.Session, "peer", peer.String(),
			"ok", iv.OK, "from_start_addr", peer.Addr() == startAddr)
	default:
		s.log.Info("first connection", "session", e.Session, "peer", peer.String(),
			"from_start_addr", peer.Addr() == startAddr)
	}
	return hc
}

// logOutside summarises the connections outside any session: the first
// after a quiet spell starts a period of outsideEvery, at whose end one
// line gives their count. Close logs what is left.
func (s *Server) logOutside() {
	for {
		select {
		case <-s.outsideKick:
		case <-s.closed:
			return
		}
		t := time.NewTimer(s.outsideEvery)
		select {
		case <-t.C:
		case <-s.closed:
			t.Stop()
			return
		}
		s.flushOutside()
	}
}

// flushOutside logs the connections outside any session counted since the
// last summary, if any.
func (s *Server) flushOutside() {
	s.mu.Lock()
	n, last, since := s.outside, s.outsidePeer, s.outsideSince
	s.outside = 0
	s.mu.Unlock()
	if n > 0 {
		s.log.Info("connections outside any session", "count", n, "last_peer", last.String(),
			"over", time.Since(since).Round(time.Millisecond))
	}
}

// begin starts a session; the caller holds the semaphore token.
// When the server is closing it gives the token back and returns nil, and
// so it does with an error when the retry port would not stop listening.
func (s *Server) begin(peer netip.AddrPort, maxMS int32) (*running, error) {
	if s.mode.Is(backoff.ModeRefuse) || s.mode.Is(backoff.ModeRestart) {
		// The port stops listening before the session starts, under the
		// lock that orders accepts with sessions: what completed before
		// is taken first, as outside any session (docs/spec.md §7.1).
		s.acceptMu.Lock()
		defer s.acceptMu.Unlock()
		if err := s.portDownLocked(); err != nil {
			<-s.sem
			s.log.Error("retry port would not stop listening; session not started", "err", err)
			return nil, err
		}
	}
	s.mu.Lock()
	if s.closing {
		<-s.sem
		s.mu.Unlock()
		return nil, nil
	}
	s.lastID++
	policy := backoff.ReferencePolicy(maxMS)
	policy.MinConnectTimeout = s.cfg.MinConnectTimeout
	sess := &running{
		Session: Session{
			ID:      s.lastID,
			Peer:    peer,
			Params:  session.SessionParams{MaxReconnectBackoffMS: maxMS, Policy: policy, Mode: s.mode},
			Started: s.now(),
		},
		chains: make(map[netip.Addr]*chainState),
		done:   make(chan struct{}),
	}
	s.cur = sess
	s.wg.Add(1)
	go s.watch(sess)
	p := sess.Params
	s.emitLocked(session.RecordEvent{
		Event: session.EventStart, Time: sess.Started, Session: sess.ID, Peer: peer,
		RetryPort: uint16(s.RetryPort()), Params: &p,
	})
	s.log.Info("session started", "session", sess.ID, "peer", peer.String(),
		"max_reconnect_backoff_ms", maxMS, "policy", sess.Params.Policy.String(),
		"retry_mode", sess.Params.Mode.String())
	return sess, nil
}

// watch ends sess when its timeout runs out first; in restart mode it
// brings the retry port back Mode.Down after the session began.
func (s *Server) watch(sess *running) {
	defer s.wg.Done()
	t := time.NewTimer(s.cfg.SessionTimeout)
	defer t.Stop()
	var down, back <-chan time.Time
	switch m := sess.Params.Mode; m.Kind {
	case backoff.ModeRestart:
		bt := time.NewTimer(m.Down)
		defer bt.Stop()
		back = bt.C
	case backoff.ModeOutage:
		dt := time.NewTimer(m.Serve)
		defer dt.Stop()
		down = dt.C
	}
	for {
		select {
		case <-down:
			down = nil
			s.goDown(sess)
			bt := time.NewTimer(sess.Params.Mode.Down)
			defer bt.Stop()
			back = bt.C
			continue
		case <-back:
			back = nil
			s.comeBack(sess)
			continue
		case <-t.C:
			s.timeout(sess)
		case <-sess.done:
		case <-s.closed:
		}
		return
	}
}

// timeout ends sess, if it still runs, as timed out.
func (s *Server) timeout(sess *running) {
	// Connections complete before the timeout belong to the session.
	s.acceptMu.Lock()
	defer s.acceptMu.Unlock()
	s.drainQueueLocked()
	s.mu.Lock()
	if s.cur != sess {
		s.mu.Unlock()
		return
	}
	s.log.Warn("session timed out without Stop; ending it", "session", sess.ID,
		"peer", sess.Peer.String(), "session_timeout", s.cfg.SessionTimeout)
	s.endLocked(sess, session.CauseTimeout, netip.AddrPort{})
}

// goDown ends the serving phase of outage mode, if sess still runs: every
// connection the port holds is closed, the port refuses, and the down event
// records when (docs/spec.md §7.1).
func (s *Server) goDown(sess *running) {
	s.acceptMu.Lock()
	defer s.acceptMu.Unlock()
	s.mu.Lock()
	if s.cur != sess || s.closing {
		s.mu.Unlock()
		return
	}
	held := s.releaseHeldLocked()
	if err := s.portDownLocked(); err != nil {
		s.log.Error("retry port would not stop listening; it keeps serving", "session", sess.ID, "err", err)
	}
	sess.Down = s.now().Round(0) // wall clock, as the accepts it is compared with
	s.emitLocked(session.RecordEvent{Event: session.EventDown, Time: sess.Down, Session: sess.ID})
	for _, c := range held {
		c.Close()
	}
	s.log.Info("retry port down: its connections closed, SYNs refused", "session", sess.ID,
		"closed", len(held), "for", sess.Params.Mode.Down)
}

// comeBack makes the retry port listen again in restart and outage modes,
// if sess still runs, and records when (docs/spec.md §7.1).
func (s *Server) comeBack(sess *running) {
	s.acceptMu.Lock()
	defer s.acceptMu.Unlock()
	s.mu.Lock()
	if s.cur != sess || s.closing {
		s.mu.Unlock()
		return
	}
	if err := s.portUpLocked(); err != nil {
		s.mu.Unlock()
		s.log.Error("retry port would not listen again; it refuses until the session ends", "session", sess.ID, "err", err)
		return
	}
	sess.Back = s.now().Round(0) // wall clock, as the accepts it is compared with
	s.emitLocked(session.RecordEvent{Event: session.EventRestart, Time: sess.Back, Session: sess.ID})
	s.log.Info("retry port listening again", "session", sess.ID, "after", sess.Params.Mode.Down)
}

// endLocked verifies and ends the current session sess, frees the
// semaphore, and emits the stop or expire event; the connections the mode
// held are closed, and a retry port that stopped listening listens again.
// It is called with acceptMu and mu held and returns with mu released.
func (s *Server) endLocked(sess *running, cause string, stopPeer netip.AddrPort) Session {
	sess.Ended = s.now()
	sess.End.Cause = cause
	held := s.releaseHeldLocked() // what is still held is open at the end
	s.verdict(sess)
	s.cur = nil
	close(sess.done)
	if s.retryDown {
		// Outside a session the port accepts and closes (docs/spec.md §7.1).
		// Every caller holds acceptMu.
		if err := s.portUpLocked(); err != nil {
			s.log.Error("retry port would not listen again after the session", "session", sess.ID, "err", err)
		}
	}
	s.finishedMu.Lock()
	s.finished = append(s.finished, &sess.Session)
	if n := len(s.finished) - s.cfg.KeepSessions; n > 0 {
		s.finished = slices.Delete(s.finished, 0, n)
	}
	s.finishedMu.Unlock()
	<-s.sem
	out := sess.clone()
	e := session.RecordEvent{Event: session.EventExpire, Time: sess.Ended, Session: sess.ID, End: &out.End}
	if cause == session.CauseStop {
		e.Event = session.EventStop
		e.Peer = stopPeer
	}
	s.emitLocked(e)
	for _, c := range held {
		c.Close()
	}
	s.logEnd(out)
	return out
}

// verdict chooses the chain to verify (docs/spec.md §4: the Start caller's
// address, else the only address that connected) and verifies it.
func (s *Server) verdict(sess *running) {
	end := &sess.End
	end.Attempts = len(sess.Accepts)
	own := sess.Peer.Addr()
	end.VerifiedPeer, end.VerifiedReason = session.ChooseVerifiedPeer(own, sess.order)
	end.Foreign = []session.PeerCount{}
	for _, a := range sess.order {
		if a != end.VerifiedPeer {
			end.Foreign = append(end.Foreign, session.PeerCount{Addr: a, Attempts: sess.chains[a].n})
		}
	}
	var times []time.Time
	if end.VerifiedPeer.IsValid() {
		times = sess.Times(end.VerifiedPeer)
	}
	end.VerifiedAttempts = len(times)
	sess.Endings = nil
	if sess.endings != nil {
		for i, a := range sess.Accepts {
			if a.Peer.Addr() == end.VerifiedPeer {
				sess.Endings = append(sess.Endings, sess.endings[i])
			}
		}
	}
	// The model of docs/spec.md §7.3: the mode, and in hang mode each
	// attempt's ending, set each interval's window; a hung last attempt
	// the client never gave up on fails the chain. In close mode it is
	// backoff.Verify.
	run := sess.run()
	run.End, run.Endings = sess.Ended, sess.Endings
	r := backoff.VerifyRun(sess.Params.Policy, times, run)
	end.Reason = r.Reason()
	switch m := sess.Params.Mode; {
	case m.Is(backoff.ModeRefuse):
		r.Reference = backoff.Reading{Verdict: backoff.NotJudged}
		end.Reason = refuseReason
	case m.Is(backoff.ModeRestart):
		// The attempts refused while the port was down are not in the
		// list, so the first interval seen is interval k of a chain
		// whose k the server cannot know.
		r.Reference = backoff.Reading{Verdict: backoff.NotJudged}
		end.Reason = fmt.Sprintf("restart mode: the server accepted nothing for %v, so it saw only the %d attempts after the port came back; "+
			"audit live judges the whole chain from the kernel's SYNs", m.Down, len(times))
	case m.Is(backoff.ModeOutage):
		// The attempts refused while the port was down are not in the
		// list either.
		r.Reference = backoff.Reading{Verdict: backoff.NotJudged}
		end.Reason = fmt.Sprintf("outage mode: the server refused every connection for %v after serving for %v, so it saw only the %d attempts while it served; "+
			"audit live judges the whole chain from the kernel's SYNs", m.Down, m.Serve, len(times))
	}
	if end.VerifiedReason == session.VerifiedNone {
		end.Reason = fmt.Sprintf("no connection came from the Start caller's address %s and %d other addresses connected: no peer verified",
			own, len(sess.order))
	}
	if end.Dropped > 0 {
		r, end.Reason = session.Overflowed(r, end.Attempts, end.Dropped, s.cfg.MaxAttempts)
	}
	sess.Result = r
	end.Verdict = r.Reference.Verdict
	end.Passed = r.Passed()
	end.BackoffMS = r.BackoffMS
	if end.BackoffMS == nil {
		end.BackoffMS = []int32{}
	}
}

// refuseReason is the verdict's reason in refuse mode, where the server
// accepts nothing during the session and so cannot judge it.
const refuseReason = "refuse mode: the server accepts nothing during the session, so it saw no attempt; " +
	"audit live judges the attempts from the kernel's SYNs"

func (s *Server) logEnd(ss Session) {
	end := ss.End
	if end.VerifiedReason == session.VerifiedSolePeer {
		s.log.Info("no connection from the Start caller's address; verified the sole address that connected",
			"session", ss.ID, "start_peer", ss.Peer.String(), "verified_peer", end.VerifiedPeer.String())
	}
	for _, f := range end.Foreign {
		s.log.Warn("foreign chain: kept in the record, not in the verdict",
			"session", ss.ID, "addr", f.Addr.String(), "attempts", f.Attempts)
	}
	lvl := slog.LevelInfo
	if !end.Passed {
		lvl = slog.LevelWarn
	}
	chain := "" // no peer chosen (VerifiedNone); the zero Addr prints "invalid IP"
	if end.VerifiedPeer.IsValid() {
		chain = end.VerifiedPeer.String()
	}
	args := []any{"session", ss.ID, "cause", end.Cause,
		"verdict", string(end.Verdict), "passed", end.Passed, "reason", end.Reason,
		"verified_peer", chain, "verified_reason", string(end.VerifiedReason),
		"verified_attempts", end.VerifiedAttempts, "attempts", end.Attempts, "dropped", end.Dropped,
		"foreign_chains", len(end.Foreign), "backoff_ms", end.BackoffMS}
	switch m := ss.Params.Mode; m.Kind {
	case backoff.ModeHang:
		open := 0
		for _, e := range ss.Endings {
			if e.Fate == backoff.FateOpen {
				open++
			}
		}
		args = append(args, "retry_mode", m.String(), "abandoned", ss.Abandoned,
			"verified_open_at_end", open, "not_held", ss.NotHeld)
	case backoff.ModeRestart, backoff.ModeOutage:
		back, down := "never (the session ended first)", "never (the session ended first)"
		if !ss.Back.IsZero() {
			back = ss.Back.Sub(ss.Started).String()
		}
		if !ss.Down.IsZero() {
			down = ss.Down.Sub(ss.Started).String()
		}
		args = append(args, "retry_mode", m.String(), "port_back_after", back)
		if m.Kind == backoff.ModeOutage {
			args = append(args, "port_down_after", down, "served", ss.Handshakes)
		}
	case backoff.ModeSettingsClose, backoff.ModeGoaway:
		args = append(args, "retry_mode", m.String(), "handshakes", ss.Handshakes,
			"handshake_errors", ss.HandshakeErrors, "not_held", ss.NotHeld)
	case backoff.ModeRefuse:
		args = append(args, "retry_mode", m.String())
	}
	s.log.Log(context.Background(), lvl, "session ended", args...)
}
