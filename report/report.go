package report

import (
	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/infer"
	"github.com/backoff-audit/audit/report/herd"
	"github.com/backoff-audit/audit/session"
)

// Report is the JSON of every document (Audit, SessionReport, RecordRun),
// as a program reads it back with encoding/json: the documents write it,
// and only tests and programs that read a report use this type.
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
//	    "inferred": {…}                    // --infer: the policy read from the chain
//	  }],
//	  "summary": {"peers", "passed", "failed", "too_few", "passed_all",
//	              "fits_cap_ms"}          // audit pcap only, absent when 0
//	}
//
// A reading beyond one capture's SYNs adds sections after "summary" (see
// sections.go); each is absent when the reading has none:
//
//	"policies":   infer.Policies: --infer's policies of the peers (after "herd")
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
	HerdReading *herd.Reading `json:"herd,omitempty"`
	// Policies is the policies the peers run (Peers.WithInfer).
	Policies *infer.Policies `json:"policies,omitempty"`

	Session    *SessionInfo        `json:"session,omitempty"`
	Live       *LiveInfo           `json:"live,omitempty"`
	Foreign    []session.PeerCount `json:"foreign,omitzero"`
	Server     *ServerVerdict      `json:"server,omitempty"`
	CrossCheck *session.CrossCheck `json:"crosscheck,omitempty"`
	Record     *RecordInfo         `json:"record,omitempty"`
	Sessions   []RecordSession     `json:"sessions,omitzero"`
}
