package session

import "time"

// chain is attempt times from a fixed start, each gap after the one before.
func chain(gaps ...time.Duration) []time.Time {
	ts := []time.Time{time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	for _, g := range gaps {
		ts = append(ts, ts[len(ts)-1].Add(g))
	}
	return ts
}
