package session

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/backoff-audit/audit/backoff"
)

// writerMaxAttempts is server.DefaultMaxAttempts, the bound on the
// connections a session keeps; the server's own tests cannot be imported
// here (server imports this package).
const writerMaxAttempts = 10000

// TestRecordLineBoundFitsWriter: the longest line the server writes at its
// default bound on attempts (a stop event whose every connection came from
// a different full-length IPv6 address, or whose chain has every interval
// at its longest) is read, so the bound refuses only what is not a record.
func TestRecordLineBoundFitsWriter(t *testing.T) {
	t0 := time.Date(2025, 1, 2, 15, 4, 5, 0, time.UTC)
	foreign := make([]PeerCount, writerMaxAttempts)
	for i := range foreign {
		a := netip.MustParseAddr("fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff").As16()
		a[14], a[15] = 0xf0|byte(i>>8), byte(i) // distinct, and no group shortened
		foreign[i] = PeerCount{Addr: netip.AddrFrom16(a), Attempts: 1}
	}
	backoffMS := make([]int32, writerMaxAttempts-1)
	for i := range backoffMS {
		backoffMS[i] = -2147483648
	}
	ends := map[string]*SessionEnd{
		"all foreign": {Cause: CauseTimeout, Verdict: backoff.Overflow, Reason: "too many attempts", Attempts: writerMaxAttempts,
			Dropped: 1 << 62, VerifiedReason: VerifiedNone, Foreign: foreign},
		"longest chain": {Cause: CauseTimeout, Verdict: backoff.Failed, Reason: backoff.Verify(backoff.DefaultPolicy(), chain(-30*24*time.Hour)).Reason(),
			Attempts: writerMaxAttempts, Dropped: 1 << 62, VerifiedPeer: netip.MustParseAddr("fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
			VerifiedReason: VerifiedStartPeer, VerifiedAttempts: writerMaxAttempts, BackoffMS: backoffMS},
	}
	for name, end := range ends {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			e := RecordEvent{Event: EventStop, Time: t0, Session: 1 << 62,
				Peer: netip.MustParseAddrPort("[fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535"), End: end}
			if err := WriteRecordEvent(&buf, e); err != nil {
				t.Fatal(err)
			}
			t.Logf("%d bytes", buf.Len())
			if buf.Len()-1 > MaxRecordLine/4*3 {
				t.Errorf("a stop line of %d bytes leaves less than a quarter of MaxRecordLine (%d) spare", buf.Len()-1, MaxRecordLine)
			}
			if got, err := ReadRecord(&buf); err != nil || len(got) != 1 {
				t.Errorf("read back: %d events, %v", len(got), err)
			}
		})
	}
}
