package herd

import "github.com/backoff-audit/audit/backoff"

// A herd read as it goes (`audit watch`) sees each wave as it comes,
// among the attempts of the peers around it, never the whole capture's:
// it judges a wave by the rule of Read all the same.

// WaveSpreadMS is the standard deviation in ms that the jitter of policy p
// gives the time of attempt k (0 for the first) from a peer's first
// attempt, in mode m: 0 where it does not spread it (the herd's Spread).
func WaveSpreadMS(p backoff.Policy, m backoff.RetryMode, k int) float64 {
	if k < 0 {
		return 0
	}
	sds, _ := policySpread(p, m, k+1)
	return sds[k]
}

// Judge sets w's Share, PolicyShare and Expected from its K, Peers and
// Count, for peers held to p in mode m, and reports whether the herd
// reading lists such a wave (the herd's rule).
func (w *Wave) Judge(p backoff.Policy, m backoff.RetryMode) bool {
	return w.judge(WaveSpreadMS(p, m, w.K))
}
