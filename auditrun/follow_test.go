package auditrun

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/session"
	"github.com/google/go-cmp/cmp"
)

// The record follower notices a file truncated or replaced under it and
// reads it again from its start; it never buffers an endless line.
func TestTailRecordReopens(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "run.jsonl")
	start := func(n int, port uint16) []byte {
		var b bytes.Buffer
		p := backoff.DefaultPolicy()
		session.WriteRecordEvent(&b, session.RecordEvent{Event: session.EventStart, Time: time.Now(), Session: n,
			Peer: netip.MustParseAddrPort("127.0.0.1:40000"), RetryPort: port,
			Params: &session.SessionParams{Policy: p}})
		return b.Bytes()
	}
	if err := os.WriteFile(path, start(1, 1), 0o644); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []uint16
	var warnings []string
	push := func(e session.RecordEvent) { mu.Lock(); got = append(got, e.RetryPort); mu.Unlock() }
	warn := func(s string) { mu.Lock(); warnings = append(warnings, s); mu.Unlock() }
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- tailRecord(ctx, path, push, warn) }()
	waitUntil := func(what string, n int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			mu.Lock()
			ok := len(got) >= n
			mu.Unlock()
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("no event after %s in 10 s", what)
			}
		}
	}
	waitUntil("the first read", 1)
	// Truncated, then a new server run writes its first session.
	if err := os.WriteFile(path, start(1, 2)[:0], 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * recordPoll)
	if err := os.WriteFile(path, start(1, 2), 0o644); err != nil {
		t.Fatal(err)
	}
	waitUntil("truncation", 2)
	// Rotated: a new file takes the name.
	if err := os.WriteFile(path+".new", start(1, 3), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
	waitUntil("rotation", 3)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("tailRecord: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(got) != "[1 2 3]" {
		t.Errorf("retry ports of the Starts read: %v; want [1 2 3]", got)
	}
	if len(warnings) != 2 || !strings.Contains(warnings[0], "truncated") || !strings.Contains(warnings[1], "replaced") {
		t.Errorf("warnings %q; want one for the truncation, one for the replacement", warnings)
	}

	// An endless line is an error naming where it starts.
	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := tailRecord(ctx, "/dev/zero", push, warn)
	if err == nil || !strings.Contains(err.Error(), "line 1 at offset 0 is longer than") {
		t.Errorf("tailRecord(/dev/zero) = %v; want a line-length error", err)
	}
}

// The record follower hands on every session written after it first read
// the file, a session that starts and ends between two of its reads
// included, and of what the file held then only the session still open.
func TestTailRecordFollowsNewSessions(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	peer := netip.MustParseAddrPort("127.0.0.1:40000")
	ev := func(kind session.EventKind, n int) session.RecordEvent {
		e := session.RecordEvent{Event: kind, Time: at, Session: n, Peer: peer}
		switch kind {
		case session.EventStart:
			e.Params = &session.SessionParams{Policy: backoff.DefaultPolicy()}
		case session.EventStop:
			e.End = &session.SessionEnd{Cause: session.CauseStop, Verdict: backoff.Passed, Passed: true, BackoffMS: []int32{}}
		}
		return e
	}
	lines := func(events ...session.RecordEvent) []byte {
		var b bytes.Buffer
		for _, e := range events {
			if err := session.WriteRecordEvent(&b, e); err != nil {
				t.Fatal(err)
			}
		}
		return b.Bytes()
	}
	start, accept, stop := session.EventStart, session.EventAccept, session.EventStop
	tests := []struct {
		name string
		// before is the file when the follower starts (nil: no file),
		// after what is appended at once, between two of its reads.
		before, after []byte
		want          []string
	}{
		{
			name:  "a whole session into a missing file",
			after: lines(ev(start, 1), ev(accept, 1), ev(stop, 1)),
			want:  []string{"start 1", "accept 1", "stop 1"},
		},
		{
			name:   "a whole session into an empty file",
			before: []byte{},
			after:  lines(ev(start, 1), ev(accept, 1), ev(stop, 1)),
			want:   []string{"start 1", "accept 1", "stop 1"},
		},
		{
			name:   "after a session that had ended",
			before: lines(ev(start, 1), ev(accept, 1), ev(stop, 1)),
			after:  lines(ev(start, 2), ev(stop, 2)),
			want:   []string{"start 2", "stop 2"},
		},
		{
			name:   "the end of a session still open",
			before: lines(ev(start, 1), ev(stop, 1), ev(start, 2), ev(accept, 2)),
			after:  lines(ev(accept, 2), ev(stop, 2)),
			want:   []string{"start 2", "accept 2", "accept 2", "stop 2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "run.jsonl")
			if tt.before != nil {
				if err := os.WriteFile(path, tt.before, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var mu sync.Mutex
			var got []string
			push := func(e session.RecordEvent) {
				mu.Lock()
				got = append(got, fmt.Sprintf("%s %d", e.Event, e.Session))
				mu.Unlock()
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- tailRecord(ctx, path, push, func(string) {}) }()
			time.Sleep(3 * recordPoll) // its first read, and one more
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write(tt.after); err != nil {
				t.Fatal(err)
			}
			f.Close()
			cancel() // its last read takes what was appended
			if err := <-done; err != nil {
				t.Fatalf("tailRecord: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("events followed (-want +got):\n%s", diff)
			}
		})
	}
}

// A torn line in the record followed (a server killed mid-line, then
// restarted) is skipped with a warning; the events around it are read.
func TestTailRecordTornLine(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "run.jsonl")
	var b bytes.Buffer
	for n := 1; n <= 2; n++ {
		session.WriteRecordEvent(&b, session.RecordEvent{Event: session.EventStart, Time: time.Now(), Session: n,
			Peer: netip.MustParseAddrPort("127.0.0.1:40000"), RetryPort: uint16(n),
			Params: &session.SessionParams{Policy: backoff.DefaultPolicy()}})
		if n == 1 {
			b.WriteString(`{"event":"accept","time":"2025-` + "\n")
		}
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var got []uint16
	var warnings []string
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // one read, then the end
	err := tailRecord(ctx, path, func(e session.RecordEvent) { got = append(got, e.RetryPort) }, func(s string) { warnings = append(warnings, s) })
	if err != nil {
		t.Fatalf("tailRecord: %v", err)
	}
	// The follower keeps the last open session of what was there: the
	// second; the torn line is named.
	if fmt.Sprint(got) != "[2]" || len(warnings) != 1 || !strings.Contains(warnings[0], "record line 2 at offset") || !strings.Contains(warnings[0], "torn line") {
		t.Errorf("events %v, warnings %q; want session 2's start and one warning naming the torn line", got, warnings)
	}
}
