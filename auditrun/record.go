package auditrun

import (
	"fmt"
	"time"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/internal/text"
	"github.com/backoff-audit/audit/report"
	"github.com/backoff-audit/audit/session"
)

// RecordOptions say how to read a capture with a server's record file.
type RecordOptions struct {
	// Path is the record file (`audit server --record`).
	Path string
	// Port is the retry port the capture's attempts are to.
	Port uint16
	// Policy, when set, judges every session instead of the policy of its
	// Start line.
	Policy *backoff.Policy
	// DefaultPolicy is the report's policy when Policy is nil: the one a
	// capture without a record would be judged by.
	DefaultPolicy backoff.Policy
	// Herd ends the report with the herd of every chain of the capture
	// (not only the sessions' verified peers).
	Herd bool
	// Mode is the retry mode of sessions whose server does not say it (a
	// control port's): given, or read from the fates.
	Mode backoff.RetryMode
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
func AuditRecord(opt RecordOptions, chains []attempt.Chain, capInfo attempt.CaptureInfo) (*report.RecordRun, error) {
	first, last := attemptSpan(chains)
	events, warnings, counted, err := readRecordFor(opt.Path, opt.Done, first, last)
	if err != nil {
		return nil, err
	}
	if note := countedNote(opt.Path, counted); note != "" {
		warnings = append(warnings, note)
	}
	return auditRecordEvents(opt, events, warnings, chains, capInfo)
}

// auditRecordEvents is AuditRecord on the events of a record already read,
// with the warnings of the read.
func auditRecordEvents(opt RecordOptions, events []session.RecordEvent, warnings []string, chains []attempt.Chain, capInfo attempt.CaptureInfo) (*report.RecordRun, error) {
	rec := &report.RecordInfo{Path: opt.Path, Policy: report.PolicyFromRecord,
		Outside: []report.OutsideSession{}, Warnings: append([]string{}, warnings...)}
	p := opt.DefaultPolicy
	if opt.Policy != nil {
		rec.Policy, p = report.PolicyFromCommandLine, *opt.Policy
	}
	return auditSessions(opt, session.Sessions(events), chains, capInfo, rec, p)
}

// attemptSpan is the span of the chains' attempts; zero times when there
// are none.
func attemptSpan(chains []attempt.Chain) (first, last time.Time) {
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
func auditSessions(opt RecordOptions, all []session.Session, chains []attempt.Chain, capInfo attempt.CaptureInfo,
	rec *report.RecordInfo, p backoff.Policy) (*report.RecordRun, error) {
	source := "record " + opt.Path
	if rec.ControlPort != 0 {
		source = fmt.Sprintf("control port %d", rec.ControlPort)
	}
	var attempts []attempt.Attempt
	for _, c := range chains {
		attempts = append(attempts, c.Attempts...)
	}
	if len(attempts) == 0 {
		return nil, fmt.Errorf("%s: the capture has no attempt to port %d to cross-check", source, opt.Port)
	}
	first, last := attemptSpan(chains)
	var sessions []session.Session
	for _, s := range all {
		if s.Overlaps(opt.Port, first, last) {
			sessions = append(sessions, s)
			continue
		}
		o := report.OutsideSession{Number: s.Number, Start: s.Start.UTC().Format(text.TimeLayout), RetryPort: s.RetryPort}
		if !s.EndTime.IsZero() {
			o.End = s.EndTime.UTC().Format(text.TimeLayout)
		}
		rec.Outside = append(rec.Outside, o)
	}
	if len(sessions) == 0 {
		return nil, fmt.Errorf("%s does not cover the capture: %s; the capture's attempts to port %d span %s – %s",
			source, recordSpan(all), opt.Port, first.UTC().Format(text.TimeLayout), last.UTC().Format(text.TimeLayout))
	}
	capInfo.Attempts, capInfo.Retransmits = len(attempts), 0
	for _, c := range chains {
		capInfo.Retransmits += c.Retransmits()
	}
	// The run's mode is its sessions', when they share one.
	mode := sessions[0].Params.Mode
	for _, s := range sessions {
		if s.Params.Mode != mode {
			mode = backoff.RetryMode{}
		}
	}
	rep := report.NewRecordRun(report.Head{Port: opt.Port, Policy: p, Mode: mode, Capture: capInfo}, *rec)
	split := session.SplitAttempts(sessions, attempts)
	for i, s := range sessions {
		if opt.Policy != nil {
			s.Params.Policy = *opt.Policy
		}
		ls := newServerSession(&s, 0)
		ls.offline, ls.cause = true, session.CauseNoEnd
		if s.End != nil {
			ls.cause = s.End.Cause
		}
		r := ls.report(opt.Port, split[i], attempt.CaptureInfo{}, nil, time.Time{})
		var chain attempt.Chain
		var res *backoff.Result
		if r.Peers.Len() > 0 {
			chain, res = r.Peers.Verified(0)
		}
		rep.AddSession(report.RecordSession{Session: r.Session, Policy: s.Params.Policy,
			Server: r.Server, CrossCheck: r.CrossCheck}, chain, res)
	}
	if opt.Herd {
		rep.SetHerd(report.NewPeers(p, backoff.Run{}, report.Chains(chains)).Herd(backoff.RetryMode{}))
	}
	return rep, nil
}

// recordSpan says what a record holds, for the error of a record that
// does not cover the capture.
func recordSpan(sessions []session.Session) string {
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
	endText := end.UTC().Format(text.TimeLayout)
	if open {
		endText = "(open)"
	}
	span := fmt.Sprintf("its %s span %s – %s", text.Plural(len(sessions), "session"),
		start.UTC().Format(text.TimeLayout), endText)
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
