package analyze

// A herd read as it goes (`audit watch`) sees each wave as it comes,
// among the attempts of the peers around it, never the whole capture's:
// it judges a wave by the rule of NewHerd all the same.

// WaveSpreadMS is the standard deviation in ms that the policy's jitter
// gives the time of attempt k (0 for the first) from a peer's first
// attempt, in mode m: 0 where it does not spread it (NewHerd's Spread).
func (p Policy) WaveSpreadMS(m RetryMode, k int) float64 {
	if k < 0 {
		return 0
	}
	sds, _ := policySpread(p, m, k+1)
	return sds[k]
}

// Judge sets w's Share, PolicyShare and Expected from its K, Peers and
// Count, for peers held to p in mode m, and reports whether the herd
// reading lists such a wave (NewHerd).
func (w *Wave) Judge(p Policy, m RetryMode) bool { return w.judge(p.WaveSpreadMS(m, w.K)) }
