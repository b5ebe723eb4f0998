package backoff

import "time"

// A chain read as it goes (`audit watch`) has no session or capture end to
// close it: it ends when its client succeeds (a READY connection resets
// the backoff), and is over when the client stops retrying. ChainEnd is
// the second rule; the model of docs/spec.md §7 judges what it closes.

// ChainEnd is when a chain of n attempts, the latest made at last, is over
// if no attempt came by then: the upper bound of its next window (interval
// n), and past the connect deadline of its last attempt, the later of the
// two. Both are the deadline by which VerifyRun's tail expects the next
// attempt after one that hung (docs/spec.md §7.3): a client that follows
// the spec has tried again by then whatever became of its last attempt,
// so one that has not stopped retrying.
func ChainEnd(p Policy, n int, last time.Time) time.Time {
	return last.Add(time.Duration(p.due(p.expectedSat(n)) * float64(time.Millisecond)))
}

// due is the time in ms from an attempt's start by which the next attempt
// is due whatever became of it, e the expected value of the interval to
// come: the connect deadline, max(T, backoff), with the backoff's upper
// bound, plus the tolerance (docs/spec.md §7.3).
func (p Policy) due(e float64) float64 {
	return max(Millis(p.MinConnectTimeout), e*(1+p.Jitter)) + Millis(p.Tolerance)
}

// expectedSat is Expected(k), in as many steps as the value changes: a
// chain read as it goes may count millions of attempts, and the value
// stops changing at the cap.
func (p Policy) expectedSat(k int) float64 {
	e := p.first()
	for i := 1; i < k; i++ {
		f := p.Next(e)
		if f == e {
			break
		}
		e = f
	}
	return e
}
