package auditrun

// Ctrl-C while AuditFiles reads (the context `audit pcap` ends on SIGINT):
// a pipe that never ends, and reads that have had no byte yet.

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/internal/testutil"
)

// interruptedRun runs AuditFiles on files, reading stdin for "-", and
// ends its context once ready returns (after it, a moment for the read to
// reach where it waits).
func interruptedRun(t *testing.T, files []string, stdin *os.File, ready func()) filesRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errOut testutil.SyncBuffer
	ran := make(chan result, 1)
	go func() {
		o, err := AuditFiles(ctx, files, FilesConfig{Policy: backoff.DefaultPolicy(), Stdin: stdin}, &out, &errOut)
		ran <- result{o, err}
	}()
	ready()
	cancel()
	select {
	case r := <-ran:
		return filesRun{result: r, stdout: out.String(), stderr: errOut.String()}
	case <-time.After(10 * time.Second):
		t.Fatalf("AuditFiles did not return 10 s after the interrupt; warnings:\n%s", &errOut)
		return filesRun{}
	}
}

// A pipe that never ends (the real grpc-go capture's records written
// again and again, then silence): the interrupt ends the read without
// waiting for the writer, the report covers every record read, a warning
// says where the read stopped, and the verdict is the capture's (failed).
func TestPcapStdinInterrupted(t *testing.T) {
	data, err := os.ReadFile(fixture("real-grpc-go.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	run := interruptedRun(t, []string{"-"}, r, func() {
		w.Write(data[:24])
		for range 20 { // 20 copies, then silence: the pipe stays open
			w.Write(data[24:])
		}
		// Everything came when the pipe holds nothing; what was read is
		// parsed before the interruption counts.
		for i := 0; unread(t, w) > 0; i++ {
			if i == 2000 {
				t.Fatal("AuditFiles read nothing in 20 s")
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	if run.verdict() != runFailed {
		t.Errorf("%s (%v), want %s; warnings:\n%s", run.verdict(), run.err, runFailed, run.stderr)
	}
	if want := "audit: warning: standard input: read interrupted at offset " + strconv.Itoa(24+20*(len(data)-24)); !strings.Contains(run.stderr, want) {
		t.Errorf("warnings lack %q (the end of the 20th copy):\n%s", want, run.stderr)
	}
	if want := ": 100 packets in 1 file, 100 SYNs, 5 attempts, 95 retransmits"; !strings.Contains(run.stdout, want) {
		t.Errorf("the report lacks %q (every record read):\n%s", want, run.stdout)
	}
}

// unread is how many bytes wait in the pipe whose write end is w.
func unread(t *testing.T, w *os.File) int {
	var n int32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, w.Fd(), syscall.TIOCINQ, uintptr(unsafe.Pointer(&n))); errno != 0 {
		t.Fatalf("FIONREAD: %v", errno)
	}
	return int(n)
}

// The interrupt stops a read that has had no byte yet: standard input or
// a FIFO whose writer is silent, or a FIFO no writer has opened. Each
// warns of a read interrupted at offset 0, and nothing is judged.
func TestPcapInterruptedBeforeAnyByte(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name   string
		fifo   bool // read a FIFO, else standard input
		writer bool // the FIFO has a writer that never writes
	}{
		{name: "standard input"},
		{name: "FIFO with a silent writer", fifo: true, writer: true},
		{name: "FIFO without writer", fifo: true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			defer w.Close() // standard input: open, silent
			input, name := "-", "standard input"
			if tt.fifo {
				input = filepath.Join(dir, "fifo"+strconv.Itoa(i))
				name = input
				if tt.writer {
					testutil.FIFO(t, input) // a writer that never writes
				} else if err := syscall.Mkfifo(input, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			// Time for the read to reach where it waits: the interrupt
			// must find it there, not before it starts.
			run := interruptedRun(t, []string{input}, r, func() { time.Sleep(500 * time.Millisecond) })
			want := "audit: warning: " + name + ": read interrupted at offset 0: what follows was not read"
			if run.verdict() != runError || !strings.Contains(run.stderr, want) {
				t.Errorf("%s (%v), warnings:\n%s\nwant %s and %q", run.verdict(), run.err, run.stderr, runError, want)
			}
		})
	}
}
