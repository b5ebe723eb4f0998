// Package realclients holds tests, and only tests, that run real gRPC
// clients of three stacks against the reference server's retry port: gRPC
// C-core through Debian's python3-grpcio (testdata/clients/ccore_client.py),
// and, newer (gRPC 1.71, which jitters its first backoff), through the
// Python the Google Cloud CLI bundles where it is installed; grpc-go through
// the interop client behind `audit client`; and grpc-js
// (testdata/clients/grpcjs). Each run starts the server in-process on
// loopback, lets the client run the interop steps of docs/spec.md §1.3 for a
// bounded time, and holds what the client really did (docs/spec.md §4.2) to
// the server's attempt times and to the client's own account of them.
//
// `go test -v ./internal/realclients` logs the figures of every run.
package realclients
