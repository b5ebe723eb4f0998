package session

// The record file
//
// `audit server --record FILE` appends one JSON object per line (JSON Lines,
// UTF-8, "\n" after every line, never a blank line) for every event of the
// retry port and of the sessions. Lines are written in the order the events
// happened; a file holds the events of one or more server runs, appended.
// Readers must ignore fields they do not know (new fields may be added);
// existing fields never change meaning.
//
// A line is complete with its newline. A writer that stopped in the middle
// of one (a full disk, a killed server) leaves a torn last line: readers
// ignore it, keep the events of every complete line before it, and warn
// (ReadRecord returns those events with an error wrapping ErrTornLine). A
// server that appends to a file ending in a torn line ends it with a
// newline first; ScanRecord skips such a torn line in the middle of a file
// with a warning, and reads a line an older writer appended onto one. No
// line is longer than MaxRecordLine (1 MiB) without its newline; a reader
// stops at a longer one, since what follows is not a record file's. One
// server at a time appends to a record: it holds a lock (flock) on it.
//
// Every line has:
//
//	"event"    "start" | "accept" | "down" | "restart" | "stop" | "expire"
//	"time"     RFC 3339 in UTC with exactly nine fractional digits,
//	           e.g. "2025-01-02T15:04:05.123456789Z": when the server saw the
//	           event (for "accept", the timestamp the verdict uses)
//	"session"  number of the session, counting from 1 in each server run;
//	           0 on an "accept" that arrived while no session was running
//
// "start" (a Start RPC began a session) adds:
//
//	"peer"     ip:port of the Start caller, e.g. "127.0.0.1:40112" or
//	           "[::1]:40112" (an IPv4-mapped IPv6 address is written as IPv4)
//	"retry_port" the server's retry port (absent in files written before
//	           it was recorded): a reader tells a record of another server
//	           from the capture's by it
//	"params"   {"max_reconnect_backoff_ms": int, as the client sent it (0 =
//	           default), "policy": the policy the session is verified against,
//	           {"initial_backoff_ms", "multiplier", "jitter", "max_backoff_ms",
//	           "min_connect_timeout_ms", "tolerance_ms"},
//	           "retry_mode": what the retry port does during the session
//	           (docs/spec.md §7.1), as --retry_mode spells it: "close",
//	           "refuse", "hang", "restart=5s", "settings-close" or "goaway";
//	           files written before modes existed have none, which reads
//	           as "close"}
//
// "accept" (a connection to the retry port was accepted; in close mode,
// and outside sessions, closed at once) adds:
//
//	"peer"     ip:port of the connecting client
//	"overflow" true when the session already held its maximum of attempts:
//	           the connection is in the file but not in the session's list,
//	           and the session's verdict is "too many attempts"; absent
//	           otherwise
//
// "restart" (retry modes restart=D and outage=SERVE,DOWN: the retry port,
// refusing since the session's start or since its "down", listens again)
// adds nothing; its "time" is when the port came back, and its "session"
// the running session. A session that ended first has none: its port came
// back at its end.
//
// "down" (retry mode outage=SERVE,DOWN only: the retry port, serving since
// the session's start, closes every connection and refuses) adds nothing;
// its "time" is when the port went down.
//
// "stop" (a Stop RPC ended the session) and "expire" (the session ended
// without Stop: its session timeout ran out, or the server shut down) add:
//
//	"peer"     ip:port of the Stop caller ("stop" only)
//	"end"      {
//	  "cause"          "stop" | "session timeout" | "server closed"
//	  "verdict"        "passed" | "failed" | "too few attempts" | "too many attempts"
//	  "passed"         bool: ReconnectInfo.passed as the server answered it
//	  "reason"         one line on why it did not pass; "" when it passed
//	  "attempts"       connections kept in the session's list (all peers)
//	  "dropped"        connections not kept because of the bound (0 normally)
//	  "verified_peer"  IP address whose connections were verified; "" when none
//	                   (files written before it had this name call it "chain",
//	                   and the next two "chain_reason" and "chain_attempts":
//	                   readers take either name)
//	  "verified_reason" "start peer": the address that called Start;
//	                   "sole peer": none came from the Start caller's address
//	                   and exactly one other address connected;
//	                   "none": neither, nothing was verified
//	  "verified_attempts" connections of the verified peer
//	  "backoff_ms"     [int, ...]: ReconnectInfo.backoff_ms, the verified
//	                   chain's intervals in whole ms; [] when fewer than two
//	  "foreign"        [{"addr": IP address, "attempts": int}, ...]: every
//	                   other address that connected during the session, in
//	                   order of first connection; [] when none. Foreign
//	                   connections are never part of the verdict.
//	}
//
// Example (one line each):
//
//	{"event":"start","time":"2025-01-02T15:04:05.000000000Z","session":1,"peer":"127.0.0.1:40112","params":{"max_reconnect_backoff_ms":0,"policy":{"initial_backoff_ms":1000,"multiplier":1.6,"jitter":0.2,"max_backoff_ms":120000,"min_connect_timeout_ms":20000,"tolerance_ms":100},"retry_mode":"close"}}
//	{"event":"accept","time":"2025-01-02T15:04:05.210000000Z","session":1,"peer":"127.0.0.1:40114"}
//	{"event":"accept","time":"2025-01-02T15:04:06.190000000Z","session":1,"peer":"127.0.0.1:40116"}
//	{"event":"stop","time":"2025-01-02T15:04:07.000000000Z","session":1,"peer":"127.0.0.1:40112","end":{"cause":"stop","verdict":"passed","passed":true,"reason":"","attempts":2,"dropped":0,"verified_peer":"127.0.0.1","verified_reason":"start peer","verified_attempts":2,"backoff_ms":[980],"foreign":[]}}

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/internal/text"
)

// EventKind names a line of the record file.
type EventKind string

const (
	EventStart  EventKind = "start"
	EventAccept EventKind = "accept"
	EventStop   EventKind = "stop"
	EventExpire EventKind = "expire"
)

// EventRestart is the line of retry modes restart=D and outage: the port
// listens again; EventDown that of outage: the port stops serving.
const (
	EventRestart EventKind = "restart"
	EventDown    EventKind = "down"
)

// End causes of a session.
const (
	CauseStop    = "stop"
	CauseTimeout = "session timeout"
	CauseClosed  = "server closed"
)

// VerifiedReason says why the verified peer is the one whose attempts a
// session verifies.
type VerifiedReason string

const (
	// VerifiedStartPeer: the chain of the address that called Start.
	VerifiedStartPeer VerifiedReason = "start peer"
	// VerifiedSolePeer: nothing came from the Start caller's address and
	// exactly one other address connected (e.g. Start over 127.0.0.1,
	// retries over ::1), so that address's chain was verified.
	VerifiedSolePeer VerifiedReason = "sole peer"
	// VerifiedNone: nothing came from the Start caller's address and several
	// other addresses did; no chain was verified.
	VerifiedNone VerifiedReason = "none"
)

// RecordEvent is one line of the record file (see the format above); the
// server hands the same values to its in-process observers.
type RecordEvent struct {
	Event   EventKind
	Time    time.Time
	Session int
	// Peer is the Start caller (start), the connecting client (accept), the
	// Stop caller (stop); zero on expire.
	Peer netip.AddrPort
	// RetryPort is the server's retry port, set on start (0 when unknown).
	RetryPort uint16
	// Params is set on start.
	Params *SessionParams
	// Overflow is set on an accept that the session could not keep.
	Overflow bool
	// End is set on stop and expire.
	End *SessionEnd
}

// SessionParams is what a session is verified against.
type SessionParams struct {
	// MaxReconnectBackoffMS is the Start request's field as sent (0 = default).
	MaxReconnectBackoffMS int32 `json:"max_reconnect_backoff_ms"`
	// Policy is ReferencePolicy(MaxReconnectBackoffMS), with the server's
	// MinConnectTimeout.
	Policy backoff.Policy `json:"policy"`
	// Mode is what the retry port did during the session (docs/spec.md
	// §7.1). A record written before modes existed has none: it reads as
	// the zero RetryMode, close.
	Mode backoff.RetryMode `json:"retry_mode"`
}

// SessionEnd is the outcome of a session.
type SessionEnd struct {
	Cause            string          `json:"cause"`
	Verdict          backoff.Verdict `json:"verdict"`
	Passed           bool            `json:"passed"`
	Reason           string          `json:"reason"`
	Attempts         int             `json:"attempts"`
	Dropped          int             `json:"dropped"`
	VerifiedPeer     netip.Addr      `json:"verified_peer"`
	VerifiedReason   VerifiedReason  `json:"verified_reason"`
	VerifiedAttempts int             `json:"verified_attempts"`
	BackoffMS        []int32         `json:"backoff_ms"`
	Foreign          []PeerCount     `json:"foreign"`
}

// PeerCount is the number of connections one address made.
type PeerCount struct {
	Addr     netip.Addr `json:"addr"`
	Attempts int        `json:"attempts"`
}

type recordJSON struct {
	Event     EventKind      `json:"event"`
	Time      string         `json:"time"`
	Session   int            `json:"session"`
	Peer      netip.AddrPort `json:"peer,omitzero"`
	RetryPort uint16         `json:"retry_port,omitempty"`
	Params    *SessionParams `json:"params,omitempty"`
	Overflow  bool           `json:"overflow,omitempty"`
	End       *SessionEnd    `json:"end,omitempty"`
}

// MarshalJSON writes the event as one record line (without the newline).
func (e RecordEvent) MarshalJSON() ([]byte, error) {
	j := recordJSON{
		Event:     e.Event,
		Time:      e.Time.UTC().Format(text.TimeLayout),
		Session:   e.Session,
		Peer:      netip.AddrPortFrom(e.Peer.Addr().Unmap(), e.Peer.Port()),
		RetryPort: e.RetryPort,
		Params:    e.Params,
		Overflow:  e.Overflow,
		End:       e.End,
	}
	if !e.Peer.IsValid() {
		j.Peer = netip.AddrPort{}
	}
	if end := e.End; end != nil {
		c := *end
		if c.BackoffMS == nil {
			c.BackoffMS = []int32{}
		}
		if c.Foreign == nil {
			c.Foreign = []PeerCount{}
		}
		j.End = &c
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads one record line and checks that it has the fields
// its kind requires.
func (e *RecordEvent) UnmarshalJSON(b []byte) error {
	var j recordJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	t, err := time.Parse(time.RFC3339Nano, j.Time)
	if err != nil {
		return fmt.Errorf("time %q: %w", j.Time, err)
	}
	// The writer writes UTC: an instant whose UTC year has no four-digit
	// RFC 3339 form could be read but never written back.
	if y := t.UTC().Year(); y < 0 || y > 9999 {
		return fmt.Errorf("time %q: year %d in UTC is outside 0000–9999", j.Time, y)
	}
	*e = RecordEvent{
		Event:     j.Event,
		Time:      t,
		Session:   j.Session,
		Peer:      j.Peer,
		RetryPort: j.RetryPort,
		Params:    j.Params,
		Overflow:  j.Overflow,
		End:       j.End,
	}
	return e.validate()
}

func (e *RecordEvent) validate() error {
	if e.Session < 0 {
		return fmt.Errorf("session %d: must not be negative", e.Session)
	}
	switch e.Event {
	case EventStart:
		if e.Params == nil {
			return errors.New("start event without params")
		}
		// The policy is what a reader verifies the session against.
		if err := e.Params.Policy.Validate(); err != nil {
			return fmt.Errorf("start event policy: %w", err)
		}
		if !e.Peer.IsValid() {
			return errors.New("start event without peer")
		}
	case EventAccept:
		if !e.Peer.IsValid() {
			return errors.New("accept event without peer")
		}
	case EventRestart, EventDown:
	case EventStop, EventExpire:
		if e.End == nil {
			return fmt.Errorf("%s event without end", e.Event)
		}
	default:
		return fmt.Errorf("unknown event %q", e.Event)
	}
	if e.Event != EventAccept && e.Session == 0 {
		return fmt.Errorf("%s event with session 0", e.Event)
	}
	return nil
}

// WriteRecordEvent appends e to w as one line.
func WriteRecordEvent(w io.Writer, e RecordEvent) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// MaxRecordLine is the longest line, in bytes without its newline, that
// ReadRecord accepts. The writer's longest line is a stop event listing a
// session's intervals and foreign peers: about 640 KB at most with the
// server's default bound of 10000 attempts. A longer line means the file is
// not a record file (or is damaged), and the bound keeps a reader pointed at
// an endless stream such as /dev/zero from holding it all.
const MaxRecordLine = 1 << 20

// ErrTornLine is wrapped by ReadRecord's error when the file's last line
// has no newline: the writer stopped in the middle of it (a full disk, a
// killed server). The events of the complete lines before it are returned
// with the error, so a caller may warn and go on.
var ErrTornLine = errors.New("torn last line (no newline at end of file)")

// recordBuf is ReadRecord's read size: lines are short, and reading far
// beyond the bound would defeat it.
const recordBuf = 64 << 10

// ReadRecord reads a whole record file. An error names the 1-based line
// that could not be read and the byte offset where it starts, as
// "read record line N at offset O: ..."; the events of the lines before it
// are returned with it. Reading stops at the first line longer than
// MaxRecordLine. A last line without its newline is ignored and reported
// with an error that wraps ErrTornLine.
func ReadRecord(r io.Reader) ([]RecordEvent, error) {
	return readRecord(r, MaxRecordLine, recordBuf)
}

// readRecord is ReadRecord with the line bound and read size as
// parameters, so tests reach both with small inputs.
func readRecord(r io.Reader, maxLine, bufSize int) ([]RecordEvent, error) {
	var events []RecordEvent
	err := scanRecord(r, maxLine, bufSize, func(e RecordEvent) error {
		events = append(events, e)
		return nil
	}, nil)
	return events, err
}

// UnmarshalJSON reads an end, taking the verified peer's members under
// their earlier names too ("chain", "chain_reason", "chain_attempts"), so
// that record files written before the rename still read.
func (e *SessionEnd) UnmarshalJSON(b []byte) error {
	type plain SessionEnd
	var j struct {
		plain
		Chain         *netip.Addr     `json:"chain"`
		ChainReason   *VerifiedReason `json:"chain_reason"`
		ChainAttempts *int            `json:"chain_attempts"`
	}
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*e = SessionEnd(j.plain)
	if j.Chain != nil && !e.VerifiedPeer.IsValid() {
		e.VerifiedPeer = *j.Chain
	}
	if j.ChainReason != nil && e.VerifiedReason == "" {
		e.VerifiedReason = *j.ChainReason
	}
	if j.ChainAttempts != nil && e.VerifiedAttempts == 0 {
		e.VerifiedAttempts = *j.ChainAttempts
	}
	return nil
}
