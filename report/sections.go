package report

import (
	"bufio"
	"cmp"
	"fmt"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/internal/quote"
	"github.com/backoff-audit/audit/internal/text"
	"github.com/backoff-audit/audit/session"
)

// Sections are what a reading beyond one capture's SYNs adds to a Report:
// the session it judges (a live run's, or one of a record file's), the live
// capture's counters, the addresses outside the verdict, the server's own
// verdict, the cross-check of the server's list against the SYNs, and, for
// a capture read with a record file, the record and its sessions. Each is
// absent (nil) when the reading has none; Report.WriteText and Report's
// JSON write them after the summary, in this order.

// SessionInfo is the session a report judges.
//
// Cause is "stop", "session timeout", "server closed", "idle" (a session
// delimited by the SYNs alone ended by silence), "interrupted" (Ctrl-C,
// SIGTERM, or the next Start came first), "end of the record" (a
// session of a record file read offline whose end the file lacks), or
// "capture error: …" or "record error: …". Dropped counts the attempts past MaxAttempts, counted
// and not kept (the verdict is then "too many attempts"); OutsideDropped
// those outside any session forgotten since the last report.
type SessionInfo struct {
	Number    int    `json:"number"`
	Start     string `json:"start"`
	End       string `json:"end"`
	Cause     string `json:"cause"`
	StartPeer string `json:"start_peer,omitempty"`
	// MaxMS is the Start's max_reconnect_backoff_ms (0 = default).
	MaxMS int32 `json:"max_reconnect_backoff_ms"`
	// VerifiedPeer is the address whose attempts the verdict judges, "" when
	// none; VerifiedReason why it was chosen.
	VerifiedPeer   string                 `json:"verified_peer"`
	VerifiedReason session.VerifiedReason `json:"verified_reason,omitempty"`
	// MaxAttempts is absent from the sessions of a record file, read
	// offline.
	MaxAttempts    int `json:"max_attempts,omitempty"`
	Dropped        int `json:"dropped"`
	OutsideDropped int `json:"outside_dropped"`
}

// LiveInfo is the live capture a session was judged from.
type LiveInfo struct {
	Iface      string `json:"iface"`
	Timestamps string `json:"timestamps"`
	attempt.LiveStats
	Write string `json:"write,omitempty"`
	// NotTaken counts the packets the capture read that the auditor, too
	// far behind, did not take in.
	NotTaken uint64 `json:"not_taken"`
	// Loopback says the counters count each SYN twice.
	Loopback bool `json:"-"`
	// Control is the capture of the server's control port, when sessions
	// follow its calls (audit live --attach --control_port); its losses
	// are Start and Stop calls missed, not SYNs, so Lost leaves them out.
	Control *ControlCapture `json:"control,omitempty"`
}

// ControlCapture is the live capture of a server's control port, on a
// libpcap handle of its own that keeps whole packets.
type ControlCapture struct {
	Port uint16 `json:"port"`
	attempt.LiveStats
	// MidStream counts the control connections the capture joined
	// mid-stream: their calls could not be decoded.
	MidStream int `json:"joined_mid_stream"`
}

// Lost is every packet the report is known to lack.
func (l LiveInfo) Lost() uint64 { return l.LiveStats.Lost() + l.NotTaken }

// StatsLine is libpcap's counters in a sentence.
func (l LiveInfo) StatsLine() string {
	line := fmt.Sprintf("libpcap on %s since the start: %d packets received, %d dropped by the kernel, %d dropped by the interface",
		l.Iface, l.Received, l.Dropped, l.IfDropped)
	if l.Loopback {
		line += " (a loopback interface: two packets per SYN, leaving and arriving)"
	}
	if l.NotTaken > 0 {
		line += fmt.Sprintf("; %d captured packets not taken in by the auditor", l.NotTaken)
	}
	if c := l.Control; c != nil {
		line += fmt.Sprintf("; control port %d (whole packets): %d received, %d dropped by the kernel, %d dropped by the interface",
			c.Port, c.Received, c.Dropped, c.IfDropped)
		if c.MidStream > 0 {
			line += fmt.Sprintf(", %s joined mid-stream, whose calls could not be decoded", text.Plural(c.MidStream, "connection"))
		}
	}
	return line
}

// ServerVerdict is what the server's Stop answered for the session.
type ServerVerdict struct {
	Passed    bool            `json:"passed"`
	BackoffMS []int32         `json:"backoff_ms"`
	Verdict   backoff.Verdict `json:"verdict"`
	Reason    string          `json:"reason"`
}

// NewServerVerdict is the verdict of a session's end.
func NewServerVerdict(end *session.SessionEnd) *ServerVerdict {
	if end == nil {
		return nil
	}
	v := &ServerVerdict{Passed: end.Passed, BackoffMS: end.BackoffMS, Verdict: end.Verdict, Reason: end.Reason}
	if v.BackoffMS == nil {
		v.BackoffMS = []int32{}
	}
	return v
}

// RecordInfo says which record file a capture was read with, and what of
// it was judged.
type RecordInfo struct {
	Path string `json:"path"`
	// ControlPort is set when the sessions were read from the server's
	// control port in the capture (its Start and Stop calls) instead of
	// a record file; Path is then "".
	ControlPort uint16 `json:"control_port,omitempty"`
	// Policy is PolicyFromRecord or PolicyFromCommandLine.
	Policy string `json:"policy"`
	// Outside lists the sessions that do not overlap the capture (another
	// time or another retry port): not judged.
	Outside  []OutsideSession `json:"outside"`
	Warnings []string         `json:"warnings"`
}

// OutsideSession is a session of a record file that the capture does not
// cover.
type OutsideSession struct {
	Number    int    `json:"number"`
	Start     string `json:"start"`
	End       string `json:"end"`
	RetryPort uint16 `json:"retry_port,omitempty"`
}

// RecordSession is one session of a record file, judged from the capture:
// the session, the server's verdict, and the cross-check. The kernel's
// verdict is its chain's peer in the report's peers.
type RecordSession struct {
	Session SessionInfo `json:"session"`
	// Policy is what the session was judged against.
	Policy     backoff.Policy      `json:"policy"`
	Server     *ServerVerdict      `json:"server,omitempty"`
	CrossCheck *session.CrossCheck `json:"crosscheck"`
	// peer is the index of the session's chain in the report's peers, -1
	// when the capture holds none of its attempts.
	peer int
}

// Where a report read with a record file took each session's policy.
const (
	PolicyFromRecord      = "record"
	PolicyFromCommandLine = "command line"
)

// sessionFailure says what failed in session n, or "" when it passed.
func sessionFailure(n int, chain *PeerReport, hasServer bool, sv *ServerVerdict) string {
	kernelFailed, kernelReason := true, "no attempt of the session's chain was seen"
	if chain != nil {
		kernelFailed, kernelReason = !chain.Passed, chain.Reason
	}
	if sv != nil && sv.Verdict == backoff.NotJudged {
		hasServer = false // the kernel's verdict is the session's
	}
	serverFailed := hasServer && (sv == nil || !sv.Passed)
	serverReason := "the session did not end with Stop, so the server gave no verdict"
	if sv != nil {
		serverReason = quote.Text(sv.Reason) // from the record: it reaches a terminal
	}
	switch {
	case kernelFailed && serverFailed:
		return fmt.Sprintf("session %d: kernel and server verdicts failed: %s", n, kernelReason)
	case kernelFailed && hasServer:
		return fmt.Sprintf("session %d: kernel verdict failed, server passed: %s", n, kernelReason)
	case kernelFailed:
		return fmt.Sprintf("session %d: kernel verdict failed: %s", n, kernelReason)
	case serverFailed:
		return fmt.Sprintf("session %d: server verdict failed, kernel passed: %s", n, serverReason)
	}
	return ""
}

// writeSessionHeading writes the heading of a session's section.
func writeSessionHeading(bw *bufio.Writer, s *SessionInfo) {
	fmt.Fprintf(bw, "\n=== session %d: %s → %s, ended by %s", s.Number, s.Start, cmp.Or(s.End, "(open)"), quote.Text(s.Cause))
	if s.StartPeer != "" {
		fmt.Fprintf(bw, "; Start from %s, max_reconnect_backoff_ms %d", s.StartPeer, s.MaxMS)
	}
	bw.WriteString("\n")
}

// writeServerText writes what the server's Stop answered.
func writeServerText(bw *bufio.Writer, sv *ServerVerdict) {
	if sv == nil {
		fmt.Fprintln(bw, "server verdict: none, the session did not end with Stop")
		return
	}
	// The verdict and its reason are the record's (or the server's): quoted.
	fmt.Fprintf(bw, "server verdict (Stop): passed=%v (%s) backoff_ms=%v", sv.Passed, quote.Text(string(sv.Verdict)), sv.BackoffMS)
	if sv.Reason != "" {
		fmt.Fprintf(bw, ": %s", quote.Text(sv.Reason))
	}
	fmt.Fprintln(bw)
}
