package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/backoff-audit/audit/internal/testutil"
)

// TestPcapStdinInterrupt: `audit pcap -` on a pipe that never ends (the
// real grpc-go capture's records written again and again): SIGINT makes
// the binary report every record read, warn where the read stopped, and
// exit by the verdict (1: the capture fails), without waiting for the
// writer.
func TestPcapStdinInterrupt(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(fixture("real-grpc-go.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, auditBin, "pcap", "-")
	cmd.WaitDelay = 5 * time.Second
	r, stdin, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	cmd.Stdin = r
	stdout, stderr := &testutil.SyncBuffer{}, &testutil.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stdin.Write(data[:24])
	for range 20 { // 20 copies, then silence: the pipe stays open
		stdin.Write(data[24:])
		time.Sleep(20 * time.Millisecond)
	}
	// The binary has read all that came when the pipe holds nothing;
	// what it read is parsed before the interruption counts.
	for i := 0; unread(t, stdin) > 0; i++ {
		if i == 2000 {
			t.Fatalf("the binary read nothing in 20 s; stderr:\n%s", stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	signalled := time.Now()
	var code int
	select {
	case err := <-exited:
		t.Logf("exited %v after SIGINT", time.Since(signalled).Round(100*time.Microsecond))
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no exit 10 s after SIGINT; stderr:\n%s", stderr)
	}
	if code != exitFail {
		t.Errorf("exit %d, want %d; stderr:\n%s", code, exitFail, stderr)
	}
	if want := "audit: warning: standard input: read interrupted at offset " + strconv.Itoa(24+20*(len(data)-24)); !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr lacks %q (the end of the 20th copy):\n%s", want, stderr)
	}
	if want := ": 100 packets in 1 file, 100 SYNs, 5 attempts, 95 retransmits"; !strings.Contains(stdout.String(), want) {
		t.Errorf("stdout lacks %q (every record read):\n%s", want, stdout)
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

// One SIGINT stops a read that has had no byte yet: `audit pcap` and
// `audit h2` on standard input or a FIFO whose writer is silent, or a
// FIFO no writer has opened. Each exits with the warning of a read
// interrupted at offset 0, by what it had to judge: nothing.
func TestInterruptBeforeAnyByte(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		name   string
		verb   string
		fifo   bool // read a FIFO, else standard input
		writer bool // the FIFO has a writer that never writes
		code   int
	}{
		{name: "pcap, standard input", verb: "pcap", code: exitUsage},
		{name: "pcap, FIFO with a silent writer", verb: "pcap", fifo: true, writer: true, code: exitUsage},
		{name: "pcap, FIFO without writer", verb: "pcap", fifo: true, code: exitUsage},
		{name: "h2, standard input", verb: "h2", code: exitUsage},
		{name: "h2, FIFO without writer", verb: "h2", fifo: true, code: exitUsage},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			input, name := "-", "standard input"
			if tt.fifo {
				input = filepath.Join(dir, fmt.Sprintf("fifo%d", i))
				name = input
				if tt.writer {
					testutil.FIFO(t, input) // a writer that never writes
				} else if err := syscall.Mkfifo(input, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.CommandContext(ctx, auditBin, tt.verb, input)
			cmd.WaitDelay = 5 * time.Second
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close() // standard input: open, silent
			cmd.Stdin = r
			stderr := &testutil.SyncBuffer{}
			cmd.Stderr = stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			r.Close()
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			// Time for the binary to reach its read, which has no byte to
			// give: the signal must find it there, not before it starts.
			time.Sleep(500 * time.Millisecond)
			if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			code := exitAfterSignal(t, exited, stderr)
			want := "audit: warning: " + name + ": read interrupted at offset 0: what follows was not read"
			if code != tt.code || !strings.Contains(stderr.String(), want) {
				t.Errorf("exit %d, stderr:\n%s\nwant %d and %q", code, stderr, tt.code, want)
			}
		})
	}
}

// exitAfterSignal returns the exit code of a process signalled to end,
// whose Wait's error exited gives; the test fails when it has not exited
// 10 s after the signal.
func exitAfterSignal(t *testing.T, exited <-chan error, stderr fmt.Stringer) int {
	t.Helper()
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(10 * time.Second):
		t.Fatalf("no exit 10 s after one signal; stderr:\n%s", stderr)
		return -1
	}
}
