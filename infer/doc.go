// Package infer reads from the wire the backoff policy a client runs:
// for one chain of attempts, the schedule of the spec's family that best
// explains it (initial backoff, multiplier, jitter, cap, and the connect
// timeout where attempts hung), each parameter with an interval that says
// how sure it is or the reason the chain does not determine it; for a
// fleet of chains, the few policies it runs and which chain runs which.
//
// The family is that of gRPC's connection backoff and of the libraries
// that implement it (docs/spec.md §1.1, §4.2, §7): a success resets the
// backoff, an attempt that hangs ends at the connect timeout, interval 1
// may be exact or jittered, and jitter may compound (grpc-js). The model,
// the estimators, their intervals and when a chain is undetermined are in
// docs/spec.md §8. Everything is linear in the attempts read.
//
// The fit and the search (FitChain, Cluster) know nothing of captures or
// reports: a chain is its attempts' times and how each ended. Read is the
// bridge to a document's chains: it reads each attempt's end as the
// verifier classes it (package backoff, the only package of the module
// infer imports besides internal/text), keeps a word a chain, and writes
// the JSON and text a report carries (Reading.AppendPeer, Policies,
// Reading.WriteText), so that package report only calls it.
//
// Spec: https://github.com/grpc/grpc/blob/master/doc/connection-backoff.md
package infer
