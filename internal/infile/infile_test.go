package infile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestReadSmall(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, n int) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name, path string
		n          int    // bytes read, when no error
		err        string // in the error; "" for none
	}{
		{name: "small", path: write("small.pem", 3000), n: 3000},
		{name: "the bound exactly", path: write("bound.pem", MaxSmall), n: MaxSmall},
		{name: "a byte more", path: write("more.pem", MaxSmall+1), err: "more than 1048576 bytes: not a certificate or key file"},
		{name: "endless", path: "/dev/zero", err: "more than 1048576 bytes"},
		{name: "missing", path: filepath.Join(dir, "none.pem"), err: "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := ReadSmall(tt.path)
			switch {
			case tt.err == "" && (err != nil || len(b) != tt.n):
				t.Errorf("ReadSmall = %d bytes, %v; want %d", len(b), err, tt.n)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Errorf("ReadSmall: %v; want %q", err, tt.err)
			}
		})
	}
}

// wait returns what ch gives, failing the test after a bound.
func wait[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("no return 10 s after done was closed")
		panic("unreachable")
	}
}

// Open and a Read that wait for a writer end as soon as done is closed;
// before that, they read as usual.
func TestStoppable(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	opened := make(chan error, 1)
	go func() {
		_, err := Open(fifo, done) // no writer: it waits
		opened <- err
	}()
	close(done)
	if err := wait(t, opened); !errors.Is(err, ErrInterrupted) {
		t.Errorf("Open of a FIFO without writer after done: %v; want ErrInterrupted", err)
	}
	// The abandoned open ends once a writer comes.
	if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
		w.Close()
	}

	done = make(chan struct{})
	pr, pw := io.Pipe()
	defer pw.Close()
	r := NewReader(pr, done)
	go pw.Write([]byte("first bytes"))
	b := make([]byte, 64)
	if n, err := r.Read(b); err != nil || string(b[:n]) != "first bytes" {
		t.Fatalf("Read = %q, %v; want the bytes written", b[:n], err)
	}
	read := make(chan error, 1)
	go func() {
		_, err := r.Read(b) // the writer is silent: it waits
		read <- err
	}()
	close(done)
	if err := wait(t, read); !errors.Is(err, ErrInterrupted) {
		t.Errorf("Read after done: %v; want ErrInterrupted", err)
	}
	if _, err := r.Read(b); !errors.Is(err, ErrInterrupted) {
		t.Errorf("a later Read: %v; want ErrInterrupted", err)
	}
}

// closingReader closes done inside its Read, then returns its bytes: the
// interrupt comes while the bytes are on their way.
type closingReader struct {
	done chan struct{}
	data string
}

func (c *closingReader) Read(p []byte) (int, error) {
	close(c.done)
	return copy(p, c.data), nil
}

// Bytes a Read of the pipe has taken when the interrupt comes are handed
// over, not dropped; the Read after them is interrupted. The grace is long
// here, so that a loaded machine's scheduling cannot outlast it.
func TestStoppableKeepsBytesTaken(t *testing.T) {
	defer func(g time.Duration) { handOverGrace = g }(handOverGrace)
	handOverGrace = time.Minute
	for i := range 200 {
		done := make(chan struct{})
		r := NewReader(&closingReader{done: done, data: "taken"}, done)
		b := make([]byte, 16)
		if n, err := r.Read(b); err != nil || string(b[:n]) != "taken" {
			t.Fatalf("run %d: Read = %q, %v; want the bytes taken from the pipe", i, b[:n], err)
		}
		if _, err := r.Read(b); !errors.Is(err, ErrInterrupted) {
			t.Fatalf("run %d: the Read after: %v; want ErrInterrupted", i, err)
		}
	}
}
