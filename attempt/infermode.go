package attempt

import (
	"time"

	"github.com/backoff-audit/audit/backoff"
)

// InferMode reads what the retry port did from the fates of the chains'
// attempts, for a capture read without --retry_mode: the most common of
// refused (refuse), hung (hang: as the model reads a hung attempt, with
// p's connect timeout), reached READY (settings-close: a GOAWAY inside TLS
// cannot be told apart) and closed at once (close). An attempt whose
// answer the capture lacks, and one still open where the capture ends,
// are no evidence of a mode. A chain that reached READY and was later
// refused saw the port serve and then go down: an outage (the restart of a
// healthy server), whatever the counts. ok is false when no fate is known.
func (c *Chains) InferMode(p backoff.Policy) (m backoff.RetryMode, ok bool) {
	var refused, hung, succeeded, closed int
	outage := false
	var buf []backoff.Ending
	var times []time.Time
	for i := range c.Len() {
		buf = c.Endings(i, buf)
		_, times, _ = c.Times(i, times)
		run := backoff.Run{Endings: buf}
		served := false
		for k, e := range buf {
			var gap time.Duration
			if k+1 < len(times) {
				gap = times[k+1].Sub(times[k])
			}
			switch class := run.Class(k, p, times[k], gap); {
			case e.Fate == "" || e.Fate == backoff.FateUnknown:
			case e.Fate == backoff.FateOpen && k == len(buf)-1, class == backoff.ClassUnseen:
			case e.Fate == backoff.FateRefused:
				refused++
				outage = outage || served
			case class == backoff.ClassHung:
				hung++
			case class == backoff.ClassReady:
				succeeded++
				served = true
			default:
				closed++
			}
		}
	}
	switch most := max(refused, hung, succeeded, closed); {
	case most == 0:
		return backoff.RetryMode{}, false
	case outage:
		return backoff.RetryMode{Kind: backoff.ModeOutage}, true
	case most == refused:
		return backoff.RetryMode{Kind: backoff.ModeRefuse}, true
	case most == hung:
		return backoff.RetryMode{Kind: backoff.ModeHang}, true
	case most == succeeded:
		return backoff.RetryMode{Kind: backoff.ModeSettingsClose}, true
	}
	return backoff.RetryMode{}, true
}
