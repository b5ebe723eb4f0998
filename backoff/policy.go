// Package backoff is the arithmetic of gRPC's connection backoff: the
// policy of doc/connection-backoff.md, the one verifier of the interop test
// (docs/spec.md §3) that the reference server's Stop, the interop client's
// own check and the packet auditor all run, and the model of a run of
// attempts with their fates that judges every retry-port mode
// (docs/spec.md §7): what each interval's window is, which known deviations
// a chain matches, and which lower cap a failing fleet fits. It imports
// only the standard library and takes timestamps, never a clock, so anyone
// can read and test it in one sitting.
//
// Spec: https://github.com/grpc/grpc/blob/master/doc/connection-backoff.md
package backoff

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"
)

// Policy is a connection backoff policy. Field names follow grpc-go's
// backoff.Config; the defaults are the spec's (docs/spec.md §1).
type Policy struct {
	// BaseDelay is INITIAL_BACKOFF, the expected wait after the first
	// failure. The reference verifier never caps it.
	BaseDelay time.Duration
	// Multiplier is MULTIPLIER, the growth of the backoff per failed attempt.
	Multiplier float64
	// Jitter is JITTER: each backoff may be off by ±Jitter of its expected
	// value.
	Jitter float64
	// MaxDelay is MAX_BACKOFF, the cap on the expected backoff (before jitter).
	MaxDelay time.Duration
	// MinConnectTimeout is MIN_CONNECT_TIMEOUT. The verifier does not use it
	// (an attempt on the retry port fails at once); it is reported so that a
	// reader knows the whole policy a client was held to.
	MinConnectTimeout time.Duration
	// Tolerance is the reference verifier's transmission-delay allowance,
	// added on both sides of every window.
	Tolerance time.Duration
}

// Spec defaults (docs/spec.md §1 and §3).
const (
	DefaultBaseDelay         = time.Second
	DefaultMultiplier        = 1.6
	DefaultJitter            = 0.2
	DefaultMaxDelay          = 120 * time.Second
	DefaultMinConnectTimeout = 20 * time.Second
	DefaultTolerance         = 100 * time.Millisecond
)

// DefaultPolicy is the policy of the spec and of the reference verifier.
func DefaultPolicy() Policy {
	return Policy{
		BaseDelay:         DefaultBaseDelay,
		Multiplier:        DefaultMultiplier,
		Jitter:            DefaultJitter,
		MaxDelay:          DefaultMaxDelay,
		MinConnectTimeout: DefaultMinConnectTimeout,
		Tolerance:         DefaultTolerance,
	}
}

// ReferencePolicy is the policy the reference server verifies a session
// against: the defaults, with the cap a client asked for in Start
// (max_reconnect_backoff_ms; 0 keeps the default 120000 ms).
func ReferencePolicy(maxReconnectBackoffMS int32) Policy {
	p := DefaultPolicy()
	if maxReconnectBackoffMS != 0 {
		p.MaxDelay = time.Duration(maxReconnectBackoffMS) * time.Millisecond
	}
	return p
}

// Validate reports every field that makes the policy meaningless, each
// named. A policy it accepts gives finite expected values, windows and
// jitter for any gap: the durations are whole nanoseconds, at most
// about 9.2e12 ms, and the multiplied expectation is capped by MaxDelay.
func (p Policy) Validate() error {
	var errs []error
	if p.BaseDelay <= 0 {
		errs = append(errs, fmt.Errorf("initial backoff %v: must be positive", p.BaseDelay))
	}
	// An infinite multiplier would be capped by MaxDelay in Expected, but
	// the policy itself is written into every report, and JSON has no
	// infinity: refuse it here rather than fail the report at the end.
	switch m := p.Multiplier; {
	case math.IsNaN(m) || math.IsInf(m, 0):
		errs = append(errs, fmt.Errorf("multiplier %v: must be a finite number", m))
	case m < 1:
		errs = append(errs, fmt.Errorf("multiplier %v: must be at least 1", m))
	}
	switch j := p.Jitter; {
	case math.IsNaN(j) || math.IsInf(j, 0):
		errs = append(errs, fmt.Errorf("jitter %v: must be a finite number", j))
	case j < 0 || j >= 1:
		errs = append(errs, fmt.Errorf("jitter %v: must be in [0, 1)", j))
	}
	if p.MaxDelay <= 0 {
		errs = append(errs, fmt.Errorf("max backoff %v: must be positive", p.MaxDelay))
	}
	if p.MinConnectTimeout < 0 {
		errs = append(errs, fmt.Errorf("min connect timeout %v: must not be negative", p.MinConnectTimeout))
	}
	if p.Tolerance < 0 {
		errs = append(errs, fmt.Errorf("tolerance %v: must not be negative", p.Tolerance))
	}
	return errors.Join(errs...)
}

// Millis converts a duration to float64 milliseconds; whole milliseconds convert
// exactly, which keeps the reference arithmetic bit for bit.
func Millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// first returns E1, the expected first backoff in ms.
func (p Policy) first() float64 { return Millis(p.BaseDelay) }

// Next returns the expected backoff after e: multiplied, then capped, in
// float64 and in that order (docs/spec.md §3.2).
func (p Policy) Next(e float64) float64 {
	e *= p.Multiplier
	if c := Millis(p.MaxDelay); e > c {
		e = c
	}
	return e
}

// Expected returns the expected backoff of interval k (k ≥ 1) in ms.
func (p Policy) Expected(k int) float64 {
	e := p.first()
	for i := 1; i < k; i++ {
		e = p.Next(e)
	}
	return e
}

type policyJSON struct {
	InitialBackoffMS    float64 `json:"initial_backoff_ms"`
	Multiplier          float64 `json:"multiplier"`
	Jitter              float64 `json:"jitter"`
	MaxBackoffMS        float64 `json:"max_backoff_ms"`
	MinConnectTimeoutMS float64 `json:"min_connect_timeout_ms"`
	ToleranceMS         float64 `json:"tolerance_ms"`
}

// MarshalJSON writes the policy in milliseconds, the unit of the reports.
func (p Policy) MarshalJSON() ([]byte, error) {
	return json.Marshal(policyJSON{
		InitialBackoffMS:    Millis(p.BaseDelay),
		Multiplier:          p.Multiplier,
		Jitter:              p.Jitter,
		MaxBackoffMS:        Millis(p.MaxDelay),
		MinConnectTimeoutMS: Millis(p.MinConnectTimeout),
		ToleranceMS:         Millis(p.Tolerance),
	})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (p *Policy) UnmarshalJSON(b []byte) error {
	var j policyJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	var errs []error
	// Rounded, not truncated: 1.000052 ms is 1000052 ns, which v*1e6
	// computes as 1000051.9999999999. A value beyond a Duration is refused:
	// Go's conversion of such a float is implementation-defined, so it
	// could come back as any duration, negative or huge.
	d := func(name string, v float64) time.Duration {
		ns := math.Round(v * float64(time.Millisecond))
		if !(ns >= math.MinInt64 && ns < 1<<63) {
			errs = append(errs, fmt.Errorf("%s %v: out of range for a duration", name, v))
			return 0
		}
		return time.Duration(ns)
	}
	q := Policy{
		BaseDelay:         d("initial_backoff_ms", j.InitialBackoffMS),
		Multiplier:        j.Multiplier,
		Jitter:            j.Jitter,
		MaxDelay:          d("max_backoff_ms", j.MaxBackoffMS),
		MinConnectTimeout: d("min_connect_timeout_ms", j.MinConnectTimeoutMS),
		Tolerance:         d("tolerance_ms", j.ToleranceMS),
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	*p = q
	return nil
}

// String describes the policy in one line, for report headers.
func (p Policy) String() string {
	return fmt.Sprintf("initial %v ×%g ±%g%% cap %v, tolerance %v",
		p.BaseDelay, p.Multiplier, p.Jitter*100, p.MaxDelay, p.Tolerance)
}
