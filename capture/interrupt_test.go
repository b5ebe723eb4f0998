package capture

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/internal/testutil"
)

// synRecords returns n pcap records of SYNs from 10.0.0.1 port 1000+i to
// 10.0.0.2:80, one a second.
func synRecords(n int) []pcapRecord {
	recs := make([]pcapRecord, n)
	for i := range recs {
		recs[i] = pcapRecord{sec: uint32(100 + i), data: ethFrame(0x0800, ipv4Packet("10.0.0.1", "10.0.0.2", 6, synSeg(uint16(1000+i), 80, uint32(i))))}
	}
	return recs
}

// TestReadInterruptedPipe: a pipe whose writer has written a header, 7
// records and half an eighth, and then waits: closing Options.Done (at
// the seventh SYN) ends the read without waiting for the writer, with the
// 7 SYNs handed on, a warning naming the offset of the eighth record, no
// error, and not truncated.
func TestReadInterruptedPipe(t *testing.T) {
	data := pcapFile(binary.LittleEndian, false, 1, synRecords(7)...)
	// Half of an eighth record follows: the read stops before it.
	eighth := pcapFile(binary.LittleEndian, false, 1, synRecords(8)...)[len(data):]
	r, w := io.Pipe()
	defer w.Close()
	done := make(chan struct{})
	go func() {
		w.Write(data)
		w.Write(eighth[:len(eighth)/2])
		// The writer writes no more until the test ends.
	}()
	var syns []attempt.SYN
	finished := make(chan struct{})
	var st attempt.FileInfo
	var err error
	go func() {
		defer close(finished)
		st, err = ReadFile(Stdin, Options{Port: 80, Done: done, Stdin: r}, func(s attempt.SYN) {
			if syns = append(syns, s); len(syns) == 7 {
				close(done)
			}
		})
	}()
	select {
	case <-finished:
	case <-time.After(10 * time.Second):
		t.Fatal("ReadFile did not return after Done was closed")
	}
	if err != nil {
		t.Fatalf("ReadFile: %v", err)
	}
	if len(syns) != 7 || st.SYNs != 7 || st.Packets != 7 {
		t.Errorf("got %d SYNs (FileInfo: %d SYNs, %d packets); want the 7 written", len(syns), st.SYNs, st.Packets)
	}
	want := fmt.Sprintf("standard input: read interrupted at offset %d: what follows was not read", len(data))
	if len(st.Warnings) != 1 || st.Warnings[0] != want {
		t.Errorf("warnings %q; want [%q]", st.Warnings, want)
	}
	if st.Truncated || st.Path != Stdin {
		t.Errorf("Truncated %v, Path %q; want false, %q", st.Truncated, st.Path, Stdin)
	}
}

// TestReadFilesInterrupted: Done closed before the read: the first file
// reads nothing and says so, and the later files are named as not read.
func TestReadFilesInterrupted(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for i := range 3 {
		p := filepath.Join(dir, fmt.Sprintf("f%d.pcap", i))
		if err := os.WriteFile(p, pcapFile(binary.LittleEndian, false, 1, synRecords(3)...), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	done := make(chan struct{})
	close(done)
	pt, info, err := ReadFiles(paths, Options{Done: done}, io.Discard)
	if err != nil {
		t.Fatalf("ReadFiles: %v", err)
	}
	if len(info.Files) != 1 || len(pt.Ports()) != 0 {
		t.Fatalf("read %d files, ports %v; want the first only, no SYN", len(info.Files), pt.Ports())
	}
	want := []string{
		paths[0] + ": read interrupted at offset 0: what follows was not read",
		paths[0] + ": read interrupted: 2 later files not read: " + strings.Join(paths[1:], ", "),
	}
	if got := info.Warnings(); !slices.Equal(got, want) {
		t.Errorf("warnings\n%q\nwant\n%q", got, want)
	}
}

// TestReadStdin: "-" reads Options.Stdin as a file, named standard input
// in messages and "-" in FileInfo.
func TestReadStdin(t *testing.T) {
	data := pcapFile(binary.LittleEndian, false, 1, synRecords(4)...)
	var n int
	st, err := ReadFile(Stdin, Options{Port: 80, Stdin: bytes.NewReader(data[:len(data)-3])}, func(attempt.SYN) { n++ })
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 || st.Path != Stdin || !st.Truncated || len(st.Warnings) != 1 || !strings.HasPrefix(st.Warnings[0], "standard input: record at offset ") {
		t.Errorf("%d SYNs, path %q, truncated %v, warnings %q; want 3, -, true, one naming standard input", n, st.Path, st.Truncated, st.Warnings)
	}
	_, err = ReadFile(Stdin, Options{Stdin: strings.NewReader("not a capture")}, func(attempt.SYN) {})
	if err == nil || !strings.HasPrefix(err.Error(), "read standard input: unknown file format") {
		t.Errorf("error %v; want one naming standard input", err)
	}
}

// Done stops a read that has had no byte yet, at once: standard input or
// a FIFO whose writer is silent, a FIFO no writer has opened. The read
// ends with the warning of an interrupted read at offset 0, no error.
func TestReadInterruptedBeforeAnyByte(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		// open returns the path to read and the standard input.
		open func(t *testing.T) (string, io.Reader)
	}{
		{name: "standard input, writer silent", open: func(t *testing.T) (string, io.Reader) {
			r, w := io.Pipe()
			t.Cleanup(func() { w.Close() })
			return Stdin, r
		}},
		{name: "FIFO, writer silent", open: func(t *testing.T) (string, io.Reader) {
			fifo := filepath.Join(dir, "silent")
			testutil.FIFO(t, fifo) // a writer that never writes
			return fifo, nil
		}},
		{name: "FIFO, no writer", open: func(t *testing.T) (string, io.Reader) {
			fifo := filepath.Join(dir, "nowriter")
			if err := syscall.Mkfifo(fifo, 0o644); err != nil {
				t.Fatal(err)
			}
			// Let the abandoned open end when the test does.
			t.Cleanup(func() {
				if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					w.Close()
				}
			})
			return fifo, nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path, stdin := tt.open(t)
			done := make(chan struct{})
			type result struct {
				st  attempt.FileInfo
				err error
			}
			finished := make(chan result, 1)
			go func() {
				st, err := ReadFile(path, Options{Port: 80, Done: done, Stdin: stdin}, func(attempt.SYN) {})
				finished <- result{st, err}
			}()
			time.Sleep(50 * time.Millisecond) // the read is waiting by now; it is stopped either way
			close(done)
			var r result
			select {
			case r = <-finished:
			case <-time.After(10 * time.Second):
				t.Fatal("ReadFile did not return after Done was closed")
			}
			name := path
			if path == Stdin {
				name = "standard input"
			}
			want := []string{name + ": read interrupted at offset 0: what follows was not read"}
			if r.err != nil || !slices.Equal(r.st.Warnings, want) || r.st.Truncated {
				t.Errorf("ReadFile = %v, warnings %q, truncated %v; want no error, %q, not truncated", r.err, r.st.Warnings, r.st.Truncated, want)
			}
		})
	}
}
