// Package control reads the sessions of a ReconnectService from its control
// port: the Start and Stop calls that the h2 decoder finds on the port's
// plaintext HTTP/2 connections, turned into the events of a server's record
// (session.RecordEvent), so that a capture of any server, the C++
// reference or another library's, is cross-checked as a record file is
// (docs/spec.md §5.6). Start gives a session's caller, time and cap; Stop
// ends it with ReconnectInfo's passed and backoff_ms, the only list such a
// server gives.
package control

import (
	"cmp"
	"net/netip"
	"slices"
	"time"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/h2"
	"github.com/backoff-audit/audit/session"
)

// The method paths of docs/spec.md §2.2.
const (
	StartMethod = "/grpc.testing.ReconnectService/Start"
	StopMethod  = "/grpc.testing.ReconnectService/Stop"
)

// CallKind says which ReconnectService method a call is.
type CallKind uint8

const (
	Start CallKind = iota + 1
	Stop
)

// Call is one ReconnectService call of the control port.
type Call struct {
	Kind CallKind
	// Time is when the server's answer ended (its END_STREAM crossed the
	// interface): the server began (Start) or ended (Stop) the session a
	// moment before, and the client, which waits for Start's answer, made
	// no attempt in between. A call the capture saw no answer to has the
	// time of its request's HEADERS.
	Time time.Time
	// Caller is the client end of the call's connection.
	Caller netip.AddrPort
	// Status is the call's grpc-status by name, "" when the connection
	// ended (or the capture did) before it came.
	Status string
	// MaxMS is Start's max_reconnect_backoff_ms (0 = default).
	MaxMS int32
	// Info is Stop's decoded answer; nil when none was decoded.
	Info *h2.ReconnectInfo
}

// IsControl reports whether a decoded connection calls the
// ReconnectService: the mark of a control port.
func IsControl(r *h2.Report) bool {
	return slices.ContainsFunc(r.Streams, func(s h2.Stream) bool {
		return s.Method == StartMethod || s.Method == StopMethod
	})
}

// Calls returns the Start and Stop calls of the connections, in time
// order.
func Calls(conns []*h2.Report) []Call {
	var out []Call
	for _, r := range conns {
		for i := range r.Streams {
			if c, ok := CallOf(r, &r.Streams[i]); ok {
				out = append(out, c)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b Call) int { return cmp.Or(a.Time.Compare(b.Time), cmp.Compare(a.Kind, b.Kind)) })
	return out
}

// CallOf is the call one stream of the connection r makes; ok is false
// for a stream that calls neither Start nor Stop. A live reader takes
// each stream as it ends (flows.Options.StreamEnd).
func CallOf(r *h2.Report, s *h2.Stream) (c Call, ok bool) {
	c = Call{Time: s.ResponseEnd, Caller: r.Client, Status: s.GRPCStatus}
	if c.Time.IsZero() {
		c.Time = s.Start
	}
	switch s.Method {
	case StartMethod:
		c.Kind = Start
		if s.ReconnectParams != nil {
			c.MaxMS = s.ReconnectParams.MaxReconnectBackoffMs
		}
	case StopMethod:
		c.Kind = Stop
		c.Info = s.ReconnectInfo
	default:
		return Call{}, false
	}
	return c, true
}

// Sessions numbers the calls' sessions as a server numbers them, and gives
// them as its record would: a Start that did not fail begins session
// n+1; a Stop that answered a ReconnectInfo ends the session then open.
// A Start that failed, or a Stop that failed or whose answer was not
// decoded, ends nothing: with a server that refuses a Stop without a
// Start, nothing was open.
type Sessions struct {
	// Mode is the retry mode the server ran its sessions in: the control
	// port does not say it (ReconnectParams has no such field), so the
	// caller does (--retry_mode, or the mode read from the fates); the zero
	// Mode is the interop test's.
	Mode backoff.RetryMode
	// MinConnectTimeout is the connect timeout the sessions are judged
	// with, which the calls do not say either (--min_connect_timeout); 0
	// is the spec's.
	MinConnectTimeout time.Duration
	n                 int
	open              bool
	// policy is the open session's, for the reason of a failed Stop.
	policy backoff.Policy
}

// Event turns one call into the event of a record; ok is false for a call
// that neither begins nor ends a session.
func (s *Sessions) Event(c Call) (e session.RecordEvent, ok bool) {
	switch {
	case c.Kind == Start && (c.Status == "" || c.Status == "OK"):
		s.n++
		s.open, s.policy = true, backoff.ReferencePolicy(c.MaxMS)
		if s.MinConnectTimeout > 0 {
			s.policy.MinConnectTimeout = s.MinConnectTimeout
		}
		return session.RecordEvent{Event: session.EventStart, Time: c.Time, Session: s.n, Peer: c.Caller,
			Params: &session.SessionParams{MaxReconnectBackoffMS: c.MaxMS, Policy: s.policy, Mode: s.Mode}}, true
	case c.Kind == Stop && s.open && c.Status == "OK" && c.Info != nil:
		s.open = false
		return session.RecordEvent{Event: session.EventStop, Time: c.Time, Session: s.n, Peer: c.Caller, End: End(c.Info, s.policy, s.Mode)}, true
	}
	return session.RecordEvent{}, false
}

// Events is every call's event, in order, for a server that ran in mode.
func Events(calls []Call, mode backoff.RetryMode) []session.RecordEvent {
	s := Sessions{Mode: mode}
	var out []session.RecordEvent
	for _, c := range calls {
		if e, ok := s.Event(c); ok {
			out = append(out, e)
		}
	}
	return out
}

// ServerSessions is the sessions of the calls, as session.Sessions
// groups a record's, each marked BackoffOnly: its list is its Stop's
// backoff_ms.
func ServerSessions(calls []Call, mode backoff.RetryMode) []session.Session {
	ss := session.Sessions(Events(calls, mode))
	for i := range ss {
		ss[i].BackoffOnly = true
	}
	return ss
}

// End is the outcome of a session judged by p in mode as its Stop answered
// it. The answer names no verified peer: it is chosen from the kernel's
// attempts (session.Session.ChoosePeerFromKernel). A failing answer in a
// mode where the server cannot see every attempt is not judged: its list
// is not the chain (backoff.RetryMode.ServerSeesAll).
func End(info *h2.ReconnectInfo, p backoff.Policy, mode backoff.RetryMode) *session.SessionEnd {
	end := &session.SessionEnd{Cause: session.CauseStop, Passed: info.Passed, Verdict: backoff.Passed,
		BackoffMS: slices.Clone(info.BackoffMs), Foreign: []session.PeerCount{}}
	if end.BackoffMS == nil {
		end.BackoffMS = []int32{}
	}
	if len(end.BackoffMS) > 0 {
		end.Attempts = len(end.BackoffMS) + 1
		end.VerifiedAttempts = end.Attempts
	}
	switch {
	case info.Passed:
	case !mode.ServerSeesAll():
		end.Verdict, end.Reason = backoff.NotJudged, backoff.VerifyBackoff(p, end.BackoffMS, mode).Reason()
	case len(end.BackoffMS) == 0:
		end.Verdict, end.Reason = backoff.TooFew, "Stop answered passed=false with no interval"
	default:
		end.Verdict, end.Reason = backoff.Failed, "Stop answered passed=false"
		if r := backoff.VerifyBackoff(p, end.BackoffMS, mode).Reason(); r != "" {
			end.Reason += "; over its backoff_ms, " + r
		}
	}
	return end
}
