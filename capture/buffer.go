package capture

import (
	"errors"
	"io"
	"sync"

	"github.com/backoff-audit/audit/internal/infile"
)

// chunkSize is how much the reader asks the file for at once. docs/spec.md §6:
// 4 MiB reads parsed in place run at a third of tcpdump's time on a 552 MB
// capture, where libpcap's 4 KiB reads lose to it.
const chunkSize = 4 << 20

// maxNeed is the most a parser asks to see at once: one whole block.
const maxNeed = maxBlock

// chunk is a piece of the stream in a buffer with room in front of it
// (headroom) where the unread tail of the previous chunk is copied, so a
// record that straddles two chunks is contiguous without copying the chunk.
type chunk struct {
	mem  []byte // headroom, then data
	head int    // headroom size
	n    int    // data bytes: mem[head:head+n]
	err  error  // the stream's error after these bytes (io.EOF at the end)
}

// source hands out chunks in stream order and takes spent ones back.
// Once the channel it was made with (Options.Done) is closed, it hands out
// what it has read and then, instead of waiting for the stream, a chunk of
// no bytes whose err is errInterrupted.
type source interface {
	next() *chunk
	release(*chunk)
	stop()
}

// buffer is a window on a stream: buf[start:end] holds the bytes from
// stream offset off on. Memory is bounded by the chunks of its source and
// maxNeed, whatever a length field says.
type buffer struct {
	src        source
	cur        *chunk
	buf        []byte
	start, end int
	off        int64 // stream offset of buf[start]
	err        error // the stream's error once reached (io.EOF at the end)
	progress   func()
}

// errInterrupted is the error of a stream whose read Options.Done
// stopped, in the source or in the reader under it (infile.NewReader).
var errInterrupted = infile.ErrInterrupted

func newBuffer(src source) *buffer { return &buffer{src: src} }

// avail is how many bytes are ready without reading.
func (b *buffer) avail() int { return b.end - b.start }

// bytes returns the ready bytes; valid until the next fill.
func (b *buffer) bytes() []byte { return b.buf[b.start:b.end] }

// advance consumes n ready bytes.
func (b *buffer) advance(n int) {
	b.start += n
	b.off += int64(n)
}

// fill makes at least n (at most maxNeed) bytes ready. It returns false
// when the stream ends or fails first; b.err then says why and b.avail()
// how much there is.
func (b *buffer) fill(n int) bool {
	if n > maxNeed {
		panic("capture: fill beyond maxNeed") // a parser bug, not bad input
	}
	for b.avail() < n {
		if b.err != nil {
			return false
		}
		c := b.src.next()
		if c.err == errInterrupted && c.n == 0 {
			b.err = errInterrupted
			return false
		}
		left := b.avail() // < n <= maxNeed
		if c.head < left {
			// Only the first record longer than any before it gets here.
			mem := make([]byte, maxNeed+len(c.mem)-c.head)
			copy(mem[maxNeed:], c.mem[c.head:c.head+c.n])
			c.mem, c.head = mem, maxNeed
		}
		copy(c.mem[c.head-left:c.head], b.bytes())
		if b.cur != nil {
			b.src.release(b.cur)
		}
		b.cur = c
		b.buf, b.start, b.end = c.mem, c.head-left, c.head+c.n
		b.err = c.err
		if b.progress != nil {
			b.progress()
		}
	}
	return true
}

// skip consumes n bytes, dropping what is not yet buffered, so a huge block
// costs time, not memory. It returns false when the stream ends first.
func (b *buffer) skip(n int64) bool {
	for n > 0 {
		if b.avail() == 0 && !b.fill(1) {
			return false
		}
		k := int(min(n, int64(b.avail())))
		b.advance(k)
		n -= int64(k)
	}
	return true
}

// eof reports whether the stream ended cleanly (as opposed to failing).
func (b *buffer) eof() bool { return b.err == io.EOF }

// close stops the source; the buffer is unusable afterwards.
func (b *buffer) close() { b.src.stop() }

// headroom for new chunks: enough for the leftover of ordinary records;
// fill grows a chunk's headroom for the rare longer record.
const headroom = 64 << 10

func newChunk(size int) *chunk {
	return &chunk{mem: make([]byte, headroom+size), head: headroom}
}

// readChunk fills c's data area from r; with some set, it takes what one
// read gives instead (at least a byte, unless the stream ends or fails).
func readChunk(r io.Reader, c *chunk, some bool) {
	if some {
		c.n, c.err = readSome(r, c.mem[c.head:])
		return
	}
	c.n, c.err = readFull(r, c.mem[c.head:])
	if c.err == nil && c.n < len(c.mem)-c.head {
		c.err = io.EOF
	}
}

// readSome reads at least a byte into p, or returns the stream's error,
// and fails a reader that returns (0, nil) 100 times in a row.
func readSome(r io.Reader, p []byte) (int, error) {
	for range 100 {
		if n, err := r.Read(p); n > 0 || err != nil {
			return n, err
		}
	}
	return 0, errNoProgress
}

var errNoProgress = errors.New("reader returned no data and no error 100 times in a row")

// readFull is io.ReadFull that tolerates a short stream (returns its error
// or nil at a clean EOF after data) and a reader that returns (0, nil)
// forever (an error, not a spin).
func readFull(r io.Reader, p []byte) (int, error) {
	n, idle := 0, 0
	for n < len(p) {
		m, err := r.Read(p[n:])
		n += m
		if err != nil {
			return n, err
		}
		if m == 0 {
			if idle++; idle == 100 {
				return n, errNoProgress
			}
			continue
		}
		idle = 0
	}
	return n, nil
}

// syncSource reads chunks in the caller's goroutine: for input that fits a
// chunk or two, where a goroutine would cost more than it saves.
type syncSource struct {
	r     io.Reader
	size  int
	spare *chunk
	done  <-chan struct{}
}

func (s *syncSource) next() *chunk {
	if closed(s.done) {
		return &chunk{err: errInterrupted}
	}
	c := s.spare
	s.spare = nil
	if c == nil {
		c = newChunk(s.size)
	}
	readChunk(s.r, c, false)
	return c
}

func (s *syncSource) release(c *chunk) { s.spare = c }
func (s *syncSource) stop()            {}

// asyncSource reads the next chunk while the parser works on the current
// one: reading (a syscall, or gzip inflation) and parsing overlap, which on
// make bench's capture takes the read from the sum of the two to about the
// larger. Three chunks circulate: parsed, ready, being read. With some
// set (a pipe, whose writer may be slow or endless) a chunk is what one
// read gives, so that what came is parsed without waiting for a chunk's
// worth, and an interrupted read keeps it.
type asyncSource struct {
	ready  chan *chunk
	free   chan *chunk
	quit   chan struct{}
	exited chan struct{} // closed when the reading goroutine returns
	once   sync.Once
	// done, once closed, stops the reading before its next read, and
	// stop from waiting for a read that may never return (a pipe nothing
	// writes to).
	done <-chan struct{}
}

func newAsyncSource(r io.Reader, size int, some bool, done <-chan struct{}) *asyncSource {
	s := &asyncSource{
		ready:  make(chan *chunk, 1),
		free:   make(chan *chunk, 3),
		quit:   make(chan struct{}),
		exited: make(chan struct{}),
		done:   done,
	}
	for range 3 {
		s.free <- newChunk(size)
	}
	go func() {
		defer close(s.exited)
		for {
			var c *chunk
			select {
			case c = <-s.free:
			case <-s.quit:
				return
			}
			if closed(done) {
				c.n, c.err = 0, errInterrupted
			} else {
				readChunk(r, c, some)
			}
			select {
			case s.ready <- c:
			case <-s.quit:
				return
			}
			if c.err != nil {
				return
			}
		}
	}()
	return s
}

// next hands out the reading goroutine's next chunk. It does not look at
// done itself: the goroutine does, and hands over what a read had taken
// when done came, then a chunk that says the read was interrupted (a read
// that waits is a stoppable one, which done ends). What was read before an
// interruption is parsed, whenever the interruption comes.
func (s *asyncSource) next() *chunk {
	return <-s.ready
}

// closed reports whether done is closed (a nil done never is).
func closed(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

func (s *asyncSource) release(c *chunk) { s.free <- c }

// stop ends the reading goroutine and waits for it, so the caller may
// close the file afterwards; after an interrupted read it does not wait
// for a read in progress, which may wait for a writer that never writes.
func (s *asyncSource) stop() {
	s.once.Do(func() {
		close(s.quit)
		select {
		case <-s.exited:
		case <-s.done:
		}
	})
}
