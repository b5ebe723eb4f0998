package flows

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"time"

	"github.com/backoff-audit/audit/h2"
	"github.com/backoff-audit/audit/internal/quote"
	"github.com/backoff-audit/audit/internal/text"
	"github.com/backoff-audit/audit/tlsdec"
)

// Report is what `audit h2` prints: every connection's timeline, in order
// of start, then the findings of h2.Diagnose.
type Report struct {
	Files       []string     `json:"files"`
	Connections Timelines    `json:"connections"`
	Findings    []h2.Finding `json:"findings"`
	// Retries are the RPCs retried (their attempts linked by
	// grpc-previous-rpc-attempts), each with its check against the retry
	// policy when one was given.
	Retries []Retry `json:"retries,omitempty"`
	// Problems counts the findings that are problems (h2.Finding.Problem).
	Problems int `json:"problems"`
	// Warnings are the files' (attempt.CaptureInfo.Warnings): a file cut
	// short, damaged blocks, a read interrupted.
	Warnings []string `json:"warnings,omitempty"`
	// KeyLog is the key log the TLS connections were decrypted with, and
	// what was read of it; nil without one.
	KeyLog *tlsdec.KeyLog `json:"keylog,omitempty"`
	// Ports are the ports asked for (AuditOptions.Ports), if any.
	Ports []uint16 `json:"ports,omitempty"`
}

// Verdict says why the report does not pass, "" when it does: problems
// were found.
func (rep *Report) Verdict() string {
	if rep.Problems > 0 {
		return text.Plural(rep.Problems, "problem") + " found"
	}
	return ""
}

// Nothing says why nothing was judged, "" when something was: the ports
// asked for had no connection (as `audit pcap --port` with no attempt).
func (rep *Report) Nothing() string {
	if rep.Connections.Len() == 0 && len(rep.Ports) > 0 {
		return fmt.Sprintf("no connection to port %s in the capture", joinPorts(rep.Ports))
	}
	return ""
}

func joinPorts(ps []uint16) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = fmt.Sprint(p)
	}
	return strings.Join(s, ", ")
}

// Retry is one retried RPC: its attempts, and their delays held to the
// retry policy (nil without one).
type Retry struct {
	h2.RetryChain
	Check *h2.RetryCheck `json:"check,omitempty"`
}

// Timeline is one connection as a person reads it: what matters for
// reconnects, from its h2.Report.
type Timeline struct {
	Conn      int            `json:"conn"`
	Client    netip.AddrPort `json:"client"`
	Server    netip.AddrPort `json:"server"`
	Start     time.Time      `json:"start"`
	End       time.Time      `json:"end"`
	SYN       bool           `json:"syn"`
	Ended     string         `json:"ended"`
	Encrypted bool           `json:"encrypted,omitempty"`
	// TLS is what the key log's decryption found (Conn.TLS).
	TLS      *tlsdec.Status `json:"tls,omitempty"`
	Damaged  string         `json:"damaged,omitempty"`
	Warnings []h2.Warning   `json:"warnings,omitempty"`
	// Streams counts the RPCs by method, in order of first call.
	Streams []MethodCount `json:"streams"`
	GoAways []GoAway      `json:"goaways,omitempty"`
	Pings   []Pings       `json:"pings,omitempty"`
	Resets  []Reset       `json:"rst_streams,omitempty"`
	// Refused are the streams above a server GOAWAY's last stream id.
	Refused []Refused `json:"refused_after_goaway,omitempty"`
	// Next is the client's next connection to the same server after this
	// one's server GOAWAY, else after its end.
	Next *Next `json:"next,omitempty"`
	// Dropped counts what the decoder did not keep past its limits
	// (h2.Dropped); Pings, GoAways and Resets, and the findings, count
	// every one all the same.
	Dropped h2.Dropped `json:"dropped,omitzero"`
}

// MethodCount is how many RPCs of a method a connection carried.
type MethodCount struct {
	Method string `json:"method"`
	Count  int    `json:"count"`
}

// GoAway is a GOAWAY frame with the connection's age when it came.
type GoAway struct {
	Time         time.Time     `json:"time"`
	Dir          h2.Direction  `json:"dir"`
	Age          time.Duration `json:"age_ns"`
	LastStreamID uint32        `json:"last_stream_id"`
	Code         string        `json:"code"`
	Debug        string        `json:"debug,omitempty"`
	InFlight     []uint32      `json:"in_flight"`
	MoreInFlight int           `json:"more_in_flight,omitempty"`
}

// Pings is the cadence of one side's PINGs, and how many ACKs came back.
// Count, Min and Median leave BDP probes out (h2.Cadence); Probes counts
// them, and Acks answer both.
type Pings struct {
	Dir    h2.Direction  `json:"dir"`
	Count  int           `json:"count"`
	Probes int           `json:"bdp_probes,omitempty"`
	Acks   int           `json:"acks"`
	Min    time.Duration `json:"min_interval_ns,omitempty"`
	Median time.Duration `json:"median_interval_ns,omitempty"`
}

// Reset is a RST_STREAM.
type Reset struct {
	Time   time.Time    `json:"time"`
	Dir    h2.Direction `json:"dir"`
	Stream uint32       `json:"stream"`
	Code   string       `json:"code"`
}

// Refused is a stream above a GOAWAY's last stream id, and how it ended
// (h2.Refusal).
type Refused struct {
	Stream  uint32 `json:"stream"`
	Method  string `json:"method"`
	Outcome string `json:"outcome"`
}

// Next is the client's next connection after a GOAWAY or a close.
type Next struct {
	// After is "goaway" or "close"; Conn indexes the next connection,
	// -1 when the client opened none.
	After string    `json:"after"`
	At    time.Time `json:"at"`
	Conn  int       `json:"conn"`
	// Start is the next connection's start (its SYN when captured), Delay
	// the time from At to it.
	Start time.Time     `json:"start,omitzero"`
	Delay time.Duration `json:"delay_ns,omitempty"`
}

// Write writes the report in format, "text" (WriteText) or "json"
// (WriteJSON).
func (rep *Report) Write(w io.Writer, format string) error {
	switch format {
	case "text":
		return rep.WriteText(w)
	case "json":
		return rep.WriteJSON(w)
	}
	return fmt.Errorf("write report: unknown format %q", format)
}

// WriteJSON writes the report as one indented JSON document.
//
// The connections are encoded one at a time, as they are written: the
// document of 100 000 connections is tens of MB, which encoding the
// report whole held in memory at once. The bytes are encoding/json's of
// the whole report, indented by two spaces (TestWriteJSONAsEncoder).
func (rep *Report) WriteJSON(w io.Writer) error {
	b := bufio.NewWriterSize(w, 64<<10)
	members := []struct {
		name string
		v    any
		omit bool
	}{
		{"files", rep.Files, false},
		{"connections", nil, false},
		{"findings", rep.Findings, false},
		{"retries", rep.Retries, len(rep.Retries) == 0},
		{"problems", rep.Problems, false},
		{"warnings", rep.Warnings, len(rep.Warnings) == 0},
		{"keylog", rep.KeyLog, rep.KeyLog == nil},
		{"ports", rep.Ports, len(rep.Ports) == 0},
	}
	b.WriteString("{")
	first := true
	for _, m := range members {
		if m.omit {
			continue
		}
		if !first {
			b.WriteString(",")
		}
		first = false
		fmt.Fprintf(b, "\n  %q: ", m.name)
		if m.name == "connections" {
			if err := rep.writeConnectionsJSON(b); err != nil {
				return err
			}
			continue
		}
		v, err := json.MarshalIndent(m.v, "  ", "  ")
		if err != nil {
			return err
		}
		b.Write(v)
	}
	b.WriteString("\n}\n")
	return b.Flush()
}

// writeConnectionsJSON writes the connections as an array member of the
// report, one element at a time.
func (rep *Report) writeConnectionsJSON(b *bufio.Writer) error {
	n := rep.Connections.Len()
	if n == 0 {
		b.WriteString("[]")
		return nil
	}
	b.WriteString("[")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		tl := rep.Connections.At(i)
		v, err := json.MarshalIndent(&tl, "    ", "  ")
		if err != nil {
			return err
		}
		b.WriteString("\n    ")
		b.Write(v)
	}
	b.WriteString("\n  ]")
	return nil
}

// WriteText writes the report for people: a block per connection, then
// the findings and the verdict. Every string that came from the capture
// (methods, warnings, findings) goes through quote.Text.
func (rep *Report) WriteText(w io.Writer) error {
	// Written as it goes: the text of 100 000 connections is tens of MB.
	b := bufio.NewWriterSize(w, 64<<10)
	enc, dam, dec := rep.Connections.tally()
	decrypted := ""
	if rep.KeyLog != nil {
		decrypted = fmt.Sprintf("%d decrypted with the key log, ", dec)
	}
	fmt.Fprintf(b, "%s in %s: %s%d encrypted, %d damaged\n", text.Plural(rep.Connections.Len(), "connection"),
		strings.Join(rep.Files, ", "), decrypted, enc, dam)
	if rep.KeyLog != nil {
		fmt.Fprintf(b, "key log %s\n", rep.KeyLog.Summary())
	}
	for tl := range rep.Connections.All() {
		tl.writeText(b)
	}
	b.WriteString("\nfindings:\n")
	if len(rep.Findings) == 0 {
		b.WriteString("  none\n")
	}
	for _, f := range rep.Findings {
		mark := " "
		if f.Problem {
			mark = "!"
		}
		conn := "all"
		if f.Conn >= 0 {
			conn = fmt.Sprintf("#%d", f.Conn)
		}
		fmt.Fprintf(b, "%s %-20s %-4s %s\n", mark, f.Kind, conn, quote.Text(f.Text))
	}
	switch v := rep.Verdict(); {
	case rep.Nothing() != "":
		fmt.Fprintf(b, "\nverdict: nothing judged: %s\n", rep.Nothing())
	case v == "":
		b.WriteString("\nverdict: no problem found\n")
	default:
		fmt.Fprintf(b, "\nverdict: %s (marked !)\n", text.Plural(rep.Problems, "problem"))
	}
	return b.Flush()
}

func (tl Timeline) writeText(b *bufio.Writer) {
	syn := "SYN captured"
	if !tl.SYN {
		syn = "no SYN: began before the capture"
	}
	fmt.Fprintf(b, "\n#%d %s → %s  %s – %s (%s), %s; ended: %s\n", tl.Conn, tl.Client, tl.Server,
		tl.Start.UTC().Format(text.TimeLayout), tl.End.UTC().Format(text.TimeLayout), text.Span(tl.End.Sub(tl.Start)), syn, tl.Ended)
	if tl.TLS != nil {
		fmt.Fprintf(b, "  %s\n", tlsText(tl.TLS, tl.Encrypted))
	}
	if tl.Encrypted {
		if tl.TLS == nil {
			b.WriteString("  encrypted (TLS): not decoded\n")
		}
		return
	}
	if tl.Damaged != "" {
		fmt.Fprintf(b, "  damaged: %s\n", quote.Text(tl.Damaged))
		for _, w := range tl.Warnings {
			fmt.Fprintf(b, "    %s %s %s: %s\n", w.Time.UTC().Format(text.TimeLayout), w.Dir, w.Name, quote.Text(w.Detail))
		}
	}
	var ms []string
	for _, m := range tl.Streams {
		ms = append(ms, fmt.Sprintf("%s ×%d", quote.Text(m.Method), m.Count))
	}
	if len(ms) == 0 {
		ms = []string{"none"}
	}
	fmt.Fprintf(b, "  RPCs: %s\n", strings.Join(ms, ", "))
	if d := tl.Dropped; d != (h2.Dropped{}) {
		fmt.Fprintf(b, "  not kept past the decoder's limits: %s, %s, %s (PINGs, GOAWAYs and RST_STREAMs are counted all the same)\n",
			text.Plural(d.Events, "event"), text.Plural(d.Streams, "RPC"), text.Plural(d.Warnings, "warning"))
	}
	for _, p := range tl.Pings {
		var n []string
		if p.Count > 0 || p.Probes == 0 {
			n = append(n, fmt.Sprint(p.Count))
		}
		if p.Probes > 0 {
			n = append(n, text.Plural(p.Probes, "BDP probe"))
		}
		fmt.Fprintf(b, "  %s PINGs: %s", who(p.Dir), strings.Join(n, " and "))
		fmt.Fprintf(b, ", %d ACKed", p.Acks)
		if p.Count > 1 {
			fmt.Fprintf(b, ", interval min %s, median %s", text.Span(p.Min), text.Span(p.Median))
		}
		b.WriteString("\n")
	}
	for _, g := range tl.GoAways {
		debug := ""
		if g.Debug != "" {
			debug = fmt.Sprintf(" debug %q", g.Debug)
		}
		fmt.Fprintf(b, "  %s %s GOAWAY %s last stream %d%s at age %s, %s in flight%s\n", g.Time.UTC().Format(text.TimeLayout), who(g.Dir),
			g.Code, g.LastStreamID, debug, text.Span(g.Age), text.Plural(len(g.InFlight)+g.MoreInFlight, "stream"), ids(g.InFlight))
	}
	for _, r := range tl.Resets {
		fmt.Fprintf(b, "  %s %s RST_STREAM %s on stream %d\n", r.Time.UTC().Format(text.TimeLayout), who(r.Dir), r.Code, r.Stream)
	}
	for _, r := range tl.Refused {
		fmt.Fprintf(b, "  stream %d (%s) above the GOAWAY's last stream id: %s\n", r.Stream, quote.Text(r.Method), r.Outcome)
	}
	if n := tl.Next; n != nil {
		if n.Conn < 0 {
			fmt.Fprintf(b, "  after the %s: no new connection from the client\n", after(n.After))
		} else {
			fmt.Fprintf(b, "  after the %s: next connection #%d at %s, %s later\n", after(n.After), n.Conn,
				n.Start.UTC().Format(text.TimeLayout), text.Span(n.Delay))
		}
	}
}

func after(s string) string {
	if s == "goaway" {
		return "server's GOAWAY"
	}
	return "close"
}

func who(d h2.Direction) string {
	if d == h2.ClientToServer {
		return "client"
	}
	return "server"
}

func ids(v []uint32) string {
	if len(v) == 0 {
		return ""
	}
	s := make([]string, len(v))
	for i, id := range v {
		s[i] = fmt.Sprint(id)
	}
	return " (" + strings.Join(s, ", ") + ")"
}
