package report

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/session"
)

// A server that could not see the attempts (refuse, restart) leaves the
// session's verdict to the kernel's: it neither fails a session whose
// chain passed nor is said to have passed beside one that failed.
func TestFailuresServerNotJudged(t *testing.T) {
	notJudged := &ServerVerdict{Verdict: backoff.NotJudged, Reason: "refuse mode: …"}
	failed := &ServerVerdict{Verdict: backoff.Failed, Reason: "interval 2: late"}
	pass := backoff.Result{Reference: backoff.Reading{Passed: true, Verdict: backoff.Passed}, Strict: backoff.Reading{Passed: true, Verdict: backoff.Passed}}
	fail := backoff.Result{Reference: backoff.Reading{Verdict: backoff.Failed}, Tail: "interval 1: 3000 ms is late"}
	chain := attempt.Chain{Peer: netip.MustParseAddr("127.0.0.1")}
	for _, tt := range []struct {
		chain backoff.Result
		sv    *ServerVerdict
		want  string
	}{
		{pass, notJudged, ""},
		{fail, notJudged, "session 4: kernel verdict failed: interval 1"},
		{pass, failed, "session 4: server verdict failed, kernel passed: interval 2"},
		{fail, failed, "session 4: kernel and server verdicts failed"},
	} {
		r := SessionReport{Session: SessionInfo{Number: 4}, Peers: VerifiedPeers([]attempt.Chain{chain}, []backoff.Result{tt.chain}),
			Server: tt.sv, CrossCheck: &session.CrossCheck{}}
		n, total, first := r.Failures()
		if total != 1 || (tt.want == "") != (n == 0) || !strings.HasPrefix(first, tt.want) {
			t.Errorf("chain %s, server %s: %d failed, %q; want %q", tt.chain.Reference.Verdict, tt.sv.Verdict, n, first, tt.want)
		}
	}
}
