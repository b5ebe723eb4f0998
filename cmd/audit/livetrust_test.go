package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/backoff-audit/audit/analyze"
	"github.com/backoff-audit/audit/pb"
)

// A failed run leaves the file the user named as it was: --write replaces
// it only once the capture is open.
func TestLiveWriteKeepsFileOnError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	precious := filepath.Join(dir, "precious.pcap")
	if err := os.WriteFile(precious, []byte("what the user had"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg := liveConfig{Iface: "nonexist0", Write: precious, Server: serverConfig("127.0.0.1:0", "127.0.0.1:0")}
	err := runLive(ctx, cfg, io.Discard, io.Discard)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitUsage {
		t.Fatalf("runLive = %v; want a usage error", err)
	}
	if b, _ := os.ReadFile(precious); string(b) != "what the user had" {
		t.Errorf("--write file after a failed start holds %q; want it untouched", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d files in the folder; want only the user's (no temporary file left)", len(ents))
	}
}

// The record follower notices a file truncated or replaced under it and
// reads it again from its start; it never buffers an endless line.
func TestTailRecordReopens(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "run.jsonl")
	start := func(n int, port uint16) []byte {
		var b bytes.Buffer
		p := analyze.DefaultPolicy()
		analyze.WriteRecordEvent(&b, analyze.RecordEvent{Event: analyze.EventStart, Time: time.Now(), Session: n,
			Peer: netip.MustParseAddrPort("127.0.0.1:40000"), RetryPort: port,
			Params: &analyze.SessionParams{Policy: p}})
		return b.Bytes()
	}
	if err := os.WriteFile(path, start(1, 1), 0o644); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []uint16
	var warnings []string
	push := func(e analyze.RecordEvent) { mu.Lock(); got = append(got, e.RetryPort); mu.Unlock() }
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

// A capture that fails (here --write on a full disk) ends the open session
// at once with cause "capture error", and the accepts after it are
// explained as after the capture stopped, not as drops.
func TestLiveCaptureErrorEndsSession(t *testing.T) {
	t.Parallel()
	requireCapture(t)
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("SKIPPED, NOT RUN: a full disk needs a small tmpfs: mount: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	r := startLive(t, liveConfig{Write: filepath.Join(dir, "full.pcap")})

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cc, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", r.control), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if _, err := pb.NewReconnectServiceClient(cc).Start(ctx, &pb.ReconnectParams{MaxReconnectBackoffMs: liveMaxMS}); err != nil {
		t.Fatalf("Start: %v", err)
	}
	// 16 KiB hold about 90 SYNs on lo: connect until the capture fails.
	addr := fmt.Sprintf("127.0.0.1:%d", r.retry)
	var runErr error
	for i := 0; i < 5000 && runErr == nil; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
		}
		select {
		case runErr = <-r.done:
			r.done <- runErr
		default:
		}
	}
	if runErr == nil {
		runErr = r.stop(t)
	}
	if runErr == nil || !strings.Contains(runErr.Error(), "no space left on device") {
		t.Fatalf("runLive = %v; want the write error", runErr)
	}
	reps, _ := r.reports(t, 1)
	rep := reps[0]
	if !strings.HasPrefix(rep.Session.Cause, "capture error") || !strings.Contains(rep.Session.Cause, "no space left") {
		t.Errorf("session cause %q; want the capture error", rep.Session.Cause)
	}
	if rep.CrossCheck == nil {
		t.Fatal("no cross-check")
	}
	for _, l := range rep.CrossCheck.ServerOnly {
		if !strings.Contains(l.Detail, "after the capture stopped") {
			t.Errorf("server only %d: %s (%s); want it explained by the capture's end", l.SrcPort, l.Reason, l.Detail)
			break
		}
	}
	if !strings.Contains(r.errOut.String(), "audit live: capture error") {
		t.Errorf("stderr does not say the capture failed when it did:\n%s", r.errOut)
	}
}
