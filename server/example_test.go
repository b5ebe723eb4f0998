package server_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/backoff-audit/audit/pb"
	"github.com/backoff-audit/audit/server"
	"github.com/backoff-audit/audit/session"
)

// A session as an in-process observer sees it: the server runs on
// loopback with a clock the example moves, a "client" connects to the retry
// port three times, and OnEvent and Session expose what the server saw.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var mu sync.Mutex
	now := time.Date(2025, 1, 2, 15, 4, 5, 0, time.UTC)
	accepted := make(chan session.RecordEvent, 8)
	s, err := server.New(server.Config{
		RetryAddr: "127.0.0.1:0",
		Logger:    slog.New(slog.DiscardHandler),
		Now:       func() time.Time { mu.Lock(); defer mu.Unlock(); return now },
		OnEvent: func(e session.RecordEvent) {
			if e.Event == session.EventAccept {
				accepted <- e
			}
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	cc, err := grpc.NewClient(s.ControlAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cc.Close()
	rpc := pb.NewReconnectServiceClient(cc)

	if _, err := rpc.Start(ctx, &pb.ReconnectParams{}); err != nil {
		fmt.Println(err)
		return
	}
	retry := net.JoinHostPort("127.0.0.1", strconv.Itoa(s.RetryPort()))
	for _, gap := range []time.Duration{0, 1050 * time.Millisecond, 1500 * time.Millisecond} {
		mu.Lock()
		now = now.Add(gap)
		mu.Unlock()
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", retry)
		if err != nil {
			fmt.Println(err)
			return
		}
		c.Close()
		<-accepted // the server has stamped it: the clock may move on
	}
	info, err := rpc.Stop(ctx, &pb.Empty{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("passed:", info.GetPassed(), "backoff_ms:", info.GetBackoffMs())

	ss, _ := s.Session(1)
	for _, iv := range ss.Result.Intervals {
		fmt.Println(iv.LogLine())
	}
	fmt.Println("chain:", ss.End.VerifiedPeer, ss.End.VerifiedReason, ss.End.VerifiedAttempts, "attempts")
	// Output:
	// passed: true backoff_ms: [1050 1500]
	// retry  1:backoff   1.05s,expected backoff   1.00s, jitter 5.00%
	// retry  2:backoff   1.50s,expected backoff   1.60s, jitter -6.25%
	// chain: 127.0.0.1 start peer 3 attempts
}
