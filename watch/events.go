package watch

import (
	"bufio"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/infer"
	"github.com/backoff-audit/audit/internal/text"
	"github.com/backoff-audit/audit/report"
	"github.com/backoff-audit/audit/report/herd"
)

// The kinds of Event.
const (
	EventFailedChain = "failed chain"
	EventSignature   = "signature"
	EventTightLoop   = "tight loop"
	EventHerdWave    = "herd wave"
	EventSummary     = "summary"
	// With Config.Infer: a chain judged that did not fail, and the
	// policies of a port's sample.
	EventChain    = "chain"
	EventPolicies = "policies"
)

// Event is one line of a Watch: text for a person (Text), or one JSON
// object a line. Members that do not apply to the kind are left out.
//
//	{"event": "failed chain", "time", "port", "peer", "end", "chain": {the peer of an audit pcap JSON report}}
//	{"event": "signature", "time", "port", "peer", "signature": {"name", "seen_in", "detail"}}
//	{"event": "tight loop", "time", "port", "peer", "successes", "reconnects": {"per_second", "median_ms", "tight_loop"}}
//	{"event": "herd wave", "time", "port", "wave": {"k", "peers", "count", "share", "at_ms", "span_ms", "policy_share", "expected"}, "note"}
//	{"event": "summary", "time", "summary": {…}}
//
// With Config.Infer (docs/spec.md §8.7), every judged chain is a line: a
// failed one as above, another as {"event": "chain", "time", "port",
// "peer", "end", "chain"}, the chain's "inferred" member its reading by
// the port's policies last read (infer.PeerInference: its schedule, the
// policy it runs or that it is an outlier, its verdict against that
// policy); and each reading of a port's policies is a line:
//
//	{"event": "policies", "time", "port", "since", "policies": {the "policies" of an audit pcap --infer JSON report}}
//
// since is when the oldest chain of the sample the policies were read
// from was judged.
//
// time (TimeLayout) is when the chain was judged: its attempt that
// succeeded, its attempt past the cap, the time the Watch found its client
// had stopped retrying (the SYN or Tick after backoff.ChainEnd), the run's
// end; for a tight loop, the success that made it one; for a wave, its
// first attempt. A wave's k counts from 0, the first attempt of each
// peer's chain, and its at_ms is 0.
type Event struct {
	Event      string              `json:"event"`
	Time       string              `json:"time"`
	Port       uint16              `json:"port,omitempty"`
	Peer       *netip.Addr         `json:"peer,omitempty"`
	End        string              `json:"end,omitempty"`
	Chain      *report.PeerReport  `json:"chain,omitempty"`
	Signature  *backoff.Signature  `json:"signature,omitempty"`
	Successes  int                 `json:"successes,omitempty"`
	Reconnects *backoff.Reconnects `json:"reconnects,omitempty"`
	Wave       *herd.Wave          `json:"wave,omitempty"`
	Note       string              `json:"note,omitempty"`
	Summary    *Summary            `json:"summary,omitempty"`
	Since      string              `json:"since,omitempty"`
	Policies   *infer.Policies     `json:"policies,omitempty"`
	// inferred is Chain's reading, for the text.
	inferred *infer.PeerInference
}

// Text is the event in one line.
func (e *Event) Text() string {
	var b strings.Builder
	b.WriteString(e.Time)
	if e.Port != 0 {
		fmt.Fprintf(&b, " port %d", e.Port)
	}
	if e.Peer != nil {
		fmt.Fprintf(&b, " peer %s", e.Peer)
	}
	b.WriteString(": ")
	switch e.Event {
	case EventFailedChain:
		c := e.Chain
		fmt.Fprintf(&b, "failed chain of %s from %s (%s): %s; strict: %s",
			text.Plural(len(c.Attempts), "attempt"), c.Attempts[0].Time.UTC().Format(text.TimeLayout), endText(e.End), c.Reason, c.Strict.Verdict)
		e.inferredText(&b)
	case EventChain:
		c := e.Chain
		fmt.Fprintf(&b, "chain of %s from %s (%s): %s",
			text.Plural(len(c.Attempts), "attempt"), c.Attempts[0].Time.UTC().Format(text.TimeLayout), endText(e.End), c.Verdict)
		e.inferredText(&b)
	case EventPolicies:
		var sec strings.Builder
		w := bufio.NewWriter(&sec)
		e.Policies.WriteText(w)
		w.Flush()
		b.WriteString(strings.TrimSuffix(sec.String(), "\n"))
		fmt.Fprintf(&b, "\n  read from the last %s judged, since %s", text.Plural(e.Policies.Peers, "chain"), e.Since)
	case EventSignature:
		fmt.Fprintf(&b, "signature %q (seen in %s): %s", e.Signature.Name, e.Signature.Seen, e.Signature.Detail)
	case EventTightLoop:
		rc := e.Reconnects
		fmt.Fprintf(&b, "tight loop: %d successes in a row, %.1f reconnects a second, median interval %.1f ms: each connection succeeds and drops, and the client resets its backoff after each success (docs/spec.md §7.3)",
			e.Successes, rc.PerSecond, rc.MedianMS)
	case EventHerdWave:
		wv := e.Wave
		fmt.Fprintf(&b, "herd wave at attempt %d: %d of %d peers (%.1f %%) within %.1f ms: %s",
			wv.K+1, wv.Count, wv.Peers, wv.Share*100, wv.SpanMS, e.Note)
	case EventSummary:
		b.WriteString(e.Summary.String())
	}
	return b.String()
}

// inferredText appends the chain's reading.
func (e *Event) inferredText(b *strings.Builder) {
	if e.inferred != nil {
		b.WriteString("; inferred: " + e.inferred.Text())
	}
}

func endText(end string) string {
	if end == "" {
		return ""
	}
	return "ended by " + end
}

// Summary is what a Watch judged, in all and per port.
type Summary struct {
	Counts
	// Ports holds each port's counts, by port.
	Ports []PortCounts `json:"ports"`
	// FirstFailure names the first failed chain and why it failed.
	FirstFailure string `json:"first_failure,omitempty"`
	// Compactions counts the rebuilds of the attempt tracker.
	Compactions int `json:"-"`
}

// Counts are a Watch's counts.
type Counts struct {
	Attempts    int `json:"attempts"`
	Retransmits int `json:"retransmits"`
	// Chains counts the chains judged: Passed, Failed and TooFew of them.
	Chains int `json:"chains"`
	Passed int `json:"passed"`
	Failed int `json:"failed"`
	TooFew int `json:"too_few"`
	// Connections counts attempts that succeeded with no failed attempt
	// before them: no chain to judge.
	Connections int `json:"connections"`
	Signatures  int `json:"signatures"`
	TightLoops  int `json:"tight_loops"`
	// Waves counts herd waves; WavesUnprinted those of them not written,
	// within waveQuiet of the last line for the same port and attempt.
	Waves          int `json:"herd_waves"`
	WavesUnprinted int `json:"herd_waves_unprinted,omitempty"`
	// Forgotten counts peers freed once idle; Untracked attempts of peers
	// beyond MaxPeers; Dropped attempts beyond MaxChain.
	Forgotten int `json:"peers_forgotten"`
	Untracked int `json:"attempts_untracked"`
	Dropped   int `json:"attempts_dropped"`
	// Outliers counts the chains, with Config.Infer, that no policy of
	// their port explained when they were judged.
	Outliers int `json:"outliers,omitempty"`
}

// PortCounts are one port's counts.
type PortCounts struct {
	Port uint16 `json:"port"`
	Counts
}

func (c *Counts) count(v backoff.Verdict) {
	c.Chains++
	switch v {
	case backoff.Passed:
		c.Passed++
	case backoff.Failed:
		c.Failed++
	case backoff.TooFew:
		c.TooFew++
	}
}

func (w *Watch) summary() Summary {
	s := w.sum
	for port, ps := range w.ports {
		s.Ports = append(s.Ports, PortCounts{Port: port, Counts: ps.sum})
	}
	slices.SortFunc(s.Ports, func(a, b PortCounts) int { return int(a.Port) - int(b.Port) })
	if s.Ports == nil {
		s.Ports = []PortCounts{}
	}
	return s
}

// String is the summary in a line, then one line per port when there are
// more than one.
func (s Summary) String() string {
	line := "summary: " + s.Counts.text()
	if len(s.Ports) > 1 {
		for _, pc := range s.Ports {
			line += fmt.Sprintf("\n  port %d: %s", pc.Port, pc.Counts.text())
		}
	}
	return line
}

func (c Counts) text() string {
	parts := []string{
		fmt.Sprintf("%s, %s", text.Plural(c.Attempts, "attempt"), text.Plural(c.Retransmits, "retransmission")),
		fmt.Sprintf("%s judged: %d passed, %d failed, %d too few attempts", text.Plural(c.Chains, "chain"), c.Passed, c.Failed, c.TooFew),
		text.Plural(c.Connections, "connection") + " at the first attempt",
		text.Plural(c.Signatures, "signature"),
		text.Plural(c.TightLoops, "tight loop"),
		text.Plural(c.Waves, "herd wave"),
		text.Plural(c.Forgotten, "peer") + " forgotten once idle",
	}
	if c.WavesUnprinted > 0 {
		parts[5] += fmt.Sprintf(" (%d not printed: at most one line per port and attempt per %v)", c.WavesUnprinted, waveQuiet)
	}
	if c.Untracked > 0 {
		parts = append(parts, text.Plural(c.Untracked, "attempt")+" of peers over --max_peers, not judged")
	}
	if c.Dropped > 0 {
		parts = append(parts, text.Plural(c.Dropped, "attempt")+" beyond --max_chain, counted only")
	}
	if c.Outliers > 0 {
		parts = append(parts, text.Plural(c.Outliers, "chain")+" no policy of its port explained (outliers)")
	}
	return strings.Join(parts, "; ")
}

// Verdict says why the run did not pass, or "" when no chain failed.
func (s Summary) Verdict() string {
	if s.Failed == 0 {
		return ""
	}
	return fmt.Sprintf("%s failed; first: %s", text.Plural(s.Failed, "chain"), s.FirstFailure)
}
