package server

import (
	"net"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/backoff-audit/audit/session"
)

// TestHangHeldMemory measures what one held connection costs the server
// in hang mode (its reading goroutine, buffer and bookkeeping), so that
// --max_held bounds the memory: RELIABILITY.md states the figure and what
// the default of 10 000 comes to. It holds the cost to 32 KiB a
// connection, four times what is measured, and checks that Stop gives
// every goroutine back. --max_held (default 10 000) bounds the count.
func TestHangHeldMemory(t *testing.T) {
	const n = 2000
	h := start(t, Config{Mode: mode(t, "hang"), Record: nil})
	h.startSession(0)
	before := memInUse()
	goroutines := runtime.NumGoroutine()
	conns := make([]net.Conn, 0, n)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	for range n {
		c, err := dialAndLeave(h.ctx, h.s, netip.MustParseAddr("127.0.0.1"))
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for range n {
		h.waitEvent(session.EventAccept)
	}
	waitHeld(t, h.s, n)
	// The client's end of each connection is in this process too, so the
	// figure is an upper bound of the server's own cost.
	per := float64(memInUse()-before) / n
	t.Logf("%d held connections (and their %d client ends): %.1f KiB a connection in heap and stacks; %d goroutines more",
		n, n, per/1024, runtime.NumGoroutine()-goroutines)
	if per > 32<<10 {
		t.Errorf("%.1f KiB a held connection, want at most 32", per/1024)
	}
	h.stop()
	deadline := time.Now().Add(testTimeout)
	for runtime.NumGoroutine() > goroutines+10 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > goroutines+10 {
		t.Errorf("%d goroutines after Stop, %d before the connections: the held ones did not end", g, goroutines)
	}
}

// memInUse is the heap and the goroutine stacks in use, after a GC.
func memInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}

// waitHeld waits until the server holds n connections.
func waitHeld(t *testing.T, s *Server, n int) {
	t.Helper()
	for deadline := time.Now().Add(testTimeout); ; time.Sleep(5 * time.Millisecond) {
		s.mu.Lock()
		got := len(s.held)
		s.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("server holds %d connections, want %d", got, n)
		}
	}
}
