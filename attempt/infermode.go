package attempt

import (
	"time"

	"github.com/backoff-audit/audit/backoff"
)

// InferMode reads what the retry port did from the fates of the chains'
// attempts, for a capture read without --retry_mode (ModeTally). ok is
// false when no fate is known.
func (c *Chains) InferMode(p backoff.Policy) (m backoff.RetryMode, ok bool) {
	var t ModeTally
	var buf []backoff.Ending
	var times []time.Time
	for i := range c.Len() {
		buf = c.Endings(i, buf)
		_, times, _ = c.Times(i, times)
		t.Add(p, times, buf, 1)
	}
	return t.Mode()
}

// ModeTally counts the evidence of the retry port's mode in chains'
// attempts, a chain at a time: refused (refuse), hung (hang: as the model
// reads a hung attempt, with the policy's connect timeout), reached READY
// (settings-close: a GOAWAY inside TLS cannot be told apart) and closed
// at once (close). An attempt whose answer the capture lacks, and one
// still open where its chain ends, are no evidence of a mode. A chain that
// reached READY and was later refused saw the port serve and then go
// down: an outage (the restart of a healthy server), whatever the counts.
type ModeTally struct {
	refused, hung, succeeded, closed int
	outages                          int // chains refused after READY
}

// Add counts the attempts of one chain, their times and fates in time
// order, sign times: -1 takes back what an Add of the same chain counted.
func (t *ModeTally) Add(p backoff.Policy, times []time.Time, endings []backoff.Ending, sign int) {
	run := backoff.Run{Endings: endings}
	served, outage := false, false
	for k, e := range endings {
		var gap time.Duration
		if k+1 < len(times) {
			gap = times[k+1].Sub(times[k])
		}
		switch class := run.Class(k, p, times[k], gap); {
		case e.Fate == "" || e.Fate == backoff.FateUnknown:
		case e.Fate == backoff.FateOpen && k == len(endings)-1, class == backoff.ClassUnseen:
		case e.Fate == backoff.FateRefused:
			t.refused += sign
			outage = outage || served
		case class == backoff.ClassHung:
			t.hung += sign
		case class == backoff.ClassReady:
			t.succeeded += sign
			served = true
		default:
			t.closed += sign
		}
	}
	if outage {
		t.outages += sign
	}
}

// Merge adds what u counted.
func (t *ModeTally) Merge(u ModeTally) {
	t.refused += u.refused
	t.hung += u.hung
	t.succeeded += u.succeeded
	t.closed += u.closed
	t.outages += u.outages
}

// Mode is the most common mode counted, or outage when a chain was
// refused after READY; ok is false when nothing was counted.
func (t ModeTally) Mode() (m backoff.RetryMode, ok bool) {
	switch most := max(t.refused, t.hung, t.succeeded, t.closed); {
	case most == 0:
		return backoff.RetryMode{}, false
	case t.outages > 0:
		return backoff.RetryMode{Kind: backoff.ModeOutage}, true
	case most == t.refused:
		return backoff.RetryMode{Kind: backoff.ModeRefuse}, true
	case most == t.hung:
		return backoff.RetryMode{Kind: backoff.ModeHang}, true
	case most == t.succeeded:
		return backoff.RetryMode{Kind: backoff.ModeSettingsClose}, true
	}
	return backoff.RetryMode{}, true
}
