// Package infile reads the files audit is given so that no input can hold
// it: a small file (a certificate, a key) is read up to a bound, never
// whole whatever it is (/dev/zero); a FIFO, a pipe or a terminal is opened
// and read so that Ctrl-C stops it at once, whether or not a byte came.
//
// It imports only the standard library.
package infile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// MaxSmall bounds a certificate, key or CA file: real ones are a few KiB.
const MaxSmall = 1 << 20

// ReadSmall reads the whole file at path, which must hold at most MaxSmall
// bytes; a longer one (a device that never ends, a capture given by
// mistake) is an error, read no further than the bound. The caller names
// the flag and the path.
func ReadSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxSmall+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxSmall {
		return nil, fmt.Errorf("more than %d bytes: not a certificate or key file", MaxSmall)
	}
	return b, nil
}

// handOverGrace is how long an interrupted Read waits for the bytes of a
// read of r that has just returned: far longer than handing them over
// takes, far shorter than a person notices. A variable for tests.
var handOverGrace = 20 * time.Millisecond

// ErrInterrupted is the error of a read or an open that done stopped.
var ErrInterrupted = errors.New("read interrupted")

// Open opens path for reading, or returns ErrInterrupted as soon as done
// is closed first: opening a FIFO waits for its writer, which may never
// come. A file opened after that is closed. A nil done never closes.
func Open(path string, done <-chan struct{}) (*os.File, error) {
	if done == nil {
		return os.Open(path)
	}
	type opened struct {
		f   *os.File
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		f, err := os.Open(path)
		ch <- opened{f, err}
	}()
	select {
	case o := <-ch:
		return o.f, o.err
	case <-done:
		go func() {
			if o := <-ch; o.f != nil {
				o.f.Close()
			}
		}()
		return nil, ErrInterrupted
	}
}

// NewReader returns a reader of r that returns ErrInterrupted as soon as
// done is closed, even while a Read of r waits (a pipe whose writer is
// silent): each Read of r runs in a goroutine of its own, into a buffer of
// the reader's, and is abandoned when done comes first; no Read of r
// follows. For pipes and terminals; a regular file's reads never wait.
func NewReader(r io.Reader, done <-chan struct{}) io.Reader {
	return &stoppable{r: r, done: done, res: make(chan readResult, 1)}
}

type stoppable struct {
	r    io.Reader
	done <-chan struct{}
	buf  []byte
	res  chan readResult
}

type readResult struct {
	n   int
	err error
}

func (s *stoppable) Read(p []byte) (int, error) {
	select {
	case <-s.done:
		return 0, ErrInterrupted
	default:
	}
	if len(s.buf) < len(p) {
		s.buf = make([]byte, len(p))
	}
	go func(b []byte) {
		n, err := s.r.Read(b)
		s.res <- readResult{n, err}
	}(s.buf[:len(p)])
	select {
	case r := <-s.res:
		return copy(p, s.buf[:r.n]), r.err
	case <-s.done:
		// Bytes the Read has already taken from r are not dropped: they
		// left the pipe and exist nowhere else. A Read that returned an
		// instant ago hands them over within the grace.
		t := time.NewTimer(handOverGrace)
		defer t.Stop()
		select {
		case r := <-s.res:
			return copy(p, s.buf[:r.n]), r.err
		case <-t.C:
		}
		// The Read goes on in its goroutine, into s.buf, which is never
		// used again: no Read follows.
		s.buf = nil
		return 0, ErrInterrupted
	}
}
