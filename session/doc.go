// Package session holds what a reading of the interop test knows of its
// sessions beyond the SYNs: the server's record file (its events, written
// and read), the rules of a session (which chain it verifies, which
// attempts fall in it, what an overflow means: docs/spec.md §4.1), the
// server's list of one session, and the cross-check of that list against
// the kernel's attempts (§5.4, §5.6).
package session
