package analyze

import (
	"bufio"
	"cmp"
	"fmt"

	"github.com/backoff-audit/audit/internal/quote"
)

// Sections are what a reading beyond one capture's SYNs adds to a Report:
// the session it judges (a live run's, or one of a record file's), the live
// capture's counters, the addresses outside the verdict, the server's own
// verdict, the cross-check of the server's list against the SYNs, and, for
// a capture read with a record file, the record and its sessions. Each is
// absent (nil) when the reading has none; Report.WriteText and Report's
// JSON write them after the summary, in this order.

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
	VerifiedPeer   string         `json:"verified_peer"`
	VerifiedReason VerifiedReason `json:"verified_reason,omitempty"`
	// MaxAttempts is absent from the sessions of a record file, read
	// offline.
	MaxAttempts    int `json:"max_attempts,omitempty"`
	Dropped        int `json:"dropped"`
	OutsideDropped int `json:"outside_dropped"`
}

// LiveStats are libpcap's counters since a live capture opened.
type LiveStats struct {
	// Received counts packets that passed the filter (pcap_stats ps_recv).
	// On a loopback interface (lo) the kernel's capture sees each packet
	// twice, leaving and arriving, and libpcap drops the leaving copy only
	// after the ring: there Received and Dropped count two per SYN, while
	// a report's SYNs count one. The filter cannot keep the leaving copy
	// out: libpcap 1.10 runs a new filter in userland on the first packet
	// after it is set, where "inbound" matches nothing, so the capture's
	// first SYN would be lost (libpcap bug reports #1254 and #1482 on GitHub).
	Received uint64 `json:"received"`
	// Dropped counts packets the kernel dropped because the capture buffer
	// was full (ps_drop): SYNs the report cannot see.
	Dropped uint64 `json:"dropped"`
	// IfDropped counts packets the interface or its driver dropped
	// (ps_ifdrop).
	IfDropped uint64 `json:"if_dropped"`
}

// Lost is every packet the capture is known to have missed.
func (s LiveStats) Lost() uint64 { return s.Dropped + s.IfDropped }

// LiveInfo is the live capture a session was judged from.
type LiveInfo struct {
	Iface      string `json:"iface"`
	Timestamps string `json:"timestamps"`
	LiveStats
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
	LiveStats
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
			line += fmt.Sprintf(", %s joined mid-stream, whose calls could not be decoded", Plural(c.MidStream, "connection"))
		}
	}
	return line
}

// ServerVerdict is what the server's Stop answered for the session.
type ServerVerdict struct {
	Passed    bool    `json:"passed"`
	BackoffMS []int32 `json:"backoff_ms"`
	Verdict   Verdict `json:"verdict"`
	Reason    string  `json:"reason"`
}

// NewServerVerdict is the verdict of a session's end.
func NewServerVerdict(end *SessionEnd) *ServerVerdict {
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
	Policy     Policy         `json:"policy"`
	Server     *ServerVerdict `json:"server,omitempty"`
	CrossCheck *CrossCheck    `json:"crosscheck"`
	// peer is the index of the session's chain in the report's peers, -1
	// when the capture holds none of its attempts.
	peer int
}

// Where a report read with a record file took each session's policy.
const (
	PolicyFromRecord      = "record"
	PolicyFromCommandLine = "command line"
)

// AddRecordSession appends a session of the record file to r: its chain's
// kernel verdict (r's peers gain it; nil when the capture holds none of
// its attempts) and its section.
func (r *Report) AddRecordSession(s RecordSession, chain *PeerReport) {
	s.peer = -1
	if chain != nil {
		s.peer = len(r.Peers)
		r.Peers = append(r.Peers, *chain)
	}
	r.Sessions = append(r.Sessions, s)
	r.Summary = summarize(r.Peers)
}

// Failures counts the sessions a report judges (one for a session's
// report, each of a record file's) and those that did not pass: the
// kernel's verdict on the session's chain failed, or the server's did, or
// a session with a server side ended without its answer. first names what
// failed in the first that did not pass: which verdict, and its reason.
func (r Report) Failures() (failed, total int, first string) {
	note := func(f string) {
		if failed == 0 {
			first = f
		}
		failed++
	}
	if r.Session != nil {
		var chain *PeerReport
		for i := range r.Peers {
			if !r.Peers[i].Passed || chain == nil {
				chain = &r.Peers[i]
			}
		}
		if f := sessionFailure(r.Session.Number, chain, r.CrossCheck != nil, r.Server); f != "" {
			note(f)
		}
		return failed, 1, first
	}
	for _, s := range r.Sessions {
		var chain *PeerReport
		if s.peer >= 0 && s.peer < len(r.Peers) {
			chain = &r.Peers[s.peer]
		}
		if f := sessionFailure(s.Session.Number, chain, true, s.Server); f != "" {
			note(f)
		}
	}
	return failed, len(r.Sessions), first
}

// sessionFailure says what failed in session n, or "" when it passed.
func sessionFailure(n int, chain *PeerReport, hasServer bool, sv *ServerVerdict) string {
	kernelFailed, kernelReason := true, "no attempt of the session's chain was seen"
	if chain != nil {
		kernelFailed, kernelReason = !chain.Passed, chain.Reason
	}
	if sv != nil && sv.Verdict == NotJudged {
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
