// Package spill is an append-only store of bytes set aside to be read
// back later: in memory up to a bound, then in a temporary file that is
// unlinked as soon as it is made, so that what a long capture's audit
// keeps for its report costs disk rather than memory, and nothing is left
// behind whatever becomes of the process.
package spill

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// blockSize is the size of the blocks the memory part is held in, and of
// the file part's write buffer.
const blockSize = 1 << 20

// Spill is an append-only store of bytes. Append is for one goroutine;
// ReadAt may be called from any number at once, but not while Append
// runs.
type Spill struct {
	dir    string
	memMax int64
	// mem holds the first bytes appended, up to memMax, in blocks of
	// blockSize; memN counts them.
	mem  [][]byte
	memN int64
	// f holds the bytes beyond them, from offset memN; tail the last of
	// them, not yet written to f, which starts at fileN in f.
	f     *os.File
	tail  []byte
	fileN int64
	err   error
}

// New returns an empty spill that holds up to memMax bytes in memory
// before it opens its file in dir (os.TempDir when empty).
func New(dir string, memMax int64) *Spill {
	return &Spill{dir: dir, memMax: max(memMax, 0)}
}

// Len is the number of bytes appended.
func (s *Spill) Len() int64 { return s.memN + s.fileN + int64(len(s.tail)) }

// Err is the first error of Append: the file could not be made or
// written. Bytes appended after it are lost, and ReadAt fails for them.
func (s *Spill) Err() error { return s.err }

// Append adds b and returns the offset it starts at.
func (s *Spill) Append(b []byte) int64 {
	off := s.Len()
	for len(b) > 0 && s.memN < s.memMax {
		k := int(s.memN / blockSize)
		if k == len(s.mem) {
			s.mem = append(s.mem, make([]byte, 0, blockSize))
		}
		n := min(len(b), blockSize-len(s.mem[k]), int(s.memMax-s.memN))
		s.mem[k] = append(s.mem[k], b[:n]...)
		s.memN += int64(n)
		b = b[n:]
	}
	for len(b) > 0 {
		if s.tail == nil {
			s.tail = make([]byte, 0, blockSize)
		}
		n := min(len(b), blockSize-len(s.tail))
		s.tail = append(s.tail, b[:n]...)
		b = b[n:]
		if len(s.tail) == blockSize {
			s.flush()
		}
	}
	return off
}

// flush writes the tail to the file, making the file first.
func (s *Spill) flush() {
	if s.err == nil && s.f == nil {
		f, err := os.CreateTemp(s.dir, "audit-spill-*")
		if err != nil {
			s.err = fmt.Errorf("spill: %w", err)
		} else {
			s.f = f
			// Unlinked at once: the data lives while the file is open.
			// Where an open file cannot be removed it is at Close.
			os.Remove(f.Name())
		}
	}
	if s.err == nil {
		if _, err := s.f.WriteAt(s.tail, s.fileN); err != nil {
			s.err = fmt.Errorf("spill: write %s: %w", s.f.Name(), err)
		}
	}
	s.fileN += int64(len(s.tail))
	s.tail = s.tail[:0]
}

// ReadAt reads len(p) bytes at off, which must have been appended.
func (s *Spill) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > s.Len() {
		return 0, fmt.Errorf("spill: read %d bytes at %d of %d: %w", len(p), off, s.Len(), io.ErrUnexpectedEOF)
	}
	n := 0
	for n < len(p) && off < s.memN {
		blk := s.mem[off/blockSize][off%blockSize:]
		c := copy(p[n:], blk)
		n += c
		off += int64(c)
	}
	if n == len(p) {
		return n, nil
	}
	off -= s.memN
	if off < s.fileN {
		if s.f == nil || s.err != nil {
			return n, errors.Join(errors.New("spill: bytes lost"), s.err)
		}
		c, err := s.f.ReadAt(p[n:min(len(p), n+int(s.fileN-off))], off)
		n += c
		off += int64(c)
		if err != nil {
			return n, fmt.Errorf("spill: read %s: %w", s.f.Name(), err)
		}
		if n == len(p) {
			return n, nil
		}
	}
	n += copy(p[n:], s.tail[off-s.fileN:])
	return n, nil
}

// Close drops what the spill holds and removes its file.
func (s *Spill) Close() error {
	s.mem, s.tail, s.memN, s.fileN = nil, nil, 0, 0
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	os.Remove(s.f.Name())
	s.f = nil
	return err
}
