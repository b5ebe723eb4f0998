// Package analyze groups a capture's SYNs into attempts and chains, reads
// their fates, cross-checks a server's list against them, and writes the
// reports (docs/spec.md §5, §7). The backoff rules it applies are package
// backoff's.
package analyze
