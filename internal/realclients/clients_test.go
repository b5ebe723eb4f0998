package realclients

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/backoff-audit/audit/analyze"
)

// modeCase is one retry-port mode: how each client is run in it and what
// it must have done.
type modeCase struct {
	name string // the subtest's name, the mode as --retry_mode spells it
	mode analyze.RetryMode
	// args are the run's settings for one stack.
	args func(stack string) args
	// check holds one client's run to what that client does in this mode.
	check func(t *testing.T, o outcome)
}

// TestClients runs every client in every mode, each run with its own
// server; `go test -v -run 'TestClients/MODE/STACK'` shows one run's
// figures.
func TestClients(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			for _, st := range stacks {
				t.Run(st.name, func(t *testing.T) {
					st.require(t)
					t.Parallel()
					o := run(t, st, m.mode, m.args(st.name))
					t.Logf("%s", o.summary())
					m.check(t, o)
				})
			}
		})
	}
}

var modes = []modeCase{closeMode}

// closeMode is the interop test (docs/spec.md §1.2): every connection is
// accepted and closed at once, so every attempt fails at once and the
// intervals are the clients' backoffs. With a 2 s cap, 8 s hold at least
// 1000 + 1920 + 2400 + 2400 ms of backoff: at least 5 attempts.
var closeMode = modeCase{
	name: "close",
	mode: analyze.RetryMode{Kind: analyze.ModeClose},
	args: func(string) args {
		return args{duration: 8 * time.Second, maxBackoffMS: 2000}
	},
	check: func(t *testing.T, o outcome) {
		wantDeadlineOnly(t, o)
		wantStopAgrees(t, o)
		if len(o.chain) < 5 {
			t.Fatalf("%d attempts in %v, want at least 5", len(o.chain), o.args.duration)
		}
		// All three start with the unjittered initial backoff
		// (docs/spec.md §4.2) and jitter within the spec's window after
		// it: both readings pass, so a client with no backoff, or a
		// jittered or wrong first one, fails here.
		res := o.session.Result
		if !res.Reference.Passed || !res.Strict.Passed {
			t.Errorf("reference reading %s, strict %s (%s); want both passed", res.Reference.Verdict, res.Strict.Verdict, res.Reason())
		}
		wantClientSawServer(t, o, 50*time.Millisecond)
		wantKernelSawServer(t, o, 50*time.Millisecond)
	},
}

// wantDeadlineOnly: the retry RPCs never ended before the run's end.
func wantDeadlineOnly(t *testing.T, o outcome) {
	t.Helper()
	for i, r := range o.line.RPCs {
		if r.Status != "DEADLINE_EXCEEDED" {
			t.Errorf("retry RPC %d ended in %s (%s), want DEADLINE_EXCEEDED", i+1, r.Status, r.Error)
		}
	}
	if len(o.line.RPCs) == 0 {
		t.Errorf("no retry RPC ended")
	}
}

// wantStopAgrees: the client got the server's session in Stop's answer.
func wantStopAgrees(t *testing.T, o outcome) {
	t.Helper()
	if diff := cmp.Diff(o.session.End.BackoffMS, o.line.BackoffMS, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("backoff_ms (-server's session +Stop's answer to the client):\n%s", diff)
	}
	if o.line.Passed == nil || *o.line.Passed != o.session.End.Passed {
		t.Errorf("Stop's passed %v, the session's %v", o.line.Passed, o.session.End.Passed)
	}
}

// wantClientSawServer holds the client's own account of its attempts to
// the server's accepts: as many, each accept within slack of the attempt's
// start. grpc-go does not trace its attempts; nothing to compare.
func wantClientSawServer(t *testing.T, o outcome, slack time.Duration) {
	t.Helper()
	ca := o.clientAttempts()
	if o.stack == grpcGo {
		return
	}
	if len(ca) != len(o.chain) {
		t.Errorf("the client saw %d attempts, the server %d", len(ca), len(o.chain))
		return
	}
	for i := range ca {
		if d := o.chain[i].Sub(ca[i]); d < -slack || d > slack {
			t.Errorf("attempt %d: the server accepted it %v after the client began it, want within ±%v", i+1, d, slack)
		}
	}
}

// wantKernelSawServer holds the server's accepts to the kernel's SYNs,
// where the capture could open: as many, each accept at most slack after
// its SYN (docs/spec.md §5.1: the server stamps after the handshake and a
// wake-up).
func wantKernelSawServer(t *testing.T, o outcome, slack time.Duration) {
	t.Helper()
	if o.noCapture != "" {
		t.Logf("no kernel timestamps: %s", o.noCapture)
		return
	}
	if len(o.syns) != len(o.chain) {
		t.Errorf("the kernel saw %d SYNs, the server accepted %d", len(o.syns), len(o.chain))
		return
	}
	for i := range o.syns {
		if d := o.chain[i].Sub(o.syns[i]); d < 0 || d > slack {
			t.Errorf("attempt %d: accepted %v after its SYN, want 0–%v", i+1, d, slack)
		}
	}
}
