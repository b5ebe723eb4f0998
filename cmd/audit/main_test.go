package main

// The tests of the command line: flags and their aliases, help, exit
// codes, a library's field error spelt as a flag, and the wiring of
// outputsApart and of signals. What a verb judges is its package's to
// test (auditrun, flows, server, interop). Most run the command in
// process (run, the function main exits with); those that send a signal
// run the binary TestMain builds.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/backoff-audit/audit/internal/testutil"
)

// auditBin is the audit binary TestMain builds once.
var auditBin string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "audit-cmd-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "build audit: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	auditBin = filepath.Join(dir, "audit")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", auditBin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// fixture is a file of the repository's testdata/, written by
// capture/internal/gen.
func fixture(name string) string { return filepath.Join("..", "..", "testdata", name) }

// runAudit runs the command line in process through run and returns the
// exit code and what the command printed.
func runAudit(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code = run(ctx, args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// printedPorts are the lines `audit server` prints on start.
var printedPorts = regexp.MustCompile(`control port \S+:(\d+)\nretry port \S+:(\d+)\n`)

// runningServer runs `audit server` on free ports with args in process
// until the test ends, which must find it exit 0, and returns the ports it
// printed.
func runningServer(t *testing.T, args ...string) (control, retry string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	var out, errOut testutil.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"server", "--control_port=0", "--retry_port=0"}, args...), &out, &errOut)
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != exitOK {
			t.Errorf("audit server exited %d on interrupt: %s", code, errOut.String())
		}
	})
	for !printedPorts.MatchString(out.String()) {
		select {
		case code := <-done:
			done <- code // for the cleanup
			t.Fatalf("audit server exited %d: %s", code, errOut.String())
		case <-ctx.Done():
			t.Fatal("audit server printed no ports")
		case <-time.After(5 * time.Millisecond):
		}
	}
	m := printedPorts.FindStringSubmatch(out.String())
	return m[1], m[2]
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

// ports are the client flags that name a server's ports on 127.0.0.1.
func ports(control, retry string) []string {
	return []string{"--server_host=127.0.0.1", "--server_control_port=" + control, "--server_retry_port=" + retry}
}
