package analyze

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// Attempt is one TCP connection attempt: the first SYN of a (src, dst, ISN)
// tuple, with the kernel's retransmissions of it counted, never verified as
// backoffs (SPEC.md §5).
type Attempt struct {
	// Time is the earliest SYN of the tuple, wherever in the input it came.
	Time time.Time
	Src  netip.AddrPort
	Dst  netip.AddrPort
	// Seq is the initial sequence number.
	Seq uint32
	// Retransmits counts the SYNs of the tuple after the first.
	Retransmits int
}

// Chain is one peer's attempts in time order: what the verifier judges.
type Chain struct {
	// Peer is the client address; an IPv4-mapped IPv6 address is the IPv4
	// address, while ::1 and 127.0.0.1 stay distinct peers (SPEC.md §5).
	Peer     netip.Addr
	Attempts []Attempt
}

// Times returns the attempt times, the input of Verify.
func (c Chain) Times() []time.Time {
	ts := make([]time.Time, len(c.Attempts))
	for i, a := range c.Attempts {
		ts[i] = a.Time
	}
	return ts
}

// Retransmits sums the retransmitted SYNs of the chain.
func (c Chain) Retransmits() int {
	n := 0
	for _, a := range c.Attempts {
		n += a.Retransmits
	}
	return n
}

// attemptKey identifies one attempt. It holds no pointers (hashing is most
// of Add's cost), and As16 spells a.b.c.d and ::ffff:a.b.c.d alike, so a
// tuple written both ways is one attempt.
type attemptKey struct {
	src, dst     [16]byte
	sport, dport uint16
	seq          uint32
}

func keyOf(s SYN) attemptKey {
	return attemptKey{
		src: s.Src.Addr().As16(), dst: s.Dst.Addr().As16(),
		sport: s.Src.Port(), dport: s.Dst.Port(), seq: s.Seq,
	}
}

// attemptRef locates an attempt inside the tracker.
type attemptRef struct {
	peer  *peerAttempts
	index int
}

type peerAttempts struct {
	peer     netip.Addr
	attempts []Attempt
}

// Tracker groups SYNs into attempts and attempts into peers as they stream
// in. Add takes SYNs in capture order, but the input need not be in time
// order (rotated files read in any order): Peers sorts every chain by time,
// and an attempt keeps the earliest time seen for its tuple.
//
// A Tracker is not safe for concurrent use.
type Tracker struct {
	attempts map[attemptKey]attemptRef
	peers    map[netip.Addr]*peerAttempts
	syns     int
	retrans  int
}

// NewTracker returns an empty tracker.
func NewTracker() *Tracker {
	return &Tracker{
		attempts: make(map[attemptKey]attemptRef),
		peers:    make(map[netip.Addr]*peerAttempts),
	}
}

// Add records one SYN. It returns the attempt the SYN belongs to, as it
// stands after this SYN, and whether the SYN opened a new attempt (false
// for a retransmission).
func (t *Tracker) Add(s SYN) (a Attempt, isNew bool) {
	t.syns++
	k := keyOf(s)
	if ref, ok := t.attempts[k]; ok {
		t.retrans++
		at := &ref.peer.attempts[ref.index]
		at.Retransmits++
		if s.Time.Before(at.Time) {
			// Input out of time order: the SYN seen first was the
			// retransmission, this one opened the attempt.
			at.Time = s.Time
		}
		return *at, false
	}
	peer := s.Src.Addr().Unmap()
	p := t.peers[peer]
	if p == nil {
		p = &peerAttempts{peer: peer}
		t.peers[peer] = p
	}
	a = Attempt{Time: s.Time, Src: s.Src, Dst: s.Dst, Seq: s.Seq}
	p.attempts = append(p.attempts, a)
	t.attempts[k] = attemptRef{peer: p, index: len(p.attempts) - 1}
	return a, true
}

// SYNs returns how many SYNs were added.
func (t *Tracker) SYNs() int { return t.syns }

// Attempts returns how many distinct attempts the SYNs made.
func (t *Tracker) Attempts() int { return len(t.attempts) }

// Retransmits returns how many SYNs were retransmissions.
func (t *Tracker) Retransmits() int { return t.retrans }

// Peers returns every peer, ordered by address, with its attempts sorted by
// time (ties broken by source port, then ISN, so the order never depends on
// the input's). The chains are copies: adding more SYNs later does not
// change them.
func (t *Tracker) Peers() []Chain {
	chains := make([]Chain, 0, len(t.peers))
	for _, p := range t.peers {
		as := slices.Clone(p.attempts)
		slices.SortFunc(as, compareAttempts)
		chains = append(chains, Chain{Peer: p.peer, Attempts: as})
	}
	slices.SortFunc(chains, func(a, b Chain) int { return a.Peer.Compare(b.Peer) })
	return chains
}

func compareAttempts(a, b Attempt) int {
	return cmp.Or(
		a.Time.Compare(b.Time),
		cmp.Compare(a.Src.Port(), b.Src.Port()),
		cmp.Compare(a.Seq, b.Seq),
		a.Dst.Compare(b.Dst),
		a.Src.Addr().Compare(b.Src.Addr()),
	)
}

// PortTracker keeps one Tracker per destination port, for reading a capture
// before the retry port is known.
type PortTracker struct {
	ports map[uint16]*Tracker
}

// NewPortTracker returns an empty PortTracker.
func NewPortTracker() *PortTracker { return &PortTracker{ports: make(map[uint16]*Tracker)} }

// Add records s with the other SYNs to its destination port.
func (pt *PortTracker) Add(s SYN) {
	t := pt.ports[s.Dst.Port()]
	if t == nil {
		t = NewTracker()
		pt.ports[s.Dst.Port()] = t
	}
	t.Add(s)
}

// Tracker returns the tracker of port; an empty one when no SYN went there.
func (pt *PortTracker) Tracker(port uint16) *Tracker {
	if t := pt.ports[port]; t != nil {
		return t
	}
	return NewTracker()
}

// PortCount is how many SYNs went to one port.
type PortCount struct {
	Port uint16 `json:"port"`
	SYNs int    `json:"syns"`
}

// Ports returns the destination ports seen, most SYNs first.
func (pt *PortTracker) Ports() []PortCount {
	pcs := make([]PortCount, 0, len(pt.ports))
	for p, t := range pt.ports {
		pcs = append(pcs, PortCount{Port: p, SYNs: t.SYNs()})
	}
	slices.SortFunc(pcs, func(a, b PortCount) int {
		return cmp.Or(cmp.Compare(b.SYNs, a.SYNs), cmp.Compare(a.Port, b.Port))
	})
	return pcs
}

// OnlyPort returns the port when every SYN went to one port, and otherwise
// an error that lists the candidate ports with their SYN counts.
func (pt *PortTracker) OnlyPort() (uint16, error) {
	pcs := pt.Ports()
	switch len(pcs) {
	case 0:
		return 0, errors.New("no TCP SYN in the capture: nothing to audit")
	case 1:
		return pcs[0].Port, nil
	}
	list := make([]string, len(pcs))
	for i, pc := range pcs {
		list[i] = fmt.Sprintf("%d (%s)", pc.Port, plural(pc.SYNs, "SYN"))
	}
	return 0, fmt.Errorf("the capture holds SYNs to %d ports, choose the retry port with --port: %s",
		len(pcs), strings.Join(list, ", "))
}

// unmapPort returns ap with an IPv4-mapped address unmapped.
func unmapPort(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}
