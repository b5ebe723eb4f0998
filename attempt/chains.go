package attempt

import (
	"cmp"
	"net/netip"
	"slices"
	"time"

	"github.com/backoff-audit/audit/attempt/internal/rec"
	"github.com/backoff-audit/audit/backoff"
)

// Chains is every peer's chain of a Tracker, ordered as Peers orders them,
// to be read one at a time: where Peers copies every attempt at once,
// Chain builds one chain in a buffer the caller may reuse. It reads the
// tracker as it is, and is valid until the next Add.
type Chains struct {
	t     *Tracker
	addrs []netip.Addr // by chain
	// recs holds each chain's attempt indices, chain after chain, each in
	// the order its attempts were opened; chain i ends at end[i]. stamps
	// holds their times in the same order, so that verifying every chain
	// reads memory in order rather than an attempt here and there.
	recs    []int32
	stamps  []rec.Stamp
	end     []int
	retrans []int // by chain
	// endings holds the attempts' Endings in recs' order too, when the
	// tracker knows fates: every verification reads them (see endings),
	// and reading each from its attempt's record was a cache miss each,
	// an allocation a chain besides.
	ends []backoff.Ending
}

// Chains groups the attempts by peer, peers ordered by address, without
// copying an attempt.
func (t *Tracker) Chains() *Chains {
	t.readSegments()
	// As16 makes 127.0.0.1 and ::ffff:127.0.0.1 one peer, and ::1 another
	// (docs/spec.md §5).
	for ; t.grouped < t.attempts.n; t.grouped++ {
		r := t.rec(t.grouped)
		p, ok := t.peers[r.key.src]
		if !ok {
			p = int32(len(t.peerN))
			t.peers[r.key.src] = p
			t.peerN = append(t.peerN, 0)
		}
		r.peer = p
		t.peerN[p]++
	}
	np := len(t.peerN)
	byIndex := make([]netip.Addr, np)
	for b, i := range t.peers {
		byIndex[i] = netip.AddrFrom16(b).Unmap()
	}
	order := make([]int32, np) // peer indices by address
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return byIndex[a].Compare(byIndex[b]) })
	c := &Chains{t: t, addrs: make([]netip.Addr, np), recs: make([]int32, t.attempts.n), stamps: make([]rec.Stamp, t.attempts.n),
		end: make([]int, np), retrans: make([]int, np)}
	if t.fatesKnown {
		c.ends = make([]backoff.Ending, t.attempts.n)
	}
	// A counting sort of the attempts by peer: next[p] is where peer p's
	// next attempt goes, and the end of its chain once all are placed.
	next := make([]int, np)
	n := 0
	for _, p := range order {
		next[p] = n
		n += int(t.peerN[p])
	}
	retrans := make([]int, np) // by peer index
	for i := range t.attempts.n {
		r := t.rec(i)
		j := next[r.peer]
		c.recs[j] = int32(i)
		c.stamps[j] = rec.Stamp{Sec: r.sec, Nsec: r.nsec}
		if c.ends != nil {
			c.ends[j] = t.withDecryption(&r.key, rec.Stamp{Sec: r.sec, Nsec: r.nsec}, r.fate.Ending(rec.Stamp{Sec: r.sec, Nsec: r.nsec}, r.last))
		}
		retrans[r.peer] += int(r.retrans)
		next[r.peer]++
	}
	for i, p := range order {
		c.addrs[i] = byIndex[p]
		c.end[i] = next[p]
		c.retrans[i] = retrans[p]
	}
	return c
}

// Times returns chain i's peer, attempt times (sorted, in buf's array)
// and retransmits, without building its attempts.
func (c *Chains) Times(i int, buf []time.Time) (netip.Addr, []time.Time, int) {
	from := 0
	if i > 0 {
		from = c.end[i-1]
	}
	buf = buf[:0]
	for k, s := range c.stamps[from:c.end[i]] {
		if k > 0 && !c.stamps[from+k-1].Before(s) {
			// Out of time order, or a tie: sort as Chain does.
			ch := c.Chain(i, nil)
			return ch.Peer, ch.Times(), ch.Retransmits()
		}
		buf = append(buf, time.Unix(s.Sec, int64(s.Nsec)).UTC())
	}
	return c.addrs[i], buf, c.retrans[i]
}

// Endings returns chain i's attempts' fates in time order, or nil when
// the tracker knows none: a slice of the chains' Endings, which the
// caller may keep, not append to. buf is not used.
func (c *Chains) Endings(i int, buf []backoff.Ending) []backoff.Ending {
	if c.ends == nil {
		return nil
	}
	from, to := 0, c.end[i]
	if i > 0 {
		from = c.end[i-1]
	}
	for k := from + 1; k < to; k++ {
		if !c.stamps[k-1].Before(c.stamps[k]) {
			return c.Chain(i, nil).Endings() // out of time order: as Chain sorts
		}
	}
	return c.ends[from:to:to]
}

// Len returns the number of chains (peers).
func (c *Chains) Len() int { return len(c.addrs) }

// Chain returns chain i (0 ≤ i < Len), its attempts sorted by time, built
// in buf's array when it has room.
func (c *Chains) Chain(i int, buf []Attempt) Chain {
	from := 0
	if i > 0 {
		from = c.end[i-1]
	}
	as := buf[:0]
	sorted := true
	var last *attemptRec
	for k, j := range c.recs[from:c.end[i]] {
		r := c.t.rec(int(j))
		if last != nil && !r.after(last.sec, last.nsec) {
			sorted = false
		}
		if c.ends != nil { // made once, by Chains
			a := r.attempt()
			a.Ending = c.ends[from+k]
			as = append(as, a)
		} else {
			as = append(as, c.t.attempt(int(j)))
		}
		last = r
	}
	// Capture order is time order but for rotated files read out of
	// order, and for attempts at the same time.
	if !sorted {
		slices.SortFunc(as, Compare)
	}
	return Chain{Peer: c.addrs[i], Attempts: as}
}

// Peers returns every peer, ordered by address, with its attempts sorted by
// time (ties broken by source port, then ISN, so the order never depends on
// the input's). The chains are copies, in one backing array: adding more
// SYNs later does not change them.
func (t *Tracker) Peers() []Chain {
	c := t.Chains()
	all := make([]Attempt, t.attempts.n)
	chains := make([]Chain, c.Len())
	from := 0
	for i := range chains {
		to := c.end[i]
		chains[i] = c.Chain(i, all[from:to:to]) // capped: appending to one chain copies it
		from = to
	}
	return chains
}

// Compare orders a chain: by time, then source port, ISN,
// destination and source address, a total order over distinct attempts.
func Compare(a, b Attempt) int {
	if c := a.Time.Compare(b.Time); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Src.Port(), b.Src.Port()); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Seq, b.Seq); c != 0 {
		return c
	}
	if c := a.Dst.Compare(b.Dst); c != 0 {
		return c
	}
	return a.Src.Addr().Compare(b.Src.Addr())
}
