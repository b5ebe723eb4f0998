// Package stream groups the SYNs and segments of one retry port into
// chains as a capture comes (docs/spec.md §5.3), and hands each chain over
// once the capture is past its end (backoff.ChainEnd), so that what an
// audit of a long capture holds follows the peers still retrying. Every
// chain comes out as attempt.Tracker gives it; the records are attempt's
// (attempt/internal/rec), kept off the Go heap (internal/arena) and set
// aside in a spill (internal/spill).
package stream
