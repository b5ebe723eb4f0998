package html

import (
	"time"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/report"
)

// attemptFate is what the page shows of an attempt's fate (docs/spec.md
// §7.2): the fate's words and, when it ended, the time from its SYN to its
// end in ms. ok is false when the report gives no fate; the page then
// shows no fate column.
//
// This is the one place that reads fates from an AttemptReport.
func attemptFate(a report.AttemptReport) (fate string, durationMS float64, ok bool) {
	e := a.Ending
	if e.Fate == "" || e.Fate == backoff.FateUnknown {
		return "", 0, false
	}
	if e.Fate.Ended() {
		durationMS = float64(e.Duration) / float64(time.Millisecond)
	}
	return string(e.Fate), durationMS, true
}
