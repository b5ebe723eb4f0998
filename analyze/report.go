package analyze

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// Report is what `audit pcap` prints, as text (WriteText) or as JSON. It is
// a plain struct so that the live auditor can embed it and add members.
//
// JSON schema (names are stable; consumers must ignore unknown members):
//
//	{
//	  "port": 50052,                       // the retry port audited
//	  "policy": {"initial_backoff_ms", "multiplier", "jitter", "max_backoff_ms",
//	             "min_connect_timeout_ms", "tolerance_ms"},
//	  "capture": {
//	    "packets", "syns",                 // read, and SYNs to the port
//	    "attempts", "retransmits",         // SYNs grouped by (src, dst, ISN)
//	    "skipped": {"reason": count},      // packets not decoded, by reason
//	    "files": [{"path", "format", "bytes", "packets", "syns", "truncated",
//	               "skipped", "warnings"}]  // the last two only when not empty
//	  },
//	  "peers": [{                          // failing peers first
//	    "peer": "127.0.0.1",               // client address
//	    "passed": false,                   // the reference reading (SPEC.md §3,
//	    "verdict": "failed",               //   too few attempts fails, §4):
//	                                       //   "passed" | "failed" | "too few attempts"
//	    "reason": "interval 3: …",         // why it did not pass ("" when it did)
//	    "strict": {"passed", "verdict", "first_failure"},
//	                                       // spec-text reading: interval 1 un-jittered
//	    "reference_passed": false,         // the C++ reference's answer, bugs included
//	    "retransmits": 0,                  // retransmitted SYNs over the chain
//	    "attempts": [{"time": "2025-01-02T03:04:05.123456789Z", // RFC 3339, ns, UTC
//	                  "src_port", "seq", "retransmits"}],
//	    "intervals": [{"k", "measured_ms", "backoff_ms", "expected_ms", "min_ms",
//	                   "max_ms", "ok", "outcome", "jitter_pct", "strict_ok"}],
//	    "backoff_ms": [1000, 1600]         // ReconnectInfo.backoff_ms
//	  }],
//	  "summary": {"peers", "passed", "failed", "too_few", "passed_all"}
//	}
type Report struct {
	Port    uint16       `json:"port"`
	Policy  Policy       `json:"policy"`
	Capture CaptureInfo  `json:"capture"`
	Peers   []PeerReport `json:"peers"`
	Summary Summary      `json:"summary"`
}

// CaptureInfo describes the input of a report.
type CaptureInfo struct {
	Packets     uint64            `json:"packets"`
	SYNs        uint64            `json:"syns"`
	Attempts    int               `json:"attempts"`
	Retransmits int               `json:"retransmits"`
	Skipped     map[string]uint64 `json:"skipped"`
	Files       []FileInfo        `json:"files"`
}

// FileInfo describes one input file. It mirrors capture.FileStats, which
// analyze cannot import.
type FileInfo struct {
	Path      string            `json:"path"`
	Format    string            `json:"format"`
	Bytes     int64             `json:"bytes"`
	Packets   uint64            `json:"packets"`
	SYNs      uint64            `json:"syns"`
	Skipped   map[string]uint64 `json:"skipped,omitempty"`
	Truncated bool              `json:"truncated"`
	Warnings  []string          `json:"warnings,omitempty"`
}

// PeerReport is the verdict on one peer's chain of attempts.
type PeerReport struct {
	Peer netip.Addr `json:"peer"`
	// Passed and Verdict are the reference reading (SPEC.md §3 with the
	// fixes of §4).
	Passed  bool    `json:"passed"`
	Verdict Verdict `json:"verdict"`
	Reason  string  `json:"reason"`
	// Strict is the reading after the spec text, beside the reference's.
	Strict Reading `json:"strict"`
	// ReferencePassed is what the C++ reference would have answered.
	ReferencePassed bool            `json:"reference_passed"`
	Retransmits     int             `json:"retransmits"`
	Attempts        []AttemptReport `json:"attempts"`
	Intervals       []Interval      `json:"intervals"`
	BackoffMS       []int32         `json:"backoff_ms"`
}

// AttemptReport is one attempt of a peer.
type AttemptReport struct {
	Time        time.Time `json:"time"`
	SrcPort     uint16    `json:"src_port"`
	Seq         uint32    `json:"seq"`
	Retransmits int       `json:"retransmits"`
}

// timeLayout is RFC 3339 with all nine fraction digits, so that the
// timestamps of a report line up and sort as text.
const timeLayout = "2006-01-02T15:04:05.000000000Z07:00"

type attemptJSON struct {
	Time        string `json:"time"`
	SrcPort     uint16 `json:"src_port"`
	Seq         uint32 `json:"seq"`
	Retransmits int    `json:"retransmits"`
}

// MarshalJSON writes the time in UTC with nanoseconds.
func (a AttemptReport) MarshalJSON() ([]byte, error) {
	return json.Marshal(attemptJSON{
		Time:        a.Time.UTC().Format(timeLayout),
		SrcPort:     a.SrcPort,
		Seq:         a.Seq,
		Retransmits: a.Retransmits,
	})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (a *AttemptReport) UnmarshalJSON(b []byte) error {
	var j attemptJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	t, err := time.Parse(time.RFC3339Nano, j.Time)
	if err != nil {
		return fmt.Errorf("parse attempt time: %w", err)
	}
	*a = AttemptReport{Time: t, SrcPort: j.SrcPort, Seq: j.Seq, Retransmits: j.Retransmits}
	return nil
}

// Summary counts the peers by verdict.
type Summary struct {
	Peers  int `json:"peers"`
	Passed int `json:"passed"`
	Failed int `json:"failed"`
	TooFew int `json:"too_few"`
	// PassedAll is true when there is at least one peer and every peer
	// passed: the condition for exit status 0.
	PassedAll bool `json:"passed_all"`
}

// NewPeerReport verifies one chain against p.
func NewPeerReport(p Policy, c Chain) PeerReport {
	res := Verify(p, c.Times())
	pr := PeerReport{
		Peer:            c.Peer,
		Passed:          res.Reference.Passed,
		Verdict:         res.Reference.Verdict,
		Reason:          res.Reason(),
		Strict:          res.Strict,
		ReferencePassed: res.ReferencePassed,
		Retransmits:     c.Retransmits(),
		Attempts:        make([]AttemptReport, len(c.Attempts)),
		Intervals:       res.Intervals,
		BackoffMS:       res.BackoffMS,
	}
	if pr.Intervals == nil {
		pr.Intervals = []Interval{}
		pr.BackoffMS = []int32{}
	}
	for i, a := range c.Attempts {
		pr.Attempts[i] = AttemptReport{Time: a.Time, SrcPort: a.Src.Port(), Seq: a.Seq, Retransmits: a.Retransmits}
	}
	return pr
}

// NewReport verifies every chain against p. Attempts and retransmits in
// capture are counted from the chains; the other members are kept as given.
// Peers are ordered failing first (failed, then too few attempts, then
// passed), by address within each group.
func NewReport(port uint16, p Policy, chains []Chain, capture CaptureInfo) Report {
	r := Report{Port: port, Policy: p, Capture: capture, Peers: make([]PeerReport, 0, len(chains))}
	r.Capture.Attempts, r.Capture.Retransmits = 0, 0
	for _, c := range chains {
		r.Capture.Attempts += len(c.Attempts)
		r.Capture.Retransmits += c.Retransmits()
		r.Peers = append(r.Peers, NewPeerReport(p, c))
	}
	if r.Capture.Skipped == nil {
		r.Capture.Skipped = map[string]uint64{}
	}
	if r.Capture.Files == nil {
		r.Capture.Files = []FileInfo{}
	}
	r.sortPeers()
	r.Summary = summarize(r.Peers)
	return r
}

func verdictRank(v Verdict) int {
	switch v {
	case Failed:
		return 0
	case TooFew:
		return 1
	case Passed:
		return 3
	}
	return 2 // any other failing verdict
}

func (r *Report) sortPeers() {
	slices.SortStableFunc(r.Peers, func(a, b PeerReport) int {
		return cmp.Or(cmp.Compare(verdictRank(a.Verdict), verdictRank(b.Verdict)), a.Peer.Compare(b.Peer))
	})
}

func summarize(peers []PeerReport) Summary {
	s := Summary{Peers: len(peers)}
	for _, p := range peers {
		switch {
		case p.Passed:
			s.Passed++
		case p.Verdict == TooFew:
			s.TooFew++
		default:
			s.Failed++
		}
	}
	s.PassedAll = s.Peers > 0 && s.Passed == s.Peers
	return s
}

// Only keeps the peers whose address is in peers (IPv4-mapped addresses
// unmapped) and recounts the summary; the capture members are unchanged.
// With no addresses it returns r as is.
func (r Report) Only(peers ...netip.Addr) Report {
	if len(peers) == 0 {
		return r
	}
	keep := make(map[netip.Addr]bool, len(peers))
	for _, a := range peers {
		keep[a.Unmap()] = true
	}
	out := r
	out.Peers = make([]PeerReport, 0, len(peers))
	for _, p := range r.Peers {
		if keep[p.Peer] {
			out.Peers = append(out.Peers, p)
		}
	}
	out.Summary = summarize(out.Peers)
	return out
}

// WriteText writes the report for a person: a capture header, then per
// peer a header line and the reference-style interval table, then a
// summary line.
func (r Report) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	c := r.Capture
	fmt.Fprintf(bw, "port %d: %d packets in %s, %s, %s, %s\n",
		r.Port, c.Packets, plural(len(c.Files), "file"), plural(int(c.SYNs), "SYN"),
		plural(c.Attempts, "attempt"), plural(c.Retransmits, "retransmit"))
	fmt.Fprintf(bw, "policy: %v\n", r.Policy)
	for _, p := range r.Peers {
		bw.WriteByte('\n')
		writePeerText(bw, p)
	}
	bw.WriteByte('\n')
	fmt.Fprintln(bw, r.Summary.String())
	return bw.Flush()
}

// String is the summary line.
func (s Summary) String() string {
	verdict := "FAIL"
	if s.PassedAll {
		verdict = "PASS"
	}
	return fmt.Sprintf("%s: %s: %d passed, %d failed, %d too few attempts",
		verdict, plural(s.Peers, "peer"), s.Passed, s.Failed, s.TooFew)
}

func writePeerText(w *bufio.Writer, p PeerReport) {
	fmt.Fprintf(w, "peer %s: %s, %s, %s", p.Peer, plural(len(p.Attempts), "attempt"),
		plural(p.Retransmits, "retransmit"), p.Verdict)
	if p.Reason != "" && p.Verdict != TooFew {
		fmt.Fprintf(w, ": %s", p.Reason)
	}
	if p.Verdict != TooFew {
		fmt.Fprintf(w, "; strict: %s", p.Strict.Verdict)
		if p.Strict.FirstFailure > 0 {
			fmt.Fprintf(w, " at interval %d", p.Strict.FirstFailure)
		}
	}
	if p.ReferencePassed != p.Passed {
		fmt.Fprintf(w, "; the C++ reference would say passed")
	}
	w.WriteByte('\n')
	if len(p.Attempts) > 0 {
		fmt.Fprintf(w, "  first attempt %s from port %d\n", p.Attempts[0].Time.UTC().Format(timeLayout), p.Attempts[0].SrcPort)
	}
	if len(p.Intervals) == 0 {
		return
	}
	fmt.Fprintf(w, "  %3s %13s %12s %17s %9s  %s\n", "k", "measured ms", "expected ms", "window ms", "jitter", "verdict")
	for _, iv := range p.Intervals {
		verdict := string(iv.Outcome)
		switch {
		case iv.OK && !iv.StrictOK:
			verdict += ", strict: fails"
		case !iv.OK && iv.StrictOK:
			verdict += ", strict: ok"
		}
		window := fmt.Sprintf("%.1f–%.1f", iv.MinMS, iv.MaxMS)
		fmt.Fprintf(w, "  %3d %13.3f %12.1f %17s %+8.2f%%  %s\n",
			iv.K, iv.MeasuredMS, iv.ExpectedMS, window, iv.JitterPct, verdict)
	}
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// SkippedLines returns one warning line per skip reason, sorted by reason.
func (c CaptureInfo) SkippedLines() []string {
	reasons := slices.Sorted(maps.Keys(c.Skipped))
	lines := make([]string, len(reasons))
	for i, k := range reasons {
		lines[i] = fmt.Sprintf("skipped %d packets: %s", c.Skipped[k], k)
	}
	return lines
}

// Warnings returns every warning of the capture for a person: each file's
// warnings (which name the file, as the reader writes them) and, when the
// reader gave none for a truncated file, a line saying so; then one line per
// skip reason.
func (c CaptureInfo) Warnings() []string {
	var out []string
	for _, f := range c.Files {
		if f.Truncated && len(f.Warnings) == 0 {
			out = append(out, fmt.Sprintf("%s: truncated after %d packets", f.Path, f.Packets))
		}
		for _, w := range f.Warnings {
			out = append(out, strings.TrimSpace(w))
		}
	}
	return append(out, c.SkippedLines()...)
}
