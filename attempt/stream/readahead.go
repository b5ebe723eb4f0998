package stream

import (
	"runtime"
	"sync/atomic"

	"github.com/backoff-audit/audit/internal/spill"
)

// A report of every chain reads them in its order, by address, where the
// spill holds them in runs, one a flush, each in that order
// (Stream.flush). The report goes through the runs in step, and readAhead
// follows each run through a window of its own, which reads on from
// where the run is asked: the JSON of 100 000 peers reads the spill a few
// thousand times, where a read a chain took 90 000.
const (
	// maxWindows bounds the windows of the goroutines that read at once,
	// about one a core, up to 32 cores (viewWindows): the runs past a
	// goroutine's share share its windows.
	maxWindows = 2048
	// windowLen is what a window reads of the spill at a time.
	windowLen = 16 << 10
)

// viewWindows is how many windows a goroutine's readAhead has: 1 024 (16
// MiB, for as many runs) on two cores, fewer on more, at least 64.
func viewWindows() int { return max(64, maxWindows/runtime.GOMAXPROCS(0)) }

// readAhead holds a window on each run of the spill, for one goroutine
// at a time (a chainView's): the report's goroutines each follow the runs
// in their own windows, with no lock to wait for and no window moved
// under another's feet, which shared windows cost a tenth of the JSON of
// 100 000 peers.
type readAhead struct {
	w []window // by run, up to n
	n int
	// reads counts the spill's reads, the Stream's: every view's.
	reads *atomic.Int64
}

func newReadAhead(reads *atomic.Int64) readAhead {
	return readAhead{n: viewWindows(), reads: reads}
}

// window is bytes of the spill, from off on.
type window struct {
	b   []byte
	off int64
}

// read returns the spill's n bytes at off, in run: from the run's window
// when it holds them, else read into it with what follows them,
// windowLen bytes in all (or n, when more). They are the window's, valid
// until its next read.
func (ra *readAhead) read(sp *spill.Spill, off int64, n, run int) ([]byte, error) {
	k := run % ra.n
	if k >= len(ra.w) {
		ra.w = append(ra.w, make([]window, k+1-len(ra.w))...)
	}
	x := &ra.w[k]
	end := off + int64(n)
	if off < x.off || end > x.off+int64(len(x.b)) {
		size := max(int64(n), min(windowLen, sp.Len()-off))
		ra.reads.Add(1)
		if int64(cap(x.b)) < size {
			x.b = make([]byte, size)
		}
		x.b, x.off = x.b[:size], off
		if _, err := sp.ReadAt(x.b, off); err != nil {
			x.b = x.b[:0]
			return nil, err
		}
	}
	return x.b[off-x.off : end-x.off], nil
}
