package report

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"time"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/internal/text"
)

// PeerReport is the verdict on one peer's chain of attempts.
type PeerReport struct {
	Peer netip.Addr `json:"peer"`
	// Passed and Verdict are the reference reading (docs/spec.md §3 with the
	// fixes of §4).
	Passed  bool            `json:"passed"`
	Verdict backoff.Verdict `json:"verdict"`
	Reason  string          `json:"reason"`
	// Strict is the reading after the spec text, beside the reference's.
	Strict backoff.Reading `json:"strict"`
	// ReferencePassed is what the C++ reference would have answered.
	ReferencePassed bool                `json:"reference_passed"`
	Retransmits     int                 `json:"retransmits"`
	Attempts        []AttemptReport     `json:"attempts"`
	Intervals       []backoff.Interval  `json:"intervals"`
	BackoffMS       []int32             `json:"backoff_ms"`
	Signatures      []backoff.Signature `json:"signatures,omitempty"`
	Recovery        *backoff.Recovery   `json:"recovery,omitempty"`
	Reconnects      *backoff.Reconnects `json:"reconnects,omitempty"`
	// Unseen counts the attempts whose answer the capture lacks
	// (backoff.ClassUnseen).
	Unseen int `json:"unseen,omitempty"`
	// States are the channel's connectivity states as the wire shows them
	// (backoff.States), for a chain with a connection that reached READY:
	// what a restart or an outage did to the client.
	States []backoff.State `json:"states,omitempty"`
	// BegunBefore says a chain whose first interval is late against a
	// plain backoff (no Term) may have begun before the capture did: its
	// first attempt came within that interval's window of the capture's
	// first packet, where an earlier attempt could have been (a file of a
	// rotated set read alone), and its first interval may then be a
	// later, longer one.
	BegunBefore bool `json:"may_have_begun_before_capture,omitempty"`
	// Inferred is the policy read from the chain (Peers.WithInfer).
	Inferred json.RawMessage `json:"inferred,omitempty"`
}

// BegunBeforeNote is what a report says of a chain that may have begun
// before the capture (PeerReport.BegunBefore).
const BegunBeforeNote = "its first attempt came within interval 1's window of the capture's first packet: the chain may have begun before the capture (one file of a rotated set read alone?)"

// mayPrecede says the chain of p may have begun before a capture that
// began at start (PeerReport.BegunBefore); false when start is unknown.
func (p *PeerReport) mayPrecede(start time.Time) bool {
	if start.IsZero() || len(p.Attempts) == 0 || len(p.Intervals) == 0 || p.Intervals[0].Outcome != backoff.Late || p.Intervals[0].Term != "" {
		return false
	}
	return backoff.Millis(p.Attempts[0].Time.Sub(start)) <= p.Intervals[0].MaxMS
}

// AttemptReport is one attempt of a peer.
type AttemptReport struct {
	Time        time.Time `json:"time"`
	SrcPort     uint16    `json:"src_port"`
	Seq         uint32    `json:"seq"`
	Retransmits int       `json:"retransmits"`
	// Ending is the attempt's fate (docs/spec.md §7); its Fate is
	// FateUnknown when the capture could not show it.
	Ending backoff.Ending `json:"-"`
}

type attemptJSON struct {
	Time        text.Time       `json:"time"`
	SrcPort     uint16          `json:"src_port"`
	Seq         uint32          `json:"seq"`
	Retransmits int             `json:"retransmits"`
	Fate        backoff.Fate    `json:"fate"`
	AcceptedMS  *float64        `json:"accepted_ms,omitempty"`
	DurationMS  *float64        `json:"duration_ms,omitempty"`
	ClientSent  backoff.Payload `json:"client_sent,omitempty"`
	ServerSent  backoff.Payload `json:"server_sent,omitempty"`
	ReadyMS     *float64        `json:"ready_ms,omitempty"`
	RST         bool            `json:"rst,omitempty"`
	// Decrypted and NotDecrypted say what a key log made of the
	// attempt's TLS (backoff.Ending).
	Decrypted    bool   `json:"decrypted,omitempty"`
	NotDecrypted string `json:"not_decrypted,omitempty"`
}

// MarshalJSON writes the time in UTC with nanoseconds, and the fate's
// times in milliseconds where the fate has them.
func (a AttemptReport) MarshalJSON() ([]byte, error) {
	e := a.Ending
	j := attemptJSON{Time: text.Time(a.Time), SrcPort: a.SrcPort, Seq: a.Seq, Retransmits: a.Retransmits,
		Fate: e.ReportFate(), ClientSent: e.ClientSent, ServerSent: e.ServerSent, Decrypted: e.Decrypted, NotDecrypted: e.NotDecrypted}
	if e.Fate.Accepted() {
		v := backoff.Millis(e.Accepted)
		j.AcceptedMS = &v
	}
	if e.Fate.Ended() {
		v := backoff.Millis(e.Duration)
		j.DurationMS = &v
		j.RST = e.RST
	}
	if e.Ready {
		v := backoff.Millis(e.ReadyAfter)
		j.ReadyMS = &v
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes; times in milliseconds come
// back to the nanosecond.
func (a *AttemptReport) UnmarshalJSON(b []byte) error {
	var j attemptJSON
	err := json.Unmarshal(b, &j)
	*a = AttemptReport{Time: time.Time(j.Time), SrcPort: j.SrcPort, Seq: j.Seq, Retransmits: j.Retransmits,
		Ending: backoff.Ending{Fate: j.Fate, ClientSent: j.ClientSent, ServerSent: j.ServerSent, Decrypted: j.Decrypted, NotDecrypted: j.NotDecrypted}}
	if j.AcceptedMS != nil {
		a.Ending.Accepted = fromMS(*j.AcceptedMS)
	}
	if j.DurationMS != nil {
		a.Ending.Duration = fromMS(*j.DurationMS)
	}
	if j.ReadyMS != nil {
		a.Ending.Ready, a.Ending.ReadyAfter = true, fromMS(*j.ReadyMS)
	}
	a.Ending.RST = j.RST
	return err
}

// fromMS is the duration of v milliseconds, to the nearest nanosecond.
func fromMS(v float64) time.Duration { return time.Duration(math.Round(v * 1e6)) }

// Summary counts the peers by verdict.
type Summary struct {
	Peers  int `json:"peers"`
	Passed int `json:"passed"`
	Failed int `json:"failed"`
	TooFew int `json:"too_few"`
	// PassedAll is true when there is at least one peer and every peer
	// passed: the condition for exit status 0.
	PassedAll bool `json:"passed_all"`
	// FitsCapMS is a cap below the policy's, in whole ms, under which every
	// failing peer would pass (0 when there is none): the clients likely
	// ran with it. Only NewAudit looks for one (see capfit.go); a session's
	// report is judged against the cap its Start asked for.
	FitsCapMS int64 `json:"fits_cap_ms,omitempty"`
	// Unseen counts the peers' attempts whose answer the capture lacks
	// (PeerReport.Unseen).
	Unseen int `json:"unseen,omitempty"`
}

// PeerReportOf is the report of a chain already verified: res is VerifyRun's
// result over c's times.
func PeerReportOf(c attempt.Chain, res backoff.Result) PeerReport {
	return peerReportInto(c, res, nil)
}

// peerReportInto is PeerReportOf with the attempts' reports in
// reports[:0]'s array, when it is large enough.
func peerReportInto(c attempt.Chain, res backoff.Result, reports []AttemptReport) PeerReport {
	pr := PeerReport{
		Peer:            c.Peer,
		Passed:          res.Reference.Passed,
		Verdict:         res.Reference.Verdict,
		Reason:          res.Reason(),
		Strict:          res.Strict,
		ReferencePassed: res.ReferencePassed,
		Retransmits:     c.Retransmits(),
		Attempts:        slices.Grow(reports[:0], len(c.Attempts))[:len(c.Attempts)],
		Intervals:       res.Intervals,
		BackoffMS:       res.BackoffMS,
		Signatures:      backoff.Signatures(res),
		Recovery:        res.Recovery,
		Reconnects:      res.Reconnects,
		Unseen:          res.Unseen,
	}
	if pr.Intervals == nil {
		pr.Intervals = []backoff.Interval{}
		pr.BackoffMS = []int32{}
	}
	ready := false
	for _, a := range c.Attempts {
		ready = ready || a.Ending.Ready
	}
	if ready {
		pr.States = backoff.States(c.Times(), c.Endings())
	}
	for i, a := range c.Attempts {
		pr.Attempts[i] = AttemptReport{Time: a.Time, SrcPort: a.Src.Port(), Seq: a.Seq, Retransmits: a.Retransmits, Ending: a.Ending}
		pr.Attempts[i].Ending.Fate = a.Ending.ReportFate()
	}
	return pr
}

// peerOrder is the order of a report's peers: failing first (failed, then
// too few attempts, then passed), by address within each group.
func peerOrder(x, y *auditPeer) int {
	return cmp.Or(cmp.Compare(x.Verdict().Rank(), y.Verdict().Rank()), compareAddr(x, y))
}

func maxJitter(ivs []backoff.Interval) float64 {
	m := 0.0
	for _, iv := range ivs {
		m = max(m, math.Abs(iv.JitterPct))
	}
	return m
}

// count adds a peer of the reference reading passed and verdict v.
func (s *Summary) count(passed bool, v backoff.Verdict) {
	s.Peers++
	switch {
	case passed:
		s.Passed++
	case v == backoff.TooFew:
		s.TooFew++
	default:
		s.Failed++
	}
	s.PassedAll = s.Passed == s.Peers
}

// String is the summary line; with no peer, nothing was judged.
func (s Summary) String() string {
	if s.Peers == 0 {
		return "nothing judged: 0 peers"
	}
	verdict := "FAIL"
	if s.PassedAll {
		verdict = "PASS"
	}
	return fmt.Sprintf("%s: %s: %d passed, %d failed, %d too few attempts",
		verdict, text.Plural(s.Peers, "peer"), s.Passed, s.Failed, s.TooFew)
}
