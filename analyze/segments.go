package analyze

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"time"
)

// Segment is a TCP segment of a connection attempt other than its SYN: a
// SYN-ACK, an RST, a FIN, or one that carries bytes. The fates of attempts
// are read from them (docs/spec.md §7).
type Segment struct {
	// Time is the capture timestamp.
	Time     time.Time
	Src, Dst netip.AddrPort
	Seq, Ack uint32
	// Flags is the TCP header's flag byte: FIN 0x01, SYN 0x02, RST 0x04,
	// ACK 0x10.
	Flags uint8
	// Sent names the segment's first bytes (PayloadOf); PayloadNone when
	// it carries none.
	Sent Payload
}

// segRec is a Segment as a Tracker keeps it when it cannot read it at
// once: no pointers, so the collector never scans them, and no
// allocation each.
type segRec struct {
	src, dst     addr128
	sport, dport uint16
	seq, ack     uint32
	sec          int64
	nsec         int32
	flags        uint8
	sent         payloadCode
}

func (r *segRec) at() stamp { return stamp{r.sec, r.nsec} }

// addr128 is an address as As16 spells it (IPv4 mapped), in two words,
// compared and hashed a word at a time.
type addr128 struct{ hi, lo uint64 }

func words(b *[16]byte) addr128 {
	return addr128{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

// wordsOf is words(a.As16()) in 4 ns instead of 11: As16's result was
// copied aside whole and read back a word at a time, a store forwarding
// stall, where AppendBinary's bytes are read as they were written.
func wordsOf(a netip.Addr) addr128 {
	var buf [16]byte
	b, _ := a.AppendBinary(buf[:0])
	switch {
	case len(b) == 4:
		return addr128{0, 0xffff<<32 | uint64(binary.BigEndian.Uint32(b))}
	case len(b) >= 16: // a zone follows; a segment has none
		return addr128{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:16])}
	}
	return addr128{} // the zero Addr
}

func (a addr128) bytes() (b [16]byte) {
	binary.BigEndian.PutUint64(b[:8], a.hi)
	binary.BigEndian.PutUint64(b[8:], a.lo)
	return b
}

// segBatch bounds the segments that wait to be read (64 bytes each while
// they do): memory follows the attempts, not the packets.
const segBatch = 1 << 18

// recentSlots is the size of a Tracker's table of recent attempts: 128
// KiB, which stays in cache while a capture streams through.
const recentSlots = 1 << 14

// pendingRef tags a reference in the table of recent attempts to a pushed
// SYN's position rather than an attempt's index.
const pendingRef = 1 << 31

// AddSegment reads a segment into the fate of the attempt of its 4-tuple
// (in either direction) that it belongs to (docs/spec.md §7); a segment
// of no attempt the tracker holds is dropped. It does not keep s. Segments must come in
// capture order with the SYNs: a segment that comes before its attempt's
// SYN is matched only when the tracker is read.
//
// Most segments of an attempt follow its SYN within milliseconds, so a
// small table keeps the attempts opened last by tuple, and a segment is
// read at once through it, into the attempt's fate, or, while the SYNs
// wait to be grouped (see push), into that of the SYN that opens the
// attempt. The table stays in cache, where looking every segment up among
// all attempts was a cache miss or two each, and nothing is kept per
// segment. A segment the table cannot place (its attempt opened long
// before and was pushed out of the table, one of a reused tuple's earlier
// attempts, or one read before its SYN) waits for the tracker to be read
// (List, Chains, Peers), or for segBatch of them, and is then matched by
// sorting (see readLate).
func (t *Tracker) AddSegment(s *Segment) {
	if !t.watching {
		t.watch()
	}
	// Field by field: a composite literal was built aside and copied,
	// a stall on every segment.
	var r segRec
	r.src, r.dst = wordsOf(s.Src.Addr()), wordsOf(s.Dst.Addr())
	r.sport, r.dport = s.Src.Port(), s.Dst.Port()
	r.seq, r.ack, r.flags, r.sent = s.Seq, s.Ack, s.Flags, codeOf(s.Sent)
	r.sec, r.nsec = s.Time.Unix(), int32(s.Time.Nanosecond())
	t.readSegment(&r)
}

// watch starts the table of recent attempts, with the SYNs that wait.
func (t *Tracker) watch() {
	t.watching = true
	if t.recent == nil {
		t.recent = make([]uint64, recentSlots)
	}
	for i := range t.pushed.n {
		t.rememberPushed(i)
	}
}

// SetFatesKnown says whether the input can show fates: true when it holds
// more than SYNs (docs/spec.md §7), so that an attempt no segment answered
// was unanswered rather than unseen. Until it is set, every attempt's
// Ending is the zero Ending, whatever segments were added.
func (t *Tracker) SetFatesKnown(known bool) { t.fatesKnown = known }

// FatesKnown reports what SetFatesKnown set.
func (t *Tracker) FatesKnown() bool { return t.fatesKnown }

// endpoint is one side of a 4-tuple.
type endpoint struct {
	addr [16]byte
	port uint16
}

// tupleHash hashes a 4-tuple whichever way its segment went: its
// endpoints are mixed each, summed, and the sum mixed again. It is read
// for every segment and SYN, where maphash.Comparable took 20 ns an
// endpoint; the key is seeded per Tracker, so input cannot aim at its
// collisions, and they cost only time.
func (t *Tracker) tupleHash(a addr128, ap uint16, b addr128, bp uint16) uint64 {
	h := t.endHash(a, ap) + t.endHash(b, bp)
	// The finaliser of MurmurHash3: every bit of h reaches every bit.
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	return h ^ h>>33
}

func (t *Tracker) endHash(a addr128, port uint16) uint64 {
	x := (a.hi ^ t.key[0]) * 0x9e3779b97f4a7c15
	y := (a.lo ^ t.key[1] ^ uint64(port)<<48) * 0xc2b2ae3d27d4eb4f
	x ^= y ^ y>>29
	return x ^ x>>32
}

func (t *Tracker) keyHash(k *attemptKey) uint64 {
	return t.tupleHash(words(&k.src), k.sport, words(&k.dst), k.dport)
}

// remember makes attempt i its tuple's latest in the table of recent
// attempts, in place of any other of its slot.
func (t *Tracker) remember(i int) {
	if t.recent == nil {
		t.recent = make([]uint64, recentSlots)
	}
	h := t.keyHash(&t.rec(i).key)
	t.recent[h&(recentSlots-1)] = h>>32<<32 | uint64(i+1)
}

// rememberPushed makes the attempt that pushed SYN i opens its tuple's
// latest in the table, unless the table holds it already (SYN i is a
// retransmission), and gives it a fate while it waits.
func (t *Tracker) rememberPushed(i int) {
	for t.pushedFates.n <= i {
		t.pushedFates.add(fateRec{})
	}
	k := &t.pushed.at(i).key
	h := t.keyHash(k)
	slot := &t.recent[h&(recentSlots-1)]
	if *slot>>32 == h>>32 && *slot != 0 {
		if ref, _, _ := t.refKey(*slot); *ref == *k {
			return
		}
	}
	*slot = h>>32<<32 | pendingRef | uint64(i+1)
}

// refKey returns the attempt key, the fate and the start of the attempt
// a slot of the table refers to.
func (t *Tracker) refKey(slot uint64) (*attemptKey, *fateRec, stamp) {
	ref := int(uint32(slot)&^pendingRef) - 1
	if uint32(slot)&pendingRef != 0 {
		p := t.pushed.at(ref)
		return &p.key, t.pushedFates.at(ref), stamp{p.sec, p.nsec}
	}
	if ref >= len(t.fates) {
		t.fates = slices.Grow(t.fates, t.attempts.n-len(t.fates))[:t.attempts.n]
	}
	r := t.rec(ref)
	return &r.key, &t.fates[ref], stamp{r.sec, r.nsec}
}

// settleFates moves the fates of the pushed SYNs to their attempts, and
// the table's references to them; attempt gives each position's attempt.
func (t *Tracker) settleFates(attempt []int32) {
	if n := t.attempts.n; len(t.fates) < n {
		t.fates = slices.Grow(t.fates, n-len(t.fates))[:n]
	}
	for i := range t.pushedFates.n {
		if f := t.pushedFates.at(i); *f != (fateRec{}) {
			t.fates[attempt[i]].merge(f)
		}
	}
	for j, slot := range t.recent {
		if uint32(slot)&pendingRef != 0 {
			t.recent[j] = slot>>32<<32 | uint64(attempt[int(uint32(slot)&^pendingRef)-1]+1)
		}
	}
	t.pushedFates = blocks[fateRec]{}
}

// readSegment reads r through the table of recent attempts, or leaves it
// for readLate.
func (t *Tracker) readSegment(r *segRec) {
	if t.recent != nil {
		h := t.tupleHash(r.src, r.sport, r.dst, r.dport)
		if slot := t.recent[h&(recentSlots-1)]; slot != 0 && slot>>32 == h>>32 {
			k, f, start := t.refKey(slot)
			if fromClient, ok := owns(k, f, r); ok && !r.at().before(start) {
				f.observe(r.at(), fromClient, r.flags, r.seq, r.ack, k.seq, r.sent)
				return
			}
		}
	}
	if t.late.n == t.segBatch {
		t.readLate()
	}
	t.late.add(*r)
}

// owns reports whether r, of the tuple of the attempt of key k and fate f
// by its hash, and no older than it, surely belongs to that attempt, the
// latest of its tuple, and which way it went: it is of the tuple, and does
// not acknowledge another ISN where an answer to this one's SYN would (an
// earlier attempt of the tuple may own it: readLate decides).
func owns(k *attemptKey, f *fateRec, r *segRec) (fromClient, ok bool) {
	ksrc, kdst := words(&k.src), words(&k.dst)
	fromClient = r.sport == k.sport && r.dport == k.dport && r.src == ksrc && r.dst == kdst
	if !fromClient && !(r.sport == k.dport && r.dport == k.sport && r.src == kdst && r.dst == ksrc) {
		return false, false
	}
	if !fromClient && r.flags&flagACK != 0 && r.ack != k.seq+1 &&
		(r.flags&flagSYN != 0 || r.flags&flagRST != 0 && f.state&fateAccepted == 0) {
		return false, false
	}
	return fromClient, true
}

// observe reads r, which went the way fromClient says, into attempt i's
// fate.
func (t *Tracker) observe(i int, r *segRec, fromClient bool) {
	if i >= len(t.fates) {
		t.fates = slices.Grow(t.fates, t.attempts.n-len(t.fates))[:t.attempts.n]
	}
	t.fates[i].observe(r.at(), fromClient, r.flags, r.seq, r.ack, t.rec(i).key.seq, r.sent)
}

// readSegments reads every segment that waits: the SYNs are grouped, and
// the segments the table of recent attempts could not place are matched.
func (t *Tracker) readSegments() {
	t.settle()
	t.readLate()
}

// readLate reads the segments the table of recent attempts could not
// place, and lets them go. It sorts and merges: the attempts and the
// segments are sorted by a hash of their 4-tuple, then each tuple's
// segments are matched to its attempts, in time order. A tuple reused by
// later attempts (a new ISN) gives a segment to the attempt its sequence
// numbers name (a SYN-ACK or RST acknowledging ISN+1, the client's bytes
// at ISN+1), otherwise to the latest attempt that started before it
// (docs/spec.md §7).
func (t *Tracker) readLate() {
	m := t.late.n
	if m == 0 {
		return
	}
	n := t.attempts.n
	ak := make([]uint64, n)
	for i := range n {
		ak[i] = t.keyHash(&t.rec(i).key)>>32<<32 | uint64(i)
	}
	ak = sortHigh32(ak, make([]uint64, n))
	sk := make([]uint64, m)
	for i := range m {
		r := t.late.at(i)
		sk[i] = t.tupleHash(r.src, r.sport, r.dst, r.dport)>>32<<32 | uint64(i)
	}
	sk = sortHigh32(sk, make([]uint64, m))
	var as, ss []int32
	for a, s := 0, 0; a < n && s < m; {
		ha, hs := ak[a]>>32, sk[s]>>32
		switch {
		case ha < hs:
			a++
			continue
		case hs < ha:
			s++
			continue
		}
		as, ss = as[:0], ss[:0]
		for ; a < n && ak[a]>>32 == ha; a++ {
			as = append(as, int32(uint32(ak[a])))
		}
		for ; s < m && sk[s]>>32 == hs; s++ {
			ss = append(ss, int32(uint32(sk[s])))
		}
		t.matchRun(as, ss)
	}
	t.late = blocks[segRec]{}
}

// tupleKey is a 4-tuple whichever way its segment went: its lower
// endpoint (by port, then address) first.
type tupleKey struct{ lo, hi endpoint }

func tupleOf(a [16]byte, ap uint16, b [16]byte, bp uint16) tupleKey {
	x, y := endpoint{a, ap}, endpoint{b, bp}
	if compareEndpoint(y, x) < 0 {
		x, y = y, x
	}
	return tupleKey{x, y}
}

// matchRun matches the late segments ss to the attempts as of one hash
// of their tuples: most often one tuple, one attempt and a few segments.
func (t *Tracker) matchRun(as, ss []int32) {
	// Attempts by tuple, then start; segments in time order (the capture
	// order, but for files read out of order).
	tupleAt := func(i int32) tupleKey {
		k := &t.rec(int(i)).key
		return tupleOf(k.src, k.sport, k.dst, k.dport)
	}
	if len(as) > 1 {
		slices.SortFunc(as, func(x, y int32) int {
			if c := compareTuple(tupleAt(x), tupleAt(y)); c != 0 {
				return c
			}
			rx, ry := t.rec(int(x)), t.rec(int(y))
			return stamp{rx.sec, rx.nsec}.compare(stamp{ry.sec, ry.nsec})
		})
	}
	order := func(x, y int32) int { return t.late.at(int(x)).at().compare(t.late.at(int(y)).at()) }
	if !slices.IsSortedFunc(ss, order) {
		slices.SortStableFunc(ss, order)
	}
	for _, si := range ss {
		r := t.late.at(int(si))
		k := tupleOf(r.src.bytes(), r.sport, r.dst.bytes(), r.dport)
		lo, _ := slices.BinarySearchFunc(as, k, func(i int32, k tupleKey) int { return compareTuple(tupleAt(i), k) })
		hi := lo
		for hi < len(as) && tupleAt(as[hi]) == k {
			hi++
		}
		if i := t.attemptOf(as[lo:hi], r); i >= 0 {
			a := t.rec(int(i))
			t.observe(int(i), r, r.sport == a.key.sport && r.src == words(&a.key.src))
		}
	}
}

// lookBack bounds how many earlier attempts of a tuple a segment's
// sequence numbers are checked against: a tuple reused within one
// attempt's life is rare, and a flood of attempts on one tuple must not
// make matching quadratic.
const lookBack = 4

// attemptOf returns the attempt of one tuple's attempts as (sorted by
// start) that segment r belongs to, or -1.
func (t *Tracker) attemptOf(as []int32, r *segRec) int32 {
	at := r.at()
	// The latest attempt that started no later than the segment.
	n, _ := slices.BinarySearchFunc(as, at, func(i int32, at stamp) int {
		a := t.rec(int(i))
		if (stamp{a.sec, a.nsec}).compare(at) <= 0 {
			return -1
		}
		return 1
	})
	for j := n - 1; j >= 0 && j >= n-lookBack; j-- {
		a := t.rec(int(as[j]))
		fromClient := r.sport == a.key.sport && r.src == words(&a.key.src)
		answers := !fromClient && r.flags&flagACK != 0 && r.flags&(flagSYN|flagRST) != 0 && r.ack == a.key.seq+1
		if answers || fromClient && r.sent != 0 && r.seq == a.key.seq+1 {
			return as[j]
		}
	}
	if n == 0 {
		return -1
	}
	return as[n-1]
}

func compareTuple(a, b tupleKey) int {
	if c := compareEndpoint(a.lo, b.lo); c != 0 {
		return c
	}
	return compareEndpoint(a.hi, b.hi)
}

func compareEndpoint(a, b endpoint) int {
	switch {
	case a.port != b.port:
		if a.port < b.port {
			return -1
		}
		return 1
	case a.addr == b.addr:
		return 0
	case string(a.addr[:]) < string(b.addr[:]):
		return -1
	}
	return 1
}

func (s stamp) compare(u stamp) int {
	switch {
	case s.before(u):
		return -1
	case u.before(s):
		return 1
	}
	return 0
}

func (s stamp) sub(u stamp) time.Duration {
	return time.Duration(s.sec-u.sec)*time.Second + time.Duration(s.nsec-u.nsec)
}

func (s stamp) add(d time.Duration) stamp {
	return stampOf(time.Unix(s.sec, int64(s.nsec)).Add(d))
}

func stampOf(t time.Time) stamp { return stamp{t.Unix(), int32(t.Nanosecond())} }
