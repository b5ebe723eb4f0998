package capture

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/internal/testutil"
)

// TestLiveFates: a capture with the fate filter on lo sees a connection the
// server closes, one the client gives up on, and one refused, and tells
// them apart; the file it writes reads back with the same fates.
func TestLiveFates(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	var file testutil.SyncBuffer
	var mu sync.Mutex
	tr := attempt.NewTracker()
	tr.SetFatesKnown(true)
	l := openLive(t, LiveConfig{Iface: "lo", Port: port, Write: &file, Segments: func(v *attempt.SegmentView) {
		mu.Lock()
		tr.AddSegmentView(v)
		mu.Unlock()
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- l.Run(runCtx, func(s attempt.SYN) {
			mu.Lock()
			tr.Add(s)
			mu.Unlock()
		}, nil)
	}()

	// The server closes the first connection at once, and holds the
	// second, which the client closes after sending its preface.
	hold := make(chan net.Conn, 1)
	go func() {
		for i := 0; ; i++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if i == 0 {
				c.Close()
			} else {
				hold <- c
			}
		}
	}()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, c) // until the server's FIN
	c.Close()
	c, err = d.DialContext(ctx, "tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	held := <-hold
	time.Sleep(50 * time.Millisecond)
	c.Close()
	io.Copy(io.Discard, held) // until the client's FIN
	held.Close()
	ln.Close()
	if c, err := d.DialContext(ctx, "tcp4", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
		c.Close()
		t.Fatal("the closed port accepted")
	}

	want := []backoff.Fate{backoff.FateClosed, backoff.FateAbandoned, backoff.FateRefused}
	fates := func(as []attempt.Attempt) []backoff.Fate {
		var fs []backoff.Fate
		for _, a := range as {
			fs = append(fs, a.Ending.Fate)
		}
		return fs
	}
	var got []attempt.Attempt
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		mu.Lock()
		got = tr.List()
		mu.Unlock()
		if cmp.Equal(want, fates(got)) || time.Now().After(deadline) {
			break
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	l.Close()
	if diff := cmp.Diff(want, fates(got)); diff != "" {
		t.Fatalf("fates (-want +got):\n%s", diff)
	}
	if e := got[1].Ending; e.ClientSent != backoff.PayloadH2Preface || e.ServerSent != "" || e.Duration < 50*time.Millisecond {
		t.Errorf("abandoned attempt: %+v; want the client's preface, nothing from the server, 50 ms or more", e)
	}

	// The written file reads back with the same fates.
	path := filepath.Join(t.TempDir(), "live.pcap")
	if err := os.WriteFile(path, file.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	pt, info, err := ReadFiles([]string{path}, Options{Port: port}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if info.SYNOnly {
		t.Error("the written file holds SYNs only")
	}
	if diff := cmp.Diff(endings(got), endings(pt.Tracker(port).List())); diff != "" {
		t.Errorf("read back (-live +file):\n%s", diff)
	}
}

func endings(as []attempt.Attempt) []backoff.Ending {
	var es []backoff.Ending
	for _, a := range as {
		es = append(es, a.Ending)
	}
	return es
}
