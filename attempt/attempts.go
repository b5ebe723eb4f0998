package attempt

import (
	"hash/maphash"
	"math"
	"net/netip"
	"time"

	"github.com/backoff-audit/audit/attempt/internal/rec"

	"github.com/backoff-audit/audit/backoff"
)

// Attempt is one TCP connection attempt: the first SYN of a (src, dst, ISN)
// tuple, with the kernel's retransmissions of it counted, never verified as
// backoffs (docs/spec.md §5).
type Attempt struct {
	// Time is the earliest SYN of the tuple, wherever in the input it came.
	Time time.Time
	Src  netip.AddrPort
	Dst  netip.AddrPort
	// Seq is the initial sequence number.
	Seq uint32
	// Retransmits counts the SYNs of the tuple after the first.
	Retransmits int
	// Ending is the attempt's fate as its segments showed it (docs/spec.md
	// §7); the zero Ending when the input could show none (see
	// Tracker.SetFatesKnown), which reports write as FateUnknown.
	Ending backoff.Ending
}

// Chain is one peer's attempts in time order: what the verifier judges.
type Chain struct {
	// Peer is the client address; an IPv4-mapped IPv6 address is the IPv4
	// address, while ::1 and 127.0.0.1 stay distinct peers (docs/spec.md §5).
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

// Endings returns the attempts' fates, in the chain's order.
func (c Chain) Endings() []backoff.Ending {
	es := make([]backoff.Ending, len(c.Attempts))
	for i, a := range c.Attempts {
		es[i] = a.Ending
	}
	return es
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
// tuple written both ways is one attempt. A SYN carries no IPv6 zone, so
// As16 loses nothing.
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

// attemptRec is the tracker's copy of an Attempt. It holds no pointers
// (time.Time and netip.Addr do), so the collector never scans a tracker's
// attempts, and they cost no allocation each.
type attemptRec struct {
	key attemptKey
	sec int64 // Time as Unix seconds and nanoseconds: exact for any time
	// last is the latest SYN's time in Unix nanoseconds (rec.Stamp.nanos):
	// an unanswered attempt ends there.
	last int64
	// fate is what the segments read so far showed of the attempt (see
	// AddSegment), beside the rest of it: a chain's attempts are read
	// one by one, and a fate elsewhere was a second cache miss each.
	fate    rec.Fate
	nsec    int32
	peer    int32 // index into Tracker.peerN, set by Chains
	retrans int32
	// src4 and dst4 keep the spelling of the first SYN's addresses: 4-byte,
	// or 16-byte (IPv4-mapped when the address is IPv4).
	src4, dst4 bool
}

func (r *attemptRec) after(sec int64, nsec int32) bool {
	return r.sec > sec || r.sec == sec && r.nsec > nsec
}

func addrOf(b [16]byte, is4 bool) netip.Addr {
	if is4 {
		return netip.AddrFrom4([4]byte(b[12:]))
	}
	return netip.AddrFrom16(b)
}

// attempt returns the record as an Attempt, its time in UTC, without its
// Ending (see Tracker.attempt).
func (r *attemptRec) attempt() Attempt {
	return Attempt{
		Time:        time.Unix(r.sec, int64(r.nsec)).UTC(),
		Src:         netip.AddrPortFrom(addrOf(r.key.src, r.src4), r.key.sport),
		Dst:         netip.AddrPortFrom(addrOf(r.key.dst, r.dst4), r.key.dport),
		Seq:         r.key.seq,
		Retransmits: int(r.retrans),
	}
}

// Tracker groups SYNs into attempts and attempts into peers as they stream
// in. Add takes SYNs in capture order, but the input need not be in time
// order (rotated files read in any order): Peers and Chains sort every
// chain by time, and an attempt keeps the earliest time seen for its tuple.
//
// Add allocates nothing per SYN: attempts go into fixed-size blocks, found
// again through a table of 8-byte slots, neither holding a pointer for the
// collector to scan. Times come back in UTC, without a monotonic reading.
//
// A Tracker is not safe for concurrent use.
type Tracker struct {
	// last is the latest SYN's or segment's time (Last).
	last rec.Stamp
	// attempts in the order they were opened.
	attempts blocks[attemptRec]
	// table finds an attempt by its key: open addressing, linear probing,
	// at most half full. A slot is the top 32 bits of the key's hash and
	// the attempt's index + 1; 0 is empty. A map[attemptKey]int32 has
	// 48-byte slots and misses the cache while it grows; this table is 8
	// bytes a slot and reads an attempt only when the hashes agree. It holds the first indexed attempts: those
	// that settle opens join it when Add next needs it.
	table   []uint64
	indexed int
	seed    maphash.Seed
	// pushed holds the SYNs that PortTracker added, not yet grouped (see
	// push).
	pushed    blocks[pushedSYN]
	pushBatch int // the most SYNs that wait: pushBatch, but in tests
	// collide gives every pushed SYN the same hash, in tests of settle.
	collide bool
	// peers numbers the clients: unmapped address (As16) → peer index.
	// Attempts get their peer in Chains, not in Add: a lookup per attempt
	// while the reader streams 4 MiB chunks through the cache cost Add a
	// third of its time.
	peers map[[16]byte]int32
	// peerN counts the attempts of each peer, by peer index, over the
	// first grouped attempts.
	peerN   []int32
	grouped int
	syns    int
	retrans int
	// watching is set by the first segment (see AddSegment). recent is
	// the table of recent attempts, a slot a tuple's hash (nil until
	// used); seen the set of tuples SYNs came from. pushedFates holds, by
	// position, the fates of the attempts pushed SYNs open that left the
	// table while the SYNs wait to be grouped (an attempt's is beside it).
	// late holds the segments the table could not place, at most segBatch
	// (but in tests) until read.
	watching    bool
	recent      []recentAttempt
	seen        []byte
	pushedFates blocks[rec.Fate]
	late        blocks[segRec]
	segBatch    int
	recentMax   int // recentSlots, but in tests
	fatesKnown  bool
	// decrypted is what a key log showed of attempts' TLS (Decrypt).
	decrypted map[attemptKey]Decryption
}

// blocks is a list that grows by fixed-size blocks (the first grows up to
// one by append), so that growing never copies what it holds.
type blocks[T any] struct {
	b [][]T
	n int
}

const (
	blockBits = 10
	blockSize = 1 << blockBits
)

func (l *blocks[T]) at(i int) *T { return &l.b[i>>blockBits][i&(blockSize-1)] }

func (l *blocks[T]) add(v T) {
	if k := l.n >> blockBits; k == len(l.b) {
		l.b = append(l.b, nil)
		if k > 0 {
			l.b[k] = make([]T, 0, blockSize)
		}
	}
	last := len(l.b) - 1
	l.b[last] = append(l.b[last], v)
	l.n++
}

// next adds a zero element and returns it, to be filled in place: adding
// a record built aside copied it once more (attemptRec is 96 bytes).
func (l *blocks[T]) next() *T {
	if k := l.n >> blockBits; k < len(l.b) && len(l.b[k]) < cap(l.b[k]) {
		b := l.b[k][:len(l.b[k])+1] // never written: blocks never shrink, and growing clears
		l.b[k] = b
		l.n++
		return &b[len(b)-1]
	}
	var zero T
	l.add(zero)
	return l.at(l.n - 1)
}

// pushedSYN is a SYN as push keeps it: its tuple, time and spelling.
type pushedSYN struct {
	key        attemptKey
	sec        int64
	nsec       int32
	src4, dst4 bool
}

func pushedOf(s SYN) pushedSYN {
	return pushedSYN{key: keyOf(s), sec: s.Time.Unix(), nsec: int32(s.Time.Nanosecond()),
		src4: s.Src.Addr().Is4(), dst4: s.Dst.Addr().Is4()}
}

// NewTracker returns an empty tracker. It is small until SYNs come: a
// PortTracker may hold thousands.
func NewTracker() *Tracker {
	seed := maphash.MakeSeed()
	return &Tracker{
		table:     make([]uint64, 8),
		seed:      seed,
		peers:     make(map[[16]byte]int32),
		pushBatch: pushBatch,
		segBatch:  segBatch,
		recentMax: recentSlots,
	}
}

func (t *Tracker) rec(i int) *attemptRec { return t.attempts.at(i) }

// attempt returns attempt i with its Ending, as the segments read so far
// show it.
func (t *Tracker) attempt(i int) Attempt {
	r := t.rec(i)
	a := r.attempt()
	if t.fatesKnown {
		a.Ending = t.withDecryption(&r.key, rec.Stamp{Sec: r.sec, Nsec: r.nsec}, r.fate.Ending(rec.Stamp{Sec: r.sec, Nsec: r.nsec}, r.last))
	}
	return a
}

// find returns the index of k's attempt among the indexed ones, or -1 and
// the empty slot where k goes. fp is the top 32 bits of k's hash.
func (t *Tracker) find(k *attemptKey, fp uint64) (index, slot int) {
	mask := len(t.table) - 1
	for i := int(fp) & mask; ; i = (i + 1) & mask {
		s := t.table[i]
		if s == 0 {
			return -1, i
		}
		if s>>32 == fp && t.rec(int(uint32(s))-1).key == *k {
			return int(uint32(s)) - 1, i
		}
	}
}

// index puts every attempt in the table.
func (t *Tracker) index() {
	for ; t.indexed < t.attempts.n; t.indexed++ {
		if 2*(t.indexed+1) > len(t.table) {
			t.grow()
		}
		t.place(maphash.Comparable(t.seed, t.rec(t.indexed).key)>>32<<32 | uint64(t.indexed+1))
	}
}

// grow doubles the table. A slot keeps 32 bits of its key's hash, enough to
// place it again without reading the attempt.
func (t *Tracker) grow() {
	old := t.table
	t.table = make([]uint64, 2*len(old))
	for _, s := range old {
		if s != 0 {
			t.place(s)
		}
	}
}

// place puts slot value s in the first empty slot from its hash on.
func (t *Tracker) place(s uint64) {
	mask := len(t.table) - 1
	i := int(s>>32) & mask
	for t.table[i] != 0 {
		i = (i + 1) & mask
	}
	t.table[i] = s
}

// Add records one SYN. It returns the attempt the SYN belongs to, as it
// stands after this SYN (its Ending aside: that is read when the tracker
// is), and whether the SYN opened a new attempt (false for a
// retransmission).
func (t *Tracker) Add(s SYN) (a Attempt, isNew bool) {
	if t.pushed.n > 0 {
		t.settle()
	}
	if t.indexed < t.attempts.n {
		t.index()
	}
	t.syns++
	k := keyOf(s)
	sec, nsec := s.Time.Unix(), int32(s.Time.Nanosecond())
	t.saw(rec.Stamp{Sec: sec, Nsec: nsec})
	fp := maphash.Comparable(t.seed, k) >> 32
	i, slot := t.find(&k, fp)
	if i >= 0 {
		t.retransmit(i, sec, nsec)
		t.remember(i)
		return t.rec(i).attempt(), false
	}
	t.open(&pushedSYN{key: k, sec: sec, nsec: nsec, src4: s.Src.Addr().Is4(), dst4: s.Dst.Addr().Is4()})
	t.table[slot] = fp<<32 | uint64(t.attempts.n)
	t.indexed = t.attempts.n
	if 2*t.attempts.n > len(t.table) {
		t.grow()
	}
	t.remember(t.attempts.n - 1)
	return Attempt{Time: s.Time.UTC(), Src: s.Src, Dst: s.Dst, Seq: s.Seq}, true
}

// Retransmit counts s as a retransmission when the tracker holds an
// attempt of its tuple and ISN, and reports whether it did; otherwise it
// changes nothing. With Add it lets a caller that bounds what it holds
// tell a retransmission from a new attempt before deciding to hold it.
func (t *Tracker) Retransmit(s SYN) bool {
	if t.pushed.n > 0 {
		t.settle()
	}
	if t.indexed < t.attempts.n {
		t.index()
	}
	k := keyOf(s)
	i, _ := t.find(&k, maphash.Comparable(t.seed, k)>>32)
	if i < 0 {
		return false
	}
	t.syns++
	t.retransmit(i, s.Time.Unix(), int32(s.Time.Nanosecond()))
	t.remember(i)
	return true
}

// AddAttempt holds a, its retransmits and its Ending included, as the
// SYNs and segments that made it would have: segments added later go on
// from its Ending.
func (t *Tracker) AddAttempt(a Attempt) {
	t.Add(SYN{Time: a.Time, Src: a.Src, Dst: a.Dst, Seq: a.Seq})
	if a.Retransmits == 0 && a.Ending == (backoff.Ending{}) {
		return
	}
	k := keyOf(SYN{Src: a.Src, Dst: a.Dst, Seq: a.Seq})
	i, _ := t.find(&k, maphash.Comparable(t.seed, k)>>32)
	r := t.rec(i)
	r.retrans += int32(a.Retransmits)
	t.syns += a.Retransmits
	t.retrans += a.Retransmits
	if a.Ending == (backoff.Ending{}) {
		return
	}
	start := rec.Stamp{Sec: r.sec, Nsec: r.nsec}
	if a.Ending.Fate == backoff.FateUnanswered {
		r.last = start.Nanos() + int64(a.Ending.Duration)
	}
	t.readSegments()
	*t.home(uint32(i + 1)) = rec.FateOf(a.Ending, start)
	if t.recent != nil {
		if e := t.slot(t.keyHash(&r.key)); e.ref == uint32(i+1) {
			e.fate, e.homed = r.fate, true
		}
	}
}

// Retain keeps the attempts keep returns true for, in the order they were
// opened, and forgets the others. Each kept attempt goes on from all its
// segments showed so far, which later segments are read against (the
// server's ISN, the flights of a TLS handshake), where AddAttempt knows
// of an attempt only its Ending: a connection accepted before a live
// session ended reaches READY in the next as it would have in one. keep
// sees each attempt without its Ending.
func (t *Tracker) Retain(keep func(Attempt) bool) {
	t.readSegments() // every fate at home, none waiting
	u := NewTracker()
	u.fatesKnown, u.pushBatch, u.segBatch, u.recentMax = t.fatesKnown, t.pushBatch, t.segBatch, t.recentMax
	for i := range t.attempts.n {
		r := t.rec(i)
		a := r.attempt()
		if !keep(a) {
			continue
		}
		u.Add(SYN{Time: a.Time, Src: a.Src, Dst: a.Dst, Seq: a.Seq})
		j := u.attempts.n - 1
		ur := u.rec(j)
		ur.last, ur.retrans, ur.fate = r.last, r.retrans, r.fate
		u.syns += int(r.retrans)
		u.retrans += int(r.retrans)
		if u.recent != nil {
			if e := u.slot(u.keyHash(&ur.key)); e.ref == uint32(j+1) {
				e.fate, e.homed = ur.fate, true
			}
		}
		if d, ok := t.decrypted[r.key]; ok {
			if u.decrypted == nil {
				u.decrypted = make(map[attemptKey]Decryption)
			}
			u.decrypted[r.key] = d
		}
	}
	*t = *u
}

// Find returns the attempt the tracker holds for a's tuple and ISN, with
// its retransmits and its Ending as the segments read so far show it (the
// zero Ending until SetFatesKnown), and whether it holds one. Only a's
// Src, Dst and Seq are read. A chain read as it goes asks for a few
// attempts at a time (the live auditor, for the attempt before each new
// one; audit watch), where List and Chains build every one.
func (t *Tracker) Find(a Attempt) (Attempt, bool) {
	if t.pushed.n > 0 || t.late.n > 0 {
		t.readSegments()
	}
	if t.indexed < t.attempts.n {
		t.index()
	}
	k := keyOf(SYN{Src: a.Src, Dst: a.Dst, Seq: a.Seq})
	i, _ := t.find(&k, maphash.Comparable(t.seed, k)>>32)
	if i < 0 {
		return Attempt{}, false
	}
	r := t.rec(i)
	out := r.attempt()
	if !t.fatesKnown {
		return out, true
	}
	// What leave would store at home, without storing it: the slot keeps
	// the attempt's fate as it reads on.
	f := r.fate
	if t.recent != nil {
		if e := t.slot(t.keyHash(&r.key)); e.ref == uint32(i+1) && e.fate != (rec.Fate{}) {
			if e.homed {
				f.Merge(&e.fate)
			} else {
				f = e.fate
			}
		}
	}
	out.Ending = t.withDecryption(&r.key, rec.Stamp{Sec: r.sec, Nsec: r.nsec}, f.Ending(rec.Stamp{Sec: r.sec, Nsec: r.nsec}, r.last))
	return out, true
}

// Ending is Find's Ending of a.
func (t *Tracker) Ending(a Attempt) backoff.Ending {
	f, _ := t.Find(a)
	return f.Ending
}

// List returns every attempt, in the order they were opened.
func (t *Tracker) List() []Attempt {
	t.readSegments()
	out := make([]Attempt, t.attempts.n)
	for i := range out {
		out[i] = t.attempt(i)
	}
	return out
}

// ClientSent reports whether the client of an attempt opened with p (its
// first bytes, as the fates read them), without building any attempt.
func (t *Tracker) ClientSent(p backoff.Payload) bool {
	t.readSegments()
	for i := range t.attempts.n {
		if t.rec(i).fate.ClientSent() == p {
			return true
		}
	}
	return false
}

// open adds the attempt that s opens.
func (t *Tracker) open(s *pushedSYN) {
	if t.attempts.n == math.MaxInt32 {
		panic("analyze: a Tracker holds at most 2^31-1 attempts")
	}
	r := t.attempts.next()
	r.key, r.sec, r.nsec, r.last, r.src4, r.dst4 = s.key, s.sec, s.nsec, rec.Stamp{Sec: s.sec, Nsec: s.nsec}.Nanos(), s.src4, s.dst4
}

// retransmit counts a SYN at sec, nsec again for attempt i.
func (t *Tracker) retransmit(i int, sec int64, nsec int32) {
	t.retrans++
	r := t.rec(i)
	r.retrans++
	if r.after(sec, nsec) {
		// Input out of time order: the SYN seen first was the
		// retransmission, this one opened the attempt.
		r.sec, r.nsec = sec, nsec
	}
	if at := (rec.Stamp{Sec: sec, Nsec: nsec}).Nanos(); at > r.last {
		r.last = at
	}
}

// push records one SYN as Add does, without telling what it made of it:
// the SYN is kept as it is, and the SYNs pushed are grouped when the
// tracker is next read, or when pushBatch of them wait. Reading a
// capture, finding each SYN's attempt in the table was a cache miss or two
// per SYN while the reader streams 4 MiB chunks through the cache (the
// 2 M-packet bench, BENCHMARKS.md). Keeping the SYN is a write in order.
func (t *Tracker) push(s SYN) {
	if t.pushed.n == t.pushBatch {
		t.settle()
	}
	t.syns++
	t.saw(rec.Stamp{Sec: s.Time.Unix(), Nsec: int32(s.Time.Nanosecond())})
	t.pushed.add(pushedOf(s))
	if t.watching {
		t.rememberPushed(t.pushed.n - 1)
	}
}

// pushBatch bounds the SYNs that wait to be grouped (56 bytes each while
// they do, 80 while their fates are read), so that a capture with many
// retransmissions holds about as much as its attempts. They are hashed
// when grouped, not as they come: what a file's read allocates decides
// whether the collector runs while 12 MiB of chunks are held, and so how
// large it lets the heap grow.
const pushBatch = 1 << 20

// settle groups the pushed SYNs into attempts exactly as Add would have,
// in the order they were pushed. It sorts and scans, where Add looks each
// SYN up: the memory is read in order but for a retransmission.
func (t *Tracker) settle() {
	m := t.pushed.n
	if m == 0 {
		return
	}
	// Sort the SYNs by 32 bits of their tuple's hash, then by position,
	// so that a tuple's SYNs are together and in the order pushed; first
	// is then, for every SYN, the position of its tuple's first SYN.
	hashed := make([]uint64, m)
	for i := range m {
		hashed[i] = maphash.Comparable(t.seed, t.pushed.at(i).key)>>32<<32 | uint64(i)
		if t.collide {
			hashed[i] = 7<<32 | uint64(i)
		}
	}
	order := rec.SortHigh32(hashed, make([]uint64, m))
	first := make([]int32, m)
	var firsts []int32 // of the run's tuples
	for a := 0; a < m; {
		b := a + 1
		for b < m && order[b]>>32 == order[a]>>32 {
			b++
		}
		// A run of one hash is a tuple's SYNs or, the hash being seeded,
		// by chance the SYNs of a few tuples: about once in a capture of
		// 100 000 attempts.
		firsts = firsts[:0]
		for _, o := range order[a:b] {
			pi := int32(uint32(o))
			first[pi] = pi
			k := &t.pushed.at(int(pi)).key
			for _, pj := range firsts {
				if t.pushed.at(int(pj)).key == *k {
					first[pi] = pj
					break
				}
			}
			if first[pi] == pi {
				firsts = append(firsts, pi)
			}
		}
		a = b
	}
	// In the order pushed: a tuple's first SYN opens its attempt (or
	// retransmits one that Add or an earlier settle opened), the others
	// retransmit it.
	t.index()
	existed := t.attempts.n > 0
	attempt := make([]int32, m) // by position: its tuple's attempt
	for i := range m {
		attempt[i] = t.settleOne(i, first[i], attempt, existed)
	}
	if t.pushedFates.n > 0 {
		t.settleFates(attempt)
	}
	t.pushed = blocks[pushedSYN]{}
}

// settleOne groups pushed SYN i, whose tuple's first SYN is at position
// f, and returns its attempt; existed says attempts were held before.
func (t *Tracker) settleOne(i int, f int32, attempt []int32, existed bool) int32 {
	s := t.pushed.at(i)
	if f != int32(i) {
		t.retransmit(int(attempt[f]), s.sec, s.nsec)
		return attempt[f]
	}
	if existed {
		if j, _ := t.find(&s.key, maphash.Comparable(t.seed, s.key)>>32); j >= 0 {
			t.retransmit(j, s.sec, s.nsec)
			return int32(j)
		}
	}
	t.open(s)
	return int32(t.attempts.n - 1)
}

// SYNs returns how many SYNs were added.
func (t *Tracker) SYNs() int { return t.syns }

// Attempts returns how many distinct attempts the SYNs made.
func (t *Tracker) Attempts() int {
	t.settle()
	return t.attempts.n
}

// Retransmits returns how many SYNs were retransmissions.
func (t *Tracker) Retransmits() int {
	t.settle()
	return t.retrans
}
