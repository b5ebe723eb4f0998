package attempt_test

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
)

// A client's SYNs become attempts (the kernel's retransmission is counted,
// not verified), the attempts a chain per peer, and the chain a verdict.
func ExampleTracker() {
	start := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	dst := netip.MustParseAddrPort("127.0.0.1:50052")
	syns := []attempt.SYN{
		{Time: start, Src: netip.MustParseAddrPort("127.0.0.1:40000"), Dst: dst, Seq: 1},
		{Time: start.Add(1000 * time.Millisecond), Src: netip.MustParseAddrPort("127.0.0.1:40002"), Dst: dst, Seq: 3},
		{Time: start.Add(1003 * time.Millisecond), Src: netip.MustParseAddrPort("127.0.0.1:40000"), Dst: dst, Seq: 1}, // retransmission
		{Time: start.Add(2650 * time.Millisecond), Src: netip.MustParseAddrPort("127.0.0.1:40004"), Dst: dst, Seq: 5},
		{Time: start.Add(3000 * time.Millisecond), Src: netip.MustParseAddrPort("127.0.0.1:40006"), Dst: dst, Seq: 7},
	}
	tr := attempt.NewTracker()
	for _, s := range syns {
		tr.Add(s)
	}
	for _, c := range tr.Peers() {
		res := backoff.Verify(backoff.DefaultPolicy(), c.Times())
		fmt.Printf("peer %s: %d attempts, %d retransmit, %s\n", c.Peer, len(c.Attempts), c.Retransmits(), res.Reference.Verdict)
		for _, iv := range res.Intervals {
			fmt.Println(iv.LogLine(), iv.Outcome)
		}
		fmt.Println(res.Reason())
	}
	// Output:
	// peer 127.0.0.1: 4 attempts, 1 retransmit, failed
	// retry  1:backoff   1.00s,expected backoff   1.00s, jitter 0.00% ok
	// retry  2:backoff   1.65s,expected backoff   1.60s, jitter 3.12% ok
	// retry  3:backoff   0.35s,expected backoff   2.56s, jitter -86.33% early
	// interval 3: 350 ms is early (expected 2560 ms, window 1948–3172 ms)
}
