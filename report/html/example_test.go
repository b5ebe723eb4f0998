package html_test

import (
	"log"
	"net/netip"
	"os"
	"time"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/report"
	"github.com/backoff-audit/audit/report/html"
)

// A capture's audit as a page: the report of every peer and the herd
// reading of them all, written to a file that opens in any browser.
func ExampleWrite() {
	start := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	dst := netip.MustParseAddrPort("127.0.0.1:50052")
	tr := attempt.NewTracker()
	for i, gap := range []time.Duration{0, 1000 * time.Millisecond, 1650 * time.Millisecond, 350 * time.Millisecond} {
		start = start.Add(gap)
		tr.Add(attempt.SYN{Time: start, Src: netip.AddrPortFrom(dst.Addr(), uint16(40000+i)), Dst: dst, Seq: uint32(i)})
	}
	a := report.NewAudit(dst.Port(), backoff.DefaultPolicy(), backoff.Run{}, tr.Chains(), attempt.CaptureInfo{})
	f, err := os.Create("report.html")
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	if err := html.Write(f, a); err != nil {
		log.Fatal(err)
	}
}
