package stream

import (
	"slices"
	"unsafe"

	"github.com/backoff-audit/audit/attempt/internal/rec"

	"github.com/backoff-audit/audit/internal/arena"
)

// A Stream's peers are entries in a store, in the order of their hash
// and address, each its own bytes: an entryHead, the attempts' records,
// their fates when a segment of the chain came, and the extras of the
// attempts that have one. A chain handed over is the same bytes in the
// spill; its peer's entry is then its head alone, which names the chain.
// The bytes are the records' memory as it is: they are read back by the
// process that wrote them.

// entryHead opens a peer's entry.
type entryHead struct {
	h      uint64
	addr   [16]byte // As16
	last   int64    // the latest attempt's start, ns from base
	n      uint32   // attempts held
	chain  int32    // handed over as this chain, when over; -1
	extras uint32
	state  uint8
	fates  bool
	_      [2]byte
}

const (
	peerHeld = iota // its chain is held
	peerOver        // handed over as chain
	peerLost        // the spill lost its chain
)

var (
	headSize  = int(unsafe.Sizeof(entryHead{}))
	recSize   = int(unsafe.Sizeof(streamRec{}))
	fateSize  = int(unsafe.Sizeof(rec.Fate{}))
	extraSize = int(unsafe.Sizeof(blobExtra{}))
)

// bytesOf is the memory of v.
func bytesOf[T any](v []T) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*int(unsafe.Sizeof(v[0])))
}

// headOf reads the head of entry e.
func headOf(e []byte) entryHead {
	var h [1]entryHead
	copy(bytesOf(h[:]), e)
	return h[0]
}

// entrySize is the size of the entry h opens.
func entrySize(h *entryHead) int {
	n := headSize + int(h.n)*recSize + int(h.extras)*extraSize
	if h.fates {
		n += int(h.n) * fateSize
	}
	return n
}

// tombstone writes the entry of a peer whose chain was handed over as
// h.chain (or lost): its head alone.
func (w *storeWriter) tombstone(h *entryHead) {
	w.t[0] = entryHead{h: h.h, addr: h.addr, chain: h.chain, state: h.state}
	if h.state == peerHeld {
		w.t[0].state = peerOver
	}
	w.add(bytesOf(w.t[:]))
}

// storeChunk is the size of a store's chunks, unless an entry needs more.
const storeChunk = 4 << 20

// store holds entries in chunks off the Go heap, written in order and
// read back in order while the next store is written (rewrite).
type store struct {
	chunks [][]byte // each used up to its length
	spare  [][]byte // chunks read, for the writer
	// The store being read: chunk rc, from offset roff.
	old      [][]byte
	rc, roff int
}

// storeWriter writes a store's next entries.
type storeWriter struct {
	s      *store
	chunks [][]byte
	t      [1]entryHead
}

// bytes is the size of the entries held.
func (s *store) bytes() int {
	n := 0
	for _, c := range s.chunks {
		n += len(c)
	}
	return n
}

// rewrite starts reading the entries held (next) and returns the writer
// of the store that replaces them (done).
func (s *store) rewrite() *storeWriter {
	s.old, s.chunks, s.rc, s.roff = s.chunks, nil, 0, 0
	return &storeWriter{s: s}
}

// next returns the next entry read, valid until the call after; ok is
// false at the end.
func (s *store) next() (e []byte, ok bool) {
	for s.rc < len(s.old) && s.roff == len(s.old[s.rc]) {
		s.drop(s.old[s.rc])
		s.old[s.rc] = nil
		s.rc++
		s.roff = 0
	}
	if s.rc == len(s.old) {
		return nil, false
	}
	c := s.old[s.rc][s.roff:]
	h := headOf(c)
	n := entrySize(&h)
	s.roff += n
	return c[:n], true
}

// drop gives a chunk read back, to the writer or to the system.
func (s *store) drop(c []byte) {
	if cap(c) == storeChunk && len(s.spare) < 2 {
		s.spare = append(s.spare, c[:0])
		return
	}
	arena.Free(c)
}

// done makes the entries w wrote the store's.
func (s *store) done(w *storeWriter) {
	for ; s.rc < len(s.old); s.rc++ {
		s.drop(s.old[s.rc])
	}
	s.old, s.chunks = nil, w.chunks
}

// add writes entry e.
func (w *storeWriter) add(e []byte) {
	k := len(w.chunks) - 1
	if k < 0 || cap(w.chunks[k])-len(w.chunks[k]) < len(e) {
		var c []byte
		switch s := w.s; {
		case len(e) > storeChunk:
			c = arena.Make[byte](len(e))[:0]
		case len(s.spare) > 0:
			c, s.spare = s.spare[len(s.spare)-1], s.spare[:len(s.spare)-1]
		default:
			c = arena.Make[byte](storeChunk)[:0]
		}
		w.chunks = append(w.chunks, c)
		k++
	}
	w.chunks[k] = append(w.chunks[k], e...)
}

// free gives back every chunk.
func (s *store) free() {
	for _, set := range [][][]byte{s.chunks, s.spare, s.old} {
		for _, c := range set {
			if c != nil {
				arena.Free(c)
			}
		}
	}
	*s = store{}
}

// chainBuf is a peer's entry as a merge changes it.
type chainBuf struct {
	head  entryHead
	recs  []streamRec
	fates []rec.Fate // when head.fates
	xs    []blobExtra
	ix    *tupleIndex // of a long chain, once needed
	out   []byte
}

// tupleIndex finds a long chain's attempts of one tuple: latest by
// source port and server, then each attempt's previous of its tuple.
type tupleIndex struct {
	latest map[uint32]uint32 // sport | dst << 16 → position + 1
	prev   []uint32          // by position: the previous of its tuple, + 1
}

func (ix *tupleIndex) add(pos uint32, sport uint16, dst uint32) {
	k := uint32(sport) | dst<<16
	ix.prev = append(ix.prev, ix.latest[k])
	ix.latest[k] = pos + 1
}

// reset empties cb for a chain of head h.
func (cb *chainBuf) reset(h entryHead) {
	cb.head = h
	cb.head.n, cb.head.extras, cb.head.fates = 0, 0, false
	cb.recs, cb.fates, cb.xs, cb.ix = cb.recs[:0], cb.fates[:0], cb.xs[:0], nil
}

// load reads entry e, of head h, into cb.
func (cb *chainBuf) load(e []byte, h *entryHead) {
	cb.reset(*h)
	cb.head.fates = h.fates
	n, nx := int(h.n), int(h.extras)
	e = e[headSize:]
	cb.recs = slices.Grow(cb.recs, n)[:n]
	e = e[copy(bytesOf(cb.recs), e):]
	if h.fates {
		cb.fates = slices.Grow(cb.fates, n)[:n]
		e = e[copy(bytesOf(cb.fates), e):]
	}
	cb.xs = slices.Grow(cb.xs, nx)[:nx]
	copy(bytesOf(cb.xs), e)
	cb.head.n = h.n
}

// bytes is cb's entry.
func (cb *chainBuf) bytes() []byte {
	cb.head.n, cb.head.extras = uint32(len(cb.recs)), uint32(len(cb.xs))
	cb.out = append(cb.out[:0], bytesOf([]entryHead{cb.head})...)
	cb.out = append(cb.out, bytesOf(cb.recs)...)
	if cb.head.fates {
		cb.out = append(cb.out, bytesOf(cb.fates)...)
	}
	cb.out = append(cb.out, bytesOf(cb.xs)...)
	return cb.out
}

// extraAt is the index in cb.xs of the extra of the attempt at pos, or
// where it goes.
func (cb *chainBuf) extraAt(pos uint32) (int, bool) {
	return slices.BinarySearchFunc(cb.xs, pos, func(x blobExtra, pos uint32) int { return int(x.pos) - int(pos) })
}

// dst is the server id of the attempt at pos.
func (cb *chainBuf) dst(pos uint32) uint32 {
	if d := uint32(cb.recs[pos].meta & dstExtra); d != dstExtra {
		return d
	}
	j, _ := cb.extraAt(pos)
	return cb.xs[j].x.dst
}

// index is the tuple index of a long chain, nil for a short one.
func (cb *chainBuf) index() *tupleIndex {
	if cb.ix == nil && len(cb.recs) > longChain {
		cb.ix = &tupleIndex{latest: map[uint32]uint32{}}
		for i, r := range cb.recs {
			cb.ix.add(uint32(i), r.sport, cb.dst(uint32(i)))
		}
	}
	return cb.ix
}

// find finds the attempt with source port sport, server dst and ISN
// seq.
func (cb *chainBuf) find(sport uint16, dst, seq uint32) (uint32, bool) {
	if ix := cb.index(); ix != nil {
		for q := ix.latest[uint32(sport)|dst<<16]; q != 0; q = ix.prev[q-1] {
			if cb.recs[q-1].seq == seq {
				return q - 1, true
			}
		}
		return 0, false
	}
	for i := len(cb.recs) - 1; i >= 0; i-- {
		if r := &cb.recs[i]; r.seq == seq && r.sport == sport && cb.dst(uint32(i)) == dst {
			return uint32(i), true
		}
	}
	return 0, false
}
