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
)

// TestBackoffCrossCheck holds the cross-check of a server known by its
// Stop's backoff_ms only to the kernel's chain of crossInput (cap 1 s,
// attempts 1000 ms apart): the intervals in order, each verdict compared.
func TestBackoffCrossCheck(t *testing.T) {
	tests := []struct {
		name      string
		kernel    []attempt.Attempt
		backoffMS []int32
		wantAgree bool
		// wantServerPassed is the reference reading over backoff_ms.
		wantServerPassed bool
		// wantDisagree are the K of the disagreements.
		wantDisagree []int
		// wantKernelOnly are the reasons of the attempts outside the comparison.
		wantKernelOnly []string
		mode           backoff.RetryMode
		// wantText is a line the text must hold.
		wantText string
	}{
		{name: "agree", kernel: kernelChain(), backoffMS: []int32{1000, 1000, 1000, 1000},
			wantAgree: true, wantServerPassed: true},
		{name: "server's app delay moves interval 2 out", kernel: kernelChain(), backoffMS: []int32{1000, 1301, 1000, 1000},
			wantDisagree: []int{2}},
		// Without fates, nothing says which attempt the server lacks: the
		// lists are compared as far as both go, and the lengths are said,
		// not a disagreement.
		{name: "server has one interval fewer", kernel: kernelChain(), backoffMS: []int32{1000, 1000, 1000},
			wantServerPassed: true, wantText: "the server's backoff_ms has 3 intervals where the 5 attempts it could see make 4"},
		// The fates say the server could not see attempt 3 (refused while
		// its port was down): its backoff_ms of 3 intervals spans it, and
		// only the intervals between attempts it saw are compared.
		{name: "a refused attempt is counted, not a disagreement", kernel: refuseThird(kernelChain()), backoffMS: []int32{1000, 2000, 1000},
			mode: backoff.RetryMode{Kind: backoff.ModeRefuse}, wantServerPassed: false,
			wantText: "the server saw 4 of the 5 attempts of 127.0.0.1: 1 refused while its port was down"},
		// In a mode whose connections succeed, the fates say these did
		// not (their TLS handshakes failed): the server's list is judged
		// by the backoff, as the kernel's chain is, not read as resets.
		{name: "handshakes that failed are judged", kernel: failHandshakes(kernelChain()), backoffMS: []int32{1000, 1000, 1000, 300},
			mode: backoff.RetryMode{Kind: backoff.ModeSettingsClose}, wantDisagree: []int{4}},
		{name: "foreign and outside attempts are explained, not compared",
			kernel:    append(kernelChain(), syn(xOther, 50000, 500), syn(xClient, 40100, 20000)),
			backoffMS: []int32{1000, 1000, 1000, 1000}, wantAgree: true, wantServerPassed: true,
			wantKernelOnly: []string{ReasonForeign, ReasonOutside}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := crossInput()
			in.Run.Mode = tt.mode
			c := NewBackoffCrossCheck(in, tt.kernel, tt.backoffMS)
			if c.Agree != tt.wantAgree || c.ServerPassed != tt.wantServerPassed || !c.KernelPassed {
				t.Errorf("Agree, ServerPassed, KernelPassed = %v, %v, %v; want %v, %v, true",
					c.Agree, c.ServerPassed, c.KernelPassed, tt.wantAgree, tt.wantServerPassed)
			}
			var ks []int
			for _, d := range c.Disagreements {
				ks = append(ks, d.K)
			}
			if diff := cmp.Diff(tt.wantDisagree, ks); diff != "" {
				t.Errorf("disagreements (-want +got):\n%s\n%+v", diff, c.Disagreements)
			}
			var reasons []string
			for _, l := range c.KernelOnly {
				reasons = append(reasons, l.Reason)
			}
			if diff := cmp.Diff(tt.wantKernelOnly, reasons); diff != "" {
				t.Errorf("kernel only (-want +got):\n%s", diff)
			}
			if len(c.Pairs) != 0 || len(c.ServerOnly) != 0 || c.ServerSide != ServerSideBackoff {
				t.Errorf("pairs %d, server only %d, side %q: backoff_ms pairs nothing", len(c.Pairs), len(c.ServerOnly), c.ServerSide)
			}
			b, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			var back CrossCheck
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.Intervals, back.Intervals); diff != "" || back.ServerSide != c.ServerSide {
				t.Errorf("JSON round trip (-want +got):\n%s", diff)
			}
			var text bytes.Buffer
			if err := c.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			if got := strings.Count(text.String(), "DISAGREE"); got != len(tt.wantDisagree) {
				t.Errorf("text has %d DISAGREE lines, want %d:\n%s", got, len(tt.wantDisagree), text.String())
			}
			if !strings.Contains(text.String(), tt.wantText) || strings.Contains(text.String(), "verdicts differ") {
				t.Errorf("text lacks %q, or says the verdicts differ:\n%s", tt.wantText, text.String())
			}
		})
	}
}

// failHandshakes gives every attempt of chain the fate of a TLS handshake
// the server closed before it was done: accepted, closed, never READY.
func failHandshakes(chain []attempt.Attempt) []attempt.Attempt {
	for i := range chain {
		chain[i].Ending = backoff.Ending{Fate: backoff.FateClosed, Accepted: 20 * time.Microsecond,
			Duration: time.Millisecond, ClientSent: backoff.PayloadTLSClientHello}
	}
	return chain
}

// refuseThird gives the attempts of chain fates: the third refused, the
// others accepted and closed.
func refuseThird(chain []attempt.Attempt) []attempt.Attempt {
	for i := range chain {
		chain[i].Ending = backoff.Ending{Fate: backoff.FateClosed, Accepted: 20 * time.Microsecond, Duration: 200 * time.Microsecond}
		if i == 2 {
			chain[i].Ending = backoff.Ending{Fate: backoff.FateRefused, Duration: 20 * time.Microsecond, RST: true}
		}
	}
	return chain
}

// TestBackoffDisagreementText holds the diagnosis of an interval whose
// verdict the server's timestamps changed to its figures.
func TestBackoffDisagreementText(t *testing.T) {
	c := NewBackoffCrossCheck(crossInput(), kernelChain(), []int32{1000, 1301, 1000, 1000})
	want := "the server's backoff_ms 1301 is +301 ms from the kernel's 1000 ms (1000.000 ms measured): the app delays of attempts 2 and 3 " +
		"moved it (which one, backoff_ms cannot say): kernel 1000 ms is ok, server 1301 ms is late (window 700–1300 ms, of which 100 ms on each side is tolerance)"
	if len(c.Disagreements) != 1 || c.Disagreements[0].Cause != want {
		t.Errorf("disagreements = %+v\nwant one with cause %q", c.Disagreements, want)
	}
}

// TestChoosePeerFromKernel holds the session rule (ChooseVerifiedPeer) over
// the kernel's addresses inside a session whose server names none.
func TestChoosePeerFromKernel(t *testing.T) {
	s := Session{Start: at(-50), EndTime: at(10000), Peer: netip.AddrPortFrom(xOther, 1), End: &SessionEnd{Cause: CauseStop}}
	s.ChoosePeerFromKernel(append(kernelChain(), syn(xOther, 9, 20000)))
	if s.End.VerifiedPeer != xClient || s.End.VerifiedReason != VerifiedSolePeer {
		t.Errorf("verified peer %v (%s), want %v (%s)", s.End.VerifiedPeer, s.End.VerifiedReason, xClient, VerifiedSolePeer)
	}
}
