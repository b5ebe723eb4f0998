package attempt

import "github.com/backoff-audit/audit/backoff"

// InferMode reads what the retry port did from the fates of the chains'
// attempts, for a capture read without --retry_mode: the most common of
// refused (refuse), hung (hang: as VerifyRun reads a hung attempt, with
// p's connect timeout), succeeded then closed (settings-close: the server
// sent a TLS ServerHello or SETTINGS; a GOAWAY inside TLS cannot be told
// apart) and closed at once (close). ok is false when no fate is known.
func (c *Chains) InferMode(p backoff.Policy) (m backoff.RetryMode, ok bool) {
	var refused, hung, succeeded, closed int
	var buf []backoff.Ending
	for i := range c.Len() {
		buf = c.Endings(i, buf)
		run := backoff.Run{Endings: buf}
		for k, e := range buf {
			switch {
			case e.Fate == "" || e.Fate == backoff.FateUnknown:
			case e.Fate == backoff.FateRefused:
				refused++
			case run.Hung(k, p):
				hung++
			case e.ServerSent == backoff.PayloadTLSServerHello || e.ServerSent == backoff.PayloadH2Settings:
				succeeded++
			default:
				closed++
			}
		}
	}
	switch most := max(refused, hung, succeeded, closed); {
	case most == 0:
		return backoff.RetryMode{}, false
	case most == refused:
		return backoff.RetryMode{Kind: backoff.ModeRefuse}, true
	case most == hung:
		return backoff.RetryMode{Kind: backoff.ModeHang}, true
	case most == succeeded:
		return backoff.RetryMode{Kind: backoff.ModeSettingsClose}, true
	}
	return backoff.RetryMode{}, true
}
