package report

import (
	"bufio"
	"cmp"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/internal/text"
	"github.com/backoff-audit/audit/report/herd"
)

// writePeersText writes every peer of ps, each after a blank line: its
// header, its table and its notes; or, when brief, a passing peer in one
// line (its header and its largest jitter), after a line that counts them.
// verbose lists every interval (appendPeerText).
func writePeersText(bw *bufio.Writer, ps *Peers, brief, verbose bool) error {
	passed := ps.Summary().Passed
	return WritePeers(bw, ps, func() struct{} { return struct{}{} }, func(b []byte, _ struct{}, i int, report func() *PeerReport) ([]byte, error) {
		p := &ps.peers[i]
		if !brief || !p.passed() {
			b = append(b, '\n')
			return appendPeerText(b, *report(), verbose), nil
		}
		if i == 0 || !ps.peers[i-1].passed() {
			b = append(b, '\n')
			b = text.AppendPlural(b, passed, "passing peer")
			b = append(b, ", one line each:\n"...)
		}
		b = appendPeerHeader(b, p.header(""))
		b = append(b, "; max |jitter| "...)
		b = strconv.AppendFloat(b, p.maxJitter, 'f', 2, 64)
		return append(b, "%\n"...), nil
	})
}

// writeSummaryText writes the summary line after a blank line, and the
// cap every failing peer fits when there is one.
func writeSummaryText(bw *bufio.Writer, s Summary) {
	bw.WriteByte('\n')
	fmt.Fprintln(bw, s.String())
	if line := s.CapLine(); line != "" {
		fmt.Fprintln(bw, line)
	}
}

// writeHerdText writes the herd reading after a blank line, when there is
// one.
func writeHerdText(bw *bufio.Writer, h *herd.Reading) error {
	if h == nil {
		return nil
	}
	bw.WriteByte('\n')
	return h.WriteText(bw)
}

// writeRecordText writes, for a capture read with a server's sessions,
// where the policy came from (p, when the command line gave it) and what
// the record holds.
func writeRecordText(bw *bufio.Writer, p backoff.Policy, rec *RecordInfo, sessions int) {
	switch {
	case rec.Policy == PolicyFromRecord && rec.ControlPort != 0:
		fmt.Fprintln(bw, "policy: each session's own, from the max_reconnect_backoff_ms of its Start call")
	case rec.Policy == PolicyFromRecord:
		fmt.Fprintln(bw, "policy: each session's own, from its Start line in the record")
	case rec.ControlPort != 0:
		fmt.Fprintf(bw, "policy: %v, from the command line; it overrides each session's Start call\n", p)
	default:
		fmt.Fprintf(bw, "policy: %v, from the command line; it overrides each session's Start line\n", p)
	}
	if rec.ControlPort != 0 {
		fmt.Fprintf(bw, "server's control port %d (its Start and Stop calls; the server's list is Stop's backoff_ms): %s judged",
			rec.ControlPort, text.Plural(sessions, "session"))
	} else {
		fmt.Fprintf(bw, "server record %s: %s judged", rec.Path, text.Plural(sessions, "session"))
	}
	for i, o := range rec.Outside {
		if i == 0 {
			bw.WriteString("; outside the capture, not judged:")
		}
		fmt.Fprintf(bw, " session %d (%s – %s)", o.Number, o.Start, cmp.Or(o.End, "open"))
	}
	bw.WriteString("\n")
}

// appendUnseen says that answers of the attempts are missing from the
// capture: captured of them had theirs.
func appendUnseen(b []byte, captured, attempts int) []byte {
	return fmt.Appendf(b, "answers captured for %d of %s; the capture holds no answer and no SYN retransmission for the other %d (one direction captured, a filter, or drops), so the next SYN shows each ended: they are judged by the backoff window\n",
		captured, text.Plural(attempts, "attempt"), attempts-captured)
}

// writeTextHeader writes the capture's line and the policy's.
func writeTextHeader(w *bufio.Writer, h *Head) {
	writeCaptureLine(w, h.Port, h.Capture)
	text := modeText(h.Policy, h.Mode)
	if h.ModeInferred && text != "" {
		text += " (inferred from the fates)"
	}
	fmt.Fprintf(w, "policy: %v%s\n", h.Policy, text)
}

// modeText is what a report's policy line adds for a retry mode other than
// the interop test's.
func modeText(p backoff.Policy, m backoff.RetryMode) string {
	switch {
	case m.Is(backoff.ModeClose):
		return ""
	case m.Hangs():
		return fmt.Sprintf("; retry mode %v, connect timeout %v", m, p.MinConnectTimeout)
	}
	return fmt.Sprintf("; retry mode %v", m)
}

func writeCaptureLine(w *bufio.Writer, port uint16, c attempt.CaptureInfo) {
	fmt.Fprintf(w, "port %d: %d packets in %s, %s, %s, %s\n",
		port, c.Packets, text.Plural(len(c.Files), "file"), text.Plural(int(c.SYNs), "SYN"),
		text.Plural(c.Attempts, "attempt"), text.Plural(c.Retransmits, "retransmit"))
	if c.SYNOnly {
		w.WriteString(synOnlyNote + "\n")
	}
}

// synOnlyNote is what a text report says, once, of a capture of SYNs
// only (docs/spec.md §7).
const synOnlyNote = "the capture holds only SYNs: fates unknown"

// appendPeerText appends a peer's header line, first attempt and interval
// table, then its notes and fates. A chain of READY connections (a storm)
// says how fast it reconnected first; unless verbose, a run of intervals
// after READY connections, which are not judged, is one line.
func appendPeerText(b []byte, p PeerReport, verbose bool) []byte {
	b = appendPeerHeader(b, p.header())
	b = append(b, '\n')
	if len(p.Attempts) > 0 {
		b = append(b, "  first attempt "...)
		b = p.Attempts[0].Time.UTC().AppendFormat(b, text.TimeLayout)
		b = append(b, " from port "...)
		b = strconv.AppendUint(b, uint64(p.Attempts[0].SrcPort), 10)
		b = append(b, '\n')
		if p.BegunBefore {
			b = append(b, "  note: "+BegunBeforeNote+"\n"...)
		}
	}
	if rc := p.Reconnects; rc != nil {
		loop := "it kept backing off"
		if rc.TightLoop {
			loop = "a tight loop: the client reset its backoff after each success"
		}
		b = fmt.Appendf(b, "  reconnects: %.2f a second, median interval %.0f ms: %s\n", rc.PerSecond, rc.MedianMS, loop)
	}
	if len(p.Intervals) > 0 {
		b = append(b, intervalHead...)
		for i := 0; i < len(p.Intervals); i++ {
			j := i
			for j < len(p.Intervals) && p.Intervals[j].Term == backoff.TermReset {
				j++
			}
			if !verbose && j-i >= minResetRun {
				b = appendResetRun(b, p.Intervals[i:j])
				i = j - 1
				continue
			}
			b = appendIntervalRow(b, p.Intervals[i])
		}
	}
	if rc := p.Recovery; rc != nil {
		verdict := "outside it"
		if rc.OK {
			verdict = "ok"
		}
		b = fmt.Appendf(b, "  recovery: attempt %d came %.0f ms after the port's return; the backoff owed %.0f ms then (window %.0f–%.0f ms): %s",
			rc.Attempt+1, rc.AfterMS, rc.OwedMS, rc.MinMS, rc.MaxMS, verdict)
		if rc.ReadyMS != nil {
			b = fmt.Appendf(b, "; READY %.0f ms after the return", *rc.ReadyMS)
		}
		b = append(b, '\n')
	}
	for _, sg := range p.Signatures {
		b = fmt.Appendf(b, "  signature: %s (seen in %s): %s\n", sg.Name, sg.Seen, sg.Detail)
	}
	if p.Unseen > 0 {
		b = appendUnseen(append(b, "  "...), len(p.Attempts)-p.Unseen, len(p.Attempts))
	}
	if verbose && len(p.States) > 0 {
		b = appendStates(b, p)
	}
	return appendFatesText(b, p.Attempts, verbose)
}

// appendStates appends the channel's states, one line: each from the
// first attempt, in ms.
func appendStates(b []byte, p PeerReport) []byte {
	b = append(b, "  states (ms from the first attempt):"...)
	t0 := p.Attempts[0].Time
	for _, st := range p.States {
		b = fmt.Appendf(b, " %s %.1f", st.State, backoff.Millis(st.At.Sub(t0)))
	}
	return append(b, '\n')
}

// minResetRun is the shortest run of intervals after READY connections
// that the text gives one line.
const minResetRun = 3

// appendResetRun appends one line for a run of intervals after READY
// connections: how many, and their range.
func appendResetRun(b []byte, ivs []backoff.Interval) []byte {
	lo, hi := ivs[0].MeasuredMS, ivs[0].MeasuredMS
	for _, iv := range ivs {
		lo, hi = min(lo, iv.MeasuredMS), max(hi, iv.MeasuredMS)
	}
	return fmt.Appendf(b, "  %3d–%d: %d intervals after READY connections, %.3f–%.3f ms: reset, not judged (-v lists them)\n",
		ivs[0].K, ivs[len(ivs)-1].K, len(ivs), lo, hi)
}

// fateHead heads the table of the attempts' fates.
var fateHead = fmt.Sprintf("  %3s %6s  %-19s %12s %16s %12s  %-16s  %s\n",
	"#", "port", "fate", "accepted ms", "after accept ms", "ended ms", "client sent", "server sent")

// appendFatesText appends the attempts' fates (docs/spec.md §7): the
// fate, the time from the SYN to the SYN-ACK, from the SYN-ACK to the end
// (how long a server that closed first held the connection), and from the
// SYN to the end (when a client that closed first gave up), and the first
// bytes each side sent. When every attempt ended alike (one fate, the same
// first bytes), one line says so with the range of each time; else a
// table, one row an attempt, "-" where the fate has none. Nothing when no
// fate is known.
func appendFatesText(b []byte, as []AttemptReport, verbose bool) []byte {
	known := false
	type group struct {
		e  *backoff.Ending
		as []AttemptReport
	}
	var groups []group
	for i := range as {
		e := &as[i].Ending
		known = known || e.ReportFate() != backoff.FateUnknown
		g := slices.IndexFunc(groups, func(g group) bool {
			return e.ReportFate() == g.e.ReportFate() && e.ClientSent == g.e.ClientSent && e.ServerSent == g.e.ServerSent && e.Ready == g.e.Ready &&
				e.Decrypted == g.e.Decrypted && e.NotDecrypted == g.e.NotDecrypted
		})
		if g < 0 {
			groups = append(groups, group{e: e})
			g = len(groups) - 1
		}
		groups[g].as = append(groups[g].as, as[i])
	}
	switch {
	case !known:
		return b
	case len(groups) == 1 && len(as) > 1, !verbose && len(as) > TablesUpTo:
		for _, g := range groups {
			b = appendFatesAlike(b, g.as, len(g.as) == len(as))
		}
		return b
	}
	b = append(b, fateHead...)
	var num [64]byte
	for i := range as {
		e := &as[i].Ending
		b = append(b, "  "...)
		b = appendPadded(b, strconv.AppendInt(num[:0], int64(i+1), 10), 3)
		b = append(b, ' ')
		b = appendPadded(b, strconv.AppendUint(num[:0], uint64(as[i].SrcPort), 10), 6)
		b = append(b, "  "...)
		b = appendLeft(b, string(e.ReportFate()), 19)
		b = append(b, ' ')
		accepted, ended := e.Fate.Accepted(), e.Fate.Ended()
		b = appendPadded(b, msText(num[:0], e.Accepted, accepted), 12)
		b = append(b, ' ')
		b = appendPadded(b, msText(num[:0], e.Duration-e.Accepted, accepted && ended), 16)
		b = append(b, ' ')
		b = appendPadded(b, msText(num[:0], e.Duration, ended), 12)
		b = append(b, "  "...)
		b = appendLeft(b, sentText(e.ClientSent), 16)
		b = append(b, "  "...)
		b = append(b, sentText(e.ServerSent)...)
		if e.Ready {
			b = msText(append(b, "; ready at "...), e.ReadyAfter, true)
			b = append(b, " ms"...)
		}
		b = appendDecryptedText(b, e)
		b = append(b, '\n')
	}
	return b
}

// appendFatesAlike is appendFatesText's line for attempts that ended
// alike (all of the chain's, when all), a group of them: the fate, the
// range of each time it has, and the first bytes.
func appendFatesAlike(b []byte, as []AttemptReport, all bool) []byte {
	e := &as[0].Ending
	if all {
		b = fmt.Appendf(b, "  fates: all %d %s", len(as), e.ReportFate())
	} else {
		b = fmt.Appendf(b, "  fates: %d %s", len(as), e.ReportFate())
	}
	accepted, ended := e.Fate.Accepted(), e.Fate.Ended()
	if accepted {
		b = appendMSRange(b, ", accepted after ", as, func(e *backoff.Ending) time.Duration { return e.Accepted })
	}
	if accepted && ended {
		b = appendMSRange(b, ", held ", as, func(e *backoff.Ending) time.Duration { return e.Duration - e.Accepted })
	}
	if ended {
		b = appendMSRange(b, ", ended at ", as, func(e *backoff.Ending) time.Duration { return e.Duration })
	}
	client, server := string(e.ClientSent), string(e.ServerSent)
	if client == "" {
		client = "nothing"
	}
	if server == "" {
		server = "nothing"
	}
	b = fmt.Appendf(b, "; client sent %s, server sent %s", client, server)
	if e.Ready {
		b = appendMSRange(b, "; READY at ", as, func(e *backoff.Ending) time.Duration { return e.ReadyAfter })
	}
	return append(appendDecryptedText(b, e), '\n')
}

// appendDecryptedText says what a key log made of an attempt's TLS:
// decrypted (READY is then its SETTINGS inside), or why not.
func appendDecryptedText(b []byte, e *backoff.Ending) []byte {
	switch {
	case e.Decrypted && e.NotDecrypted != "":
		return append(append(b, "; decrypted with the key log, then "...), e.NotDecrypted...)
	case e.Decrypted:
		return append(b, "; decrypted with the key log"...)
	case e.NotDecrypted != "":
		return append(append(b, "; not decrypted: "...), e.NotDecrypted...)
	}
	return b
}

// appendMSRange appends label and the range of what over the
// attempts, in milliseconds ("0.020–0.029 ms", or one value when all are
// equal).
func appendMSRange(b []byte, label string, as []AttemptReport, what func(*backoff.Ending) time.Duration) []byte {
	lo, hi := what(&as[0].Ending), what(&as[0].Ending)
	for i := range as {
		d := what(&as[i].Ending)
		lo, hi = min(lo, d), max(hi, d)
	}
	b = msText(append(b, label...), lo, true)
	if hi != lo {
		b = msText(append(b, "–"...), hi, true)
	}
	return append(b, " ms"...)
}

// sentText names a side's first bytes, "-" for none.
func sentText(p backoff.Payload) string {
	if p == "" {
		return "-"
	}
	return string(p)
}

// appendLeft appends s left-aligned in width bytes: the names of fates
// and first bytes are ASCII.
func appendLeft(b []byte, s string, width int) []byte {
	b = append(b, s...)
	for n := len(s); n < width; n++ {
		b = append(b, ' ')
	}
	return b
}

// msText is d in milliseconds with three decimals (whole microseconds,
// rounded half to even), or "-" when not ok. It formats integers, where
// strconv.AppendFloat took four times as long: a report's tables have
// three times a row.
func msText(b []byte, d time.Duration, ok bool) []byte {
	switch {
	case !ok:
		return append(b, '-')
	case d == math.MinInt64:
		return strconv.AppendFloat(b, backoff.Millis(d), 'f', 3, 64)
	case d < 0:
		b = append(b, '-')
		d = -d
	}
	us, r := int64(d)/1000, int64(d)%1000
	if r > 500 || r == 500 && us%2 == 1 {
		us++
	}
	b = strconv.AppendInt(b, us/1000, 10)
	return append(b, '.', byte('0'+us/100%10), byte('0'+us/10%10), byte('0'+us%10))
}

// intervalHead heads the interval table.
var intervalHead = fmt.Sprintf("  %3s %13s %12s %17s %9s  %s\n", "k", "measured ms", "expected ms", "window ms", "jitter", "verdict")

// appendIntervalRow appends an interval's row of the table, as
//
//	fmt.Sprintf("  %3d %13.3f %12.1f %17s %+8.2f%%  %s\n", k, measured, expected, window, jitter, verdict)
//
// would, window being fmt.Sprintf("%.1f–%.1f", min, max), at a tenth of
// the cost: failing peers have thousands of rows.
func appendIntervalRow(b []byte, iv backoff.Interval) []byte {
	var num [64]byte
	b = append(b, "  "...)
	b = appendPadded(b, strconv.AppendInt(num[:0], int64(iv.K), 10), 3)
	b = append(b, ' ')
	b = appendPadded(b, strconv.AppendFloat(num[:0], iv.MeasuredMS, 'f', 3, 64), 13)
	b = append(b, ' ')
	b = appendPadded(b, strconv.AppendFloat(num[:0], iv.ExpectedMS, 'f', 1, 64), 12)
	b = append(b, ' ')
	window := strconv.AppendFloat(num[:0], iv.MinMS, 'f', 1, 64)
	window = append(window, "–"...)
	window = strconv.AppendFloat(window, iv.MaxMS, 'f', 1, 64)
	b = appendPadded(b, window, 17)
	b = append(b, ' ')
	jitter := strconv.AppendFloat(num[:1], iv.JitterPct, 'f', 2, 64)
	if c := jitter[1]; c == '-' || c == '+' {
		jitter = jitter[1:] // %+ adds a sign only where there is none
	} else {
		jitter[0] = '+'
	}
	b = appendPadded(b, jitter, 8)
	b = append(b, "%  "...)
	b = append(b, iv.Outcome...)
	if iv.Term != "" {
		b = append(b, " ("...)
		b = append(b, iv.Term...)
		b = append(b, ')')
	}
	return append(AppendStrictNote(b, iv), '\n')
}

// AppendStrictNote appends what the strict reading (docs/spec.md §3.7)
// says of interval iv where it differs from the reference's verdict:
// ", strict: fails" or ", strict: ok".
func AppendStrictNote(b []byte, iv backoff.Interval) []byte {
	switch {
	case iv.OK && !iv.StrictOK:
		b = append(b, ", strict: fails"...)
	case !iv.OK && iv.StrictOK:
		b = append(b, ", strict: ok"...)
	}
	return b
}

// appendPadded appends s right-aligned in width characters (runes, as
// fmt counts them).
func appendPadded(b, s []byte, width int) []byte {
	for n := utf8.RuneCount(s); n < width; n++ {
		b = append(b, ' ')
	}
	return append(b, s...)
}

func (p PeerReport) header() peerHeader {
	return peerHeader{peer: p.Peer, attempts: len(p.Attempts), retrans: p.Retransmits, verdict: p.Verdict,
		reason: p.Reason, strict: p.Strict, passed: p.Passed, refPassed: p.ReferencePassed}
}

// peerHeader is what a peer's first line says.
type peerHeader struct {
	peer              netip.Addr
	attempts, retrans int
	verdict           backoff.Verdict
	reason            string
	strict            backoff.Reading
	passed, refPassed bool
}

func (p *auditPeer) header(reason string) peerHeader {
	return peerHeader{peer: p.Addr(), attempts: int(p.attempts), retrans: int(p.retrans), verdict: p.Verdict(),
		reason: reason, strict: p.Strict(), passed: p.passed(), refPassed: p.flags&apRefPassed != 0}
}

// appendPeerHeader appends a peer's first line, without its newline. It
// appends rather than prints: a report may have 10 000 of them.
func appendPeerHeader(b []byte, h peerHeader) []byte {
	b = append(b, "peer "...)
	b = h.peer.AppendTo(b)
	b = append(b, ": "...)
	b = text.AppendPlural(b, h.attempts, "attempt")
	b = append(b, ", "...)
	b = text.AppendPlural(b, h.retrans, "retransmit")
	b = append(b, ", "...)
	b = append(b, h.verdict...)
	if h.reason != "" && h.verdict != backoff.TooFew {
		b = append(b, ": "...)
		b = append(b, h.reason...)
	}
	if h.verdict != backoff.TooFew {
		b = append(b, "; strict: "...)
		b = append(b, h.strict.Verdict...)
		if h.strict.FirstFailure > 0 {
			b = append(b, " at interval "...)
			b = strconv.AppendInt(b, int64(h.strict.FirstFailure), 10)
		}
	}
	if h.refPassed != h.passed {
		b = append(b, "; the C++ reference would say passed"...)
	}
	return b
}
