package stream

import (
	"hash/maphash"
	"math"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/attempt/internal/rec"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/internal/arena"
	"github.com/backoff-audit/audit/internal/spill"
)

// Stream groups the SYNs and segments of one retry port into chains as a
// capture comes, and hands each peer's chain over once it is over: when
// the capture has run past backoff.ChainEnd of its last attempt with no
// further attempt. A chain handed over is written to a spill and its
// memory reused, so that what a Stream holds follows the peers still
// retrying, not the length of the capture; its reader judges it at once
// (OnOver) and reads it back from the Stream, which is a report's chain
// source (Len, Times, Endings, Chain), when it writes it.
//
// Every chain comes out as Tracker.Chains gives it. A peer's chain is
// all its attempts: when a packet of a peer whose chain was handed over
// comes (a client that comes back, a late retransmission or segment,
// files read out of time order), the chain is read back and held again,
// its reader told to forget what it was handed (OnRevive), and it is
// handed over anew, under a new number, when it is over again. Until a
// capture shows a TCP segment other than a SYN its fates are unknown
// (SetFatesKnown): when one comes, every chain handed over without them
// comes back the same way.
//
// Packets wait in arrival order, a few seconds' worth or more, and are
// then merged into the peers held: sorted by a hash of their peer, and
// read with the peers, which are kept in the order of that hash. Every
// peer is read in order, not looked up, and a peer's chain is in one
// place: where looking each SYN's peer up in a table and its chain
// elsewhere cost a cache miss or two each (hundreds of ns on the bench
// machine), the merge reads and writes memory in order. The merge is
// also where chains are found over.
//
// A Stream is not safe for concurrent use, but its chain source is, once
// Finish has returned.
type Stream struct {
	port   uint16
	policy backoff.Policy
	// OnOver, when set, is called with the chains from, to-1 handed over,
	// readable from the Stream during the call, and the time of the
	// capture then: past each one's ChainEnd.
	OnOver func(from, to int, now time.Time)
	// OnRevive, when set, is called with a chain handed over whose peer
	// came back: it is still readable during the call, and no longer the
	// peer's.
	OnRevive func(chain int)

	base  rec.Stamp // the time origin: the first packet's
	based bool
	last  rec.Stamp // the latest packet's time (Last)
	now   int64     // last, in ns from base
	key   [2]uint64

	// pending holds the packets not yet merged, in arrival order; it is
	// merged when it holds pendMax, or spans mergeEvery. sorted holds
	// them in their peers' order for the merge.
	pending   []packet
	sorted    []packet
	npend     int
	pendMin   int // minPending, but in tests
	pendMax   int
	pendFirst int64
	// storeBytes is the size of peers at the last merge, heldBytes that
	// of the chains held in it.
	storeBytes, heldBytes int
	keys, tmp             []uint64
	done                  []bool // by pending packet: a segment that found its attempt

	// peers holds every peer, in the order of (hash, address): the
	// chains held, and the numbers of those handed over.
	peers store
	count int // peers in it
	held  int // of them, with a chain held
	// reviveAll brings back every chain handed over at the next merge
	// (SetFatesKnown).
	reviveAll bool

	// dsts are the servers' addresses by id; dstOf finds an id.
	dsts    []netip.Addr
	dstOf   map[[16]byte]uint32
	lastDst netip.Addr
	lastID  uint32
	// The server of the last segment, for the next.
	segDst rec.Addr128
	segID  uint32
	segOK  bool
	dueAt  []int64 // ChainEnd's offset from the last attempt, by attempts held

	fatesKnown bool
	syns       int
	cb         chainBuf

	// The chains handed over: ref(i) is where chain i is, in the spill
	// or, from flushed on, in batch. chains holds the nchains refs in
	// blocks of refBlock, so that a million of them are never copied to
	// grow, nor made twice over in fresh memory.
	sp      *spill.Spill
	chains  [][]blobRef
	nchains int
	flushed int
	batch   []byte
	// runKeys is where flush puts the batch in order; runs[r] is the
	// first chain of run r of the spill, a flush's.
	runKeys []runKey
	runs    []int32
	// views are the views on the spill put back (takeView), reads
	// counts the spill's reads.
	views sync.Pool
	reads atomic.Int64
}

// SpillMemory bounds what a Stream's spill holds in memory before
// it writes to a temporary file.
const SpillMemory = 4 << 20

const (
	// A Stream hands its chains over in batches of at most streamBatch
	// chains and about batchBytes, each a run of the spill: 100 000
	// peers' full chains are 101 runs, 1 000 000 peers' SYNs 978.
	streamBatch = 1 << 10
	batchBytes  = 2 << 20
	// longChain is the length from which a chain's attempts are found
	// through an index rather than by reading them all.
	longChain = 64
	// The packets that wait: at least minPending, at most maxPending,
	// and about one for every pendingBytes of chains held, so that a merge
	// copies a bounded number of bytes a packet (and the entries of peers
	// whose chains were handed over, smaller, no more than 16 times
	// that).
	minPending   = 1 << 16
	maxPending   = 1 << 19
	pendingBytes = 256
	// mergeEvery is the span of capture time after which packets are
	// merged before they are pendMax, when a merge copies no more than
	// 16 times pendingBytes a packet: a chain is handed over about that
	// long after it is over, where packets are few.
	mergeEvery = int64(time.Minute)
)

// packet is a SYN or segment that waits to be merged.
type packet struct {
	h    uint64   // of addr
	addr [16]byte // the client's, As16
	t    rec.Stamp
	seq  uint32
	ack  uint32
	dst  uint32 // the server's id
	port uint16 // the client's
	kind uint8
	// flags and sent are a segment's.
	flags uint8
	sent  rec.Code
	// twin is the other reading of a segment between two clients' ports
	// both the retry port: of the two, only the first that finds its
	// attempt counts; -1 for every other packet. orig is the packet's
	// own position among those that wait.
	twin int32
	orig uint32
}

const (
	pktSYN        = 1 << iota
	pktFromClient // a segment the client sent
	pktSrc4       // a SYN's source was spelled in 4 bytes
	pktDst4
)

// streamRec is an attempt in 16 bytes: its start in ns from the Stream's
// base, its ISN and source port, and meta: its server's id (dstBits) and
// flags. What few attempts need (retransmissions, the time of the last
// SYN, a server beyond the ids, a start too far from base for ns) is in
// an extra beside the chain.
type streamRec struct {
	at    int64
	seq   uint32
	sport uint16
	meta  uint16
}

const (
	dstBits  = 12
	dstExtra = 1<<dstBits - 1 // the server's id is in the extra
	metaSrc4 = 1 << 12        // the source was spelled as 4 bytes
	metaDst4 = 1 << 13
	metaXtra = 1 << 14 // an extra holds more
)

// streamExtra is what few attempts need beyond a streamRec.
type streamExtra struct {
	retrans int64
	last    int64     // the latest SYN, Unix ns (rec.Stamp.nanos)
	start   rec.Stamp // the exact start, when the record's is clamped
	dst     uint32
	far     bool
}

// blobExtra is an attempt's extra, with the attempt's position.
type blobExtra struct {
	pos uint32
	_   uint32
	x   streamExtra
}

// NewStream returns a Stream of the attempts to port, judged over by p,
// whose spill keeps its first SpillMemory bytes in memory and the
// rest in a temporary file in dir (os.TempDir when empty).
func New(port uint16, p backoff.Policy, dir string) *Stream {
	seed := maphash.MakeSeed()
	return &Stream{
		port: port, policy: p,
		key:     [2]uint64{maphash.Comparable(seed, 1), maphash.Comparable(seed, 2)},
		pending: arena.Make[packet](maxPending), sorted: arena.Make[packet](maxPending), pendMin: minPending, pendMax: minPending,
		dstOf: map[[16]byte]uint32{}, sp: spill.New(dir, SpillMemory),
	}
}

// Close gives back what the Stream holds, its spill included: its chains
// cannot be read after it.
func (s *Stream) Close() error {
	arena.Free(s.pending)
	arena.Free(s.sorted)
	s.peers.free()
	s.pending, s.sorted, s.chains, s.batch, s.runKeys, s.runs = nil, nil, nil, nil, nil, nil
	s.nchains = 0
	return s.sp.Close()
}

// SYNs is how many SYNs were added.
func (s *Stream) SYNs() int { return s.syns }

// PeersSeen is the number of peers the Stream saw, and how many it
// holds, as of its last merge.
func (s *Stream) PeersSeen() (seen, held int) { return s.count, s.held }

// Last is the time of the latest SYN or segment of the port: where the
// capture is known to run to (Tracker.Last).
func (s *Stream) Last() time.Time {
	if s.last == (rec.Stamp{}) {
		return time.Time{}
	}
	return time.Unix(s.last.Sec, int64(s.last.Nsec)).UTC()
}

// FatesKnown reports what SetFatesKnown set.
func (s *Stream) FatesKnown() bool { return s.fatesKnown }

// SetFatesKnown says whether the capture can show fates
// (Tracker.SetFatesKnown). Set once a TCP segment other than a SYN is
// seen, it brings back every chain handed over before.
func (s *Stream) SetFatesKnown(known bool) {
	if known == s.fatesKnown {
		return
	}
	s.fatesKnown = known
	if known && s.nchains > 0 {
		s.reviveAll = true
	}
}

// rel is t in ns from base, clamped, and whether it was.
func (s *Stream) rel(t rec.Stamp) (int64, bool) {
	const maxSec = math.MaxInt64/int64(time.Second) - 1
	d := t.Sec - s.base.Sec
	switch {
	case d > maxSec:
		return math.MaxInt64, true
	case d < -maxSec:
		return math.MinInt64, true
	}
	return d*1e9 + int64(t.Nsec-s.base.Nsec), false
}

// saw notes a packet at t: the capture runs at least until the latest.
func (s *Stream) saw(t rec.Stamp) {
	if !s.based {
		s.base, s.based = t, true
	}
	if s.last == (rec.Stamp{}) || s.last.Before(t) {
		s.last = t
		s.now, _ = s.rel(t)
	}
}

// hash is the key that orders the peers held, of an address in As16 form:
// an IPv4 address's is the address, in its top half, so that a merge
// hands its chains over in the order a report reads them, which flush
// then finds nearly sorted; any other's a hash, whose top half the radix
// sort of sortPending spreads.
func (s *Stream) hash(a *[16]byte) uint64 {
	w := rec.Words(a)
	if w.Hi == 0 && w.Lo>>32 == 0xffff {
		return w.Lo << 32
	}
	h := (w.Lo^s.key[0])*0x9e3779b97f4a7c15 ^ (w.Hi^s.key[1])*0xc2b2ae3d27d4eb4f
	return h ^ h>>29
}

// dstID is the id of server address a.
func (s *Stream) dstID(a netip.Addr) uint32 {
	if a == s.lastDst && len(s.dsts) > 0 {
		return s.lastID
	}
	k := a.As16()
	id, ok := s.dstOf[k]
	if !ok {
		id = uint32(len(s.dsts))
		s.dsts = append(s.dsts, netip.AddrFrom16(k).Unmap())
		s.dstOf[k] = id
	}
	s.lastDst, s.lastID = a, id
	return id
}

// knownDst is the id of server address b (4 or 16 bytes), if a SYN went
// to it.
func (s *Stream) knownDst(b []byte) (uint32, bool) {
	k := rec.WordsOfBytes(b)
	if k == s.segDst && s.segOK {
		return s.segID, true
	}
	id, ok := s.dstOf[k.Bytes()]
	if ok {
		s.segDst, s.segID, s.segOK = k, id, true
	}
	return id, ok
}

// push adds a packet to those that wait, merging first when they are
// enough.
func (s *Stream) push(p *packet) {
	if s.npend == s.pendMax || s.now-s.pendFirst > mergeEvery && s.npend*pendingBytes*16 >= s.storeBytes {
		s.merge()
	}
	if s.npend == 0 {
		s.pendFirst = s.now
	}
	p.h, p.orig = s.hash(&p.addr), uint32(s.npend)
	s.pending[s.npend] = *p
	s.npend++
}

// Add records one SYN to the port; a SYN to another port is dropped.
func (s *Stream) Add(syn attempt.SYN) {
	if syn.Dst.Port() != s.port {
		return
	}
	p := packet{addr: syn.Src.Addr().As16(), t: rec.Stamp{Sec: syn.Time.Unix(), Nsec: int32(syn.Time.Nanosecond())},
		seq: syn.Seq, dst: s.dstID(syn.Dst.Addr()), port: syn.Src.Port(), kind: pktSYN, twin: -1}
	if syn.Src.Addr().Is4() {
		p.kind |= pktSrc4
	}
	if syn.Dst.Addr().Is4() {
		p.kind |= pktDst4
	}
	s.saw(p.t)
	s.syns++
	s.push(&p)
}

// AddSegmentView reads the segment v describes into the fate of the
// attempt it belongs to (Tracker.AddSegment): the latest of its 4-tuple
// that started no later than it, or an earlier one of the tuple whose
// ISN its sequence numbers name. A segment of no attempt is dropped. The
// first segment tells the Stream that the capture shows fates.
func (s *Stream) AddSegmentView(v *attempt.SegmentView) {
	if v.DstPort != s.port && v.SrcPort != s.port {
		return
	}
	t := rec.Stamp{Sec: v.Sec, Nsec: v.Nsec}
	s.saw(t)
	s.SetFatesKnown(true)
	p := packet{t: t, seq: v.Seq, ack: v.Ack, flags: v.Flags, sent: rec.CodeOf(v.Sent), twin: -1}
	// The client is the side away from the port; when both use it,
	// either side, the first whose attempt it is.
	first := -1
	for _, fromClient := range []bool{true, false} {
		client, server, port := v.Src, v.Dst, v.SrcPort
		if !fromClient {
			client, server, port = v.Dst, v.Src, v.DstPort
		}
		if fromClient && v.DstPort != s.port || !fromClient && v.SrcPort != s.port {
			continue
		}
		d, ok := s.knownDst(server)
		if !ok {
			continue
		}
		q := p
		q.addr, q.dst, q.port = rec.WordsOfBytes(client).Bytes(), d, port
		if fromClient {
			q.kind = pktFromClient
		}
		s.push(&q)
		if first >= 0 && first == s.npend-2 { // no merge between them
			s.pending[first].twin, s.pending[s.npend-1].twin = int32(s.npend-1), int32(first)
		}
		first = s.npend - 1
	}
}

// Finish hands over every chain still held, and gives back what held
// them. Nothing may be added after it.
func (s *Stream) Finish() error {
	s.merge()
	w := s.peers.rewrite()
	for e, ok := s.peers.next(); ok; e, ok = s.peers.next() {
		h := headOf(e)
		if h.state == peerHeld {
			s.handOverBytes(e, &h)
		}
		w.tombstone(&h)
	}
	s.peers.done(w)
	s.held = 0
	s.flush()
	// Nothing is merged after it: what merging holds goes back now, before
	// the chains are written from the spill.
	s.peers.free()
	arena.Free(s.pending)
	arena.Free(s.sorted)
	s.pending, s.sorted, s.keys, s.tmp, s.done = nil, nil, nil, nil, nil
	return s.sp.Err()
}

// Len is the number of chains handed over (their numbers run from 0).
func (s *Stream) Len() int { return s.nchains }

// dueOf is when a chain of n attempts, the latest at last, is over if no
// attempt comes: ChainEnd, in ns from base.
func (s *Stream) dueOf(n uint32, last int64) int64 {
	for len(s.dueAt) <= min(int(n), longChain) {
		k := len(s.dueAt)
		s.dueAt = append(s.dueAt, backoff.ChainEnd(s.policy, max(k, 1), time.Unix(0, 0)).UnixNano())
	}
	d := s.dueAt[min(int(n), longChain)]
	if n > longChain {
		d = backoff.ChainEnd(s.policy, int(n), time.Unix(0, 0)).UnixNano()
	}
	if last > math.MaxInt64-d {
		return math.MaxInt64
	}
	return last + d
}

// over reports whether a chain is over by now.
func (s *Stream) over(h *entryHead) bool { return s.dueOf(h.n, h.last) < s.now }

// sortPending puts the packets that wait in sorted, in the order of
// their peer's hash and address, each peer's in arrival order, and
// returns them.
func (s *Stream) sortPending() []packet {
	n := s.npend
	s.keys = slices.Grow(s.keys[:0], n)[:n]
	s.tmp = slices.Grow(s.tmp[:0], n)[:n]
	for i := range n {
		s.keys[i] = s.pending[i].h>>32<<32 | uint64(i)
	}
	order := rec.SortHigh32(s.keys, s.tmp)
	// The packets themselves in that order, so that the merge reads
	// them in order: the loads are independent, and overlap.
	out := s.sorted[:n]
	for i, o := range order {
		out[i] = s.pending[uint32(o)]
	}
	// Runs of one top half: by the whole hash, then the address; the
	// sort is stable, so a peer's stay in arrival order. A run of one
	// peer's (an IPv4 peer's packets are a run) is in order already.
	for a := 0; a < n; {
		b, one := a+1, true
		for b < n && out[b].h>>32 == out[a].h>>32 {
			one = one && out[b].h == out[a].h && out[b].addr == out[a].addr
			b++
		}
		if !one {
			slices.SortStableFunc(out[a:b], func(x, y packet) int { return s.comparePeer(&x, &y) })
		}
		a = b
	}
	return out
}

// comparePeer orders packets by their peer's hash and address.
func (s *Stream) comparePeer(x, y *packet) int {
	return compareKey(x.h, &x.addr, y.h, &y.addr)
}

func compareKey(h1 uint64, a1 *[16]byte, h2 uint64, a2 *[16]byte) int {
	switch {
	case h1 < h2:
		return -1
	case h1 > h2:
		return 1
	}
	for i := range a1 {
		if a1[i] != a2[i] {
			if a1[i] < a2[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// merge merges the packets that wait into the peers held, and hands over
// every chain over by now.
func (s *Stream) merge() {
	ps := s.sortPending()
	s.done = slices.Grow(s.done[:0], s.npend)[:s.npend]
	clear(s.done)
	w := s.peers.rewrite()
	s.held, s.heldBytes = 0, 0
	e, hasE := s.peers.next()
	var h entryHead
	if hasE {
		h = headOf(e)
	}
	for g := 0; hasE || g < len(ps); {
		var c int
		switch {
		case !hasE:
			c = 1
		case g == len(ps):
			c = -1
		default:
			c = compareKey(h.h, &h.addr, ps[g].h, &ps[g].addr)
		}
		// The packets of the next peer.
		to := g
		if c >= 0 {
			for to < len(ps) && s.comparePeer(&ps[to], &ps[g]) == 0 {
				to++
			}
		}
		switch {
		case c < 0:
			s.keep(w, e, &h)
		case c > 0:
			s.fresh(w, ps[g:to])
		default:
			s.update(w, e, &h, ps[g:to])
		}
		if c <= 0 {
			e, hasE = s.peers.next()
			if hasE {
				h = headOf(e)
			}
		}
		if c >= 0 {
			g = to
		}
	}
	s.peers.done(w)
	s.reviveAll = false
	s.npend = 0
	s.storeBytes = s.peers.bytes()
	s.pendMax = min(maxPending, max(s.pendMin, s.heldBytes/pendingBytes))
	s.flush()
}

// keep writes a peer the packets left alone: its chain handed over if it
// is over by now (or brought back for SetFatesKnown), else as it was.
func (s *Stream) keep(w *storeWriter, e []byte, h *entryHead) {
	switch {
	case h.state == peerHeld && s.over(h):
		s.handOverBytes(e, h)
		w.tombstone(h)
	case h.state == peerOver && s.reviveAll:
		s.update(w, e, h, nil)
	default:
		if h.state == peerHeld {
			s.held++
			s.heldBytes += len(e)
		}
		w.add(e)
	}
}

// fresh writes a peer first met among the packets that wait: its chain
// when a SYN came from it, nothing otherwise.
func (s *Stream) fresh(w *storeWriter, ps []packet) {
	p := &ps[0]
	s.cb.reset(entryHead{h: p.h, addr: p.addr, chain: -1, state: peerHeld})
	s.apply(ps)
	if s.cb.head.n == 0 {
		return // segments of no attempt
	}
	s.count++
	s.write(w)
}

// update writes a peer held, or handed over, with the packets that wait
// for it.
func (s *Stream) update(w *storeWriter, e []byte, h *entryHead, ps []packet) {
	switch h.state {
	case peerLost:
		w.add(e)
		return
	case peerOver:
		if !s.reviveInto(&s.cb, h) {
			w.tombstone(h)
			return
		}
	default:
		s.cb.load(e, h)
	}
	s.apply(ps)
	s.write(w)
}

// write writes the chain in s.cb: handed over if it is over by now.
func (s *Stream) write(w *storeWriter) {
	cb := &s.cb
	if s.over(&cb.head) {
		s.handOverBytes(cb.bytes(), &cb.head)
		w.tombstone(&cb.head)
		return
	}
	s.held++
	b := cb.bytes()
	s.heldBytes += len(b)
	w.add(b)
}

// apply applies packets ps, of one peer, in order, to s.cb.
func (s *Stream) apply(ps []packet) {
	cb := &s.cb
	cb.ix = nil
	for i := range ps {
		p := &ps[i]
		if p.kind&pktSYN != 0 {
			s.addSYN(cb, p)
			continue
		}
		if p.twin >= 0 && s.done[p.twin] {
			continue
		}
		s.done[p.orig] = s.addSegment(cb, p)
	}
}

// addSYN adds SYN p to cb's chain: a new attempt, or a retransmission of
// one it holds.
func (s *Stream) addSYN(cb *chainBuf, p *packet) {
	if pos, ok := cb.find(p.port, p.dst, p.seq); ok {
		s.retransmit(cb, pos, p.t)
		return
	}
	meta := uint16(min(p.dst, dstExtra))
	if p.kind&pktSrc4 != 0 {
		meta |= metaSrc4
	}
	if p.kind&pktDst4 != 0 {
		meta |= metaDst4
	}
	at, far := s.rel(p.t)
	pos := uint32(len(cb.recs))
	if p.dst >= dstExtra || far {
		meta |= metaXtra
		x := streamExtra{dst: p.dst, last: p.t.Nanos()}
		if far {
			x.start, x.far = p.t, true
		}
		cb.xs = append(cb.xs, blobExtra{pos: pos, x: x})
	}
	cb.recs = append(cb.recs, streamRec{at: at, seq: p.seq, sport: p.port, meta: meta})
	if cb.head.fates {
		cb.fates = append(cb.fates, rec.Fate{})
	}
	if cb.ix != nil {
		cb.ix.add(pos, p.port, p.dst)
	}
	if cb.head.n == 0 || at > cb.head.last {
		cb.head.last = at
	}
	cb.head.n++
}

// retransmit counts a SYN at t again for the attempt at pos
// (Tracker.retransmit).
func (s *Stream) retransmit(cb *chainBuf, pos uint32, t rec.Stamp) {
	r := &cb.recs[pos]
	j, ok := cb.extraAt(pos)
	var x streamExtra
	if ok {
		x = cb.xs[j].x
	}
	start := s.start(r, x)
	if !ok {
		x = streamExtra{dst: cb.dst(pos), last: start.Nanos()}
	}
	x.retrans++
	if t.Before(start) {
		// Input out of time order: the SYN seen first was the
		// retransmission, this one opened the attempt.
		r.at, x.far = s.rel(t)
		x.start = t
		cb.head.last = math.MinInt64
		for _, q := range cb.recs {
			cb.head.last = max(cb.head.last, q.at)
		}
	}
	if at := t.Nanos(); at > x.last {
		x.last = at
	}
	r.meta |= metaXtra
	if ok {
		cb.xs[j].x = x
	} else {
		cb.xs = slices.Insert(cb.xs, j, blobExtra{pos: pos, x: x})
	}
}

// start is the exact start of an attempt, x its extra.
func (s *Stream) start(r *streamRec, x streamExtra) rec.Stamp {
	if x.far {
		return x.start
	}
	return plus(s.base, r.at)
}

// plus is s plus d ns.
func plus(s rec.Stamp, d int64) rec.Stamp {
	sec, nsec := s.Sec+d/1e9, int64(s.Nsec)+d%1e9
	switch {
	case nsec >= 1e9:
		sec, nsec = sec+1, nsec-1e9
	case nsec < 0:
		sec, nsec = sec-1, nsec+1e9
	}
	return rec.Stamp{Sec: sec, Nsec: int32(nsec)}
}

// addSegment reads segment p into the fate of the attempt of cb it
// belongs to, and reports whether there was one: of the client port and
// server, the latest that started no later than p, unless one of the
// rec.LookBack before it is named by p's sequence numbers
// (Tracker.attemptOf).
func (s *Stream) addSegment(cb *chainBuf, p *packet) bool {
	startOf := func(q uint32) rec.Stamp {
		r := &cb.recs[q]
		if r.meta&metaXtra == 0 {
			return plus(s.base, r.at)
		}
		j, _ := cb.extraAt(q)
		return s.start(r, cb.xs[j].x)
	}
	var buf [8]uint32
	cands := buf[:0] // of the tuple, started no later than p
	if ix := cb.index(); ix != nil {
		for q := ix.latest[uint32(p.port)|p.dst<<16]; q != 0; q = ix.prev[q-1] {
			if !p.t.Before(startOf(q - 1)) {
				cands = append(cands, q-1)
			}
		}
	} else {
		for i := len(cb.recs) - 1; i >= 0; i-- {
			if r := &cb.recs[i]; r.sport == p.port && cb.dst(uint32(i)) == p.dst && !p.t.Before(startOf(uint32(i))) {
				cands = append(cands, uint32(i))
			}
		}
	}
	if len(cands) == 0 {
		return false
	}
	if len(cands) > 1 {
		// Latest first: by start, then by arrival.
		slices.SortStableFunc(cands, func(x, y uint32) int { return -startOf(x).Compare(startOf(y)) })
	}
	fromClient := p.kind&pktFromClient != 0
	pos := cands[0]
	for _, q := range cands[:min(len(cands), rec.LookBack)] {
		if rec.Names(fromClient, p.flags, p.seq, p.ack, cb.recs[q].seq, p.sent) {
			pos = q
			break
		}
	}
	if !cb.head.fates {
		cb.head.fates = true
		cb.fates = append(cb.fates[:0], make([]rec.Fate, len(cb.recs))...)
	}
	cb.fates[pos].Observe(p.t, fromClient, p.flags, p.seq, p.ack, cb.recs[pos].seq, p.sent)
	return true
}
