package session

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var (
	xt0     = time.Date(2025, 1, 2, 15, 4, 5, 0, time.UTC)
	xClient = netip.MustParseAddr("127.0.0.1")
	xOther  = netip.MustParseAddr("127.0.0.2")
	xServer = netip.MustParseAddrPort("127.0.0.1:50052")
	// netip values compare with ==; time.Time with its Equal method.
	xopts = cmpopts.EquateComparable(netip.Addr{}, netip.AddrPort{})
)

// at is a time offset from xt0 in milliseconds (fractions allowed).
func at(msec float64) time.Time { return xt0.Add(time.Duration(msec * float64(time.Millisecond))) }

func syn(addr netip.Addr, port uint16, msec float64) attempt.Attempt {
	return attempt.Attempt{Time: at(msec), Src: netip.AddrPortFrom(addr, port), Dst: xServer}
}

func acc(addr netip.Addr, port uint16, msec float64) Accept {
	return Accept{Peer: netip.AddrPortFrom(addr, port), Time: at(msec)}
}

// crossInput is a session from 0 to 10 s on xClient with a 1 s cap.
func crossInput() CrossInput {
	return CrossInput{Policy: backoff.ReferencePolicy(1000), VerifiedPeer: xClient, Start: at(-50), End: at(10000)}
}

// kernelChain is five attempts 1000 ms apart from ports 40001….
func kernelChain() []attempt.Attempt {
	var as []attempt.Attempt
	for i := range 5 {
		as = append(as, syn(xClient, uint16(40001+i), float64(i)*1000))
	}
	return as
}

// accepted is the server's side of kernelChain with the given app delays (ms).
func accepted(delays ...float64) []Accept {
	var as []Accept
	for i, d := range delays {
		as = append(as, acc(xClient, uint16(40001+i), float64(i)*1000+d))
	}
	return as
}

func TestCrossCheckAgree(t *testing.T) {
	c := NewCrossCheck(crossInput(), kernelChain(), accepted(0.3, 0.2, 5, 0.4, 0.25))
	if !c.Agree || !c.KernelPassed || !c.ServerPassed {
		t.Errorf("Agree, KernelPassed, ServerPassed = %v, %v, %v; want all true", c.Agree, c.KernelPassed, c.ServerPassed)
	}
	if len(c.Pairs) != 5 || len(c.KernelOnly) != 0 || len(c.ServerOnly) != 0 || len(c.Disagreements) != 0 {
		t.Fatalf("pairs %d, kernel only %d, server only %d, disagreements %d; want 5, 0, 0, 0",
			len(c.Pairs), len(c.KernelOnly), len(c.ServerOnly), len(c.Disagreements))
	}
	want := Pair{Peer: xClient, SrcPort: 40003, KernelTime: at(2000), AcceptTime: at(2005), Delay: 5 * time.Millisecond}
	if diff := cmp.Diff(want, c.Pairs[2], xopts); diff != "" {
		t.Errorf("pair 3 (-want +got):\n%s", diff)
	}
	wantDelay := DelayStats{Count: 5, MinUS: 200, MedianUS: 300, P99US: 5000, MaxUS: 5000}
	if diff := cmp.Diff(wantDelay, c.Delay); diff != "" {
		t.Errorf("delay (-want +got):\n%s", diff)
	}
	var b strings.Builder
	if err := c.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "agree") {
		t.Errorf("text does not say the two agree:\n%s", b.String())
	}
}

func TestCrossCheckDelayedAccept(t *testing.T) {
	// Attempt 3's accept is 400 ms late: interval 2 grows to 1400 ms (late,
	// window 700–1300) and interval 3 shrinks to 600 ms (early).
	c := NewCrossCheck(crossInput(), kernelChain(), accepted(0.3, 0.3, 400.3, 0.3, 0.3))
	if c.Agree || !c.KernelPassed || c.ServerPassed {
		t.Errorf("Agree, KernelPassed, ServerPassed = %v, %v, %v; want false, true, false", c.Agree, c.KernelPassed, c.ServerPassed)
	}
	want := []Disagreement{
		{K: 2, ServerK: 2, KernelOK: true, ServerOK: false, KernelMS: 1000, ServerMS: 1400, Attempt: 3, SrcPort: 40003, ShiftMS: 400, ToleranceMS: 100},
		{K: 3, ServerK: 3, KernelOK: true, ServerOK: false, KernelMS: 1000, ServerMS: 600, Attempt: 3, SrcPort: 40003, ShiftMS: -400, ToleranceMS: 100},
	}
	if diff := cmp.Diff(want, c.Disagreements, cmpopts.IgnoreFields(Disagreement{}, "Cause")); diff != "" {
		t.Errorf("disagreements (-want +got):\n%s", diff)
	}
	for _, d := range c.Disagreements {
		if !strings.Contains(d.Cause, "attempt 3 (port 40003)") || !strings.Contains(d.Cause, "400.000 ms") {
			t.Errorf("interval %d: cause %q does not name attempt 3 and its 400 ms", d.K, d.Cause)
		}
	}
}

func TestCrossCheckLone(t *testing.T) {
	kernel := append(kernelChain(),
		syn(xClient, 39999, -500),  // before Start
		syn(xClient, 40100, 4500),  // in the session, never accepted
		syn(xOther, 41000, 2500),   // foreign, the server recorded nothing from it
		syn(xOther, 41001, 12000),  // foreign and after Stop
		syn(xClient, 40200, 10500), // after Stop
	)
	server := append(accepted(0.3, 0.3, 0.3, 0.3, 0.3), acc(xClient, 40300, 7000))
	in := crossInput()
	in.Lost = 3
	c := NewCrossCheck(in, kernel, server)
	type lone struct {
		Peer   netip.Addr
		Port   uint16
		Reason string
	}
	var got []lone
	for _, l := range append(c.KernelOnly, c.ServerOnly...) {
		got = append(got, lone{l.Peer, l.SrcPort, l.Reason})
	}
	want := []lone{
		{xClient, 39999, ReasonOutside},
		{xOther, 41000, ReasonForeign},
		{xClient, 40100, ReasonRefused},
		{xClient, 40200, ReasonOutside},
		{xOther, 41001, ReasonOutside},
		{xClient, 40300, ReasonCaptureDrop},
	}
	if diff := cmp.Diff(want, got, xopts); diff != "" {
		t.Errorf("lone attempts (-want +got):\n%s", diff)
	}
	if c.Agree {
		t.Error("Agree = true with attempts one side missed")
	}
	// The attempt the server did not record is counted, not a
	// disagreement: a disagreement is about one attempt both sides saw.
	if len(c.Disagreements) != 0 || c.ChainAttempts != 6 || c.ServerSaw != 5 ||
		!cmp.Equal(c.ServerMissed, map[string]int{"never recorded by the server": 1}) {
		t.Errorf("disagreements %+v, server saw %d of %d, missed %v; want none, 5 of 6, 1 never recorded",
			c.Disagreements, c.ServerSaw, c.ChainAttempts, c.ServerMissed)
	}
	var text bytes.Buffer
	c.WriteText(&text)
	if !strings.Contains(text.String(), "the server saw 5 of the 6 attempts of 127.0.0.1: 1 never recorded by the server") {
		t.Errorf("text:\n%s", text.String())
	}
}

func TestCrossCheckAcceptedAfterStop(t *testing.T) {
	// The client's last SYN comes 0.5 ms before Stop; the server accepts it
	// 0.3 ms after, outside the session. Neither side's chain holds it.
	in := crossInput()
	kernel := append(kernelChain(), syn(xClient, 40100, 9999.5), syn(xClient, 40200, 10500))
	in.Late = []Accept{acc(xClient, 40100, 10000.3), acc(xClient, 40200, 10500.2)}
	c := NewCrossCheck(in, kernel, accepted(0.3, 0.3, 0.3, 0.3, 0.3))
	if !c.Agree || len(c.Pairs) != 5 || len(c.KernelOnly) != 2 {
		t.Fatalf("agree %v, %d pairs, kernel only %+v; want agreement, 5 pairs, 2 outside", c.Agree, len(c.Pairs), c.KernelOnly)
	}
	if l := c.KernelOnly[0]; l.SrcPort != 40100 || l.Reason != ReasonOutside || !strings.Contains(l.Detail, "after the session ended") {
		t.Errorf("straddling attempt: %+v", l)
	}
	if l := c.KernelOnly[1]; l.SrcPort != 40200 || l.Reason != ReasonOutside || strings.Contains(l.Detail, "inside") {
		t.Errorf("attempt after Stop: %+v", l)
	}
	if got := len(SessionAttempts(in, kernel)); got != 5 {
		t.Errorf("SessionAttempts: %d, want the 5 both lists hold", got)
	}
}

func TestCrossCheckCaptureStartedLate(t *testing.T) {
	in := crossInput()
	in.CaptureStart = at(1500)
	c := NewCrossCheck(in, kernelChain()[2:], accepted(0.3, 0.3, 0.3, 0.3, 0.3))
	if len(c.ServerOnly) != 2 {
		t.Fatalf("server only: %d, want 2", len(c.ServerOnly))
	}
	for _, l := range c.ServerOnly {
		if l.Reason != ReasonCaptureDrop || !strings.Contains(l.Detail, "before the capture started") {
			t.Errorf("server only %d: %s (%s); want a capture drop before the capture started", l.SrcPort, l.Reason, l.Detail)
		}
	}
}

func TestCrossCheckPortReuse(t *testing.T) {
	// The client reuses port 40001 for attempts 1 and 3; the server never
	// accepted attempt 1. The accept of attempt 3 must pair with SYN 3.
	kernel := []attempt.Attempt{syn(xClient, 40001, 0), syn(xClient, 40002, 1000), syn(xClient, 40001, 2000)}
	server := []Accept{acc(xClient, 40002, 1000.5), acc(xClient, 40001, 2000.5)}
	c := NewCrossCheck(crossInput(), kernel, server)
	if len(c.Pairs) != 2 || len(c.KernelOnly) != 1 {
		t.Fatalf("pairs %d, kernel only %d; want 2, 1", len(c.Pairs), len(c.KernelOnly))
	}
	if got := c.KernelOnly[0].Time; !got.Equal(at(0)) {
		t.Errorf("kernel only at %v, want the first SYN at %v", got, at(0))
	}
	for _, p := range c.Pairs {
		if p.Delay != 500*time.Microsecond {
			t.Errorf("pair %d: delay %v, want 500µs", p.SrcPort, p.Delay)
		}
	}
}

func TestCrossCheckJSON(t *testing.T) {
	c := NewCrossCheck(crossInput(), kernelChain(), accepted(0.3, 0.3, 400.3, 0.3, 0.3))
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"agree", "pairs", "kernel_only", "server_only", "disagreements", "delay_us"} {
		if _, ok := fields[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, b)
		}
	}
	var pairs []map[string]any
	if err := json.Unmarshal(fields["pairs"], &pairs); err != nil {
		t.Fatal(err)
	}
	if len(pairs) == 0 {
		t.Fatalf("no pairs in %s", b)
	}
	pair := pairs[0]
	want := map[string]any{"peer": "127.0.0.1", "src_port": 40001.0, "kernel_time": "2025-01-02T15:04:05.000000000Z",
		"accept_time": "2025-01-02T15:04:05.000300000Z", "delay_us": 300.0}
	if diff := cmp.Diff(want, pair); diff != "" {
		t.Errorf("first pair (-want +got):\n%s", diff)
	}
	var back CrossCheck
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(c, back, cmpopts.EquateEmpty(), xopts); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

func TestDelayStats(t *testing.T) {
	tests := []struct {
		name   string
		delays []time.Duration
		want   DelayStats
	}{
		{"none", nil, DelayStats{}},
		{"one", []time.Duration{7 * time.Microsecond}, DelayStats{Count: 1, MinUS: 7, MedianUS: 7, P99US: 7, MaxUS: 7}},
		{"even count takes the lower median", []time.Duration{4000, 1000, 3000, 2000},
			DelayStats{Count: 4, MinUS: 1, MedianUS: 2, P99US: 4, MaxUS: 4}},
		{"p99 of 200 is the 198th", func() []time.Duration {
			var ds []time.Duration
			for i := 1; i <= 200; i++ {
				ds = append(ds, time.Duration(i)*time.Microsecond)
			}
			return ds
		}(), DelayStats{Count: 200, MinUS: 1, MedianUS: 100, P99US: 198, MaxUS: 200}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var pairs []Pair
			for _, d := range tt.delays {
				pairs = append(pairs, Pair{Delay: d})
			}
			if diff := cmp.Diff(tt.want, delayStats(pairs)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestSessions(t *testing.T) {
	params := &SessionParams{MaxReconnectBackoffMS: 1000, Policy: backoff.ReferencePolicy(1000)}
	start := netip.MustParseAddrPort("127.0.0.1:40000")
	end := &SessionEnd{Cause: CauseStop, Verdict: backoff.Passed, Passed: true, VerifiedPeer: xClient}
	events := []RecordEvent{
		{Event: EventAccept, Time: at(-10), Session: 0, Peer: netip.AddrPortFrom(xClient, 39000)},
		{Event: EventStart, Time: at(0), Session: 1, Peer: start, Params: params},
		{Event: EventAccept, Time: at(10), Session: 1, Peer: netip.AddrPortFrom(xClient, 40001)},
		{Event: EventAccept, Time: at(20), Session: 1, Peer: netip.AddrPortFrom(xOther, 40002)},
		{Event: EventStop, Time: at(30), Session: 1, Peer: start, End: end},
		// A second server run appended to the same file, still open.
		{Event: EventStart, Time: at(100), Session: 1, Peer: start, Params: params},
		{Event: EventAccept, Time: at(110), Session: 1, Peer: netip.AddrPortFrom(xOther, 40003)},
	}
	got := Sessions(events)
	want := []Session{
		{Number: 1, Start: at(0), Peer: start, Params: *params, End: end, EndTime: at(30),
			Accepts: []Accept{acc(xClient, 40001, 10), acc(xOther, 40002, 20)}},
		{Number: 1, Start: at(100), Peer: start, Params: *params, Accepts: []Accept{acc(xOther, 40003, 110)}},
	}
	if diff := cmp.Diff(want, got, xopts); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	// The open session's chain follows the server's rule: nothing came from
	// the Start caller's address, one other address did.
	if got := got[1].VerifiedPeer(); got != xOther {
		t.Errorf("open session chain %v, want the sole peer %v", got, xOther)
	}
	split := SplitAttempts(got, []attempt.Attempt{syn(xClient, 1, -5), syn(xClient, 2, 15), syn(xClient, 3, 50), syn(xClient, 4, 500)})
	var ports [][]uint16
	for _, as := range split {
		var ps []uint16
		for _, a := range as {
			ps = append(ps, a.Src.Port())
		}
		ports = append(ports, ps)
	}
	if diff := cmp.Diff([][]uint16{{1, 2}, {3, 4}}, ports); diff != "" {
		t.Errorf("split (-want +got):\n%s", diff)
	}
}

// Readings the caller already has are used, not verified again: the
// results given here differ from what the times would give, and win.
func TestCrossCheckUsesGivenReadings(t *testing.T) {
	in := crossInput()
	var times []time.Time
	for _, a := range kernelChain() {
		times = append(times, a.Time)
	}
	kernel := backoff.Verify(in.Policy, times)
	server := kernel
	server.Reference.Passed = false
	in.Kernel, in.Server = &kernel, &server
	c := NewCrossCheck(in, kernelChain(), accepted(0.3, 0.2, 5, 0.4, 0.25))
	if !c.KernelPassed || c.ServerPassed || c.Agree {
		t.Errorf("KernelPassed, ServerPassed, Agree = %v, %v, %v; want the given readings: true, false, false",
			c.KernelPassed, c.ServerPassed, c.Agree)
	}
}

// TestCrossCheckServerSawPart: where the server's port refused attempts
// (restart), its list is no verdict on the chain, as its own Stop says:
// the server's side of the cross-check is not judged, whichever readings
// compute it, and the attempts it missed are counted, not disagreements.
func TestCrossCheckServerSawPart(t *testing.T) {
	in := crossInput()
	in.Run = backoff.Run{Mode: backoff.RetryMode{Kind: backoff.ModeRestart, Down: 2500 * time.Millisecond}, Back: at(2500)}
	kernel := kernelChain()
	for i := range kernel[:3] {
		kernel[i].Ending = backoff.Ending{Fate: backoff.FateRefused, Duration: time.Millisecond}
	}
	// The two it accepted, 1000 ms apart: a passing chain of its own.
	c := NewCrossCheck(in, kernel, accepted(0, 0, 0, 0.3, 0.2)[3:])
	if !c.KernelPassed || c.ServerPassed || len(c.Disagreements) != 0 {
		t.Errorf("KernelPassed, ServerPassed, disagreements = %v, %v, %d; want true, false (not judged), 0",
			c.KernelPassed, c.ServerPassed, len(c.Disagreements))
	}
	if diff := cmp.Diff(map[string]int{"refused while its port was down": 3}, c.ServerMissed); diff != "" || c.ServerSaw != 2 || c.ChainAttempts != 5 {
		t.Errorf("the server saw %d of %d; missed (-want +got):\n%s", c.ServerSaw, c.ChainAttempts, diff)
	}
}
