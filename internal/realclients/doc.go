// Package realclients holds tests, and only tests, that run real gRPC
// clients of three stacks against the reference server's retry port in
// every retry mode: gRPC C-core through Debian's python3-grpcio
// (testdata/clients/ccore_client.py), and, newer (gRPC 1.71, which jitters
// its first backoff), through the Python the Google Cloud CLI bundles where
// it is installed; grpc-go through the interop client behind `audit
// client`; and grpc-js (testdata/clients/grpcjs). Each run lets the client
// run the interop steps of docs/spec.md §1.3 for a bounded time and holds
// what the client really did (docs/spec.md §4.2) to the server's attempt
// times and to the client's own account of them.
//
// Each run is also read every way the product reads a run, in this
// process through the packages behind the verbs (readings_test.go): audit
// live, whose server the client talks to, capturing lo; audit live
// --attach following that server's record file; audit live --attach
// following its control port; audit pcap --record on the first capture;
// and audit pcap on the capture of both ports, whose control port gives
// the sessions. Their JSON documents must say the same of the run, and
// the server's log and the client's own check what they say
// (agree_test.go). Where this process cannot capture (not root), the
// server runs alone and says so.
//
// `go test -v ./internal/realclients` logs the figures of every run and
// reading; with REALCLIENTS_KEEP=DIR a failed run's captures and record
// are copied to DIR.
package realclients
