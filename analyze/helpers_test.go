package analyze

import (
	"time"

	"github.com/backoff-audit/audit/backoff"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// chain is attempt times from t0, each gap after the one before.
func chain(gaps ...time.Duration) []time.Time {
	ts := []time.Time{t0}
	for _, g := range gaps {
		ts = append(ts, ts[len(ts)-1].Add(g))
	}
	return ts
}

// msd is v milliseconds.
func msd(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

// hangPolicy is the default policy with connect timeout t.
func hangPolicy(t time.Duration) backoff.Policy {
	p := backoff.DefaultPolicy()
	p.MinConnectTimeout = t
	return p
}
