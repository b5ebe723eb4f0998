package report

import (
	"net/netip"
	"time"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// chain is attempt times from t0, each gap after the one before.
func chain(gaps ...time.Duration) []time.Time {
	ts := []time.Time{t0}
	for _, g := range gaps {
		ts = append(ts, ts[len(ts)-1].Add(g))
	}
	return ts
}

// msd is v milliseconds.
func msd(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

// hangPolicy is the default policy with connect timeout t.
func hangPolicy(t time.Duration) backoff.Policy {
	p := backoff.DefaultPolicy()
	p.MinConnectTimeout = t
	return p
}

var (
	trackStart = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	netipOpt   = cmpopts.EquateComparable(netip.Addr{}, netip.AddrPort{})
	// The ends of one attempt in the fates' tests: from the client
	// 127.0.0.1:40000 to the server 127.0.0.1:50052.
	fateClient = netip.MustParseAddrPort("127.0.0.1:40000")
	fateServer = netip.MustParseAddrPort("127.0.0.1:50052")
)

// TCP flags of a Segment.
const (
	flagFIN = 0x01
	flagSYN = 0x02
	flagRST = 0x04
	flagACK = 0x10
)

// NewPeerReport verifies one chain against p.
func NewPeerReport(p backoff.Policy, c attempt.Chain) PeerReport {
	return PeerReportOf(c, backoff.Verify(p, c.Times()))
}

func summarize(peers []PeerReport) Summary {
	var s Summary
	for _, p := range peers {
		s.count(p.Passed, p.Verdict)
		s.Unseen += p.Unseen
	}
	return s
}
