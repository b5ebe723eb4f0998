package auditrun

// The report of each session: the kernel's verdict (the `audit pcap`
// report of the session's chain), the server's, and the cross-check of the
// two lists, as sections of report.Report.

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/internal/text"
	"github.com/backoff-audit/audit/report"
	"github.com/backoff-audit/audit/session"
)

// liveSession is one session as the auditor judges it: a server's session
// (its Start, kept accepts and end, as session.Fold builds it) with what
// the auditor adds, or a sniff-only session, delimited by the SYNs alone.
type liveSession struct {
	*session.Session
	// server is false for a sniff-only session, delimited by --idle: only
	// Number, Start and Params of Session are set.
	server bool
	// offline is set for a session of a record file, cross-checked
	// against capture files.
	offline bool
	cause   string
	// maxAttempts caps the attempts the session keeps; dropped counts
	// the later ones, which make its verdict backoff.Overflow.
	maxAttempts, dropped int
	// captureEnd is when the capture stopped while the session was open
	// (a capture error), captureEndCause why.
	captureEnd      time.Time
	captureEndCause string
	// serverResult is the in-process server's own reading of the session,
	// when it kept every attempt (see session.CrossInput.Server).
	serverResult *backoff.Result
	// outsideDropped counts the attempts outside any session that were
	// forgotten before this report (see OutsideKeep).
	outsideDropped int
	// peer is the address the live lines treat as the session's own: the
	// Start caller's, or for a sniff-only session the first SYN's.
	peer netip.Addr
	seen map[netip.Addr]*peerProgress
}

// peerProgress is what the live lines know of one address's chain: the
// model applied as its attempts come, and its last attempt.
type peerProgress struct {
	judge backoff.Judge
	last  attempt.Attempt
}

// newServerSession is the auditor's session of s, a server's session.
func newServerSession(s *session.Session, maxAttempts int) *liveSession {
	return &liveSession{Session: s, server: true, maxAttempts: maxAttempts,
		peer: s.Peer.Addr().Unmap(), seen: map[netip.Addr]*peerProgress{}}
}

func newSniffSession(number int, p backoff.Policy, mode backoff.RetryMode, maxAttempts int, first attempt.Attempt) *liveSession {
	return &liveSession{Session: &session.Session{Number: number, Start: first.Time, Params: session.SessionParams{Policy: p, Mode: mode}},
		maxAttempts: maxAttempts, peer: first.Src.Addr().Unmap(), seen: map[netip.Addr]*peerProgress{}}
}

// runEnd is when the session's run ended, for the model's tail (a hung
// attempt the client never gave up on): the session's end, or where the
// capture stopped if that came first; zero when unknown.
func (s *liveSession) runEnd() time.Time {
	if !s.captureEnd.IsZero() && (s.EndTime.IsZero() || s.captureEnd.Before(s.EndTime)) {
		return s.captureEnd
	}
	return s.EndTime
}

// contains reports whether t falls in the session; a sniff-only session
// holds every attempt handed to it.
func (s *liveSession) contains(t time.Time) bool {
	return !s.server || session.InSession(t, s.Start, s.EndTime)
}

// attemptLine is the line printed as an attempt arrives: kernel time,
// peer, and the interval it ends as the model judges it (the mode, and the
// fate of the attempt before it as ending reads it).
func (s *liveSession) attemptLine(a attempt.Attempt, ending func(attempt.Attempt) backoff.Ending) string {
	peer := a.Src.Addr().Unmap()
	p, ok := s.seen[peer]
	if !ok {
		p = &peerProgress{judge: backoff.Judge{Policy: s.Params.Policy, Run: s.Run()}}
		s.seen[peer] = p
	}
	var prev backoff.Ending
	if p.judge.Attempts() > 0 {
		prev = ending(p.last)
	}
	iv, class, judged := p.judge.Next(a.Time, prev)
	line := fmt.Sprintf("attempt %s  %-22s #%-3d", a.Time.UTC().Format(text.TimeLayout), attempt.UnmapPort(a.Src), p.judge.Attempts())
	switch {
	case !judged:
		line += "  first attempt, no interval yet"
	case iv.Term == backoff.TermReset:
		line += fmt.Sprintf("  interval %-2d %10.3f ms  after a READY connection: the backoff began anew, not judged", iv.K, iv.MeasuredMS)
	default:
		line += fmt.Sprintf("  interval %-2d %10.3f ms  expected %8.1f ms [%.0f–%.0f]  %s", iv.K, iv.MeasuredMS, iv.ExpectedMS, iv.MinMS, iv.MaxMS, iv.Outcome)
		if iv.Term != "" {
			line += " (" + string(iv.Term) + ")"
		}
		if class == backoff.ClassUnseen {
			line += " (no answer to the attempt before was captured)"
		}
	}
	if peer != s.peer {
		line += "  (foreign peer: not in the verdict)"
	}
	p.last = a
	return line
}

// report judges one session. attempts are every attempt handed to the
// session, of every address and time; those outside it are explained by the
// cross-check, never judged. live is nil for a session of a record file.
func (s *liveSession) report(port uint16, attempts []attempt.Attempt, capInfo attempt.CaptureInfo, live *report.LiveInfo, captureStart time.Time) *report.SessionReport {
	var lost uint64
	if live != nil {
		lost = live.Lost()
	}
	if s.BackoffOnly && s.End != nil {
		s.ChoosePeerFromKernel(attempts)
	}
	input := s.Session.Input(captureStart, lost)
	input.Offline = s.offline
	input.CaptureEnd, input.CaptureEndCause = s.captureEnd, s.captureEndCause
	input.Server = s.serverResult
	inside := slices.Clone(attempts)
	if s.server {
		inside = session.SessionAttempts(input, attempts)
	}
	slices.SortFunc(inside, func(a, b attempt.Attempt) int { return a.Time.Compare(b.Time) })
	chain, reason := s.peer, session.VerifiedReason("")
	if s.server {
		chain = s.Session.VerifiedPeer()
		if s.End != nil {
			reason = s.End.VerifiedReason
		}
		if s.BackoffOnly && s.End == nil { // open: its Stop did not come
			var connected []netip.Addr
			for _, a := range inside {
				if p := a.Src.Addr().Unmap(); !slices.Contains(connected, p) {
					connected = append(connected, p)
				}
			}
			chain, reason = session.ChooseVerifiedPeer(s.Peer.Addr(), connected)
			input.VerifiedPeer = chain
		}
	} else if len(inside) > 0 {
		chain = inside[0].Src.Addr().Unmap()
	}
	byPeer := map[netip.Addr][]attempt.Attempt{}
	var order []netip.Addr
	for _, a := range inside {
		p := a.Src.Addr().Unmap()
		if byPeer[p] == nil {
			order = append(order, p)
		}
		byPeer[p] = append(byPeer[p], a)
	}
	// The verified peer's chain is verified once: its reading is the
	// report's peer and the cross-check's kernel side.
	var chains []attempt.Chain
	var results []backoff.Result
	if as := byPeer[chain]; len(as) > 0 {
		c := attempt.Chain{Peer: chain, Attempts: as}
		// The model of the session's mode (docs/spec.md §7.3); the run
		// ends with the session, or where the capture stopped.
		run := s.Run()
		run.End, run.Endings = s.runEnd(), c.Endings()
		res := backoff.VerifyRun(s.Params.Policy, c.Times(), run)
		input.Kernel = &res
		chains, results = append(chains, c), append(results, res)
	}
	r := &report.SessionReport{Head: report.Head{Port: port, Policy: s.Params.Policy, Mode: s.Params.Mode, Capture: capInfo},
		Peers: report.VerifiedPeers(chains, results)}
	r.Capture.Attempts, r.Capture.Retransmits = len(inside), 0
	for _, a := range inside {
		r.Capture.Retransmits += a.Retransmits
	}
	if s.dropped > 0 && chain.IsValid() {
		r.Peers.Overflowed(chain, len(inside), s.dropped, s.maxAttempts)
	}
	r.Summary = r.Peers.Summary()
	r.Live = live
	r.Foreign = []session.PeerCount{}
	for _, p := range order {
		if p != chain {
			r.Foreign = append(r.Foreign, session.PeerCount{Addr: p, Attempts: len(byPeer[p])})
		}
	}
	end := s.EndTime
	if !s.server && len(inside) > 0 {
		end = inside[len(inside)-1].Time
	}
	r.Session = report.SessionInfo{
		Number: s.Number, Start: s.Start.UTC().Format(text.TimeLayout), Cause: s.cause,
		MaxMS: s.Params.MaxReconnectBackoffMS, VerifiedReason: reason,
		MaxAttempts: s.maxAttempts, Dropped: s.dropped, OutsideDropped: s.outsideDropped,
	}
	if !end.IsZero() {
		r.Session.End = end.UTC().Format(text.TimeLayout)
	}
	if s.Peer.IsValid() {
		r.Session.StartPeer = s.Peer.String()
	}
	if chain.IsValid() {
		r.Session.VerifiedPeer = chain.String()
	}
	if !s.server {
		return r
	}
	r.Server = report.NewServerVerdict(s.End)
	cc := s.Session.CrossCheck(input, attempts)
	r.CrossCheck = &cc
	return r
}
