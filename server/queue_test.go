package server

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/backoff-audit/audit/internal/testutil"
	"github.com/backoff-audit/audit/pb"
	"github.com/backoff-audit/audit/session"
)

// dialAndLeave connects to the retry port from local and returns as soon as
// connect() has returned, without waiting for the server to accept: the
// connection is then complete in the kernel, in the listener's accept queue
// or already taken from it.
func dialAndLeave(ctx context.Context, s *Server, local netip.Addr) (net.Conn, error) {
	d := net.Dialer{}
	if local.IsValid() {
		d.LocalAddr = &net.TCPAddr{IP: local.AsSlice()}
	}
	return d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(s.RetryPort())))
}

// TestStopTakesQueuedConnections: a client makes three retry connections
// 50 ms apart and calls Stop as soon as the last connect() returns. The
// last connection was complete before Stop, so it belongs to the session
// Stop ends: every Stop answers two backoffs, and the record lists the
// three accepts before the session's stop line. With a prompt accept loop
// the race is narrow (it is lost on a loaded machine); the late loop, which
// takes 20 ms to stamp each connection as a starved goroutine would, loses
// it every time unless Stop takes what is still queued.
func TestStopTakesQueuedConnections(t *testing.T) {
	const runs = 50
	tests := []struct {
		name        string
		beforeStamp func(netip.AddrPort)
	}{
		{name: "prompt accept loop"},
		{name: "late accept loop", beforeStamp: func(netip.AddrPort) { time.Sleep(20 * time.Millisecond) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rec testutil.SyncBuffer
			h := start(t, Config{Record: &rec, Now: time.Now, BeforeStamp: tt.beforeStamp, Logger: slog.New(slog.DiscardHandler)})
			own := netip.MustParseAddr("127.0.0.1")
			twos := 0
			made := make([][]netip.AddrPort, runs+1) // by session: the connections of its run
			for run := range runs {
				if _, err := h.rpc.Start(h.ctx, &pb.ReconnectParams{}); err != nil {
					t.Fatalf("run %d: Start: %v", run, err)
				}
				var last net.Conn
				for i := range 3 {
					if i > 0 {
						time.Sleep(50 * time.Millisecond)
					}
					c, err := dialAndLeave(h.ctx, h.s, own)
					if err != nil {
						t.Fatalf("run %d: dial %d: %v", run, i, err)
					}
					made[run+1] = append(made[run+1], addrPortOf(c.LocalAddr()))
					if i < 2 {
						c.Close()
					} else {
						last = c
					}
				}
				info, err := h.rpc.Stop(h.ctx, &pb.Empty{})
				last.Close()
				if err != nil {
					t.Fatalf("run %d: Stop: %v", run, err)
				}
				if len(info.GetBackoffMs()) == 2 {
					twos++
				}
			}
			t.Logf("%d of %d Stops answered 2 backoffs", twos, runs)
			if twos != runs {
				t.Errorf("%d of %d Stops answered 2 backoffs, want all", twos, runs)
			}
			if err := h.s.Close(); err != nil {
				t.Fatal(err)
			}
			events, err := session.ReadRecord(bytes.NewReader(rec.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			// Each session holds the three connections of its run, and the
			// record lists them before its stop line.
			filed := make([][]netip.AddrPort, runs+1)
			stopped := map[int]bool{}
			misfiled := 0
			for _, e := range events {
				switch e.Event {
				case session.EventAccept:
					if e.Session == 0 || stopped[e.Session] {
						misfiled++
					} else {
						filed[e.Session] = append(filed[e.Session], e.Peer)
					}
				case session.EventStop:
					stopped[e.Session] = true
				}
			}
			if misfiled != 0 {
				t.Errorf("%d accepts in the record outside any session or after their session's stop line", misfiled)
			}
			wrong := 0
			for id := 1; id <= runs; id++ {
				if !slices.Equal(filed[id], made[id]) {
					wrong++
					t.Logf("session %d holds %v, its run made %v", id, filed[id], made[id])
				}
			}
			if wrong != 0 {
				t.Errorf("%d of %d sessions do not hold exactly their run's connections", wrong, runs)
			}
		})
	}
}

// TestConcurrentCallersKeepTheirConnections: 200 callers, each with its own
// control channel and source address, call Start at once; once served, each
// makes two retry connections and calls Stop right after the second
// connect() returns. The server runs the sessions one at a time, and every
// session holds exactly its own caller's two connections: none is filed
// under the next caller's session or outside any session.
func TestConcurrentCallersKeepTheirConnections(t *testing.T) {
	const callers = 200
	lg := newEventLog()
	h := start(t, Config{OnEvent: lg.add, Now: time.Now, Logger: slog.New(slog.DiscardHandler), MaxWaiting: callers})
	ctx, cancel := context.WithTimeout(context.Background(), 3*testTimeout)
	defer cancel()
	addr := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{127, 0, 3, byte(10 + i)}) }
	rpcs := make([]pb.ReconnectServiceClient, callers)
	for i := range rpcs {
		rpcs[i] = controlClient(t, h.s, addr(i))
	}
	errs := make([]error, callers)
	backoffs := make([]int, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			if _, err := rpcs[i].Start(ctx, &pb.ReconnectParams{}); err != nil {
				errs[i] = fmt.Errorf("Start: %w", err)
				return
			}
			var conns []net.Conn
			defer func() {
				for _, c := range conns {
					c.Close()
				}
			}()
			for range 2 {
				c, err := dialAndLeave(ctx, h.s, addr(i))
				if err != nil {
					errs[i] = err
					break
				}
				conns = append(conns, c)
			}
			info, err := rpcs[i].Stop(ctx, &pb.Empty{})
			if err != nil {
				errs[i] = fmt.Errorf("Stop: %w", err)
				return
			}
			backoffs[i] = len(info.GetBackoffMs())
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("caller %d: %v", i, err)
		} else if backoffs[i] != 1 {
			t.Errorf("caller %d: Stop answered %d backoffs, want 1", i, backoffs[i])
		}
	}
	owner := map[int]netip.Addr{}
	kept := map[int]int{}
	for _, e := range lg.snapshot() {
		switch e.Event {
		case session.EventStart:
			owner[e.Session] = e.Peer.Addr()
		case session.EventAccept:
			if e.Session == 0 {
				t.Errorf("accept from %v outside any session", e.Peer)
			} else if owner[e.Session] != e.Peer.Addr() {
				t.Errorf("accept from %v filed under session %d of %v", e.Peer, e.Session, owner[e.Session])
			}
			kept[e.Session]++
		case session.EventStop:
			if e.End.Attempts != 2 || e.End.VerifiedAttempts != 2 || len(e.End.Foreign) != 0 {
				t.Errorf("session %d of %v ended with %d attempts (%d in its chain, %d foreign), want its caller's 2",
					e.Session, owner[e.Session], e.End.Attempts, e.End.VerifiedAttempts, len(e.End.Foreign))
			}
		}
	}
	if len(owner) != callers {
		t.Errorf("%d sessions, want %d", len(owner), callers)
	}
}
