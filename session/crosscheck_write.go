package session

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/internal/text"
)

// The cross-check written: its JSON, and its text for a person.

type pairJSON struct {
	Peer       netip.Addr `json:"peer"`
	SrcPort    uint16     `json:"src_port"`
	KernelTime text.Time  `json:"kernel_time"`
	AcceptTime text.Time  `json:"accept_time"`
	DelayUS    float64    `json:"delay_us"`
	Foreign    bool       `json:"foreign,omitempty"`
}

// MarshalJSON writes {"peer","src_port","kernel_time","accept_time","delay_us"}
// and "foreign": true for a pair outside the chain.
func (p Pair) MarshalJSON() ([]byte, error) {
	return json.Marshal(pairJSON{
		Peer: p.Peer, SrcPort: p.SrcPort,
		KernelTime: text.Time(p.KernelTime),
		AcceptTime: text.Time(p.AcceptTime),
		DelayUS:    float64(p.Delay) / float64(time.Microsecond),
		Foreign:    p.Foreign,
	})
}

// UnmarshalJSON reads what MarshalJSON writes; the delay is recomputed from
// the two times, which carry it to the nanosecond.
func (p *Pair) UnmarshalJSON(b []byte) error {
	var j pairJSON
	err := json.Unmarshal(b, &j)
	kt, at := time.Time(j.KernelTime), time.Time(j.AcceptTime)
	*p = Pair{Peer: j.Peer, SrcPort: j.SrcPort, KernelTime: kt, AcceptTime: at, Delay: at.Sub(kt), Foreign: j.Foreign}
	return err
}

type loneJSON struct {
	Peer    netip.Addr `json:"peer"`
	SrcPort uint16     `json:"src_port"`
	Time    text.Time  `json:"time"`
	Reason  string     `json:"reason"`
	Detail  string     `json:"detail"`
}

// MarshalJSON writes {"peer","src_port","time","reason","detail"}.
func (l Lone) MarshalJSON() ([]byte, error) {
	return json.Marshal(loneJSON{l.Peer, l.SrcPort, text.Time(l.Time), l.Reason, l.Detail})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (l *Lone) UnmarshalJSON(b []byte) error {
	var j loneJSON
	err := json.Unmarshal(b, &j)
	*l = Lone{j.Peer, j.SrcPort, time.Time(j.Time), j.Reason, j.Detail}
	return err
}

type crossJSON struct {
	Agree         bool           `json:"agree"`
	VerifiedPeer  string         `json:"verified_peer"`
	KernelPassed  bool           `json:"kernel_passed"`
	ServerPassed  bool           `json:"server_passed"`
	Pairs         []Pair         `json:"pairs"`
	KernelOnly    []Lone         `json:"kernel_only"`
	ServerOnly    []Lone         `json:"server_only"`
	Delay         DelayStats     `json:"delay_us"`
	Disagreements []Disagreement `json:"disagreements"`
	ToleranceMS   float64        `json:"tolerance_ms"`
	ServerSide    string         `json:"server_side,omitempty"`
	Intervals     []IntervalPair `json:"intervals,omitempty"`
	ChainAttempts int            `json:"chain_attempts"`
	ServerSaw     int            `json:"server_saw"`
	ServerMissed  map[string]int `json:"server_missed,omitempty"`
}

// MarshalJSON writes {"agree","verified_peer","kernel_passed","server_passed",
// "pairs","kernel_only","server_only","delay_us":{"count","min","median",
// "p99","max"},"disagreements":[{"k","server_k","kernel_ok","server_ok",
// "kernel_ms","server_ms","attempt","src_port","shift_ms","tolerance_ms",
// "cause"}],"tolerance_ms","chain_attempts","server_saw","server_missed":
// {"reason": count}}; lists are [] when empty, never null. A
// cross-check against backoff_ms adds "server_side": "backoff_ms" and
// "intervals": [{"k","kernel_ms","server_ms","shift_ms","kernel_ok",
// "server_ok","in_kernel","in_server"}].
func (c CrossCheck) MarshalJSON() ([]byte, error) {
	j := crossJSON{
		Agree: c.Agree, KernelPassed: c.KernelPassed, ServerPassed: c.ServerPassed,
		Pairs: c.Pairs, KernelOnly: c.KernelOnly, ServerOnly: c.ServerOnly,
		Delay: c.Delay, Disagreements: c.Disagreements, ToleranceMS: backoff.Millis(c.Tolerance),
		ServerSide: c.ServerSide, Intervals: c.Intervals,
		ChainAttempts: c.ChainAttempts, ServerSaw: c.ServerSaw, ServerMissed: c.ServerMissed,
	}
	if c.VerifiedPeer.IsValid() {
		j.VerifiedPeer = c.VerifiedPeer.String()
	}
	for _, l := range []*[]Lone{&j.KernelOnly, &j.ServerOnly} {
		if *l == nil {
			*l = []Lone{}
		}
	}
	if j.Pairs == nil {
		j.Pairs = []Pair{}
	}
	if j.Disagreements == nil {
		j.Disagreements = []Disagreement{}
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (c *CrossCheck) UnmarshalJSON(b []byte) error {
	var j crossJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	var chain netip.Addr
	if j.VerifiedPeer != "" {
		var err error
		if chain, err = netip.ParseAddr(j.VerifiedPeer); err != nil {
			return fmt.Errorf("parse chain: %w", err)
		}
	}
	*c = CrossCheck{
		Agree: j.Agree, VerifiedPeer: chain, KernelPassed: j.KernelPassed, ServerPassed: j.ServerPassed,
		Pairs: j.Pairs, KernelOnly: j.KernelOnly, ServerOnly: j.ServerOnly, Delay: j.Delay,
		Disagreements: j.Disagreements, Tolerance: time.Duration(j.ToleranceMS * float64(time.Millisecond)),
		ServerSide: j.ServerSide, Intervals: j.Intervals,
		ChainAttempts: j.ChainAttempts, ServerSaw: j.ServerSaw, ServerMissed: j.ServerMissed,
	}
	return nil
}

// maxLone is how many attempts of one side a text lists: a storm's are
// thousands, which their count says as well.
const maxLone = 20

// writeLone lists the attempts one side saw alone, at most maxLone.
func writeLone(bw *bufio.Writer, side string, ls []Lone) {
	for i, l := range ls {
		if i == maxLone {
			fmt.Fprintf(bw, "  %s: %d more (the JSON report lists them all)\n", side, len(ls)-maxLone)
			break
		}
		fmt.Fprintf(bw, "  %s: %s at %s: %s (%s)\n", side, netip.AddrPortFrom(l.Peer, l.SrcPort), l.Time.UTC().Format(text.TimeLayout), l.Reason, l.Detail)
	}
}

// writeVerdictText writes what the server's list lacks of the chain, one
// line per disagreement, and the conclusion: the two agree (same, what),
// agree on every interval both saw, or reach different verdicts.
func (c CrossCheck) writeVerdictText(bw *bufio.Writer, same string) {
	if c.ServerSaw < c.ChainAttempts {
		reasons := slices.Sorted(maps.Keys(c.ServerMissed))
		parts := make([]string, len(reasons))
		for i, r := range reasons {
			parts[i] = fmt.Sprintf("%d %s", c.ServerMissed[r], r)
		}
		fmt.Fprintf(bw, "the server saw %d of the %s of %s: %s\n", c.ServerSaw, text.Plural(c.ChainAttempts, "attempt"),
			chainText(c.VerifiedPeer), strings.Join(parts, ", "))
	}
	for _, d := range c.Disagreements {
		fmt.Fprintf(bw, "DISAGREE interval %d: %s\n", d.K, d.Cause)
	}
	switch {
	case c.Agree:
		fmt.Fprintln(bw, "kernel and server timestamps agree: "+same)
	case len(c.Disagreements) > 0:
	case c.ServerSaw < c.ChainAttempts || c.KernelPassed == c.ServerPassed:
		fmt.Fprintln(bw, "kernel and server timestamps agree on every interval both saw")
	default:
		fmt.Fprintf(bw, "kernel and server verdicts differ: kernel passed=%v, server passed=%v\n", c.KernelPassed, c.ServerPassed)
	}
}

// WriteText writes the cross-check for a person: every pair with its app
// delay, the attempts one side saw with their reasons, the delay
// distribution, and one line per disagreement, or one line saying the two
// agree.
func (c CrossCheck) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	if c.ServerSide == ServerSideBackoff {
		c.writeBackoffText(bw)
		return bw.Flush()
	}
	fmt.Fprintf(bw, "cross-check, kernel SYN against server accept by peer ip and port: %s, %d kernel only, %d server only\n",
		text.Plural(len(c.Pairs), "pair"), len(c.KernelOnly), len(c.ServerOnly))
	if len(c.Pairs) > 0 {
		fmt.Fprintf(bw, "  %-24s %-30s  %-30s  %12s\n", "peer", "kernel time", "accept time", "app delay")
	}
	for _, p := range c.Pairs {
		mark := ""
		if p.Foreign {
			mark = "  (foreign peer)"
		}
		fmt.Fprintf(bw, "  %-24s %-30s  %-30s  %9.1f µs%s\n", netip.AddrPortFrom(p.Peer, p.SrcPort),
			p.KernelTime.UTC().Format(text.TimeLayout), p.AcceptTime.UTC().Format(text.TimeLayout),
			float64(p.Delay)/float64(time.Microsecond), mark)
	}
	writeLone(bw, "kernel only", c.KernelOnly)
	writeLone(bw, "server only", c.ServerOnly)
	if d := c.Delay; d.Count > 0 {
		fmt.Fprintf(bw, "app delay over %s: min %.1f µs, median %.1f µs, p99 %.1f µs, max %.1f µs\n",
			text.Plural(d.Count, "pair"), d.MinUS, d.MedianUS, d.P99US, d.MaxUS)
	}
	c.writeVerdictText(bw, "same attempts, same verdict on every interval")
	return bw.Flush()
}
