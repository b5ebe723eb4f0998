package attempt

import (
	"net/netip"
	"time"
)

// SYN is one TCP segment with SYN set and ACK clear, as a capture source
// saw it: a connection attempt or a kernel retransmission of one (docs/spec.md §5).
type SYN struct {
	// Time is the capture timestamp (the kernel's, for a live capture).
	Time time.Time
	Src  netip.AddrPort
	Dst  netip.AddrPort
	// Seq is the initial sequence number: the same 4-tuple and Seq again is
	// a retransmission, not a new attempt.
	Seq uint32
}
