// Package testutil holds the helpers the module's tests share. Only _test.go
// files import it (cmd/audit's TestImportGraph checks that no package's own
// code does), and it imports none of the module's packages, so any test may
// use it without pulling in capture, server or libpcap.
package testutil

import (
	"bytes"
	"encoding/json"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// ClosedPort returns a TCP port on 127.0.0.1 that nothing listens on: it
// was free a moment ago, when ClosedPort listened on it and closed the
// listener again. A connection to it is refused (unless something else
// takes the port in the meantime).
func ClosedPort(tb testing.TB) uint16 {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("listen: %v", err)
	}
	defer ln.Close()
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}

// WaitFor polls cond every 20 ms until it holds, and fails the test after
// 20 s, or as soon as exited yields: the process whose output cond reads
// has ended (its error is put back for the caller). what names what is
// awaited.
func WaitFor(tb testing.TB, what string, exited chan error, cond func() bool) {
	tb.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-exited:
			exited <- err
			tb.Fatalf("the process ended (%v) while waiting for %s", err, what)
		default:
		}
		if time.Now().After(deadline) {
			tb.Fatalf("no %s in 20 s", what)
		}
	}
}

// FIFO makes a FIFO at path and opens it for reading and writing, which
// Linux allows without waiting: the FIFO has a reader and a writer at once,
// so that a test's other opening of it does not wait either. The FIFO is
// closed when the test ends.
func FIFO(tb testing.TB, path string) *os.File {
	tb.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		tb.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() })
	return f
}

// SyncBuffer is a bytes.Buffer that one goroutine may write while another
// reads it: a server's record or log, a process's output, a capture file.
// The zero value is ready for use.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// WriteString appends s.
func (b *SyncBuffer) WriteString(s string) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.WriteString(s)
}

// String returns what was written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Bytes returns a copy of what was written so far.
func (b *SyncBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.buf.Bytes())
}

// Golden compares got with the golden file at path and reports the
// difference as a test error. With update set (the test's -update flag) it
// first rewrites the file with got, so that a reviewed change of output is
// one command away.
func Golden(tb testing.TB, path string, got []byte, update bool) {
	tb.Helper()
	if update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("%v (go test -update writes it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		tb.Errorf("%s (-want +got):\n%s", path, diff)
	}
}

// JSONPaths returns the member paths of the JSON document doc (one object,
// or several, one a line, as JSON Lines), sorted, each once: "peers[].peer"
// for member peer of any element of the array peers. They are what a
// program reading the document may rely on.
func JSONPaths(tb testing.TB, doc []byte) []string {
	tb.Helper()
	seen := map[string]bool{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, m := range v {
				p := k
				if prefix != "" {
					p = prefix + "." + k
				}
				seen[p] = true
				walk(p, m)
			}
		case []any:
			for _, e := range v {
				walk(prefix+"[]", e)
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	for dec.More() {
		var v any
		if err := dec.Decode(&v); err != nil {
			tb.Fatalf("not JSON: %v", err)
		}
		walk("", v)
	}
	return slices.Sorted(maps.Keys(seen))
}

// RequirePaths fails tb for each path of the golden file at path that
// JSONPaths(doc) lacks: a document may gain members, never lose one. With
// update, it writes doc's paths to the file instead.
func RequirePaths(tb testing.TB, path string, doc []byte, update bool) {
	tb.Helper()
	got := JSONPaths(tb, doc)
	if update {
		if err := os.WriteFile(path, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
			tb.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	for _, p := range strings.Fields(string(want)) {
		if _, ok := slices.BinarySearch(got, p); !ok {
			tb.Errorf("%s: member %s is gone from the document", path, p)
		}
	}
}
