package auditrun

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/backoff-audit/audit/pb"
	"github.com/backoff-audit/audit/session"
)

// TestLiveAttachShortSession: a session that starts and ends between two
// reads of the record file (a few ms, well inside its 100 ms poll) is
// judged from its attempts, not left outside any session: the record was
// empty when the auditor first read it, so all it then holds is new.
func TestLiveAttachShortSession(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	r := startLive(t, Config{Attach: true, RetryPort: srv.Retry, Record: srv.Record})
	time.Sleep(2 * recordPoll) // the follower's first read finds the file empty
	cc, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", srv.Control), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	rpc := pb.NewReconnectServiceClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// The control channel connects before the session, so the session is
	// the Start, four connections and the Stop: a few ms.
	if _, err := rpc.Stop(ctx, &pb.Empty{}); err == nil {
		t.Fatal("Stop without Start succeeded")
	}
	began := time.Now()
	if _, err := rpc.Start(ctx, &pb.ReconnectParams{MaxReconnectBackoffMs: liveMaxMS}); err != nil {
		t.Fatalf("Start: %v", err)
	}
	const attempts = 4
	for range attempts {
		c, err := net.Dial("tcp4", fmt.Sprintf("127.0.0.1:%d", srv.Retry))
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	if _, err := rpc.Stop(ctx, &pb.Empty{}); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	took := time.Since(began)
	reps, _ := r.reports(t, 1)
	rep := reps[0]
	if rep.Session.Cause != session.CauseStop || len(rep.Peers) != 1 || len(rep.Peers[0].Attempts) != attempts {
		t.Fatalf("session %+v, peers %+v; want the session ended by Stop, with its %d attempts (it lasted %v)",
			rep.Session, rep.Peers, attempts, took)
	}
	if rep.Peers[0].Peer != netip.MustParseAddr("127.0.0.1") || rep.CrossCheck == nil || rep.CrossCheck.ServerSaw != attempts {
		t.Errorf("peer %v, cross-check %+v; want 127.0.0.1, every attempt seen by the server", rep.Peers[0].Peer, rep.CrossCheck)
	}
	r.stop(t)
	if strings.Contains(r.errOut.String(), "outside any session") {
		t.Errorf("attempts outside any session:\n%s", r.errOut.String())
	}
	t.Logf("a session of %v, judged with its %d attempts", took.Round(time.Millisecond), attempts)
}
