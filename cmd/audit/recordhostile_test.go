package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/backoff-audit/audit/internal/testutil"
)

// runningServer runs `audit server` with args in process until the test
// ends, and waits for it to print its ports.
func runningServer(t *testing.T, args ...string) *testutil.SyncBuffer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	var out, errOut testutil.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"server", "--control_port=0", "--retry_port=0"}, args...), &out, &errOut)
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != exitOK {
			t.Errorf("the first server exited %d: %s", code, errOut.String())
		}
	})
	for !strings.Contains(out.String(), "retry port") {
		select {
		case code := <-done:
			t.Fatalf("the server exited %d: %s", code, errOut.String())
		case <-ctx.Done():
			t.Fatal("the server printed no ports")
		case <-time.After(5 * time.Millisecond):
		}
	}
	return &errOut
}

// Two servers cannot share one record: the second fails at start, naming
// the file and the first's pid, and the record holds the first's events
// only.
func TestRecordSharedByTwoServers(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "run.jsonl")
	runningServer(t, "--record", rec)
	code, stdout, stderr := runAudit(t, "server", "--control_port=0", "--retry_port=0", "--record", rec)
	want := fmt.Sprintf("record file %s is locked by process %d", rec, os.Getpid())
	if code != exitUsage || !strings.Contains(stderr, want) || stdout != "" {
		t.Errorf("a second server on the record: exit %d, stdout %q, stderr %q; want %d, no ports, and %q", code, stdout, stderr, exitUsage, want)
	}
}

// A server restarted on a record whose last line a killed server tore
// ends that line with a newline before appending, and logs it: its own
// lines start lines of their own.
func TestRecordTornLineEnded(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "run.jsonl")
	b, err := os.ReadFile("../../testdata/real-grpc-go.record.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	torn := append(b, `{"event":"accept","time":"2026-11-29T19:50:2`...)
	if err := os.WriteFile(rec, torn, 0o644); err != nil {
		t.Fatal(err)
	}
	log := runningServer(t, "--record", rec)
	if got, _ := os.ReadFile(rec); string(got) != string(torn)+"\n" {
		t.Errorf("the record ends %q; want the torn line ended with a newline", got[max(0, len(got)-60):])
	}
	if want := fmt.Sprintf("ended it with a newline before appending; readers skip the torn line\" record=%s offset=%d", rec, len(torn)); !strings.Contains(log.String(), want) {
		t.Errorf("the log lacks %q:\n%s", want, log.String())
	}
}
