// Package attempt turns what a capture source saw into what the backoff
// model judges: each SYN an attempt or a kernel retransmission of one
// (docs/spec.md §5.2), each attempt's fate read from the segments of its
// connection (§7.2), and the attempts of one peer a chain (§5.3). Tracker
// holds a capture's attempts in pointer-free records, so that a capture of
// millions of SYNs costs the collector nothing; Chains gives each peer's
// chain in time order without building every attempt.
//
// It imports only the standard library and package backoff, whose Ending
// is the evidence an attempt carries into the model.
package attempt
