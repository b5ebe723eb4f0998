package html

import (
	"time"

	"github.com/backoff-audit/audit/report"
)

// What the browser tests (package html_test, which may import the
// packages that write reports) need of this package's insides.

var (
	MixedReport = mixedReport
	BigAudit    = bigAudit
	MixAudit    = mixAudit
	AddChain    = addChain
	MsDur       = msDur
	Start       = fixtureStart
)

const (
	MixedEarly     = mixedEarly
	MixedLate      = mixedLate
	MixedPeers     = mixedPeers
	MixedNotPassed = mixedNotPassed
)

// Update says whether the tests rewrite the screenshots in testdata/.
func Update() bool { return *update }

// GoChart is the chart Write draws of p written in full.
func GoChart(p *report.PeerReport) string {
	times := make([]time.Time, min(len(p.Attempts), maxShown+1))
	for i := range times {
		times[i] = p.Attempts[i].Time
	}
	return string(appendChart(nil, times, chartIvs(p, nil)))
}
