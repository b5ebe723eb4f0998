package report

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"time"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/report/herd"
	"github.com/backoff-audit/audit/session"
)

// The documents: Audit (`audit pcap`: every peer of a capture),
// SessionReport (`audit live`: one session) and RecordRun (`audit pcap`
// with a server's record file or control port: each of its sessions).
// Each is written as text (WriteText), as JSON (WriteJSON) and as a page
// (package html, through Parts), all three from the same values. Their
// JSON shares its first members and its peers; the schema is on Report,
// the type that reads it back.

// Head is what every document opens with: the retry port audited, the
// policy and retry mode its chains were judged against, and the capture.
type Head struct {
	Port   uint16
	Policy backoff.Policy
	Mode   backoff.RetryMode
	// ModeInferred is set when Mode was read from the attempts' fates
	// (attempt.Chains.InferMode) rather than given.
	ModeInferred bool
	Capture      attempt.CaptureInfo
}

// Check is a cross-check of a server's list as a page shows it: its
// session's number, the check, and the position of its chain among the
// document's peers (-1 when the capture holds none of its attempts).
type Check struct {
	Session int
	Check   *session.CrossCheck
	Peer    int
}

// Parts are a document's values, as a page lays them out.
type Parts struct {
	Head
	Peers   *Peers
	Summary Summary
	// Herd is the document's herd reading when it has one (WithHerd).
	Herd *herd.Reading
	// A session's sections (SessionReport).
	Session *SessionInfo
	Live    *LiveInfo
	Foreign []session.PeerCount
	Server  *ServerVerdict
	// A record's (RecordRun).
	Record   *RecordInfo
	Sessions []RecordSession
	// Checks are the document's cross-checks.
	Checks []Check
}

// Document is *Audit, *SessionReport or *RecordRun.
type Document interface {
	Parts() Parts
}

// TablesUpTo is the number of peers up to which every peer gets its
// interval table in the text and its full section on the page: a fixture,
// a session, a few clients.
const TablesUpTo = 20

// Audit is the document of a capture's peers (`audit pcap`).
type Audit struct {
	Head
	Peers *Peers
	// Summary counts Peers; FitsCapMS is looked for (backoff.FitCap).
	Summary Summary
	herd    *herd.Reading
}

// NewAudit verifies every chain of cs against p in run (NewPeers) and
// looks for a lower cap that every failing peer fits (Summary.FitsCapMS).
// capture's attempts and retransmits are counted from the chains.
func NewAudit(port uint16, p backoff.Policy, run backoff.Run, cs ChainSource, capture attempt.CaptureInfo) *Audit {
	return AuditOf(port, run.Mode, NewPeers(p, run, cs), capture)
}

// AuditOf is the audit of the peer section ps (NewPeers, or a Section's),
// its chains judged in mode, as NewAudit makes it.
func AuditOf(port uint16, mode backoff.RetryMode, ps *Peers, capture attempt.CaptureInfo) *Audit {
	ps.start = capture.Start()
	a := &Audit{Head: Head{Port: port, Policy: ps.policy, Mode: mode, Capture: capture}, Peers: ps}
	a.Capture.Attempts, a.Capture.Retransmits = 0, 0
	for _, ap := range a.Peers.peers {
		a.Capture.Attempts += int(ap.attempts)
		a.Capture.Retransmits += int(ap.retrans)
	}
	a.summarize()
	return a
}

func (a *Audit) summarize() {
	a.Summary = a.Peers.Summary()
	a.Summary.FitsCapMS = a.Peers.FitCap()
}

// Only returns the audit of the peers whose address is in addrs (Peers.Only),
// with the summary recounted; the capture members are unchanged. With no
// addresses it returns a as is.
func (a *Audit) Only(addrs ...netip.Addr) *Audit {
	if len(addrs) == 0 {
		return a
	}
	out := *a
	out.Peers = a.Peers.Only(addrs...)
	out.summarize()
	return &out
}

// WithHerd makes the audit end with the herd reading of its peers: a
// "herd" member after "summary" in JSON, its lines after the summary in
// text, a section of the page. It costs about as much as verifying the
// chains, so it is asked for, not done always.
func (a *Audit) WithHerd() *Audit {
	h := a.Peers.Herd(a.Mode)
	a.herd = &h
	return a
}

// Herd is the audit's herd reading (WithHerd), else that of its peers.
func (a *Audit) Herd() herd.Reading {
	if a.herd != nil {
		return *a.herd
	}
	return a.Peers.Herd(a.Mode)
}

func (a *Audit) Parts() Parts {
	return Parts{Head: a.Head, Peers: a.Peers, Summary: a.Summary, Herd: a.herd}
}

// Write writes the audit as JSON (WriteJSON) or as text (WriteText, with
// every peer's table when tables is set).
func (a *Audit) Write(w io.Writer, asJSON, tables bool) error {
	if asJSON {
		return a.WriteJSON(w)
	}
	return a.WriteText(w, tables)
}

// WriteJSON writes the audit as Report's JSON: the members of the document
// indented, each peer's object on one line.
func (a *Audit) WriteJSON(w io.Writer) error {
	d := newJSONDoc(w, false)
	d.head(&a.Head, a.Peers, a.Summary, a.herd)
	return d.end()
}

// WriteText writes the audit for a person: a capture header, then per
// peer a header line and the interval table, then the summary. For more
// than TablesUpTo peers a passing peer gets one line (its header and its
// largest jitter), unless tables asks for every table: with 10 000 peers,
// 9 000 tables that say ok bury the ones that failed.
func (a *Audit) WriteText(w io.Writer, tables bool) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	writeTextHeader(bw, &a.Head)
	if n := a.Summary.Unseen; n > 0 {
		bw.Write(appendUnseen(nil, a.Capture.Attempts-n, a.Capture.Attempts))
	}
	if err := writePeersText(bw, a.Peers, !tables && a.Peers.Len() > TablesUpTo, tables); err != nil {
		return err
	}
	writeSummaryText(bw, a.Summary)
	if err := writeHerdText(bw, a.herd); err != nil {
		return err
	}
	a.Peers.inferred.WriteText(bw)
	return bw.Flush()
}

// SessionReport is the document of one session (`audit live`): the
// kernel's verdict on its chain, the server's, and the cross-check of the
// two lists.
type SessionReport struct {
	Head
	// Peers holds the session's verified chain, or no peer when the
	// capture holds none of its attempts.
	Peers   *Peers
	Summary Summary
	Session SessionInfo
	// Live is the live capture's counters, nil for a session read offline.
	Live *LiveInfo
	// Foreign counts the attempts of the addresses outside the verdict.
	Foreign []session.PeerCount
	// Server is what the server's Stop answered; nil when the session
	// ended without Stop, or has no server side.
	Server *ServerVerdict
	// CrossCheck is the server's list against the kernel's attempts; nil
	// without a server side.
	CrossCheck *session.CrossCheck
	herd       *herd.Reading
}

// WithHerd makes the report end with the herd reading of its peers.
func (r *SessionReport) WithHerd() *SessionReport {
	h := r.Peers.Herd(r.Mode)
	r.herd = &h
	return r
}

func (r *SessionReport) Parts() Parts {
	p := Parts{Head: r.Head, Peers: r.Peers, Summary: r.Summary, Herd: r.herd, Session: &r.Session, Live: r.Live,
		Foreign: r.Foreign, Server: r.Server}
	if r.CrossCheck != nil {
		peer := -1
		for i := range r.Peers.Len() {
			if r.Peers.Peer(i) == r.CrossCheck.VerifiedPeer {
				peer = i
				break
			}
		}
		p.Checks = []Check{{Session: r.Session.Number, Check: r.CrossCheck, Peer: peer}}
	}
	return p
}

// Failures says whether the session did not pass (failed is 1) and what
// failed first: the kernel's verdict on its chain, or the server's, or a
// session with a server side that ended without its answer.
func (r *SessionReport) Failures() (failed, total int, first string) {
	var chain *PeerReport
	if r.Peers.Len() > 0 {
		var buf []attempt.Attempt
		pr := r.Peers.Report(0, &buf)
		chain = &pr
	}
	if f := sessionFailure(r.Session.Number, chain, r.CrossCheck != nil, r.Server); f != "" {
		return 1, 1, f
	}
	return 0, 1, ""
}

// WriteJSON writes the report as one line of JSON: `audit live
// --format json` writes one a session (JSON Lines).
func (r *SessionReport) WriteJSON(w io.Writer) error {
	d := newJSONDoc(w, true)
	d.head(&r.Head, r.Peers, r.Summary, r.herd)
	d.member("session", r.Session)
	if r.Live != nil {
		d.member("live", r.Live)
	}
	foreign := r.Foreign
	if foreign == nil {
		foreign = []session.PeerCount{}
	}
	d.member("foreign", foreign)
	if r.Server != nil {
		d.member("server", r.Server)
	}
	if r.CrossCheck != nil {
		d.member("crosscheck", r.CrossCheck)
	}
	return d.end()
}

// WriteText writes the report for a person: the session's heading, the
// kernel's verdict with the chain's table, the summary, what was counted
// and not kept, the foreign addresses, the server's verdict and the
// cross-check, and libpcap's counters.
func (r *SessionReport) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	writeSessionHeading(bw, &r.Session)
	if r.Live != nil {
		fmt.Fprintf(bw, "kernel verdict, from SYN timestamps (%s):\n", r.Live.Timestamps)
		c := r.Capture
		fmt.Fprintf(bw, "port %d: %d SYNs captured on %s, %d attempts, %d retransmits\n",
			r.Port, c.SYNs, r.Live.Iface, c.Attempts, c.Retransmits)
		fmt.Fprintf(bw, "policy: %v%s\n", r.Policy, modeText(r.Policy, r.Mode))
	} else {
		writeTextHeader(bw, &r.Head)
	}
	if err := writePeersText(bw, r.Peers, false, false); err != nil {
		return err
	}
	writeSummaryText(bw, r.Summary)
	if s := r.Session; s.Dropped > 0 {
		fmt.Fprintf(bw, "%d more attempts than the session's maximum of %d were counted, not kept: the verdict is %s\n",
			s.Dropped, s.MaxAttempts, backoff.Overflow)
	}
	if s := r.Session; s.OutsideDropped > 0 {
		fmt.Fprintf(bw, "%d older attempts outside any session were counted, not kept: the cross-check does not list them\n",
			s.OutsideDropped)
	}
	for _, f := range r.Foreign {
		fmt.Fprintf(bw, "foreign peer %s: %d attempts, not in the verdict\n", f.Addr, f.Attempts)
	}
	if r.CrossCheck != nil {
		writeServerText(bw, r.Server)
		if err := r.CrossCheck.WriteText(bw); err != nil {
			return err
		}
	}
	if r.Live != nil {
		fmt.Fprintln(bw, r.Live.StatsLine())
	}
	if err := writeHerdText(bw, r.herd); err != nil {
		return err
	}
	r.Peers.inferred.WriteText(bw)
	return bw.Flush()
}

// RecordRun is the document of a capture read with a server's sessions
// (`audit pcap --record`, or its control port): each session that overlaps
// the capture judged from the capture's attempts, beside the server's
// verdict and the cross-check of the two lists.
type RecordRun struct {
	Head
	// Peers holds each judged session's chain, in session order.
	Peers    *Peers
	Summary  Summary
	Record   RecordInfo
	Sessions []RecordSession
	herd     *herd.Reading
	chains   []attempt.Chain
	results  []backoff.Result
}

// NewRecordRun is the run of a capture with head and the record section
// rec, before its sessions are added (AddSession).
func NewRecordRun(head Head, rec RecordInfo) *RecordRun {
	r := &RecordRun{Head: head, Record: rec, Sessions: []RecordSession{}}
	r.Peers = VerifiedPeers(nil, nil)
	return r
}

// AddSession adds a judged session: its section, and its chain with the
// kernel's verdict on it (res nil when the capture holds none of its
// attempts).
func (r *RecordRun) AddSession(s RecordSession, chain attempt.Chain, res *backoff.Result) {
	s.peer = -1
	if res != nil {
		s.peer = len(r.chains)
		r.chains = append(r.chains, chain)
		r.results = append(r.results, *res)
		r.Peers = VerifiedPeers(r.chains, r.results)
		r.Summary = r.Peers.Summary()
	}
	r.Sessions = append(r.Sessions, s)
}

// SetHerd makes the run end with h, the herd reading of every chain of the
// capture, not only the sessions'.
func (r *RecordRun) SetHerd(h herd.Reading) { r.herd = &h }

// Herd is the run's herd reading (SetHerd), else that of its sessions'
// chains.
func (r *RecordRun) Herd() herd.Reading {
	if r.herd != nil {
		return *r.herd
	}
	return r.Peers.Herd(r.Mode)
}

func (r *RecordRun) Parts() Parts {
	p := Parts{Head: r.Head, Peers: r.Peers, Summary: r.Summary, Herd: r.herd, Record: &r.Record, Sessions: r.Sessions}
	for _, s := range r.Sessions {
		if s.CrossCheck != nil {
			p.Checks = append(p.Checks, Check{Session: s.Session.Number, Check: s.CrossCheck, Peer: s.peer})
		}
	}
	return p
}

// Failures counts the sessions and those that did not pass: the kernel's
// verdict on the session's chain failed, or the server's did, or the
// session ended without its answer. first names what failed in the first
// that did not pass: which verdict, and its reason.
func (r *RecordRun) Failures() (failed, total int, first string) {
	var buf []attempt.Attempt
	for _, s := range r.Sessions {
		var chain *PeerReport
		if s.peer >= 0 && s.peer < r.Peers.Len() {
			pr := r.Peers.Report(s.peer, &buf)
			chain = &pr
		}
		if f := sessionFailure(s.Session.Number, chain, true, s.Server); f != "" {
			if failed == 0 {
				first = f
			}
			failed++
		}
	}
	return failed, len(r.Sessions), first
}

// WriteJSON writes the run as Report's JSON, its members indented.
func (r *RecordRun) WriteJSON(w io.Writer) error {
	d := newJSONDoc(w, false)
	d.head(&r.Head, r.Peers, r.Summary, r.herd)
	d.member("record", r.Record)
	d.member("sessions", r.Sessions)
	return d.end()
}

// WriteText writes the run for a person: the capture, where the policy
// came from, what the record holds, then each session: its heading, its
// chain's kernel verdict, the server's verdict and the cross-check.
func (r *RecordRun) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	writeCaptureLine(bw, r.Port, r.Capture)
	writeRecordText(bw, r.Policy, &r.Record, len(r.Sessions))
	var buf []attempt.Attempt
	for _, s := range r.Sessions {
		writeSessionHeading(bw, &s.Session)
		fmt.Fprintf(bw, "kernel verdict, from SYN timestamps (policy %v):", s.Policy)
		if s.peer < 0 || s.peer >= r.Peers.Len() {
			bw.WriteString(" no attempt of its chain is in the capture\n")
		} else {
			pr := r.Peers.Report(s.peer, &buf)
			bw.Write(appendPeerText([]byte("\n\n"), pr, false))
		}
		writeServerText(bw, s.Server)
		if err := s.CrossCheck.WriteText(bw); err != nil {
			return err
		}
	}
	writeSummaryText(bw, r.Summary)
	if err := writeHerdText(bw, r.herd); err != nil {
		return err
	}
	r.Peers.inferred.WriteText(bw)
	return bw.Flush()
}

// jsonDoc writes a document's JSON object member by member: indented, one
// member a line and one peer a line, or compact, on one line.
type jsonDoc struct {
	bw      *bufio.Writer
	compact bool
	n       int // members written
	err     error
}

func newJSONDoc(w io.Writer, compact bool) *jsonDoc {
	d := &jsonDoc{bw: bufio.NewWriterSize(w, 64<<10), compact: compact}
	d.bw.WriteByte('{')
	return d
}

// sep writes what comes before member name.
func (d *jsonDoc) sep(name string) {
	if d.n > 0 {
		d.bw.WriteByte(',')
	}
	d.n++
	if !d.compact {
		d.bw.WriteString("\n  ")
	}
	fmt.Fprintf(d.bw, "%q:", name)
	if !d.compact {
		d.bw.WriteByte(' ')
	}
}

// member writes v as member name.
func (d *jsonDoc) member(name string, v any) {
	if d.err != nil {
		return
	}
	var b []byte
	var err error
	if d.compact {
		b, err = json.Marshal(v)
	} else {
		b, err = json.MarshalIndent(v, "  ", "  ")
	}
	if err != nil {
		d.err = fmt.Errorf("encode %s: %w", name, err)
		return
	}
	d.sep(name)
	d.bw.Write(b)
}

// head writes the members every document opens with, its peers and its
// summary, and its herd when it has one.
func (d *jsonDoc) head(h *Head, ps *Peers, sum Summary, hr *herd.Reading) {
	d.member("port", h.Port)
	d.member("policy", h.Policy)
	d.member("retry_mode", h.Mode)
	if h.ModeInferred {
		d.member("retry_mode_inferred", true)
	}
	c := h.Capture // {} and [] when empty, never null
	if c.Skipped == nil {
		c.Skipped = map[string]uint64{}
	}
	if c.Files == nil {
		c.Files = []attempt.FileInfo{}
	}
	d.member("capture", c)
	if d.err != nil {
		return
	}
	d.sep("peers")
	d.bw.WriteByte('[')
	windows := newWindowText(h.Policy)
	n := ps.Len()
	err := WritePeers(d.bw, ps, func() *[]byte { return new([]byte) }, func(b []byte, inferred *[]byte, i int, report func() *PeerReport) ([]byte, error) {
		if !d.compact {
			b = append(b, "\n    "...)
		}
		pr := report()
		if ps.inferred != nil {
			*inferred = ps.inferred.AppendPeer((*inferred)[:0], int(ps.peers[i].index), len(pr.Attempts), func(k int) (time.Time, backoff.Ending) { return pr.Attempts[k].Time, pr.Attempts[k].Ending })
			pr.Inferred = *inferred
		}
		b, err := appendPeerJSON(b, pr, windows)
		if err != nil {
			return b, fmt.Errorf("encode peer %s: %w", pr.Peer, err)
		}
		if i < n-1 {
			b = append(b, ',')
		}
		return b, nil
	})
	if err != nil {
		d.err = err
		return
	}
	if n > 0 && !d.compact {
		d.bw.WriteString("\n  ")
	}
	d.bw.WriteByte(']')
	d.member("summary", sum)
	if hr != nil {
		d.member("herd", hr)
	}
	if ps.inferred != nil {
		d.member("policies", ps.inferred.Policies)
	}
}

// end closes the object and flushes it, or returns the first error.
func (d *jsonDoc) end() error {
	if d.err != nil {
		return d.err
	}
	if !d.compact {
		d.bw.WriteByte('\n')
	}
	d.bw.WriteString("}\n")
	return d.bw.Flush()
}
