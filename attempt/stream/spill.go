package stream

import (
	"cmp"
	"encoding/binary"
	"net/netip"
	"slices"
	"time"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/attempt/internal/rec"

	"github.com/backoff-audit/audit/backoff"
)

// blobRef is where a chain handed over is: its bytes' offset and length,
// in the spill or, not yet flushed, in the batch.
type blobRef struct {
	off int64
	n   uint32
}

// refBlock is how many refs a block of Stream.chains holds: 64 KiB.
const refBlock = 4096

// ref is where chain i is.
func (s *Stream) ref(i int) *blobRef { return &s.chains[i/refBlock][i%refBlock] }

// addRef adds the ref of chain nchains.
func (s *Stream) addRef(r blobRef) {
	if s.nchains%refBlock == 0 {
		s.chains = append(s.chains, make([]blobRef, refBlock))
	}
	*s.ref(s.nchains) = r
	s.nchains++
}

// handOverBytes writes the chain of entry e, of head h, to the batch as
// chain Len(), which h then names.
func (s *Stream) handOverBytes(e []byte, h *entryHead) {
	ref := blobRef{off: int64(len(s.batch)), n: uint32(len(e))}
	s.batch = append(s.batch, e...)
	h.chain = int32(s.nchains)
	s.addRef(ref)
	if s.nchains-s.flushed >= streamBatch || len(s.batch) >= batchBytes {
		s.flush()
	}
}

// flush hands the chains of the batch to OnOver, then moves them to the
// spill in the order a report reads them (runKey): the spill is runs in
// that order, a batch each, which a report of every chain reads in step
// (readAhead).
func (s *Stream) flush() {
	from, to := s.flushed, s.nchains
	if from == to {
		return
	}
	if s.OnOver != nil {
		s.OnOver(from, to, s.Last())
	}
	s.runKeys = s.runKeys[:0]
	for i := from; i < to; i++ {
		s.runKeys = append(s.runKeys, runKeyOf(s.batch[s.ref(i).off:], i))
	}
	slices.SortFunc(s.runKeys, compareRunKeys)
	for _, k := range s.runKeys {
		r := s.ref(int(k.i))
		r.off = s.sp.Append(s.batch[r.off : r.off+int64(r.n)])
	}
	s.runs = append(s.runs, int32(from))
	s.flushed = to
	s.batch = s.batch[:0]
}

// runOf is the run of the spill that holds chain i, handed over before
// the last flush.
func (s *Stream) runOf(i int) int {
	r, found := slices.BinarySearch(s.runs, int32(i))
	if !found {
		r--
	}
	return r
}

// runKey is a chain's place in a run: its peer's address as a report
// orders peers within a verdict (report's compareAddr: IPv4 before IPv6,
// then by bytes), and its number. The order only spares reads: a report
// that read in another would read the same bytes, more often.
type runKey struct {
	v6     bool
	i      int32
	hi, lo uint64
}

// runKeyOf is the key of chain i, whose bytes e begins with.
func runKeyOf(e []byte, i int) runKey {
	a := headOf(e[:headSize]).addr
	return runKey{v6: !netip.AddrFrom16(a).Is4In6(), i: int32(i),
		hi: binary.BigEndian.Uint64(a[:8]), lo: binary.BigEndian.Uint64(a[8:])}
}

func compareRunKeys(x, y runKey) int {
	if x.v6 != y.v6 {
		if x.v6 {
			return 1
		}
		return -1
	}
	return cmp.Or(cmp.Compare(x.hi, y.hi), cmp.Compare(x.lo, y.lo))
}

// blob returns chain i's bytes, read from the spill into an array of
// their own when they are there.
func (s *Stream) blob(i int) ([]byte, error) {
	r := *s.ref(i)
	if i >= s.flushed {
		return s.batch[r.off : r.off+int64(r.n)], nil
	}
	buf := make([]byte, r.n)
	_, err := s.sp.ReadAt(buf, r.off)
	return buf, err
}

// reviveInto reads the chain h names back into cb, held again, and
// reports whether it could; when the spill lost it, h's peer is lost.
func (s *Stream) reviveInto(cb *chainBuf, h *entryHead) bool {
	c := int(h.chain)
	b, err := s.blob(c)
	if err != nil {
		h.state = peerLost
		return false
	}
	bh := headOf(b)
	cb.load(b, &bh)
	cb.head.h, cb.head.state, cb.head.chain = h.h, peerHeld, -1
	if s.OnRevive != nil {
		s.OnRevive(c)
	}
	return true
}

// chainView is a chain read back from its bytes, for one goroutine at a
// time, its buffers and its windows on the spill reused from chain to
// chain.
type chainView struct {
	ahead readAhead
	head  entryHead
	cb    chainBuf
	// order is the positions in the chain's time order; start the
	// attempts' starts, by position, and xi their extras' indexes in
	// cb.xs (-1: none).
	order []int32
	start []rec.Stamp
	xi    []int32
}

// takeView returns a view of the Stream's for the caller alone, until it
// puts it back (putView): a view a goroutine of the same core put back,
// which is the one most likely to hold the next chains in its windows, or
// a new one.
func (s *Stream) takeView() *chainView {
	if v, ok := s.views.Get().(*chainView); ok {
		return v
	}
	return &chainView{ahead: newReadAhead(&s.reads)}
}

func (s *Stream) putView(v *chainView) { s.views.Put(v) }

// ChainReader returns a function that reads chain i as Chain does, for
// one goroutine at a time, with a view of its own: a goroutine that reads
// chain after chain in a report's order (a report's writers) then finds
// the next chains of each run in its windows, which no other goroutine
// moves.
func (s *Stream) ChainReader() func(i int, buf []attempt.Attempt) attempt.Chain {
	v := &chainView{ahead: newReadAhead(&s.reads)}
	return func(i int, buf []attempt.Attempt) attempt.Chain { return s.chain(i, buf, v) }
}

// view reads chain i back into v.
func (s *Stream) view(i int, v *chainView) error {
	r := *s.ref(i)
	var b []byte
	if i >= s.flushed {
		b = s.batch[r.off : r.off+int64(r.n)]
	} else {
		var err error
		if b, err = v.ahead.read(s.sp, r.off, int(r.n), s.runOf(i)); err != nil {
			return err
		}
	}
	v.head = headOf(b)
	v.cb.load(b, &v.head)
	n := len(v.cb.recs)
	v.start = slices.Grow(v.start[:0], n)[:n]
	v.order = slices.Grow(v.order[:0], n)[:n]
	v.xi = slices.Grow(v.xi[:0], n)[:n]
	sorted := true
	x := 0
	for k := range v.cb.recs {
		r := &v.cb.recs[k]
		v.start[k] = plus(s.base, r.at)
		v.xi[k] = -1
		if x < len(v.cb.xs) && v.cb.xs[x].pos == uint32(k) {
			if v.cb.xs[x].x.far {
				v.start[k] = v.cb.xs[x].x.start
			}
			v.xi[k] = int32(x)
			x++
		}
		v.order[k] = int32(k)
		if k > 0 && !v.start[k-1].Before(v.start[k]) {
			sorted = false
		}
	}
	if !sorted {
		// As Tracker.Chains sorts: Compare of the attempts.
		as := make([]attempt.Attempt, n)
		for k := range as {
			as[k] = s.attempt(v, k)
		}
		slices.SortFunc(v.order, func(a, b int32) int { return attempt.Compare(as[a], as[b]) })
	}
	return nil
}

// extra is the extra of the attempt at position k of v, if it has one.
func (v *chainView) extra(k int) (streamExtra, bool) {
	if j := v.xi[k]; j >= 0 {
		return v.cb.xs[j].x, true
	}
	return streamExtra{}, false
}

// ending is the Ending of the attempt at position k of v.
func (v *chainView) ending(k int) backoff.Ending {
	st := v.start[k]
	last := st.Nanos()
	if x, ok := v.extra(k); ok {
		last = x.last
	}
	var f rec.Fate
	if v.head.fates {
		f = v.cb.fates[k]
	}
	return f.Ending(st, last)
}

// attempt is the attempt at position k of v.
func (s *Stream) attempt(v *chainView, k int) attempt.Attempt {
	r := &v.cb.recs[k]
	x, _ := v.extra(k)
	start := v.start[k]
	dst := uint32(r.meta & dstExtra)
	if dst == dstExtra {
		dst = x.dst
	}
	src, srv := netip.AddrFrom16(v.head.addr).Unmap(), s.dsts[dst]
	if r.meta&metaSrc4 == 0 && src.Is4() {
		src = netip.AddrFrom16(src.As16())
	}
	if r.meta&metaDst4 == 0 && srv.Is4() {
		srv = netip.AddrFrom16(srv.As16())
	}
	a := attempt.Attempt{Time: time.Unix(start.Sec, int64(start.Nsec)).UTC(), Src: netip.AddrPortFrom(src, r.sport),
		Dst: netip.AddrPortFrom(srv, s.port), Seq: r.seq, Retransmits: int(x.retrans)}
	if s.fatesKnown {
		a.Ending = v.ending(k)
	}
	return a
}

// Chain returns chain i, its attempts sorted as Tracker.Chains sorts
// them, built in buf's array when it has room. A chain the spill lost
// comes back empty: Finish said so.
func (s *Stream) Chain(i int, buf []attempt.Attempt) attempt.Chain {
	v := s.takeView()
	defer s.putView(v)
	return s.chain(i, buf, v)
}

func (s *Stream) chain(i int, buf []attempt.Attempt, v *chainView) attempt.Chain {
	if s.view(i, v) != nil {
		return attempt.Chain{}
	}
	as := buf[:0]
	for _, k := range v.order {
		as = append(as, s.attempt(v, int(k)))
	}
	return attempt.Chain{Peer: netip.AddrFrom16(v.head.addr).Unmap(), Attempts: as}
}

// Times returns chain i's peer, attempt times in time order (in buf's
// array) and retransmits, without building its attempts.
func (s *Stream) Times(i int, buf []time.Time) (netip.Addr, []time.Time, int) {
	v := s.takeView()
	defer s.putView(v)
	buf = buf[:0]
	if s.view(i, v) != nil {
		return netip.Addr{}, buf, 0
	}
	retrans := 0
	for _, x := range v.cb.xs {
		retrans += int(x.x.retrans)
	}
	for _, k := range v.order {
		st := v.start[k]
		buf = append(buf, time.Unix(st.Sec, int64(st.Nsec)).UTC())
	}
	return netip.AddrFrom16(v.head.addr).Unmap(), buf, retrans
}

// TimesEndings is Times and Endings of chain i, read once, appended to
// buf[:0] and ends[:0] (ends is nil when the capture shows no fates), so
// that a caller that keeps neither reads chain after chain in the same
// memory.
func (s *Stream) TimesEndings(i int, buf []time.Time, ends []backoff.Ending) (netip.Addr, []time.Time, int, []backoff.Ending) {
	v := s.takeView()
	defer s.putView(v)
	buf = buf[:0]
	if s.view(i, v) != nil {
		return netip.Addr{}, buf, 0, nil
	}
	retrans := 0
	for _, x := range v.cb.xs {
		retrans += int(x.x.retrans)
	}
	var es []backoff.Ending
	if s.fatesKnown {
		es = slices.Grow(ends[:0], len(v.order))[:len(v.order)]
	}
	for j, k := range v.order {
		st := v.start[k]
		buf = append(buf, time.Unix(st.Sec, int64(st.Nsec)).UTC())
		if es != nil {
			es[j] = v.ending(int(k))
		}
	}
	return netip.AddrFrom16(v.head.addr).Unmap(), buf, retrans, es
}

// Endings returns chain i's fates in time order, or nil when the capture
// shows none: a new slice, which the caller may keep.
func (s *Stream) Endings(i int, _ []backoff.Ending) []backoff.Ending {
	if !s.fatesKnown {
		return nil
	}
	v := s.takeView()
	defer s.putView(v)
	if s.view(i, v) != nil {
		return nil
	}
	es := make([]backoff.Ending, len(v.order))
	for j, k := range v.order {
		es[j] = v.ending(int(k))
	}
	return es
}
