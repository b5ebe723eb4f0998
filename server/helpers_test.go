package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/backoff-audit/audit/pb"
	"github.com/backoff-audit/audit/session"
)

// testTimeout bounds every wait in these tests.
const testTimeout = 20 * time.Second

// fakeClock is the server's clock in tests: it moves only when told to.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2025, 1, 2, 15, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// harness is a running server with an event feed, a control client, and a
// fake clock.
type harness struct {
	t      *testing.T
	s      *Server
	clock  *fakeClock
	events chan session.RecordEvent
	rpc    pb.ReconnectServiceClient
	ctx    context.Context
}

// start runs a server on loopback; cfg's Now, OnEvent and Logger are set
// here unless the caller set them.
func start(t *testing.T, cfg Config) *harness {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	h := &harness{t: t, clock: newFakeClock(), events: make(chan session.RecordEvent, 4096), ctx: ctx}
	if cfg.RetryAddr == "" {
		// Loopback only; the test of ::1 asks for the dual-stack default.
		cfg.RetryAddr = "127.0.0.1:0"
	}
	if cfg.Now == nil {
		cfg.Now = h.clock.Now
	}
	if cfg.OnEvent == nil {
		cfg.OnEvent = func(e session.RecordEvent) { h.events <- e }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	h.s = s
	h.rpc = h.client("127.0.0.1")
	return h
}

// client dials the control port at host (the server listens on 127.0.0.1).
func (h *harness) client(host string) pb.ReconnectServiceClient {
	h.t.Helper()
	_, port, err := net.SplitHostPort(h.s.ControlAddr())
	if err != nil {
		h.t.Fatal(err)
	}
	cc, err := grpc.NewClient(net.JoinHostPort(host, port), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { cc.Close() })
	return pb.NewReconnectServiceClient(cc)
}

func (h *harness) startSession(maxMS int32) {
	h.t.Helper()
	if _, err := h.rpc.Start(h.ctx, &pb.ReconnectParams{MaxReconnectBackoffMs: maxMS}); err != nil {
		h.t.Fatalf("Start: %v", err)
	}
	h.waitEvent(session.EventStart)
}

func (h *harness) stop() *pb.ReconnectInfo {
	h.t.Helper()
	info, err := h.rpc.Stop(h.ctx, &pb.Empty{})
	if err != nil {
		h.t.Fatalf("Stop: %v", err)
	}
	return info
}

// waitEvent returns the next event of kind, skipping others.
func (h *harness) waitEvent(kind session.EventKind) session.RecordEvent {
	h.t.Helper()
	for {
		select {
		case e := <-h.events:
			if e.Event == kind {
				return e
			}
		case <-h.ctx.Done():
			h.t.Fatalf("waiting for a %s event: %v", kind, h.ctx.Err())
		}
	}
}

// retry connects to the retry port from local (an IP address on loopback),
// waits for the server to close the connection and for its accept event,
// and returns the client's address.
func (h *harness) retry(local string) netip.AddrPort {
	h.t.Helper()
	ap := h.dialRetry(local)
	for {
		e := h.waitEvent(session.EventAccept)
		if e.Peer == ap {
			return ap
		}
	}
}

func (h *harness) dialRetry(local string) netip.AddrPort {
	h.t.Helper()
	ip := netip.MustParseAddr(local)
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: ip.AsSlice()}}
	to := "127.0.0.1" // from any 127/8 address
	if ip.Is6() {
		to = "::1"
	}
	target := net.JoinHostPort(to, strconv.Itoa(h.s.RetryPort()))
	c, err := d.DialContext(h.ctx, "tcp", target)
	if err != nil {
		h.t.Fatalf("dial retry port from %s: %v", local, err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(testTimeout))
	// The server writes nothing and closes: EOF (or a reset) is the sign.
	if _, err := c.Read(make([]byte, 1)); err == nil {
		h.t.Fatalf("retry port sent data")
	} else if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		h.t.Fatalf("read retry port: %v", err)
	}
	return addrPortOf(c.LocalAddr())
}

// chain makes one connection from local, then one more after each gap on
// the fake clock.
func (h *harness) chain(local string, gaps ...time.Duration) {
	h.t.Helper()
	h.retry(local)
	for _, g := range gaps {
		h.clock.Advance(g)
		h.retry(local)
	}
}

// waitFor polls cond until it holds (it watches state the server has no
// event for, such as a Start being blocked).
func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	for !cond() {
		select {
		case <-h.ctx.Done():
			h.t.Fatalf("waiting for %s: %v", what, h.ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

func ms(v ...int) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, m := range v {
		out[i] = time.Duration(m) * time.Millisecond
	}
	return out
}

// ipv6Loopback reports whether ::1 can be used.
func ipv6Loopback(t *testing.T) bool {
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Logf("no IPv6 loopback: %v", err)
		return false
	}
	ln.Close()
	return true
}

// recv receives from ch, failing the test when the harness's time is up.
func recv[T any](h *harness, ch <-chan T) T {
	h.t.Helper()
	select {
	case v := <-ch:
		return v
	case <-h.ctx.Done():
		h.t.Fatalf("receive: %v", h.ctx.Err())
		panic("unreachable")
	}
}

// dialRetryQuiet makes one retry connection and ignores every error (for
// background load; it must not call t.Fatal off the test goroutine).
func (h *harness) dialRetryQuiet(ctx context.Context) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(h.s.RetryPort())))
	if err != nil {
		return
	}
	c.SetReadDeadline(time.Now().Add(testTimeout))
	c.Read(make([]byte, 1))
	c.Close()
}
