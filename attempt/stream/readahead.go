package stream

import (
	"sync"
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
	// maxWindows bounds the windows: runs past it share them.
	maxWindows = 1024
	// windowLen is what a window reads of the spill at a time.
	windowLen = 16 << 10
)

// readAhead holds a window on each run of the spill, for the reads of
// every goroutine; each window has a lock of its own, so that the report's
// goroutines wait for each other only when they read the same run at once.
type readAhead struct {
	w [maxWindows]window
	// reads counts the spill's reads.
	reads atomic.Int64
}

// window is bytes of the spill, from off on.
type window struct {
	mu  sync.Mutex
	b   []byte
	off int64
}

// read appends to buf the spill's n bytes at off, in run: from the run's
// window when it holds them, else read into it with what follows them,
// windowLen bytes in all (or n, when more).
func (ra *readAhead) read(sp *spill.Spill, buf []byte, off int64, n, run int) ([]byte, error) {
	x := &ra.w[run%maxWindows]
	x.mu.Lock()
	defer x.mu.Unlock()
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
			return buf, err
		}
	}
	return append(buf, x.b[off-x.off:end-x.off]...), nil
}
