package realclients

// One wire, one verdict: the readings of a run (readings_test.go), the
// server's log and the client's own check must say the same of it.

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/report"
	"github.com/backoff-audit/audit/session"
)

// wantAgree holds the run's readings to one another: every reading judged
// the one session, with the same chain (its attempts, their fates, every
// interval, the verdicts, the recovery), the same server verdict and the
// same cross-check. They read one wire: their failures are the product's,
// whatever the client or the machine did.
func wantAgree(t testing.TB, o outcome) {
	t.Helper()
	if o.readings == nil {
		return
	}
	ref := o.readings[readLive]
	judged := true
	for _, name := range readingOrder {
		r := o.readings[name]
		if r.err != nil || r.outcome.Nothing != "" {
			t.Errorf("%s: %v %s\nstderr:\n%s", name, r.err, r.outcome.Nothing, r.errOut)
			judged = false
			continue
		}
		if s := r.session(); s == nil || s.Cause != session.CauseStop || s.VerifiedPeer != loopback.String() {
			t.Errorf("%s: session %+v; want one, ended by Stop, verified peer %s", name, s, loopback)
			judged = false
		}
		if r.chain() == nil {
			t.Errorf("%s: no chain of the verified peer among peers %v", name, peersOf(r.doc))
			judged = false
		}
	}
	if !judged {
		return
	}
	for _, name := range readingOrder[1:] {
		r := o.readings[name]
		base, opts := readLive, acrossHandles
		if b, ok := sameCapture[name]; ok {
			base, opts = b, exactly
		}
		if isControl(name) != isControl(base) {
			opts = append(slices.Clip(opts), scheduledReturn)
		}
		if diff := cmp.Diff(o.readings[base].chain(), r.chain(), opts...); diff != "" {
			t.Errorf("the verified chain (-%s +%s):\n%s", base, name, diff)
		}
		if got, want := failed(r), failed(ref); got != want {
			t.Errorf("%s: %d sessions failed (exit %d), %s: %d", name, got, exitOf(got), readLive, want)
		}
		if diff := cmp.Diff(serverOf(ref, isControl(name)), serverOf(r, isControl(name))); diff != "" {
			t.Errorf("the server's verdict (-%s +%s):\n%s", readLive, name, diff)
		}
		if diff := cmp.Diff(crossOf(ref), crossOf(r), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("the cross-check (-%s +%s):\n%s", readLive, name, diff)
		}
	}
}

// wantServerSaw holds the server's side to the readings, where they are
// made: no disagreement on an attempt both kernel and server saw, and the
// server's log and the client's own check say what the readings say. A
// server that stamps an accept late on a loaded machine (docs/spec.md
// §5.1) disagrees, rightly, and every reading says so; such a try is made
// again, as a stalled client's is.
func wantServerSaw(t testing.TB, o outcome) {
	t.Helper()
	if o.readings == nil {
		return
	}
	for _, name := range readingOrder {
		cc := o.readings[name].crossCheck()
		if cc == nil {
			t.Errorf("%s: no cross-check", name)
			continue
		}
		for _, d := range cc.Disagreements {
			t.Errorf("%s: DISAGREE interval %d: %s", name, d.K, d.Cause)
		}
	}
	if kernel := o.readings[readLive].chain(); kernel != nil {
		wantLogAgrees(t, o, kernel)
		wantOwnAgrees(t, o, kernel)
	}
}

var loopback = netip.MustParseAddr("127.0.0.1")

// sameCapture names, for an offline reading, the live reading whose
// capture file it reads: the two read the same timestamps.
var sameCapture = map[string]string{readPcapRecord: readLive, readPcapControl: readAttachControl}

// handleSpread bounds how far apart two libpcap handles on lo stamp the
// same packet: the kernel stamps it for each socket as it delivers it,
// 1–150 µs apart here on a loaded machine.
const handleSpread = time.Millisecond

// scheduledReturn leaves out of a comparison the times of a recovery that
// a control port's reading measures: its port's return is the mode's
// schedule from the Start's answer, moved to where the fates show the
// port back (backoff.RetryMode.Schedule), not the server's clock, whose
// timers fire late on a loaded machine. Which attempt was the recovery, and
// whether it was on time, must still agree.
var scheduledReturn = cmpopts.IgnoreFields(backoff.Recovery{}, "AfterMS", "OwedMS", "MinMS", "MaxMS", "ReadyMS")

var (
	// exactly compares two readings' peer reports: everything, each time
	// to the nanosecond.
	exactly = []cmp.Option{cmpopts.EquateEmpty(), cmpopts.EquateComparable(netip.Addr{})}
	// acrossHandles compares the peer reports of readings from two
	// captures: every time and every interval within handleSpread (so its
	// whole ms within 1), everything else alike. A reason's figures are
	// the fields' it is written from, compared as such, and the time a
	// hung attempt waited runs to the session's end, which a control port's
	// reading takes from Stop's answer: its words must be the same.
	acrossHandles = append(slices.Clip(exactly),
		cmpopts.EquateApproxTime(handleSpread),
		cmp.Comparer(func(a, b time.Duration) bool { return (a - b).Abs() <= handleSpread }),
		cmpopts.EquateApprox(0, backoff.Millis(handleSpread)),
		cmp.Comparer(func(a, b int32) bool { return a-b <= 1 && b-a <= 1 }),
		cmp.Comparer(func(a, b string) bool { return figures.ReplaceAllString(a, "#") == figures.ReplaceAllString(b, "#") }),
		cmp.Comparer(sameEnding))
)

// sameEnding compares two handles' fates of one attempt: alike, each time
// within handleSpread, but that a READY connection both ends closed at
// once (a settings-close server's FIN and a client's that left on the
// server's SETTINGS, microseconds apart) reads as closed by either end:
// each handle has the two FINs in the order it took them.
func sameEnding(a, b backoff.Ending) bool {
	near := func(x, y time.Duration) bool { return (x - y).Abs() <= handleSpread }
	closedBy := func(f backoff.Fate) bool { return f == backoff.FateClosed || f == backoff.FateAbandoned }
	fates := a.Fate == b.Fate || a.Ready && b.Ready && closedBy(a.Fate) && closedBy(b.Fate) && near(a.Duration, b.Duration)
	return fates && near(a.Accepted, b.Accepted) && near(a.Duration, b.Duration) && near(a.ReadyAfter, b.ReadyAfter) &&
		a.ClientSent == b.ClientSent && a.ServerSent == b.ServerSent && a.Ready == b.Ready && (a.RST == b.RST || a.Fate != b.Fate)
}

// figures are the numbers of a text.
var figures = regexp.MustCompile(`[0-9]+(\.[0-9]+)?`)

func isControl(name string) bool { return name == readAttachControl || name == readPcapControl }

func peersOf(d report.Report) []string {
	var out []string
	for _, p := range d.Peers {
		out = append(out, p.Peer.String())
	}
	return out
}

// failed is how many sessions the reading failed: its exit status is 1
// when any did.
func failed(r *reading) int { return r.outcome.Failed }

func exitOf(failed int) int {
	if failed > 0 {
		return 1
	}
	return 0
}

// serverOf is what a reading has of Stop's answer. A control port's
// reading has the answer only, passed and backoff_ms: the verdict it
// names is read from them (passed=false with no interval is "too few
// attempts", or a hung attempt the server failed), and the server's
// reason is not on the wire.
func serverOf(r *reading, answerOnly bool) *report.ServerVerdict {
	sv := r.server()
	if sv == nil || !answerOnly {
		return sv
	}
	return &report.ServerVerdict{Passed: sv.Passed, BackoffMS: sv.BackoffMS}
}

// crossView is what two readings' cross-checks must share: how many of
// the chain's attempts the server saw, why it missed the others, and both
// verdicts.
type crossView struct {
	KernelPassed, ServerPassed bool
	ChainAttempts, ServerSaw   int
	ServerMissed               map[string]int
	Disagreements              int
}

func crossOf(r *reading) *crossView {
	cc := r.crossCheck()
	if cc == nil {
		return nil
	}
	return &crossView{KernelPassed: cc.KernelPassed, ServerPassed: cc.ServerPassed, ChainAttempts: cc.ChainAttempts,
		ServerSaw: cc.ServerSaw, ServerMissed: cc.ServerMissed, Disagreements: len(cc.Disagreements)}
}

// logInterval is the server's log line of one interval (slog's text:
// the reference's line as msg, then its attributes).
var logInterval = regexp.MustCompile(`msg="retry +(\d+):backoff +([0-9.]+)s,expected backoff +[0-9.]+s, (?:jitter [^"]*|reset)" session=(\d+) peer=(\S+) (ok=true|ok=false|judged=false)`)

// logEnd is the server's line at a session's end.
var logEnd = regexp.MustCompile(`msg="session ended" session=(\d+) cause=\S+ verdict=("[^"]*"|\S+) passed=(true|false)`)

// wantLogAgrees holds the server's log to the readings: its verdict line
// says Stop's verdict, and each interval line of the verified peer is
// Stop's backoff_ms entry, judged as the kernel judged the same interval
// where the kernel's chain has the two attempts one after the other; in a
// mode where the server cannot see every attempt, not judged at all.
func wantLogAgrees(t testing.TB, o outcome, kernel *report.PeerReport) {
	t.Helper()
	end := o.end()
	ends := logEnd.FindAllStringSubmatch(o.log, -1)
	if len(ends) != 1 {
		t.Errorf("the server logged %d session ends, want 1", len(ends))
	} else if v, p := strings.Trim(ends[0][2], `"`), ends[0][3]; v != string(end.Verdict) || p != strconv.FormatBool(end.Passed) {
		t.Errorf("the server's log says verdict %s passed=%s; Stop said %s passed=%v", v, p, end.Verdict, end.Passed)
	}
	// The verified peer's accepts, by source port, in the kernel's chain.
	var accepted []int // kernel attempt index of each of the server's accepts
	for _, a := range o.session.Accepts {
		if a.Peer.Addr().Unmap() != end.VerifiedPeer {
			continue
		}
		i := slices.IndexFunc(kernel.Attempts, func(k report.AttemptReport) bool {
			return k.SrcPort == a.Peer.Port() && !k.Time.After(a.Time)
		})
		accepted = append(accepted, i)
	}
	var lines [][]string
	for _, m := range logInterval.FindAllStringSubmatch(o.log, -1) {
		if ap, err := netip.ParseAddrPort(m[4]); err == nil && ap.Addr().Unmap() == end.VerifiedPeer {
			lines = append(lines, m)
		}
	}
	if len(lines) != len(end.BackoffMS) {
		t.Errorf("the server logged %d intervals of %s, Stop answered %d", len(lines), end.VerifiedPeer, len(end.BackoffMS))
		return
	}
	for j, m := range lines {
		k, _ := strconv.Atoi(m[1])
		if want := fmt.Sprintf("%.2f", float64(end.BackoffMS[j])/1000); m[2] != want || k != j+1 {
			t.Errorf("log line %d: interval %d of %ss; Stop's backoff_ms[%d] is %d ms", j+1, k, m[2], j, end.BackoffMS[j])
		}
		if judged := m[5] != "judged=false"; judged != o.mode.ServerSeesAll() {
			t.Errorf("log line %d (%s): in %s mode the server sees every attempt: %v", j+1, m[0], o.mode, o.mode.ServerSeesAll())
			continue
		}
		if j+1 >= len(accepted) || accepted[j] < 0 || accepted[j+1] != accepted[j]+1 || m[5] == "judged=false" {
			continue // the kernel's chain has an attempt the server missed between
		}
		kiv := kernel.Intervals[accepted[j]]
		if ok := m[5] == "ok=true"; ok != kiv.OK {
			t.Errorf("log line %d (%s): %s; the kernel's interval %d, %.3f ms, is %s", j+1, m[0], m[5], kiv.K, kiv.MeasuredMS, kiv.Outcome)
		}
	}
}

// wantOwnAgrees holds the client's own check of Stop's backoff_ms, in the
// run's mode, to the readings: grpc-go's (audit client --retry_mode), or
// for a script client the check audit client makes, with what the client
// knows (whether its channel was ever READY). Where the server cannot see
// every attempt it judges nothing; elsewhere it passes exactly when the
// kernel's verdict does.
func wantOwnAgrees(t testing.TB, o outcome, kernel *report.PeerReport) {
	t.Helper()
	own := o.line.own
	if own == nil {
		run := backoff.Run{Mode: o.mode}
		if !slices.ContainsFunc(o.line.States, func(s stateAt) bool { return s.State == "READY" }) {
			run = run.NoneReady(len(o.line.BackoffMS) + 1)
		}
		r := run.VerifyBackoff(o.policy(), o.line.BackoffMS)
		own = &r
	}
	switch {
	case !o.mode.ServerSeesAll():
		if own.Reference.Verdict != backoff.NotJudged {
			t.Errorf("the client's own check: %s (%s); want %s: in %s mode Stop's list is not the chain", own.Reference.Verdict, own.Reason(), backoff.NotJudged, o.mode)
		}
	case own.Reference.Passed != kernel.Passed:
		t.Errorf("the client's own check: %s (%s); the kernel's verdict %s (%s)", own.Reference.Verdict, own.Reason(), kernel.Verdict, kernel.Reason)
	}
}

// readingsSummary is the figures of each reading, for go test -v.
func (o outcome) readingsSummary() string {
	if o.readings == nil {
		return "  readings: none (" + o.noCapture + ")"
	}
	var b strings.Builder
	for _, name := range readingOrder {
		r := o.readings[name]
		fmt.Fprintf(&b, "\n  %-36s", name+":")
		if r.err != nil {
			fmt.Fprintf(&b, " error %v", r.err)
			continue
		}
		c := r.chain()
		if c == nil {
			b.WriteString(" no chain")
			continue
		}
		var ms []string
		for _, iv := range c.Intervals[:min(len(c.Intervals), shown)] {
			ms = append(ms, strconv.FormatFloat(iv.MeasuredMS, 'f', 3, 64)+" "+string(iv.Outcome))
		}
		fmt.Fprintf(&b, " %s, %d attempts, intervals %s%s", c.Verdict, len(c.Attempts), strings.Join(ms, ", "), more(len(c.Intervals)))
		if rv := c.Recovery; rv != nil {
			fmt.Fprintf(&b, "; recovery %.0f ms after the return, ok %v", rv.AfterMS, rv.OK)
		}
		if sv := r.server(); sv != nil {
			fmt.Fprintf(&b, "; server %s", sv.Verdict)
		}
		if cc := r.crossCheck(); cc != nil {
			fmt.Fprintf(&b, ", saw %d of %d, %d DISAGREE", cc.ServerSaw, cc.ChainAttempts, len(cc.Disagreements))
		}
		fmt.Fprintf(&b, "; exit %d", exitOf(failed(r)))
	}
	return b.String()
}
