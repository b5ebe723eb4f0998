package report

import (
	"net/netip"
	"slices"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/session"
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
//	  "retry_mode": "close",               // what the retry port did (docs/spec.md §7):
//	                                       //   close | refuse | hang | restart=5s |
//	                                       //   settings-close | goaway
//	  "retry_mode_inferred": true,         // only when read from the fates, no flag
//	  "capture": {
//	    "packets", "syns",                 // read, and SYNs to the port
//	    "attempts", "retransmits",         // SYNs grouped by (src, dst, ISN)
//	    "skipped": {"reason": count},      // packets not decoded, by reason
//	    "files": [{"path", "format", "bytes", "packets", "syns",
//	               "skipped": {"reason": count}, "truncated",
//	               "warnings": ["…"]}], // {} and [] when empty
//	    "syn_only": true                   // no TCP segment but SYNs: every fate is
//	                                       //   "unknown"; absent otherwise
//	  },
//	  "peers": [{                          // failing peers first
//	    "peer": "127.0.0.1",               // client address
//	    "passed": false,                   // the reference reading (docs/spec.md §3,
//	    "verdict": "failed",               //   too few attempts fails, §4):
//	                                       //   "passed" | "failed" | "too few attempts"
//	    "reason": "interval 3: …",         // why it did not pass ("" when it did)
//	    "strict": {"passed", "verdict", "first_failure"},
//	                                       // spec-text reading: interval 1 un-jittered
//	    "reference_passed": false,         // the C++ reference's answer, bugs included
//	    "retransmits": 0,                  // retransmitted SYNs over the chain
//	    "attempts": [{"time": "2025-01-02T03:04:05.123456789Z", // RFC 3339, ns, UTC
//	                  "src_port", "seq", "retransmits",
//	                  "fate": "closed by server", // what the wire showed (docs/spec.md §7):
//	                                       //   "refused" | "unanswered" | "closed by server" |
//	                                       //   "abandoned by client" | "open at end" | "unknown"
//	                  "accepted_ms": 0.021,  // SYN to SYN-ACK; only when the server accepted
//	                  "duration_ms": 0.214,  // SYN to the first FIN or RST (to the RST for
//	                                       //   "refused", to the last SYN for "unanswered");
//	                                       //   absent when open at end or unknown
//	                  "client_sent": "tls client hello", // the first bytes each side sent:
//	                  "server_sent": "http/2 settings"}], //   "tls client hello" | "tls server hello" |
//	                                       //   "http/2 preface" | "http/2 settings" | "data";
//	                                       //   absent when that side sent none
//	    "intervals": [{"k", "measured_ms", "backoff_ms", "expected_ms", "min_ms",
//	                   "max_ms", "ok", "outcome", "jitter_pct", "strict_ok",
//	                   "term"}],           // "term" only after a hung or successful
//	                                       //   attempt: "backoff" | "connect timeout" |
//	                                       //   "reset" (docs/spec.md §7)
//	    "backoff_ms": [1000, 1600],        // ReconnectInfo.backoff_ms
//	    "signatures": [{"name", "seen_in", "detail"}],
//	                                       // known deviations the chain matches
//	    "recovery": {"attempt", "after_ms", "owed_ms", "min_ms", "max_ms", "ok"},
//	                                       // restart: the client's return
//	    "reconnects": {"per_second", "median_ms", "tight_loop"}
//	                                       // settings-close, goaway; these three
//	                                       //   are absent when they do not apply
//	  }],
//	  "summary": {"peers", "passed", "failed", "too_few", "passed_all",
//	              "fits_cap_ms"}          // audit pcap only, absent when 0
//	}
//
// A reading beyond one capture's SYNs adds sections after "summary" (see
// sections.go); each is absent when the reading has none:
//
//	"session":    SessionInfo: the session the report judges
//	"live":       LiveInfo: the live capture and libpcap's counters
//	"foreign":    [{"addr", "attempts"}]: addresses of the session outside
//	              the verdict
//	"server":     ServerVerdict: what the server's Stop answered (absent
//	              when the session ended without Stop)
//	"crosscheck": CrossCheck: the server's list against the SYNs
//	"record":     RecordInfo: the record file a capture was read with
//	"sessions":   [RecordSession]: each session of that record judged
type Report struct {
	Port   uint16            `json:"port"`
	Policy backoff.Policy    `json:"policy"`
	Mode   backoff.RetryMode `json:"retry_mode"`
	// ModeInferred is set when Mode was read from the attempts' fates
	// (InferMode) rather than given.
	ModeInferred bool                `json:"retry_mode_inferred,omitempty"`
	Capture      attempt.CaptureInfo `json:"capture"`
	Peers        []PeerReport        `json:"peers"`
	Summary      Summary             `json:"summary"`
	// HerdReading is the herd of the peers (WithHerd), written after the
	// summary in JSON and at the end of the text.
	HerdReading *Herd `json:"herd,omitempty"`

	Session    *SessionInfo        `json:"session,omitempty"`
	Live       *LiveInfo           `json:"live,omitempty"`
	Foreign    []session.PeerCount `json:"foreign,omitzero"`
	Server     *ServerVerdict      `json:"server,omitempty"`
	CrossCheck *session.CrossCheck `json:"crosscheck,omitempty"`
	Record     *RecordInfo         `json:"record,omitempty"`
	Sessions   []RecordSession     `json:"sessions,omitzero"`
}

// NewReport verifies every chain against p. Attempts and retransmits in
// capture are counted from the chains; the other members are kept as given.
// Peers are ordered failing first (failed, then too few attempts, then
// passed), by address within each group.
func NewReport(port uint16, p backoff.Policy, chains []attempt.Chain, capture attempt.CaptureInfo) Report {
	peers := make([]PeerReport, len(chains))
	for i, c := range chains {
		peers[i] = NewPeerReport(p, c)
	}
	return NewReportOf(port, p, peers, capture)
}

// NewReportOf is the report of peers already verified against p: it orders
// them as NewReport does, counts their attempts and retransmits into
// capture, and sums them up.
func NewReportOf(port uint16, p backoff.Policy, peers []PeerReport, capture attempt.CaptureInfo) Report {
	r := Report{Port: port, Policy: p, Capture: capture, Peers: peers}
	if r.Peers == nil {
		r.Peers = []PeerReport{}
	}
	if r.Capture.Skipped == nil {
		r.Capture.Skipped = map[string]uint64{}
	}
	if r.Capture.Files == nil {
		r.Capture.Files = []attempt.FileInfo{}
	}
	r.Capture.Attempts, r.Capture.Retransmits = 0, 0
	for _, pr := range r.Peers {
		r.Capture.Attempts += len(pr.Attempts)
		r.Capture.Retransmits += pr.Retransmits
	}
	slices.SortStableFunc(r.Peers, func(x, y PeerReport) int { return peerOrder(x.Verdict, x.Peer, y.Verdict, y.Peer) })
	r.Summary = summarize(r.Peers)
	return r
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
