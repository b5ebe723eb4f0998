package report

import (
	"bytes"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/internal/testutil"
	"github.com/backoff-audit/audit/internal/text"
	"github.com/backoff-audit/audit/session"
)

// TestSessionJSONSchema holds a session's document (`audit live --format
// json`) to the members programs read (testdata/schema/session.paths, the
// members of a live session's line as the tool wrote it before each
// document had one builder, and those added since: -update rewrites it,
// whose diff must only add): it may gain members, never lose one.
func TestSessionJSONSchema(t *testing.T) {
	tr := chainsTracker(3)
	chains := tr.Peers()
	c := chains[0]
	for i := range c.Attempts {
		c.Attempts[i].Ending = backoff.Ending{Fate: backoff.FateClosed, Accepted: 20 * time.Microsecond,
			Duration: 300 * time.Microsecond, ClientSent: backoff.PayloadTLSClientHello}
	}
	res := backoff.Verify(backoff.DefaultPolicy(), c.Times())
	var accepts []session.Accept
	for _, a := range c.Attempts {
		accepts = append(accepts, session.Accept{Peer: a.Src, Time: a.Time.Add(200 * time.Microsecond)})
	}
	in := session.CrossInput{Policy: backoff.DefaultPolicy(), VerifiedPeer: c.Peer,
		Start: c.Attempts[0].Time.Add(-time.Second), End: c.Attempts[len(c.Attempts)-1].Time.Add(time.Second)}
	cc := session.NewCrossCheck(in, c.Attempts, accepts)
	r := &SessionReport{
		Head:  Head{Port: 50052, Policy: backoff.DefaultPolicy(), Capture: attempt.CaptureInfo{Packets: 9, SYNs: 4}},
		Peers: VerifiedPeers([]attempt.Chain{c}, []backoff.Result{res}),
		Session: SessionInfo{Number: 1, Start: in.Start.Format(text.TimeLayout), End: in.End.Format(text.TimeLayout),
			Cause: session.CauseStop, StartPeer: netip.AddrPortFrom(c.Peer, 40000).String(), VerifiedPeer: c.Peer.String(),
			VerifiedReason: session.VerifiedStartPeer, MaxAttempts: 10000},
		Live:       &LiveInfo{Iface: "lo", Timestamps: "host clock"},
		Foreign:    []session.PeerCount{{Addr: chains[1].Peer, Attempts: len(chains[1].Attempts)}},
		Server:     NewServerVerdict(&session.SessionEnd{Passed: true, Verdict: backoff.Passed, BackoffMS: res.BackoffMS}),
		CrossCheck: &cc,
	}
	r.Summary = r.Peers.Summary()
	r.WithHerd()
	r.Peers.WithInfer(r.Mode)
	var b bytes.Buffer
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b.Bytes(), []byte("\n")); n != 1 {
		t.Errorf("%d lines, want the one of JSON Lines:\n%s", n, b.Bytes())
	}
	testutil.RequirePaths(t, filepath.Join("testdata", "schema", "session.paths"), b.Bytes(), *update)
}
