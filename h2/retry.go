package h2

import (
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// RetryPolicy is a method's retryPolicy in the service config, under its
// JSON names (gRFC A6, "Retry Policy Capabilities",
// https://github.com/grpc/proposal/blob/master/A6-client-retries.md).
type RetryPolicy struct {
	// MaxAttempts counts the attempts, the first included.
	MaxAttempts int
	// InitialBackoff, MaxBackoff and BackoffMultiplier shape the delay
	// before each retry.
	InitialBackoff    time.Duration
	MaxBackoff        time.Duration
	BackoffMultiplier float64
	// ClientMaxAttempts is the client's own cap on MaxAttempts; 0 means
	// A6's default of 5 ("Limits on Retries and Hedges").
	ClientMaxAttempts int
}

// Attempt is one attempt of an RPC: one stream.
type Attempt struct {
	// Conn indexes the connection in the list given to RetryChains.
	Conn   int    `json:"conn"`
	Stream uint32 `json:"stream"`
	// Number is 1 for the first attempt, grpc-previous-rpc-attempts + 1
	// for the others.
	Number int       `json:"number"`
	Start  time.Time `json:"start"`
	// End is when the server ended the attempt (its trailers), else when
	// the stream ended, else Start.
	End    time.Time `json:"end"`
	Status string    `json:"status,omitempty"`
	// Pushback is the server's grpc-retry-pushback-ms, if it sent one.
	Pushback string `json:"pushback,omitempty"`
	// Delay is from the previous attempt's End to this Start; 0 for the
	// chain's first.
	Delay time.Duration `json:"delay"`
}

// RetryChain is the attempts of one RPC, linked by
// grpc-previous-rpc-attempts (A6, "Exposed Retry Metadata").
type RetryChain struct {
	Method   string     `json:"method"`
	Client   netip.Addr `json:"client"`
	Attempts []Attempt  `json:"attempts"`
	// Missing is set when the chain's first attempt is not among the
	// connections given (its Attempts[0].Number is above 1).
	Missing bool `json:"missing,omitempty"`
}

// RetryChains links the RPCs of connections (their digests) into retried
// RPCs: in order of start, an attempt numbered n+1 continues the chain, of
// the same method from the same client address, whose attempt n failed
// most recently before it started. Only chains with a retry (or whose
// start is missing) are returned. Hedged RPCs, whose attempts overlap, are
// not linked.
func RetryChains(ds []Digest) []RetryChain {
	var all []Attempt
	type meta struct {
		method string
		client netip.Addr
	}
	var metas []meta
	for i, d := range ds {
		for _, r := range d.RPCs {
			a := r.Attempt
			a.Conn = i
			all = append(all, a)
			metas = append(metas, meta{r.Method, d.Client.Addr()})
		}
	}
	order := make([]int, len(all))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return all[a].Start.Compare(all[b].Start) })

	type key struct {
		meta
		number int
	}
	var chains []*RetryChain
	// tails holds the chains whose last attempt failed, by method, client
	// and that attempt's number: the chains a retry may continue.
	tails := map[key][]*RetryChain{}
	for _, i := range order {
		a, m := all[i], metas[i]
		var ch *RetryChain
		if a.Number > 1 {
			k := key{m, a.Number - 1}
			best := -1
			for j, c := range tails[k] {
				last := c.Attempts[len(c.Attempts)-1]
				if last.End.After(a.Start) {
					continue
				}
				if best < 0 || last.End.After(tails[k][best].Attempts[len(tails[k][best].Attempts)-1].End) {
					best = j
				}
			}
			if best >= 0 {
				ch = tails[k][best]
				tails[k] = slices.Delete(tails[k], best, best+1)
				a.Delay = a.Start.Sub(ch.Attempts[len(ch.Attempts)-1].End)
			}
		}
		if ch == nil {
			ch = &RetryChain{Method: m.method, Client: m.client, Missing: a.Number > 1}
			chains = append(chains, ch)
		}
		ch.Attempts = append(ch.Attempts, a)
		if a.Status != "OK" {
			k := key{m, a.Number}
			tails[k] = append(tails[k], ch)
		}
	}
	var out []RetryChain
	for _, c := range chains {
		if len(c.Attempts) > 1 || c.Missing {
			out = append(out, *c)
		}
	}
	return out
}

// Text says the chain, e.g. "/pkg.S/M from 127.0.0.1: 3 attempts
// (UNAVAILABLE, UNAVAILABLE, OK), delays 45 ms, 98 ms".
func (c RetryChain) Text() string {
	var st, dl []string
	for i, a := range c.Attempts {
		s := a.Status
		if s == "" {
			s = "no status"
		}
		st = append(st, s)
		if i > 0 {
			dl = append(dl, approx(a.Delay))
		}
	}
	t := fmt.Sprintf("%s from %s: %s (%s)", c.Method, c.Client, plural(len(c.Attempts), "attempt"), strings.Join(st, ", "))
	if c.Missing {
		t += fmt.Sprintf(", the first %s not captured", plural(c.Attempts[0].Number-1, "attempt"))
	}
	if len(dl) > 0 {
		t += ", delays " + strings.Join(dl, ", ")
	}
	return t
}

// RetryDelay is one delay before a retry, against the policy's backoff.
type RetryDelay struct {
	// Attempt is the number of the attempt the delay came before.
	Attempt int           `json:"attempt"`
	Delay   time.Duration `json:"delay"`
	// Backoff is the delay's b: min(initialBackoff·backoffMultiplier^(n−1),
	// maxBackoff) for the n-th retry since the last pushback, or the
	// previous attempt's pushback.
	Backoff time.Duration `json:"backoff"`
	// Pushback is set when the server's grpc-retry-pushback-ms set the
	// delay: the client waits exactly that long (A6, "Pushback").
	Pushback bool `json:"pushback,omitempty"`
	// InRandom: the delay lies in [0, b], A6's backoff as first published
	// ("random(0, b)").
	InRandom bool `json:"in_random"`
	// InJittered: the delay lies in [0.8·b, 1.2·b], A6's backoff as
	// revised ("b · random(0.8, 1.2)"), which grpc-go implements.
	InJittered bool `json:"in_jittered"`
}

// RetryCheck is a chain held to a retry policy.
type RetryCheck struct {
	Method string `json:"method"`
	// MaxAttempts is the policy's, capped by the client's maximum.
	MaxAttempts int          `json:"max_attempts"`
	Delays      []RetryDelay `json:"delays"`
	// TooMany are the numbers of the attempts beyond MaxAttempts.
	TooMany []int `json:"too_many,omitempty"`
}

// CheckRetries holds a chain's delays to p, each window widened by tol on
// both sides, and flags its attempts beyond p's MaxAttempts.
//
// A6 has said two things of the delay before the n-th retry, with
// b = min(initialBackoff·backoffMultiplier^(n−1), maxBackoff): first
// random(0, b), and since its revision b·random(0.8, 1.2). Clients follow
// one or the other, so both readings are given.
func CheckRetries(c RetryChain, p RetryPolicy, tol time.Duration) RetryCheck {
	limit := p.ClientMaxAttempts
	if limit <= 0 {
		limit = 5
	}
	chk := RetryCheck{Method: c.Method, MaxAttempts: min(p.MaxAttempts, limit)}
	retries := 0 // retries since the last pushback
	for i, a := range c.Attempts {
		if a.Number > chk.MaxAttempts {
			chk.TooMany = append(chk.TooMany, a.Number)
		}
		if i == 0 {
			continue
		}
		d := RetryDelay{Attempt: a.Number, Delay: a.Delay}
		if ms, err := strconv.Atoi(c.Attempts[i-1].Pushback); err == nil && ms >= 0 {
			d.Pushback, d.Backoff = true, time.Duration(ms)*time.Millisecond
			retries = 0
			ok := a.Delay >= d.Backoff-tol && a.Delay <= d.Backoff+tol
			d.InRandom, d.InJittered = ok, ok
		} else {
			b := math.Min(float64(p.InitialBackoff)*math.Pow(p.BackoffMultiplier, float64(retries)), float64(p.MaxBackoff))
			d.Backoff = time.Duration(b)
			retries++
			d.InRandom = a.Delay >= -tol && a.Delay <= d.Backoff+tol
			d.InJittered = float64(a.Delay) >= 0.8*b-float64(tol) && float64(a.Delay) <= 1.2*b+float64(tol)
		}
		chk.Delays = append(chk.Delays, d)
	}
	return chk
}

// WithinRandom says whether every delay lies in A6's first window, [0, b].
func (c RetryCheck) WithinRandom() bool {
	return !slices.ContainsFunc(c.Delays, func(d RetryDelay) bool { return !d.InRandom })
}

// WithinJittered says whether every delay lies in A6's revised window,
// [0.8·b, 1.2·b].
func (c RetryCheck) WithinJittered() bool {
	return !slices.ContainsFunc(c.Delays, func(d RetryDelay) bool { return !d.InJittered })
}

// Text says it, e.g. "delays 45 ms (b 50 ms), 98 ms (b 100 ms): within
// b·U(0.8, 1.2) (A6 as revised), within U(0, b) (A6 as first published)".
func (c RetryCheck) Text() string {
	if len(c.Delays) == 0 {
		return "no delay to check"
	}
	var ds, outR, outJ []string
	for _, d := range c.Delays {
		b := "b"
		if d.Pushback {
			b = "pushback"
		}
		ds = append(ds, fmt.Sprintf("%s (%s %s)", approx(d.Delay), b, approx(d.Backoff)))
		if !d.InRandom {
			outR = append(outR, strconv.Itoa(d.Attempt))
		}
		if !d.InJittered {
			outJ = append(outJ, strconv.Itoa(d.Attempt))
		}
	}
	verdict := func(window, reading string, out []string) string {
		if len(out) == 0 {
			return "within " + window + " (" + reading + ")"
		}
		return "outside " + window + " (" + reading + ") before attempt " + strings.Join(out, ", ")
	}
	return "delays " + strings.Join(ds, ", ") + ": " +
		verdict("b·U(0.8, 1.2)", "A6 as revised", outJ) + ", " +
		verdict("U(0, b)", "A6 as first published", outR)
}
