//go:build linux

package capture

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mapSource hands out a regular file through one read-only mmap(2) of the
// whole file instead of read(2): the pages are the page cache's own, so the
// kernel copies nothing, where read(2) copies every byte of a file of which
// the parser looks at a fraction. On make bench's 608 MB capture, read(2)
// in 4 MiB pieces took 98 ms alone, mapping and populating the file 20–34
// ms; the whole audit went from 0.37 s to 0.31 s of CPU (BENCHMARKS.md).
//
// The file is handed out as windows of the one mapping, so a record that
// straddles two windows is contiguous as it is (chunk.mapped). A goroutine
// keeps the pages of the next windows resident (MADV_POPULATE_READ), so the
// parser does not take the page faults, and drops those the parser is done
// with (MADV_DONTNEED: they stay in the page cache), so the process holds a
// few windows of the file, never the whole of it.
//
// A file that shrinks while mapped faults on the vanished pages; readSource
// turns that fault into an error (see fault). A file that grows is read up
// to its size when opened.
type mapSource struct {
	mem    []byte // the whole file
	window int
	// handed is the index of the last window handed out, for the pager.
	handed atomic.Int64
	moved  chan struct{} // wakes the pager after a window is handed out
	quit   chan struct{}
	wg     sync.WaitGroup
	once   sync.Once
	// paged is the file offset up to which pages are resident: progress.
	paged atomic.Int64
	// dropped counts the windows the pager has dropped; next drops one
	// itself when the pager falls behind, so that what stays resident is
	// bounded however the goroutines are scheduled.
	dropped atomic.Int64
}

// mapsOpened counts the files mapped, so tests can tell a mapped read from
// a fallback to read(2).
var mapsOpened atomic.Int64

// Windows the pager keeps resident ahead of the one being parsed.
const mapAhead = 2

// newMapSource maps f (size bytes) and starts the pager. It fails, and the
// caller reads the file instead, where mmap does (a filesystem without it,
// a file larger than the address space).
func newMapSource(f *os.File, size int64, window int) (*mapSource, error) {
	if size <= 0 || size > math.MaxInt || window <= 0 {
		return nil, errors.New("capture: nothing to map")
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	page := os.Getpagesize()
	window = (window + page - 1) / page * page // madvise takes whole pages
	s := &mapSource{mem: mem, window: window, moved: make(chan struct{}, 1), quit: make(chan struct{})}
	mapsOpened.Add(1)
	s.handed.Store(-1)
	s.wg.Add(1)
	go s.pager()
	return s, nil
}

// windows returns how many windows the file has.
func (s *mapSource) windows() int { return (len(s.mem) + s.window - 1) / s.window }

// span returns window k's bytes.
func (s *mapSource) span(k int) []byte {
	return s.mem[k*s.window : min((k+1)*s.window, len(s.mem))]
}

// pager keeps windows handed+1 … handed+mapAhead resident and drops the
// windows before handed−1 (the one before the current holds the headroom of
// a straddling record, and a dropped page would only fault back in).
func (s *mapSource) pager() {
	defer s.wg.Done()
	// Touching a page of a file that shrank faults: the pager stops, and
	// the parser, faulting on the same page, reports it.
	debug.SetPanicOnFault(true)
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(interface{ Addr() uintptr }); !ok {
				panic(r)
			}
		}
	}()
	populated, populate := 0, true
	for {
		cur := int(s.handed.Load())
		for populated < min(cur+1+mapAhead, s.windows()) {
			w := s.span(populated)
			if populate {
				err := unix.Madvise(w, unix.MADV_POPULATE_READ)
				populate = err != unix.EINVAL
			}
			if !populate {
				touch(w) // before Linux 5.14
			}
			populated++
			s.paged.Store(int64((populated-1)*s.window + len(w)))
			if int(s.handed.Load()) != cur {
				break // the parser moved on: drop behind it first
			}
		}
		for d := int(s.dropped.Load()); d < cur-1; d = int(s.dropped.Load()) {
			s.drop(d)
		}
		if int(s.handed.Load()) != cur {
			continue
		}
		select {
		case <-s.moved:
		case <-s.quit:
			return
		}
	}
}

var touchSink atomic.Uint32

// touch reads one byte of every page of w, faulting the pages in.
func touch(w []byte) {
	var t byte
	for i := 0; i < len(w); i += 4096 {
		t += w[i]
	}
	touchSink.Add(uint32(t))
}

// drop gives back the pages of window k (once, whoever calls it first).
func (s *mapSource) drop(k int) {
	if s.dropped.CompareAndSwap(int64(k), int64(k+1)) {
		unix.Madvise(s.span(k), unix.MADV_DONTNEED)
	}
}

func (s *mapSource) next() *chunk {
	k := int(s.handed.Load()) + 1
	s.handed.Store(int64(k))
	select {
	case s.moved <- struct{}{}:
	default:
	}
	// The pager is far behind (starved of a core): drop for it.
	if d := int(s.dropped.Load()); d < k-mapAhead-1 {
		s.drop(d)
	}
	off := k * s.window
	end := min(off+s.window, len(s.mem))
	from := max(off-maxNeed, 0)
	c := &chunk{mem: s.mem[from:end], head: off - from, n: end - off, mapped: true}
	if end == len(s.mem) {
		c.err = io.EOF
	}
	return c
}

func (s *mapSource) release(*chunk) {}

// stop ends the pager and unmaps the file; the buffer is unusable after.
func (s *mapSource) stop() {
	s.once.Do(func() {
		close(s.quit)
		s.wg.Wait()
		unix.Munmap(s.mem)
	})
}

// fault turns a recovered memory fault in the mapping into an error naming
// the file and offset: the file shrank under the reader. nil stays nil, and
// any other panic goes on.
func (s *mapSource) fault(r any, name string) error {
	if r == nil {
		return nil
	}
	if f, ok := r.(interface{ Addr() uintptr }); ok {
		base := uintptr(unsafe.Pointer(unsafe.SliceData(s.mem)))
		if a := f.Addr(); a >= base && a < base+uintptr(len(s.mem)) {
			return fmt.Errorf("read %s: the file shrank while being read: offset %d is gone", name, a-base)
		}
	}
	panic(r)
}
