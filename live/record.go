package live

import (
	"fmt"
	"time"

	"github.com/backoff-audit/audit/analyze"
)

// RecordOptions say how to read a capture with a server's record file.
type RecordOptions struct {
	// Path is the record file (`audit server --record`).
	Path string
	// Port is the retry port the capture's attempts are to.
	Port uint16
	// Policy, when set, judges every session instead of the policy of its
	// Start line.
	Policy *analyze.Policy
	// DefaultPolicy is the report's policy when Policy is nil: the one a
	// capture without a record would be judged by.
	DefaultPolicy analyze.Policy
	// Herd ends the report with the herd of every chain of the capture
	// (not only the sessions' verified peers).
	Herd bool
	// Done, when closed, stops the read of the record where it is.
	Done <-chan struct{}
}

// AuditRecord judges every session of a record file that overlaps the
// capture (its time span meets the attempts', and it names the capture's
// port as its retry port or names none) from the capture's attempts: each
// session's chain with the session's own policy (or opt.Policy), beside
// the server's verdict and the cross-check of the two lists, as
// `audit live` does live. chains are the capture's attempts to the port, by
// peer; capInfo describes the capture. A record that holds no session
// overlapping the capture is an error that names both spans. The record is
// read as readRecordFor reads it: what is kept is bounded, torn lines are
// warnings in the report's record section, and opt.Done stops the read.
func AuditRecord(opt RecordOptions, chains []analyze.Chain, capInfo analyze.CaptureInfo) (analyze.Report, error) {
	first, last := attemptSpan(chains)
	events, warnings, counted, err := readRecordFor(opt.Path, opt.Done, first, last)
	if err != nil {
		return analyze.Report{}, err
	}
	if note := countedNote(opt.Path, counted); note != "" {
		warnings = append(warnings, note)
	}
	return auditRecordEvents(opt, events, warnings, chains, capInfo)
}

// auditRecordEvents is AuditRecord on the events of a record already read,
// with the warnings of the read.
func auditRecordEvents(opt RecordOptions, events []analyze.RecordEvent, warnings []string, chains []analyze.Chain, capInfo analyze.CaptureInfo) (analyze.Report, error) {
	rec := &analyze.RecordInfo{Path: opt.Path, Policy: analyze.PolicyFromRecord,
		Outside: []analyze.OutsideSession{}, Warnings: append([]string{}, warnings...)}
	p := opt.DefaultPolicy
	if opt.Policy != nil {
		rec.Policy, p = analyze.PolicyFromCommandLine, *opt.Policy
	}
	return auditSessions(opt, analyze.ServerSessions(events), chains, capInfo, rec, p)
}

// attemptSpan is the span of the chains' attempts; zero times when there
// are none.
func attemptSpan(chains []analyze.Chain) (first, last time.Time) {
	for _, c := range chains {
		for _, a := range c.Attempts {
			if first.IsZero() || a.Time.Before(first) {
				first = a.Time
			}
			if a.Time.After(last) {
				last = a.Time
			}
		}
	}
	return first, last
}

// auditSessions judges each of a server's sessions that overlaps the
// capture, as AuditRecord describes, whatever they were read from: a
// record file, or the server's control port. rec is the report's record
// section, p its policy.
func auditSessions(opt RecordOptions, all []analyze.ServerSession, chains []analyze.Chain, capInfo analyze.CaptureInfo,
	rec *analyze.RecordInfo, p analyze.Policy) (analyze.Report, error) {
	source := "--record " + opt.Path
	if rec.ControlPort != 0 {
		source = fmt.Sprintf("control port %d", rec.ControlPort)
	}
	var attempts []analyze.Attempt
	for _, c := range chains {
		attempts = append(attempts, c.Attempts...)
	}
	if len(attempts) == 0 {
		return analyze.Report{}, fmt.Errorf("%s: the capture has no attempt to port %d to cross-check", source, opt.Port)
	}
	first, last := attemptSpan(chains)
	var sessions []analyze.ServerSession
	for _, s := range all {
		if s.Overlaps(opt.Port, first, last) {
			sessions = append(sessions, s)
			continue
		}
		o := analyze.OutsideSession{Number: s.Number, Start: s.Start.UTC().Format(analyze.TimeLayout), RetryPort: s.RetryPort}
		if !s.EndTime.IsZero() {
			o.End = s.EndTime.UTC().Format(analyze.TimeLayout)
		}
		rec.Outside = append(rec.Outside, o)
	}
	if len(sessions) == 0 {
		return analyze.Report{}, fmt.Errorf("%s does not cover the capture: %s; the capture's attempts to port %d span %s – %s",
			source, recordSpan(all), opt.Port, first.UTC().Format(analyze.TimeLayout), last.UTC().Format(analyze.TimeLayout))
	}
	capInfo.Attempts, capInfo.Retransmits = len(attempts), 0
	for _, c := range chains {
		capInfo.Retransmits += c.Retransmits()
	}
	rep := analyze.Report{Port: opt.Port, Policy: p, Capture: capInfo, Peers: []analyze.PeerReport{}, Record: rec}
	split := analyze.SplitAttempts(sessions, attempts)
	for i, s := range sessions {
		if opt.Policy != nil {
			s.Params.Policy = *opt.Policy
		}
		ls := &liveSession{number: s.Number, server: true, offline: true, start: s.Start, startPeer: s.Peer,
			maxMS: s.Params.MaxReconnectBackoffMS, policy: s.Params.Policy, accepts: s.Accepts,
			end: s.End, endTime: s.EndTime, late: s.Late, cause: analyze.CauseNoEnd, peer: s.Peer.Addr().Unmap(),
			mode: s.Params.Mode, back: s.Back, backoffOnly: s.BackoffOnly}
		if s.End != nil {
			ls.cause = s.End.Cause
		}
		r := ls.report(opt.Port, split[i], analyze.CaptureInfo{}, nil, time.Time{})
		var chain *analyze.PeerReport
		if len(r.Peers) > 0 {
			chain = &r.Peers[0]
		}
		rep.AddRecordSession(analyze.RecordSession{Session: *r.Session, Policy: s.Params.Policy,
			Server: r.Server, CrossCheck: r.CrossCheck}, chain)
	}
	if opt.Herd {
		h := analyze.NewReport(opt.Port, p, chains, capInfo).Herd()
		rep.HerdReading = &h
	}
	return rep, nil
}

// recordSpan says what a record holds, for the error of a record that
// does not cover the capture.
func recordSpan(sessions []analyze.ServerSession) string {
	if len(sessions) == 0 {
		return "the record holds no session"
	}
	start, end, open := sessions[0].Start, sessions[0].EndTime, false
	ports := map[uint16]bool{}
	for _, s := range sessions {
		start, end = minTime(start, s.Start), maxTime(end, s.EndTime)
		open = open || s.EndTime.IsZero()
		ports[s.RetryPort] = true
	}
	endText := end.UTC().Format(analyze.TimeLayout)
	if open {
		endText = "(open)"
	}
	span := fmt.Sprintf("its %s span %s – %s", analyze.Plural(len(sessions), "session"),
		start.UTC().Format(analyze.TimeLayout), endText)
	if len(ports) == 1 && !ports[0] {
		for p := range ports {
			span += fmt.Sprintf(" on retry port %d", p)
		}
	}
	return span
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
