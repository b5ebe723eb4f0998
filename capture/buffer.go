package capture

import (
	"errors"
	"io"
)

// chunkSize is how much the reader asks the file for at once. SPEC.md §6:
// 4 MiB reads parsed in place run at a third of tcpdump's time on a 552 MB
// capture, where libpcap's 4 KiB reads lose to it.
const chunkSize = 4 << 20

// minChunk is the first buffer for input of unknown size (the fuzzer, a
// pipe): small inputs stay cheap and the buffer doubles up to chunkSize.
const minChunk = 64 << 10

// buffer is a window on a stream: buf[start:end] holds the bytes from
// stream offset off on. It never grows beyond chunkSize or the largest
// record its caller asks for, whichever is bigger; the caller bounds that.
type buffer struct {
	r          io.Reader
	buf        []byte
	start, end int
	off        int64 // stream offset of buf[start]
	err        error // the reader's error once it returned one (io.EOF at the end)
	progress   func()
}

func newBuffer(r io.Reader, sizeHint int64) *buffer {
	n := minChunk
	if sizeHint > 0 {
		n = int(min(max(sizeHint, 512), chunkSize))
	}
	return &buffer{r: r, buf: make([]byte, n)}
}

// avail is how many bytes are ready without reading.
func (b *buffer) avail() int { return b.end - b.start }

// bytes returns the ready bytes; valid until the next fill.
func (b *buffer) bytes() []byte { return b.buf[b.start:b.end] }

// advance consumes n ready bytes.
func (b *buffer) advance(n int) {
	b.start += n
	b.off += int64(n)
}

// fill makes at least n bytes ready, reading as much as the buffer holds.
// It returns false when the stream ends (or fails) first; b.err then says
// why and b.avail() how much there is. n must be bounded by the caller.
func (b *buffer) fill(n int) bool {
	if b.avail() >= n {
		return true
	}
	if b.err != nil {
		return false
	}
	if b.start+n > len(b.buf) {
		if n > len(b.buf) {
			size := len(b.buf)
			for size < n || size < min(2*len(b.buf), chunkSize) {
				size *= 2
			}
			nb := make([]byte, size)
			b.end = copy(nb, b.bytes())
			b.buf = nb
		} else {
			b.end = copy(b.buf, b.bytes())
		}
		b.start = 0
	}
	for b.avail() < n {
		m, err := b.r.Read(b.buf[b.end:])
		b.end += m
		if err != nil {
			b.err = err
			break
		}
		if m == 0 {
			// io.Reader allows (0, nil); a reader that keeps doing it
			// would spin, so treat a run of them as an error.
			if m, err = b.retryRead(); err != nil {
				b.err = err
				break
			}
			b.end += m
		}
	}
	if b.progress != nil {
		b.progress()
	}
	return b.avail() >= n
}

var errNoProgress = errors.New("reader returned no data and no error 100 times")

func (b *buffer) retryRead() (int, error) {
	for range 100 {
		m, err := b.r.Read(b.buf[b.end:])
		if m > 0 || err != nil {
			return m, err
		}
	}
	return 0, errNoProgress
}

// skip consumes n bytes, reading and dropping what is not yet buffered, so a
// huge block costs time, not memory. It returns false when the stream ends
// first.
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
