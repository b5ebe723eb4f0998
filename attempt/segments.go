package attempt

import (
	"math/bits"
	"net/netip"
	"slices"
	"time"

	"github.com/backoff-audit/audit/attempt/internal/rec"

	"github.com/backoff-audit/audit/backoff"
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
	Sent backoff.Payload
}

// SegmentView is a Segment as a capture source finds it in a packet: the
// addresses are slices of the packet, 4 bytes (IPv4) or 16, and the time
// is Unix seconds and nanoseconds. It is valid only for the call it is
// handed to. Reading one costs no netip.Addr or time.Time built and read
// back, which was a third of what a segment cost a file read (BenchmarkFates).
type SegmentView struct {
	Src, Dst         []byte
	SrcPort, DstPort uint16
	Seq, Ack         uint32
	Sec              int64
	Nsec             int32
	// Flags and Sent are a Segment's.
	Flags uint8
	Sent  backoff.Payload
	// Payload is the bytes the segment carries, as far as they were
	// captured, a slice of the packet; PayloadLen is how many it carries,
	// as its IP header declares them: more than len(Payload) when the
	// capture's snap length cut the packet.
	Payload    []byte
	PayloadLen int
}

// Segment returns the Segment v describes. An address of another length
// than 4 or 16 is the zero Addr.
func (v *SegmentView) Segment() Segment {
	return Segment{Time: time.Unix(v.Sec, int64(v.Nsec)).UTC(),
		Src: netip.AddrPortFrom(addrOfBytes(v.Src), v.SrcPort), Dst: netip.AddrPortFrom(addrOfBytes(v.Dst), v.DstPort),
		Seq: v.Seq, Ack: v.Ack, Flags: v.Flags, Sent: v.Sent}
}

func addrOfBytes(b []byte) netip.Addr {
	switch len(b) {
	case 4:
		return netip.AddrFrom4([4]byte(b))
	case 16:
		return netip.AddrFrom16([16]byte(b)).Unmap()
	}
	return netip.Addr{}
}

// segRec is a Segment as a Tracker keeps it when it cannot read it at
// once: no pointers, so the collector never scans them, and no
// allocation each.
type segRec struct {
	src, dst     rec.Addr128
	sport, dport uint16
	seq, ack     uint32
	sec          int64
	nsec         int32
	flags        uint8
	sent         rec.Code
}

func (r *segRec) at() rec.Stamp { return rec.Stamp{Sec: r.sec, Nsec: r.nsec} }

// segBatch bounds the segments that wait to be read (64 bytes each while
// they do): memory follows the attempts, not the packets.
const segBatch = 1 << 18

// recentSlots is the largest size of a Tracker's table of recent attempts
// (448 KiB): enough that attempts whose segments overlap in time rarely
// share a slot, little enough to stay in the processor's caches. The
// table starts at minRecent slots and grows with the attempts, so that
// the thousands of trackers of a capture's every port stay small.
const (
	recentSlots = 1 << 8
	minRecent   = 1 << 6
)

// seenSlots is the largest size of a Tracker's set of the tuples its SYNs
// came from, a byte a tuple's hash (512 KiB), so that adding to it is a
// store the processor need not wait for: a bit meant reading its word
// first, a cache miss a SYN. It starts at minSeen and grows with the
// SYNs, keeping four to sixteen bytes a SYN; full, it takes 75 000
// tuples, the 2 M-packet bench capture's, for one in seven of other
// tuples.
const (
	seenSlots = 1 << 19
	minSeen   = 1 << 12
)

// pendingRef tags a reference to a pushed SYN's position rather than an
// attempt's index.
const pendingRef = 1 << 31

// recentAttempt is a slot of the table of recent attempts: the attempt's
// key and start, the fate its segments showed since it took the slot,
// and where that fate lives when it leaves the slot (ref: an attempt's
// index + 1 or, tagged with pendingRef, a pushed SYN's position + 1; 0
// for an empty slot). No pointers.
type recentAttempt struct {
	key   attemptKey
	start rec.Stamp
	fate  rec.Fate
	h     uint64 // the tuple's hash
	ref   uint32
	// homed says the home may hold part of the fate already (the slot's
	// fate was stored there, or the attempt came back to the table), so
	// that leaving merges rather than stores: a load of a home long out of
	// cache, on every SYN, was most of what installing cost.
	homed bool
	_     [27]byte // to 128 bytes: a slot never straddles more cache lines than it must
}

// leave stores the slot's fate at its attempt's home.
func (t *Tracker) leave(e *recentAttempt) {
	switch {
	case e.fate == (rec.Fate{}):
	case e.homed:
		t.home(e.ref).Merge(&e.fate)
	default:
		*t.home(e.ref) = e.fate
	}
}

// AddSegment reads a segment into the fate of the attempt of its 4-tuple
// (in either direction) that it belongs to (docs/spec.md §7); a segment
// of no attempt the tracker holds is dropped, and so is one that comes
// before any SYN of its tuple (a connection opened before the capture, or
// rotated files given out of time order that split a handshake). It does
// not keep s. Segments must come in capture order with the SYNs.
//
// Most segments of an attempt follow its SYN within milliseconds, so a
// table keeps the attempts opened last, a slot a tuple's hash, each with
// the fate read so far: a segment is read at once into its slot, which
// the SYN touched moments before, where looking every segment up among
// all attempts was a cache miss or two each, and nothing is kept per
// segment. An attempt leaves its slot, its fate stored where the attempt
// is held (or, while its SYN waits to be grouped, see push, beside that
// SYN), when a later attempt takes the slot. A segment the table cannot
// place (its attempt left the slot, or one of a reused tuple's earlier
// attempts) waits for the tracker to be read (List, Chains, Peers), or for
// segBatch of them, and is then matched by sorting (see readLate); a set
// of the tuples SYNs came from, a byte each, drops at once those of tuples
// no SYN came from, which would only wait to be dropped.
func (t *Tracker) AddSegment(s *Segment) {
	if !t.watching {
		t.watch()
	}
	// Field by field: a composite literal was built aside and copied,
	// a stall on every segment.
	var r segRec
	r.src, r.dst = rec.WordsOf(s.Src.Addr()), rec.WordsOf(s.Dst.Addr())
	r.sport, r.dport = s.Src.Port(), s.Dst.Port()
	r.seq, r.ack, r.flags, r.sent = s.Seq, s.Ack, s.Flags, rec.CodeOf(s.Sent)
	r.sec, r.nsec = s.Time.Unix(), int32(s.Time.Nanosecond())
	t.saw(r.at())
	t.readSegment(&r)
}

// AddSegmentView reads the segment v describes, as AddSegment does.
func (t *Tracker) AddSegmentView(v *SegmentView) {
	if !t.watching {
		t.watch()
	}
	var r segRec
	r.src, r.dst = rec.WordsOfBytes(v.Src), rec.WordsOfBytes(v.Dst)
	r.sport, r.dport = v.SrcPort, v.DstPort
	r.seq, r.ack, r.flags, r.sent = v.Seq, v.Ack, v.Flags, rec.CodeOf(v.Sent)
	r.sec, r.nsec = v.Sec, v.Nsec
	t.saw(r.at())
	t.readSegment(&r)
}

// saw notes a packet of the port at at: the capture runs at least until
// the latest (Last).
func (t *Tracker) saw(at rec.Stamp) {
	if t.last.Before(at) {
		t.last = at
	}
}

// Last is the time of the latest SYN or segment of the port the tracker
// read: where the capture is known to run to, for an attempt still open
// there (backoff.Run.End); zero before any.
func (t *Tracker) Last() time.Time {
	if t.last == (rec.Stamp{}) {
		return time.Time{}
	}
	return time.Unix(t.last.Sec, int64(t.last.Nsec)).UTC()
}

// watch starts the table of recent attempts, with the SYNs that wait,
// and the set of tuples, with every attempt's.
func (t *Tracker) watch() {
	t.watching = true
	for i := range t.attempts.n {
		t.see(t.keyHash(&t.rec(i).key))
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

// see adds the tuple of hash h to the set of tuples SYNs came from,
// growing the set first when the SYNs would fill it.
func (t *Tracker) see(h uint64) {
	if n := len(t.seen); n < seenSlots && 4*t.syns > n || n == 0 {
		t.seen = make([]byte, min(seenSlots, max(minSeen, 1<<bits.Len(uint(16*t.syns)))))
		for i := range t.attempts.n {
			t.setSeen(t.keyHash(&t.rec(i).key))
		}
		for i := range t.pushed.n {
			t.setSeen(t.keyHash(&t.pushed.at(i).key))
		}
	}
	t.setSeen(h)
}

func (t *Tracker) setSeen(h uint64) { t.seen[h&uint64(len(t.seen)-1)] = 1 }

// seenTuple reports whether a SYN may have come from the tuple of hash h.
func (t *Tracker) seenTuple(h uint64) bool {
	return len(t.seen) > 0 && t.seen[h&uint64(len(t.seen)-1)] != 0
}

// slot returns the slot of the table for hash h: its top bits.
func (t *Tracker) slot(h uint64) *recentAttempt {
	return &t.recent[h>>(64-bits.TrailingZeros(uint(len(t.recent))))]
}

// growRecent makes the table larger when the SYNs outnumber its slots,
// moving each attempt to its new slot (one that loses its slot to another
// leaves it, its fate stored at home).
func (t *Tracker) growRecent() {
	n := min(t.recentMax, max(minRecent, 4*len(t.recent)))
	if n == len(t.recent) && t.recent != nil {
		return
	}
	old := t.recent
	t.recent = make([]recentAttempt, n)
	for i := range old {
		if e := &old[i]; e.ref != 0 {
			if d := t.slot(e.h); d.ref == 0 {
				*d = *e
			} else {
				t.leave(e)
			}
		}
	}
}

// endpoint is one side of a 4-tuple.
type endpoint struct {
	addr [16]byte
	port uint16
}

// tupleHash hashes a 4-tuple whichever way its segment went: the XOR of
// its two addresses' words and of its two ports, each multiplied by an
// odd constant (three multiplications the processor runs side by side),
// the high half folded onto the low. It is read for every segment and
// SYN: maphash.Comparable took 20 ns an endpoint, a mixed sum of two
// mixed endpoints 8 ns for the tuple, this 3. Every bit of the input
// reaches the high half, which picks the table's slot and orders readLate;
// the low half picks the bit of the set of tuples. An input can make
// tuples collide (the hash is linear in XOR, whatever its key): that costs
// time, as a slot and a run of readLate compare whole tuples, and can
// change a fate where a tuple is reused while its earlier connection
// still sends (the table gives a segment to the attempt holding the slot,
// readLate to the one it names). So the key is fixed, not random: which
// tuples share a slot, and so every fate, is the same at every read of
// the same capture.
func (t *Tracker) tupleHash(a rec.Addr128, ap uint16, b rec.Addr128, bp uint16) uint64 {
	h := (a.Lo^b.Lo^tupleHashKey[0])*0x9e3779b97f4a7c15 ^ (a.Hi^b.Hi^tupleHashKey[1])*0xc2b2ae3d27d4eb4f ^
		(uint64(ap^bp)^tupleHashKey[2])*0x165667b19e3779f9
	return h ^ h>>32
}

// tupleHashKey is tupleHash's key: three odd words of the golden ratio's
// and of two other mixers' constants, fixed so that reads are reproducible.
var tupleHashKey = [3]uint64{0x9e3779b97f4a7c15, 0xbf58476d1ce4e5b9, 0x94d049bb133111eb}

func (t *Tracker) keyHash(k *attemptKey) uint64 {
	return t.tupleHash(rec.Words(&k.src), k.sport, rec.Words(&k.dst), k.dport)
}

// home is where the fate of the attempt of ref lives outside the table.
func (t *Tracker) home(ref uint32) *rec.Fate {
	i := int(ref&^pendingRef) - 1
	if ref&pendingRef != 0 {
		return t.pushedFates.at(i)
	}
	return &t.rec(i).fate
}

// install gives the slot of hash h to the attempt of key k, start and ref,
// with no fate read yet, adding its occupant's fate to what its home holds
// first. An attempt that holds the slot already keeps it, and its fate.
//
// An attempt whose SYN comes again (a retransmission) after it left the
// table takes a slot anew: its fate is then read in two parts, merged,
// the earlier accept and end winning (rec.Fate.merge). Only what depends on
// the part before is lost, and TCP sends none of it: a client retransmits
// its SYN because no SYN-ACK came, and a SYN-ACK answers it anew. Both
// ways into a tracker (Add, push) split alike, so they read alike.
func (t *Tracker) install(h uint64, k *attemptKey, start rec.Stamp, ref uint32) *recentAttempt {
	if len(t.recent) < t.recentMax && t.syns > len(t.recent) || t.recent == nil {
		t.growRecent()
	}
	t.see(h)
	e := t.slot(h)
	if e.ref != 0 {
		if e.h == h && e.key == *k {
			return e
		}
		t.leave(e)
	}
	// Field by field: a composite literal was built aside and copied, a
	// store forwarding stall on every SYN. A pushed SYN's home is new.
	e.key, e.start, e.fate, e.h, e.ref, e.homed = *k, start, rec.Fate{}, h, ref, false
	if ref&pendingRef == 0 {
		e.homed = *t.home(ref) != (rec.Fate{})
	}
	return e
}

// remember makes attempt i its tuple's latest in the table.
func (t *Tracker) remember(i int) {
	r := t.rec(i)
	t.install(t.keyHash(&r.key), &r.key, rec.Stamp{Sec: r.sec, Nsec: r.nsec}, uint32(i+1))
}

// rememberPushed makes the attempt that pushed SYN i opens its tuple's
// latest in the table, and gives it a fate beside the SYN for when it
// leaves the table before the SYNs are grouped.
func (t *Tracker) rememberPushed(i int) {
	for t.pushedFates.n <= i {
		t.pushedFates.add(rec.Fate{})
	}
	p := t.pushed.at(i)
	t.install(t.keyHash(&p.key), &p.key, rec.Stamp{Sec: p.sec, Nsec: p.nsec}, pendingRef|uint32(i+1))
}

// settleFates moves the fates of the pushed SYNs to their attempts, and
// the table's references to them; attempt gives each position's attempt.
func (t *Tracker) settleFates(attempt []int32) {
	for i := range t.recent {
		if e := &t.recent[i]; e.ref&pendingRef != 0 {
			t.leave(e)
		}
	}
	for i := range t.pushedFates.n {
		if f := t.pushedFates.at(i); *f != (rec.Fate{}) {
			t.rec(int(attempt[i])).fate.Merge(f)
		}
	}
	for i := range t.recent {
		if e := &t.recent[i]; e.ref&pendingRef != 0 {
			e.ref = uint32(attempt[int(e.ref&^pendingRef)-1]) + 1
			e.fate, e.homed = t.rec(int(e.ref-1)).fate, true
		}
	}
	t.pushedFates = blocks[rec.Fate]{}
}

// readSegment reads r into its attempt's slot of the table, or leaves it
// for readLate.
func (t *Tracker) readSegment(r *segRec) {
	if t.recent == nil {
		return // no SYN came yet
	}
	h := t.tupleHash(r.src, r.sport, r.dst, r.dport)
	if e := t.slot(h); e.ref != 0 && e.h == h {
		if fromClient, ok := owns(&e.key, &e.fate, r); ok && !r.at().Before(e.start) {
			e.fate.Observe(r.at(), fromClient, r.flags, r.seq, r.ack, e.key.seq, r.sent)
			return
		}
	}
	if !t.seenTuple(h) {
		return
	}
	if t.late.n == t.segBatch {
		// All of them, the SYNs that wait to be grouped first: their
		// attempts may own the segments that wait.
		t.readSegments()
	}
	t.late.add(*r)
}

// owns reports whether r, of the tuple of the attempt of key k and fate f
// by its hash, and no older than it, surely belongs to that attempt, the
// latest of its tuple, and which way it went: it is of the tuple, and does
// not acknowledge another ISN where an answer to this one's SYN would (an
// earlier attempt of the tuple may own it: readLate decides).
func owns(k *attemptKey, f *rec.Fate, r *segRec) (fromClient, ok bool) {
	ksrc, kdst := rec.Words(&k.src), rec.Words(&k.dst)
	fromClient = r.sport == k.sport && r.dport == k.dport && r.src == ksrc && r.dst == kdst
	if !fromClient && !(r.sport == k.dport && r.dport == k.sport && r.src == kdst && r.dst == ksrc) {
		return false, false
	}
	if !fromClient && r.flags&rec.FlagACK != 0 && r.ack != k.seq+1 &&
		(r.flags&rec.FlagSYN != 0 || r.flags&rec.FlagRST != 0 && !f.Accepted()) {
		return false, false
	}
	return fromClient, true
}

// observe reads r, which went the way fromClient says, into attempt i's
// fate at home.
func (t *Tracker) observe(i int, r *segRec, fromClient bool) {
	t.home(uint32(i+1)).Observe(r.at(), fromClient, r.flags, r.seq, r.ack, t.rec(i).key.seq, r.sent)
}

// readSegments reads every segment that waits: the SYNs are grouped, the
// table's fates added to their homes, and the segments the table could
// not place matched; the table then holds its attempts' fates as they are
// at home (a fate that extends its home's merges into it as itself).
func (t *Tracker) readSegments() {
	t.settle()
	if t.late.n == 0 && t.recent == nil {
		return
	}
	for i := range t.recent {
		if e := &t.recent[i]; e.ref != 0 {
			t.leave(e)
			e.homed = true
		}
	}
	if t.late.n > 0 {
		t.readLate()
		for i := range t.recent {
			if e := &t.recent[i]; e.ref != 0 {
				e.fate = *t.home(e.ref)
			}
		}
	}
}

// readLate reads the segments the table of recent attempts could not
// place, and lets them go. It sorts and merges: the segments and the
// attempts of their tuples are sorted by a hash of their 4-tuple, then
// each tuple's segments are matched to its attempts, in time order. A
// tuple reused by later attempts (a new ISN) gives a segment to the
// attempt its sequence numbers name (a SYN-ACK or RST acknowledging
// ISN+1, the client's bytes at ISN+1), otherwise to the latest attempt
// that started before it (docs/spec.md §7.2).
func (t *Tracker) readLate() {
	m := t.late.n
	if m == 0 {
		return
	}
	sk := make([]uint64, m)
	// A bitset of the segments' hashes, some 16 bits a segment, leaves out
	// at once the attempts of no segment's tuple: few segments wait, most
	// often, and sorting every attempt for them was a megabyte each time.
	// Before it, a set of the segments' ports leaves out most attempts
	// unhashed: hashing them all was most of what a read of the 2 M-packet
	// bench capture's 86 waiting segments cost.
	hashes := make([]uint64, max(1, 1<<bits.Len(uint(16*m))/64))
	mask := uint64(64*len(hashes) - 1)
	var ports portBits
	for i := range m {
		r := t.late.at(i)
		h := t.tupleHash(r.src, r.sport, r.dst, r.dport) >> 32
		sk[i] = h<<32 | uint64(i)
		hashes[h&mask/64] |= 1 << (h & mask % 64)
		ports.add(r.sport)
		ports.add(r.dport)
	}
	sk = rec.SortHigh32(sk, make([]uint64, m))
	var ak []uint64
	for i := range t.attempts.n {
		r := t.rec(i)
		if !ports.has(r.key.sport) {
			continue
		}
		if h := t.keyHash(&r.key) >> 32; hashes[h&mask/64]&(1<<(h&mask%64)) != 0 {
			ak = append(ak, h<<32|uint64(i))
		}
	}
	n := len(ak)
	ak = rec.SortHigh32(ak, make([]uint64, n))
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

// portBits is a set of ports, a bit each.
type portBits [1 << 10]uint64

func (p *portBits) add(port uint16)      { p[port>>6] |= 1 << (port & 63) }
func (p *portBits) has(port uint16) bool { return p[port>>6]&(1<<(port&63)) != 0 }

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
			return rec.Stamp{Sec: rx.sec, Nsec: rx.nsec}.Compare(rec.Stamp{Sec: ry.sec, Nsec: ry.nsec})
		})
	}
	order := func(x, y int32) int { return t.late.at(int(x)).at().Compare(t.late.at(int(y)).at()) }
	if !slices.IsSortedFunc(ss, order) {
		slices.SortStableFunc(ss, order)
	}
	for _, si := range ss {
		r := t.late.at(int(si))
		k := tupleOf(r.src.Bytes(), r.sport, r.dst.Bytes(), r.dport)
		lo, _ := slices.BinarySearchFunc(as, k, func(i int32, k tupleKey) int { return compareTuple(tupleAt(i), k) })
		hi := lo
		for hi < len(as) && tupleAt(as[hi]) == k {
			hi++
		}
		if i := t.attemptOf(as[lo:hi], r); i >= 0 {
			a := t.rec(int(i))
			t.observe(int(i), r, r.sport == a.key.sport && r.src == rec.Words(&a.key.src))
		}
	}
}

// attemptOf returns the attempt of one tuple's attempts as (sorted by
// start) that segment r belongs to, or -1.
func (t *Tracker) attemptOf(as []int32, r *segRec) int32 {
	at := r.at()
	// The latest attempt that started no later than the segment.
	n, _ := slices.BinarySearchFunc(as, at, func(i int32, at rec.Stamp) int {
		a := t.rec(int(i))
		if (rec.Stamp{Sec: a.sec, Nsec: a.nsec}).Compare(at) <= 0 {
			return -1
		}
		return 1
	})
	for j := n - 1; j >= 0 && j >= n-rec.LookBack; j-- {
		a := t.rec(int(as[j]))
		fromClient := r.sport == a.key.sport && r.src == rec.Words(&a.key.src)
		if rec.Names(fromClient, r.flags, r.seq, r.ack, a.key.seq, r.sent) {
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
