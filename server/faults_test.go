package server

// Fault tests: many callers at once, callers that vanish,
// Stops that race, retry clients that do what a backoff client never does,
// and a flood of connections into one session. RELIABILITY.md records what
// each found.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/pb"
	"github.com/backoff-audit/audit/server/internal/loadgen"
	"github.com/backoff-audit/audit/session"
)

// controlClient returns a ReconnectService client whose connection comes
// from local (any address when zero), so that a test can tell callers apart
// by address. Closing the returned connection makes the caller vanish.
func controlClient(tb testing.TB, s *Server, local netip.Addr) pb.ReconnectServiceClient {
	tb.Helper()
	rpc, cc := controlConn(tb, s, local)
	tb.Cleanup(func() { cc.Close() })
	return rpc
}

func controlConn(tb testing.TB, s *Server, local netip.Addr) (pb.ReconnectServiceClient, *grpc.ClientConn) {
	tb.Helper()
	d := net.Dialer{}
	if local.IsValid() {
		d.LocalAddr = &net.TCPAddr{IP: local.AsSlice()}
	}
	cc, err := grpc.NewClient("passthrough:///"+s.ControlAddr(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return d.DialContext(ctx, "tcp", addr)
		}))
	if err != nil {
		tb.Fatal(err)
	}
	return pb.NewReconnectServiceClient(cc), cc
}

// eventLog is an OnEvent that keeps every event and lets any goroutine wait
// for a condition on them.
type eventLog struct {
	mu      sync.Mutex
	events  []session.RecordEvent
	changed chan struct{} // closed and replaced at every event
}

func newEventLog() *eventLog { return &eventLog{changed: make(chan struct{})} }

func (l *eventLog) add(e session.RecordEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
	close(l.changed)
	l.changed = make(chan struct{})
}

// wait returns nil once cond holds for the events so far, or ctx's error.
// It is safe off the test goroutine.
func (l *eventLog) wait(ctx context.Context, cond func([]session.RecordEvent) bool) error {
	for {
		l.mu.Lock()
		ok, ch := cond(l.events), l.changed
		l.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (l *eventLog) snapshot() []session.RecordEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]session.RecordEvent(nil), l.events...)
}

// acceptedFrom counts accept events from addr.
func acceptedFrom(addr netip.Addr) func([]session.RecordEvent) int {
	return func(es []session.RecordEvent) int {
		n := 0
		for _, e := range es {
			if e.Event == session.EventAccept && e.Peer.Addr() == addr {
				n++
			}
		}
		return n
	}
}

// retryFrom makes one retry connection from local and waits until the
// server has recorded it. Safe off the test goroutine.
func retryFrom(ctx context.Context, s *Server, l *eventLog, local netip.Addr) error {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: local.AsSlice()}}
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(s.RetryPort())))
	if err != nil {
		return err
	}
	defer c.Close()
	me := addrPortOf(c.LocalAddr())
	c.SetReadDeadline(time.Now().Add(testTimeout))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		return errors.New("the retry port sent data")
	} else if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		return err
	}
	return l.wait(ctx, func(es []session.RecordEvent) bool {
		for _, e := range es {
			if e.Event == session.EventAccept && e.Peer == me {
				return true
			}
		}
		return false
	})
}

// TestFiftyConcurrentStarts: 50 callers call Start at once, each from its
// own address. They are served one at a time, each session holds only its
// caller's connections, and each Stop answers its own verdict: caller i
// waits 600+20i ms between its two connections, so its backoff_ms is
// [600+20i] and it passes exactly when that lies in [700, 1300].
func TestFiftyConcurrentStarts(t *testing.T) {
	const callers = 50
	lg := newEventLog()
	h := start(t, Config{OnEvent: lg.add, Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithTimeout(context.Background(), 3*testTimeout)
	defer cancel()

	addr := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{127, 0, 2, byte(10 + i)}) }
	rpcs := make([]pb.ReconnectServiceClient, callers)
	for i := range rpcs {
		rpcs[i] = controlClient(t, h.s, addr(i))
	}
	type result struct {
		info *pb.ReconnectInfo
		err  error
	}
	results := make([]result, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			r := &results[i]
			if _, r.err = rpcs[i].Start(ctx, &pb.ReconnectParams{}); r.err != nil {
				r.err = fmt.Errorf("Start: %w", r.err)
				return
			}
			// This caller holds the only session: the clock is its own.
			if r.err = retryFrom(ctx, h.s, lg, addr(i)); r.err != nil {
				return
			}
			h.clock.Advance(time.Duration(600+20*i) * time.Millisecond)
			if r.err = retryFrom(ctx, h.s, lg, addr(i)); r.err != nil {
				return
			}
			if r.info, r.err = rpcs[i].Stop(ctx, &pb.Empty{}); r.err != nil {
				r.err = fmt.Errorf("Stop: %w", r.err)
			}
		})
	}
	wg.Wait()

	for i, r := range results {
		gap := int32(600 + 20*i)
		switch {
		case r.err != nil:
			t.Errorf("caller %d: %v", i, r.err)
		case len(r.info.GetBackoffMs()) != 1 || r.info.GetBackoffMs()[0] != gap:
			t.Errorf("caller %d: backoff_ms %v, want [%d] (another caller's verdict?)", i, r.info.GetBackoffMs(), gap)
		case r.info.GetPassed() != (gap >= 700 && gap <= 1300):
			t.Errorf("caller %d: passed %v for a %d ms backoff", i, r.info.GetPassed(), gap)
		}
	}
	// The sessions ran one at a time: start n, its accepts, stop n.
	var cur *session.RecordEvent
	seen := map[netip.Addr]bool{}
	for _, e := range lg.snapshot() {
		switch e.Event {
		case session.EventStart:
			if cur != nil {
				t.Fatalf("session %d started while session %d ran", e.Session, cur.Session)
			}
			if seen[e.Peer.Addr()] {
				t.Errorf("caller %v got a second session", e.Peer.Addr())
			}
			seen[e.Peer.Addr()] = true
			cur = &e
		case session.EventAccept:
			if cur == nil || e.Session != cur.Session || e.Peer.Addr() != cur.Peer.Addr() {
				t.Errorf("accept %+v outside its caller's session", e)
			}
		case session.EventStop:
			if cur == nil || e.Session != cur.Session || e.End.VerifiedPeer != cur.Peer.Addr() || len(e.End.Foreign) != 0 {
				t.Errorf("stop %+v does not end the running session of %v alone", e, cur)
			}
			cur = nil
		default:
			t.Errorf("unexpected event %+v", e)
		}
	}
	if len(seen) != callers || h.s.waiting.Load() != 0 {
		t.Errorf("%d callers had a session, %d still waiting; want %d and 0", len(seen), h.s.waiting.Load(), callers)
	}
}

// TestVanishedCallerExpires: a caller that goes away after Start (its
// connection closes) holds the server only until the session timeout; the
// next caller then gets the next session. The expired session keeps what
// arrived.
func TestVanishedCallerExpires(t *testing.T) {
	lg := newEventLog()
	h := start(t, Config{SessionTimeout: 200 * time.Millisecond, OnEvent: lg.add})
	ghostAddr, nextAddr := netip.MustParseAddr("127.0.0.21"), netip.MustParseAddr("127.0.0.22")
	ghost, cc := controlConn(t, h.s, ghostAddr)
	if _, err := ghost.Start(h.ctx, &pb.ReconnectParams{}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := retryFrom(h.ctx, h.s, lg, ghostAddr); err != nil {
			t.Fatal(err)
		}
		h.clock.Advance(time.Second)
	}
	cc.Close() // the caller vanishes without Stop

	next := controlClient(t, h.s, nextAddr)
	if _, err := next.Start(h.ctx, &pb.ReconnectParams{}); err != nil {
		t.Fatalf("Start after a vanished caller: %v", err)
	}
	var exp, st session.RecordEvent
	for _, e := range lg.snapshot() {
		switch {
		case e.Event == session.EventExpire && e.Session == 1:
			exp = e
		case e.Event == session.EventStart && e.Session == 2:
			st = e
		}
	}
	if exp.End == nil || exp.End.Cause != session.CauseTimeout || exp.End.VerifiedAttempts != 2 || exp.End.VerifiedPeer != ghostAddr {
		t.Errorf("session 1 ended as %+v, want a timeout keeping the vanished caller's 2 attempts", exp.End)
	}
	if st.Peer.Addr() != nextAddr {
		t.Errorf("session 2 started by %v, want %v", st.Peer, nextAddr)
	}
}

// TestVanishedWaitingCaller: a caller that goes away while its Start waits
// for another session is dropped at once, and never gets a session.
func TestVanishedWaitingCaller(t *testing.T) {
	lg := newEventLog()
	h := start(t, Config{OnEvent: lg.add})
	if _, err := h.rpc.Start(h.ctx, &pb.ReconnectParams{}); err != nil {
		t.Fatal(err)
	}
	ghostAddr, nextAddr := netip.MustParseAddr("127.0.0.23"), netip.MustParseAddr("127.0.0.24")
	ghost, cc := controlConn(t, h.s, ghostAddr)
	waited := make(chan error, 1)
	go func() {
		_, err := ghost.Start(h.ctx, &pb.ReconnectParams{})
		waited <- err
	}()
	h.waitFor("the ghost's Start to wait", func() bool { return h.s.waiting.Load() == 1 })
	cc.Close()
	if err := recv(h, waited); status.Code(err) != codes.Canceled {
		t.Errorf("Start of a closed connection: %v, want Canceled", err)
	}
	h.waitFor("the server to drop the ghost's Start", func() bool { return h.s.waiting.Load() == 0 })
	h.stop()
	next := controlClient(t, h.s, nextAddr)
	if _, err := next.Start(h.ctx, &pb.ReconnectParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := next.Stop(h.ctx, &pb.Empty{}); err != nil {
		t.Fatal(err)
	}
	for _, e := range lg.snapshot() {
		if e.Event == session.EventStart && e.Peer.Addr() == ghostAddr {
			t.Errorf("the vanished caller got session %d", e.Session)
		}
	}
}

// TestRacingStops: two Stops of one session at once. One answers the
// verdict, the other FAILED_PRECONDITION; one stop event; the next Start is
// not blocked (the session's token was given back exactly once).
func TestRacingStops(t *testing.T) {
	lg := newEventLog()
	h := start(t, Config{OnEvent: lg.add, Logger: slog.New(slog.DiscardHandler)})
	other := controlClient(t, h.s, netip.MustParseAddr("127.0.0.25"))
	const rounds = 20
	for round := range rounds {
		if _, err := h.rpc.Start(h.ctx, &pb.ReconnectParams{}); err != nil {
			t.Fatalf("round %d: Start: %v", round, err)
		}
		errs := make(chan error, 2)
		for _, rpc := range []pb.ReconnectServiceClient{h.rpc, other} {
			go func() {
				_, err := rpc.Stop(h.ctx, &pb.Empty{})
				errs <- err
			}()
		}
		var ok, pre int
		for range 2 {
			switch err := recv(h, errs); status.Code(err) {
			case codes.OK:
				ok++
			case codes.FailedPrecondition:
				pre++
			default:
				t.Fatalf("round %d: Stop: %v", round, err)
			}
		}
		if ok != 1 || pre != 1 {
			t.Fatalf("round %d: %d Stops answered a verdict and %d FAILED_PRECONDITION, want 1 and 1", round, ok, pre)
		}
	}
	stops := 0
	for _, e := range lg.snapshot() {
		if e.Event == session.EventStop {
			stops++
		}
	}
	if stops != rounds {
		t.Errorf("%d stop events for %d sessions", stops, rounds)
	}
}

// TestRudeRetryClients: retry connections that send bytes (up to 1 MiB),
// half-close at once, stay open without reading, or reset right after
// connecting must not stall the accept loop: while all of them are in
// flight, a backoff chain is recorded and verified as usual, and the rude
// chains stay out of the verdict.
func TestRudeRetryClients(t *testing.T) {
	lg := newEventLog()
	h := start(t, Config{OnEvent: lg.add, Logger: slog.New(slog.DiscardHandler)})
	if _, err := h.rpc.Start(h.ctx, &pb.ReconnectParams{}); err != nil {
		t.Fatal(err)
	}
	target := net.JoinHostPort("127.0.0.1", strconv.Itoa(h.s.RetryPort()))
	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()

	const each = 10
	kinds := []struct {
		name string
		addr netip.Addr
		act  func(c *net.TCPConn)
	}{
		{"sender", netip.MustParseAddr("127.0.0.31"), func(c *net.TCPConn) {
			c.SetWriteDeadline(time.Now().Add(testTimeout))
			chunk := make([]byte, 64<<10)
			for range 16 { // until the server's reset stops us
				if _, err := c.Write(chunk); err != nil {
					return
				}
			}
		}},
		{"half-closer", netip.MustParseAddr("127.0.0.32"), func(c *net.TCPConn) { c.CloseWrite() }},
		{"holder", netip.MustParseAddr("127.0.0.33"), func(c *net.TCPConn) { <-ctx.Done() }},
		{"resetter", netip.MustParseAddr("127.0.0.34"), func(c *net.TCPConn) { c.SetLinger(0) }},
	}
	var wg sync.WaitGroup
	for _, k := range kinds {
		for range each {
			wg.Go(func() {
				d := net.Dialer{LocalAddr: &net.TCPAddr{IP: k.addr.AsSlice()}}
				c, err := d.DialContext(ctx, "tcp", target)
				if err != nil {
					return // counted below: fewer accepts than expected
				}
				defer c.Close()
				k.act(c.(*net.TCPConn))
			})
		}
	}
	// Every connection that stays open (sender, half-closer, holder) must be
	// accepted and recorded; a resetter may vanish before accept.
	for _, k := range kinds[:3] {
		count := acceptedFrom(k.addr)
		if err := lg.wait(h.ctx, func(es []session.RecordEvent) bool { return count(es) == each }); err != nil {
			t.Fatalf("%s connections: %d of %d accepted: %v", k.name, count(lg.snapshot()), each, err)
		}
	}
	// The holders are still connected; the loop must go on.
	own := netip.MustParseAddr("127.0.0.1")
	for _, gap := range []time.Duration{0, 1000 * time.Millisecond, 1600 * time.Millisecond} {
		h.clock.Advance(gap)
		if err := retryFrom(h.ctx, h.s, lg, own); err != nil {
			t.Fatal(err)
		}
	}
	info := h.stop()
	cancel()
	wg.Wait()
	if !info.GetPassed() || len(info.GetBackoffMs()) != 2 || info.GetBackoffMs()[0] != 1000 || info.GetBackoffMs()[1] != 1600 {
		t.Errorf("verdict %v, want passed with [1000 1600]", info)
	}
	var stop session.RecordEvent
	for _, e := range lg.snapshot() {
		if e.Event == session.EventStop {
			stop = e
		}
	}
	if stop.End == nil || stop.End.VerifiedPeer != own || stop.End.VerifiedAttempts != 3 || len(stop.End.Foreign) < 3 {
		t.Errorf("stop %+v: want the 3-attempt chain of %v and the rude ones as foreign", stop.End, own)
	}
	if n := acceptedFrom(kinds[3].addr)(lg.snapshot()); n > each {
		t.Errorf("%d resetter accepts from %d connections", n, each)
	}
}

// floodConns is the flood's count: connections into one session bounded at
// floodMaxAttempts. Under the race detector (`make test`) the test makes
// floodConnsRace, to stay near 15 s on two loaded cores, and -short a tenth
// of either; RELIABILITY.md has the times and the full-count command.
const (
	floodConnsRace   = 30_000
	floodConns       = 100_000
	floodMaxAttempts = 1000
	floodHeapBound   = 20 << 20
)

// TestFloodOneSession: 100 000 connections into one session keep the heap
// within floodHeapBound (the session keeps floodMaxAttempts and only counts
// the rest), every one is recorded, and the verdict is overflow.
func TestFloodOneSession(t *testing.T) {
	conns := floodConns
	if loadgen.Race {
		conns = floodConnsRace
		t.Logf("race detector on: %d connections instead of %d (run without -race for the full count)", conns, floodConns)
	}
	if testing.Short() {
		conns /= 10
	}
	var accepts, overflow atomic.Int64
	var rec countingWriter
	ends := make(chan session.SessionEnd, 1)
	s, err := New(Config{
		RetryAddr:   "127.0.0.1:0",
		MaxAttempts: floodMaxAttempts,
		Record:      &rec,
		Logger:      slog.New(slog.DiscardHandler),
		OnEvent: func(e session.RecordEvent) {
			switch e.Event {
			case session.EventAccept:
				accepts.Add(1)
				if e.Overflow {
					overflow.Add(1)
				}
			case session.EventStop:
				ends <- *e.End
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rpc := controlClient(t, s, netip.Addr{})
	if _, err := rpc.Start(ctx, &pb.ReconnectParams{}); err != nil {
		t.Fatal(err)
	}
	target := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(s.RetryPort()))
	before := heapInUse()
	goroutines := runtime.NumGoroutine()
	peak, stopSampling := sampleHeap()

	res, err := loadgen.Run(ctx, loadgen.Config{Target: target, Sources: loadSources(8), Conns: conns, Workers: 8})
	stopSampling()
	if err != nil {
		t.Fatal(err)
	}
	if res.Errors != 0 {
		t.Errorf("%d of %d connections failed (first: %v)", res.Errors, conns, res.Err)
	}
	for accepts.Load() < int64(res.Conns) && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	during := heapInUse()
	info, err := rpc.Stop(ctx, &pb.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	end := <-ends
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	growth := during - before
	t.Logf("%d connections in %v (%.0f/s), %d recorded (%d overflow), record %d bytes; live heap %d KiB before, %d KiB after the flood (%+d KiB), sampled peak %d KiB (garbage included); goroutines %d before, %d after Close",
		res.Conns, res.Elapsed.Round(time.Millisecond), float64(res.Conns)/res.Elapsed.Seconds(), accepts.Load(), overflow.Load(),
		rec.bytes, before>>10, during>>10, growth>>10, peak.Load()>>10, goroutines, runtime.NumGoroutine())
	if growth > floodHeapBound {
		t.Errorf("heap grew by %d MiB over %d connections, bound %d MiB", growth>>20, res.Conns, floodHeapBound>>20)
	}
	if info.GetPassed() || end.Verdict != backoff.Overflow || end.Attempts != floodMaxAttempts || int64(end.Dropped) != accepts.Load()-floodMaxAttempts {
		t.Errorf("end %+v (passed %v): want overflow, %d kept, %d dropped", end, info.GetPassed(), floodMaxAttempts, accepts.Load()-floodMaxAttempts)
	}
	if accepts.Load() != int64(res.Conns) || overflow.Load() != accepts.Load()-floodMaxAttempts || rec.lines.Load() != accepts.Load()+2 {
		t.Errorf("%d accepts (%d overflow), %d record lines for %d connections", accepts.Load(), overflow.Load(), rec.lines.Load(), res.Conns)
	}
}

// sampleHeap records the largest HeapAlloc (live data and garbage not yet
// collected) every 20 ms until stop is called.
func sampleHeap() (peak *atomic.Int64, stop func()) {
	peak = new(atomic.Int64)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if v := int64(m.HeapAlloc); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	return peak, func() { close(done); wg.Wait() }
}

// heapInUse is the live heap after a full collection.
func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
