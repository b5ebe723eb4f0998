package htmlreport

import "github.com/backoff-audit/audit/analyze"

// attemptFate is what the page shows of an attempt's fate (docs/spec.md
// §7.2): the fate's words and, when it ended, the time from its SYN to its
// end in ms. ok is false when the report gives no fate; the page then
// shows no fate column.
//
// This is the one place that reads fates from an AttemptReport: the
// report's attempts carry none yet. When they do, read them here;
// TestAttemptFateWired fails until this does.
func attemptFate(a analyze.AttemptReport) (fate string, durationMS float64, ok bool) {
	return "", 0, false
}
