package main

// The report `audit live` prints at the end of each session: the kernel's
// verdict (the `audit pcap` schema), the server's, and the cross-check of
// the two lists.

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"time"

	"github.com/backoff-audit/audit/analyze"
	"github.com/backoff-audit/audit/capture"
)

// Causes that end a session the server did not end. The two errors are
// followed by ": " and the error.
const (
	causeIdle           = "idle"             // sniff-only: no SYN for --idle
	causeInterrupted    = "interrupted"      // Ctrl-C or SIGTERM
	causeCaptureError   = "capture error"    // the capture failed (interface gone)
	causeServerLogError = "server-log error" // --server-log could not be read
)

// liveSession is one session as the auditor follows it: from the server's
// events when there is a server side, else from the SYNs alone.
type liveSession struct {
	number int
	// server is false for a sniff-only session, delimited by --idle.
	server bool
	// offline is set for a session of a record file, cross-checked
	// against capture files.
	offline   bool
	start     time.Time
	startPeer netip.AddrPort
	maxMS     int32
	policy    analyze.Policy
	accepts   []analyze.Accept
	// late are the accepts just after the session ended (session 0).
	late    []analyze.Accept
	end     *analyze.SessionEnd
	endTime time.Time
	cause   string
	// maxAttempts caps the attempts the session keeps; dropped counts
	// the later ones, which make its verdict analyze.Overflow.
	maxAttempts, dropped int
	// captureEnd is when the capture stopped while the session was open
	// (a capture error), captureEndCause why.
	captureEnd      time.Time
	captureEndCause string
	// outsideDropped counts the attempts outside any session that were
	// forgotten before this report (see outsideKeep).
	outsideDropped int
	// peer is the address the live lines treat as the session's own: the
	// Start caller's, or for a sniff-only session the first SYN's.
	peer netip.Addr
	seen map[netip.Addr]peerProgress
}

type peerProgress struct {
	n    int
	last time.Time
}

func newServerSession(e analyze.RecordEvent, maxAttempts int) *liveSession {
	s := &liveSession{number: e.Session, server: true, start: e.Time, startPeer: e.Peer, maxAttempts: maxAttempts,
		peer: e.Peer.Addr().Unmap(), policy: analyze.DefaultPolicy(), seen: map[netip.Addr]peerProgress{}}
	if e.Params != nil {
		s.maxMS, s.policy = e.Params.MaxReconnectBackoffMS, e.Params.Policy
	}
	return s
}

func newSniffSession(number int, p analyze.Policy, maxAttempts int, first analyze.Attempt) *liveSession {
	return &liveSession{number: number, start: first.Time, policy: p, maxAttempts: maxAttempts,
		peer: first.Src.Addr().Unmap(), seen: map[netip.Addr]peerProgress{}}
}

// serverSession is the session as analyze's cross-check reads it.
func (s *liveSession) serverSession() analyze.ServerSession {
	return analyze.ServerSession{
		Number: s.number, Start: s.start, Peer: s.startPeer,
		Params:  analyze.SessionParams{MaxReconnectBackoffMS: s.maxMS, Policy: s.policy},
		Accepts: s.accepts, End: s.end, EndTime: s.endTime, Late: s.late,
	}
}

// contains reports whether t falls in the session; a sniff-only session
// holds every attempt handed to it.
func (s *liveSession) contains(t time.Time) bool {
	if !s.server {
		return true
	}
	return !t.Before(s.start) && (s.endTime.IsZero() || !t.After(s.endTime))
}

// attemptLine is the line printed as an attempt arrives: kernel time, peer,
// interval, expected, ok.
func (s *liveSession) attemptLine(a analyze.Attempt) string {
	peer := a.Src.Addr().Unmap()
	p := s.seen[peer]
	p.n++
	line := fmt.Sprintf("attempt %s  %-22s #%-3d", a.Time.UTC().Format(liveTimeLayout), liveUnmap(a.Src), p.n)
	if p.n == 1 {
		line += "  first attempt, no interval yet"
	} else {
		iv := s.policy.Check(p.n-1, a.Time.Sub(p.last))
		line += fmt.Sprintf("  interval %-2d %10.3f ms  expected %8.1f ms [%.0f–%.0f]  %s",
			iv.K, iv.MeasuredMS, iv.ExpectedMS, iv.MinMS, iv.MaxMS, iv.Outcome)
	}
	if peer != s.peer {
		line += "  (foreign peer: not in the verdict)"
	}
	p.last = a.Time
	s.seen[peer] = p
	return line
}

// liveReport is one session's report. Its JSON is the `audit pcap` report
// of the session's kernel verdict with these members added:
//
//	"session":    {"number", "start", "end", "cause", "start_peer",
//	               "max_reconnect_backoff_ms", "chain", "chain_reason",
//	               "max_attempts", "dropped", "outside_dropped"}: cause is
//	               "stop", "session timeout", "server closed", "idle",
//	               "interrupted" (Ctrl-C, SIGTERM), or "capture error: …" or
//	               "server-log error: …"; dropped counts the attempts past
//	               max_attempts, counted and not kept (the verdict is then
//	               "too many attempts"), outside_dropped those outside any
//	               session forgotten since the last report
//	"live":       {"iface", "timestamps", "received", "dropped",
//	               "if_dropped", "write", "not_taken"}: libpcap's counters
//	               at the report, in packets (on a loopback interface each
//	               SYN is two: the kernel's capture sees it leave and
//	               arrive), and the packets captured that the auditor did
//	               not take in (it was maxQueued behind)
//	"foreign":    [{"addr", "attempts"}]: other addresses, not in the verdict
//	"server":     {"passed", "backoff_ms", "verdict", "reason"}: what Stop
//	              returned (absent without a server side, null when the
//	              session ended without Stop's answer)
//	"crosscheck": {"agree", "pairs", "kernel_only", "server_only",
//	               "delay_us", "disagreements", …} (absent without a server side)
type liveReport struct {
	Kernel     analyze.Report
	Session    sessionInfo
	Live       liveInfo
	Foreign    []analyze.PeerCount
	HasServer  bool
	Server     *serverVerdict
	CrossCheck *analyze.CrossCheck
}

type sessionInfo struct {
	Number      int                 `json:"number"`
	Start       string              `json:"start"`
	End         string              `json:"end"`
	Cause       string              `json:"cause"`
	StartPeer   string              `json:"start_peer,omitempty"`
	MaxMS       int32               `json:"max_reconnect_backoff_ms"`
	Chain       string              `json:"chain"`
	ChainReason analyze.ChainReason `json:"chain_reason,omitempty"`
	// MaxAttempts is absent from the sessions of a record file, read
	// offline.
	MaxAttempts    int `json:"max_attempts,omitempty"`
	Dropped        int `json:"dropped"`
	OutsideDropped int `json:"outside_dropped"`
}

type liveInfo struct {
	Iface      string `json:"iface"`
	Timestamps string `json:"timestamps"`
	capture.LiveStats
	Write string `json:"write,omitempty"`
	// NotTaken counts the packets the capture read that the auditor,
	// maxQueued behind, did not take in.
	NotTaken uint64 `json:"not_taken"`
	// loopback says the counters count each SYN twice.
	loopback bool
}

// lost is every packet the report is known to lack.
func (l liveInfo) lost() uint64 { return l.Lost() + l.NotTaken }

type serverVerdict struct {
	Passed    bool            `json:"passed"`
	BackoffMS []int32         `json:"backoff_ms"`
	Verdict   analyze.Verdict `json:"verdict"`
	Reason    string          `json:"reason"`
}

// Passed is the session's outcome: the kernel's verdict passed, and so did
// the server's when there is one.
func (r liveReport) Passed() bool {
	if !r.Kernel.Summary.PassedAll {
		return false
	}
	return !r.HasServer || r.Server != nil && r.Server.Passed
}

// buildLiveReport judges one session. attempts are every attempt handed to
// the session, of every address and time; those outside it are explained by
// the cross-check, never judged.
func buildLiveReport(s *liveSession, port uint16, attempts []analyze.Attempt, capInfo analyze.CaptureInfo, live liveInfo, captureStart time.Time) liveReport {
	input := s.serverSession().Input(captureStart, live.lost())
	input.Offline = s.offline
	input.CaptureEnd, input.CaptureEndCause = s.captureEnd, s.captureEndCause
	inside := slices.Clone(attempts)
	if s.server {
		inside = analyze.SessionAttempts(input, attempts)
	}
	slices.SortFunc(inside, func(a, b analyze.Attempt) int { return a.Time.Compare(b.Time) })
	chain, reason := s.peer, analyze.ChainReason("")
	if s.server {
		ss := s.serverSession()
		chain = ss.Chain()
		if s.end != nil {
			reason = s.end.ChainReason
		}
	} else if len(inside) > 0 {
		chain = inside[0].Src.Addr().Unmap()
	}
	byPeer := map[netip.Addr][]analyze.Attempt{}
	var order []netip.Addr
	for _, a := range inside {
		p := a.Src.Addr().Unmap()
		if byPeer[p] == nil {
			order = append(order, p)
		}
		byPeer[p] = append(byPeer[p], a)
	}
	var chains []analyze.Chain
	if as := byPeer[chain]; len(as) > 0 {
		chains = append(chains, analyze.Chain{Peer: chain, Attempts: as})
	}
	r := liveReport{Live: live, HasServer: s.server, Foreign: []analyze.PeerCount{}}
	r.Kernel = analyze.NewReport(port, s.policy, chains, capInfo)
	r.Kernel.Capture.Attempts, r.Kernel.Capture.Retransmits = len(inside), 0
	for _, a := range inside {
		r.Kernel.Capture.Retransmits += a.Retransmits
	}
	if s.dropped > 0 {
		r.Kernel = overflow(r.Kernel, chain, fmt.Sprintf("%d kept, %d more dropped (max attempts %d)",
			len(inside), s.dropped, s.maxAttempts))
	}
	for _, p := range order {
		if p != chain {
			r.Foreign = append(r.Foreign, analyze.PeerCount{Addr: p, Attempts: len(byPeer[p])})
		}
	}
	end := s.endTime
	if !s.server && len(inside) > 0 {
		end = inside[len(inside)-1].Time
	}
	r.Session = sessionInfo{
		Number: s.number, Start: s.start.UTC().Format(liveTimeLayout), Cause: s.cause,
		MaxMS: s.maxMS, ChainReason: reason,
		MaxAttempts: s.maxAttempts, Dropped: s.dropped, OutsideDropped: s.outsideDropped,
	}
	if !end.IsZero() {
		r.Session.End = end.UTC().Format(liveTimeLayout)
	}
	if s.startPeer.IsValid() {
		r.Session.StartPeer = s.startPeer.String()
	}
	if chain.IsValid() {
		r.Session.Chain = chain.String()
	}
	if !s.server {
		return r
	}
	if s.end != nil {
		r.Server = &serverVerdict{Passed: s.end.Passed, BackoffMS: s.end.BackoffMS, Verdict: s.end.Verdict, Reason: s.end.Reason}
		if r.Server.BackoffMS == nil {
			r.Server.BackoffMS = []int32{}
		}
	}
	cc := analyze.NewCrossCheck(input, attempts, s.accepts)
	r.CrossCheck = &cc
	return r
}

// overflow gives the chain the verdict of a session that kept its maximum
// of attempts, as the server does: the list is incomplete, so no reading
// of it can pass.
func overflow(k analyze.Report, chain netip.Addr, reason string) analyze.Report {
	if !chain.IsValid() {
		return k // no chain: nothing was judged, and nothing passed
	}
	i := slices.IndexFunc(k.Peers, func(p analyze.PeerReport) bool { return p.Peer == chain })
	if i < 0 {
		k.Peers = append(k.Peers, analyze.PeerReport{Peer: chain, Attempts: []analyze.AttemptReport{},
			Intervals: []analyze.Interval{}, BackoffMS: []int32{}})
		i = len(k.Peers) - 1
	}
	p := &k.Peers[i]
	p.Passed, p.Verdict, p.Reason = false, analyze.Overflow, reason
	p.Strict = analyze.Reading{Verdict: analyze.Overflow}
	return k.Only(chain) // recounts the summary
}

// liveTimeLayout matches the reports': RFC 3339, nine fraction digits, UTC.
const liveTimeLayout = "2006-01-02T15:04:05.000000000Z07:00"

// MarshalJSON writes the kernel report's members and the live ones beside
// them, in one object.
func (r liveReport) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(r.Kernel)
	if err != nil {
		return nil, err
	}
	m := map[string]json.RawMessage{}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	add := func(k string, v any) error {
		b, err := json.Marshal(v)
		m[k] = b
		return err
	}
	err = cmp.Or(add("session", r.Session), add("live", r.Live), add("foreign", r.Foreign))
	if err == nil && r.HasServer {
		err = cmp.Or(add("server", r.Server), add("crosscheck", r.CrossCheck))
	}
	if err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

// WriteText writes the report for a person.
func (r liveReport) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	s := r.Session
	r.writeSession(bw)
	fmt.Fprintf(bw, "kernel verdict, from SYN timestamps (%s):\n", r.Live.Timestamps)
	c := r.Kernel.Capture
	fmt.Fprintf(bw, "port %d: %d SYNs captured on %s, %d attempts, %d retransmits\n",
		r.Kernel.Port, c.SYNs, r.Live.Iface, c.Attempts, c.Retransmits)
	fmt.Fprintf(bw, "policy: %v\n", r.Kernel.Policy)
	if err := r.Kernel.WritePeersText(bw); err != nil {
		return err
	}
	fmt.Fprintf(bw, "\n%s\n", r.Kernel.Summary)
	if s.Dropped > 0 {
		fmt.Fprintf(bw, "%d more attempts than --max_attempts %d were counted, not kept: the verdict is %s\n",
			s.Dropped, s.MaxAttempts, analyze.Overflow)
	}
	if s.OutsideDropped > 0 {
		fmt.Fprintf(bw, "%d older attempts outside any session were counted, not kept: the cross-check does not list them\n",
			s.OutsideDropped)
	}
	for _, f := range r.Foreign {
		fmt.Fprintf(bw, "foreign peer %s: %d attempts, not in the verdict\n", f.Addr, f.Attempts)
	}
	if r.HasServer {
		r.writeServer(bw)
		if r.CrossCheck != nil {
			if err := r.CrossCheck.WriteText(bw); err != nil {
				return err
			}
		}
	}
	fmt.Fprintln(bw, r.Live.statsLine())
	return bw.Flush()
}

// writeSession writes the session's heading.
func (r liveReport) writeSession(bw *bufio.Writer) {
	s := r.Session
	fmt.Fprintf(bw, "\n=== session %d: %s → %s, ended by %s", s.Number, s.Start, cmp.Or(s.End, "(open)"), s.Cause)
	if s.StartPeer != "" {
		fmt.Fprintf(bw, "; Start from %s, max_reconnect_backoff_ms %d", s.StartPeer, s.MaxMS)
	}
	bw.WriteString("\n")
}

// writeServer writes what the server's Stop answered.
func (r liveReport) writeServer(bw *bufio.Writer) {
	sv := r.Server
	if sv == nil {
		fmt.Fprintln(bw, "server verdict: none, the session did not end with Stop")
		return
	}
	fmt.Fprintf(bw, "server verdict (Stop): passed=%v (%s) backoff_ms=%v", sv.Passed, sv.Verdict, sv.BackoffMS)
	if sv.Reason != "" {
		fmt.Fprintf(bw, ": %s", sv.Reason)
	}
	fmt.Fprintln(bw)
}

func (l liveInfo) statsLine() string {
	line := fmt.Sprintf("libpcap on %s since the start: %d packets received, %d dropped by the kernel, %d dropped by the interface",
		l.Iface, l.Received, l.Dropped, l.IfDropped)
	if l.loopback {
		line += " (a loopback interface: two packets per SYN, leaving and arriving)"
	}
	if l.NotTaken > 0 {
		line += fmt.Sprintf("; %d captured packets not taken in by the auditor", l.NotTaken)
	}
	return line
}

func liveUnmap(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// recordSession is one session of a record file, cross-checked offline.
type recordSession struct {
	Session    sessionInfo        `json:"session"`
	Server     *serverVerdict     `json:"server"`
	CrossCheck analyze.CrossCheck `json:"crosscheck"`
}

// recordInfo says which record was read and what of it was judged.
type recordInfo struct {
	Path string `json:"path"`
	// Policy is "record" when each session is judged by the policy of its
	// Start line, "command line" when a policy flag overrode it.
	Policy string `json:"policy"`
	// Outside lists the sessions that do not overlap the capture (another
	// time or another retry port): not judged.
	Outside  []outsideSession `json:"outside"`
	Warnings []string         `json:"warnings"`
}

type outsideSession struct {
	Number    int    `json:"number"`
	Start     string `json:"start"`
	End       string `json:"end"`
	RetryPort uint16 `json:"retry_port,omitempty"`
}

// recordAudit is `audit pcap --server-log`: every session of the record
// that overlaps the capture, judged from the capture's SYNs with the
// session's own policy (or the one given on the command line), beside the
// server's verdict and the cross-check of the two lists.
type recordAudit struct {
	Info    recordInfo
	Reports []liveReport
}

// recordPolicy is the policy that overrides every session's, or nil.
func auditRecord(path string, port uint16, chains []analyze.Chain, override *analyze.Policy) (recordAudit, error) {
	ra := recordAudit{Info: recordInfo{Path: path, Policy: "record", Outside: []outsideSession{}, Warnings: []string{}}}
	if override != nil {
		ra.Info.Policy = "command line"
	}
	f, err := os.Open(path)
	if err != nil {
		return ra, fmt.Errorf("--server-log: %w", err)
	}
	defer f.Close()
	events, err := analyze.ReadRecord(f)
	switch {
	case errors.Is(err, analyze.ErrTornLine):
		ra.Info.Warnings = append(ra.Info.Warnings, fmt.Sprintf("--server-log %s: %v; the lines before it are used", path, err))
	case err != nil:
		return ra, fmt.Errorf("--server-log %s: %w", path, err)
	}
	var attempts []analyze.Attempt
	for _, c := range chains {
		attempts = append(attempts, c.Attempts...)
	}
	if len(attempts) == 0 {
		return ra, fmt.Errorf("--server-log %s: the capture has no attempt to port %d to cross-check", path, port)
	}
	first, last := attempts[0].Time, attempts[0].Time
	for _, a := range attempts {
		first, last = minTime(first, a.Time), maxTime(last, a.Time)
	}
	all := analyze.ServerSessions(events)
	var sessions []analyze.ServerSession
	for _, s := range all {
		if s.Overlaps(port, first, last) {
			sessions = append(sessions, s)
			continue
		}
		o := outsideSession{Number: s.Number, Start: s.Start.UTC().Format(liveTimeLayout), RetryPort: s.RetryPort}
		if !s.EndTime.IsZero() {
			o.End = s.EndTime.UTC().Format(liveTimeLayout)
		}
		ra.Info.Outside = append(ra.Info.Outside, o)
	}
	if len(sessions) == 0 {
		return ra, fmt.Errorf("--server-log %s does not cover the capture: %s; the capture's attempts to port %d span %s – %s",
			path, recordSpan(all), port, first.UTC().Format(liveTimeLayout), last.UTC().Format(liveTimeLayout))
	}
	split := analyze.SplitAttempts(sessions, attempts)
	for i, s := range sessions {
		if override != nil {
			s.Params.Policy = *override
		}
		ls := &liveSession{number: s.Number, server: true, offline: true, start: s.Start, startPeer: s.Peer,
			maxMS: s.Params.MaxReconnectBackoffMS, policy: s.Params.Policy, accepts: s.Accepts,
			end: s.End, endTime: s.EndTime, late: s.Late, cause: causeInterrupted, peer: s.Peer.Addr().Unmap()}
		if s.End != nil {
			ls.cause = s.End.Cause
		}
		ra.Reports = append(ra.Reports, buildLiveReport(ls, port, split[i], analyze.CaptureInfo{}, liveInfo{}, time.Time{}))
	}
	return ra, nil
}

// recordSpan says what a record holds, for the error of a record that
// does not cover the capture.
func recordSpan(sessions []analyze.ServerSession) string {
	if len(sessions) == 0 {
		return "the record holds no session"
	}
	start, end := sessions[0].Start, sessions[0].EndTime
	ports := map[uint16]bool{}
	for _, s := range sessions {
		start, end = minTime(start, s.Start), maxTime(end, s.EndTime)
		ports[s.RetryPort] = true
	}
	span := fmt.Sprintf("its %s span %s – %s", plural(len(sessions), "session"),
		start.UTC().Format(liveTimeLayout), cmp.Or(end.UTC().Format(liveTimeLayout), "(open)"))
	if end.IsZero() {
		span = fmt.Sprintf("its %s span %s – (open)", plural(len(sessions), "session"), start.UTC().Format(liveTimeLayout))
	}
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

// Passed reports whether every session passed, on both sides.
func (ra recordAudit) Passed() bool {
	for _, r := range ra.Reports {
		if !r.Passed() {
			return false
		}
	}
	return true
}

// kernelReport is the `audit pcap` report of the record's sessions: each
// session's chain, judged with its policy, is one peer.
func (ra recordAudit) kernelReport(port uint16, p analyze.Policy, capInfo analyze.CaptureInfo) analyze.Report {
	rep := analyze.Report{Port: port, Policy: p, Capture: capInfo, Peers: []analyze.PeerReport{}}
	for _, r := range ra.Reports {
		rep.Peers = append(rep.Peers, r.Kernel.Peers...)
	}
	rep.Summary = analyze.Summarize(rep.Peers)
	return rep
}

// recordReportJSON is the JSON of `audit pcap --server-log`: the `audit
// pcap` report of the sessions' chains, then "record" and one member of
// "sessions" per session judged.
type recordReportJSON struct {
	analyze.Report
	Record   recordInfo      `json:"record"`
	Sessions []recordSession `json:"sessions"`
}

// write writes the report: in text the capture, then one section per
// session (kernel verdict, server verdict, cross-check), then the summary.
func (ra recordAudit) write(w io.Writer, rep analyze.Report, format string) error {
	if format == "json" {
		j := recordReportJSON{Report: rep, Record: ra.Info, Sessions: make([]recordSession, len(ra.Reports))}
		for i, r := range ra.Reports {
			j.Sessions[i] = recordSession{Session: r.Session, Server: r.Server, CrossCheck: *r.CrossCheck}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(j)
	}
	bw := bufio.NewWriter(w)
	c := rep.Capture
	fmt.Fprintf(bw, "port %d: %d packets in %s, %s, %s, %s\n", rep.Port, c.Packets, plural(len(c.Files), "file"),
		plural(int(c.SYNs), "SYN"), plural(c.Attempts, "attempt"), plural(c.Retransmits, "retransmit"))
	if ra.Info.Policy == "record" {
		fmt.Fprintln(bw, "policy: each session's own, from its Start line in the record")
	} else {
		fmt.Fprintf(bw, "policy: %v, from the command line: it overrides each session's Start line\n", rep.Policy)
	}
	fmt.Fprintf(bw, "server record %s: %s judged", ra.Info.Path, plural(len(ra.Reports), "session"))
	for i, o := range ra.Info.Outside {
		if i == 0 {
			bw.WriteString("; outside the capture, not judged:")
		}
		fmt.Fprintf(bw, " session %d (%s – %s)", o.Number, o.Start, cmp.Or(o.End, "open"))
	}
	bw.WriteString("\n")
	for _, r := range ra.Reports {
		r.writeSession(bw)
		fmt.Fprintf(bw, "kernel verdict, from SYN timestamps (policy %v):\n", r.Kernel.Policy)
		if err := r.Kernel.WritePeersText(bw); err != nil {
			return err
		}
		if len(r.Kernel.Peers) == 0 {
			fmt.Fprintln(bw, "no chain to judge")
		}
		r.writeServer(bw)
		if err := r.CrossCheck.WriteText(bw); err != nil {
			return err
		}
	}
	fmt.Fprintf(bw, "\n%s\n", rep.Summary)
	return bw.Flush()
}

func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// failure names what failed in a session that did not pass: which
// verdict, and the first reason.
func (r liveReport) failure() string {
	var kernelReason string
	for _, p := range r.Kernel.Peers {
		if !p.Passed {
			kernelReason = p.Reason
			break
		}
	}
	if len(r.Kernel.Peers) == 0 {
		kernelReason = "no attempt of the session's chain was captured"
	}
	kernelFailed := !r.Kernel.Summary.PassedAll
	serverFailed := r.HasServer && (r.Server == nil || !r.Server.Passed)
	serverReason := "the session did not end with Stop, so the server gave no verdict"
	if r.Server != nil {
		serverReason = r.Server.Reason
	}
	switch {
	case kernelFailed && serverFailed:
		return fmt.Sprintf("session %d: kernel and server verdicts failed: %s", r.Session.Number, kernelReason)
	case kernelFailed && r.HasServer:
		return fmt.Sprintf("session %d: kernel verdict failed, server passed: %s", r.Session.Number, kernelReason)
	case kernelFailed:
		return fmt.Sprintf("session %d: kernel verdict failed: %s", r.Session.Number, kernelReason)
	default:
		return fmt.Sprintf("session %d: server verdict failed, kernel passed: %s", r.Session.Number, serverReason)
	}
}

// sessionsVerdict is the error of a run whose sessions did not all pass:
// how many failed, and what failed first.
func sessionsVerdict(failed, total int, first string) error {
	if failed == 0 {
		return nil
	}
	return verdictError("%d of %s failed; %s", failed, plural(total, "session"), first)
}
