package server

import (
	"context"
	"fmt"
	"net/netip"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/backoff-audit/audit/pb"
	"github.com/backoff-audit/audit/session"
)

// service is grpc.testing.ReconnectService over a Server.
type service struct {
	pb.UnimplementedReconnectServiceServer
	s *Server
}

var errClosing = status.Error(codes.Unavailable, "reconnect server is shutting down")

// Start begins a session once the previous one has ended. While it waits it
// returns early with the caller's context error, or UNAVAILABLE when the
// server closes (the reference blocks for ever; docs/spec.md §4). Starts
// wait whatever connection they came on: gRPC C-core shares one connection
// between the channels of a process, so the threads of one client reach
// the server from one ip:port, and each gets its session in turn, as the
// C++ reference serialises them. A caller that calls Start again without
// Stop therefore waits for its own session to end at its session timeout;
// the log says so. It refuses at once what could never work: a negative
// max_reconnect_backoff_ms (INVALID_ARGUMENT; the record could not hold
// it), and a Start beyond Config.MaxWaiting waiting ones
// (RESOURCE_EXHAUSTED).
func (v service) Start(ctx context.Context, req *pb.ReconnectParams) (*pb.Empty, error) {
	s := v.s
	maxMS := req.GetMaxReconnectBackoffMs()
	if maxMS < 0 {
		return nil, status.Errorf(codes.InvalidArgument,
			"max_reconnect_backoff_ms %d: must not be negative (0 is the default, 120000)", maxMS)
	}
	select {
	case <-s.closed:
		return nil, errClosing
	default:
	}
	caller := callerOf(ctx)
	select {
	case s.sem <- struct{}{}: // no session runs
	default:
		if n := s.waiting.Add(1); int(n) > s.cfg.MaxWaiting {
			s.waiting.Add(-1)
			return nil, status.Errorf(codes.ResourceExhausted,
				"%d Starts already wait for the running session (max_waiting %d); try again later", n-1, s.cfg.MaxWaiting)
		}
		s.noteSameCaller(caller)
		select {
		case s.sem <- struct{}{}:
			s.waiting.Add(-1)
		case <-ctx.Done():
			s.waiting.Add(-1)
			return nil, status.FromContextError(ctx.Err()).Err()
		case <-s.closed:
			s.waiting.Add(-1)
			return nil, errClosing
		}
	}
	sess, err := s.begin(caller, maxMS)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "start session: %v", err)
	}
	if sess == nil {
		return nil, errClosing
	}
	return &pb.Empty{}, nil
}

// Stop ends the running session and answers its verdict: passed is the
// reference reading with our fixes (too few attempts and overflow fail),
// backoff_ms the verified chain's intervals. In refuse mode the server saw
// no attempt, so passed is false and the reason in the record and the log
// says why (docs/spec.md §7.1). Connections the kernel
// completed before the Stop may still wait in the retry port's accept
// queue: they are taken and filed in the session first, since the client
// made them before it called Stop.
func (v service) Stop(ctx context.Context, _ *pb.Empty) (*pb.ReconnectInfo, error) {
	s := v.s
	s.acceptMu.Lock()
	defer s.acceptMu.Unlock()
	s.drainQueueLocked()
	s.mu.Lock()
	sess := s.cur
	if sess == nil {
		s.mu.Unlock()
		return nil, status.Error(codes.FailedPrecondition, "Stop without Start: no session is running"+s.lastEnd())
	}
	ss := s.endLocked(sess, session.CauseStop, callerOf(ctx))
	return &pb.ReconnectInfo{Passed: ss.End.Passed, BackoffMs: ss.End.BackoffMS}, nil
}

// noteSameCaller logs that a Start waits behind a session its own
// connection holds: another thread of the same client (C-core shares one
// connection), or the same caller that called Start twice without Stop,
// which then waits until its session times out.
func (s *Server) noteSameCaller(caller netip.AddrPort) {
	s.mu.Lock()
	cur := s.cur
	var id int
	if cur != nil && caller.IsValid() && cur.Peer == caller {
		id = cur.ID
	}
	s.mu.Unlock()
	if id != 0 {
		s.log.Info("Start waits for the running session, which its own connection holds: it runs after that session's Stop, or its session timeout",
			"session", id, "peer", caller.String(), "session_timeout", s.cfg.SessionTimeout)
	}
}

// callerOf is the RPC's peer address, zero when gRPC does not know it.
func callerOf(ctx context.Context) netip.AddrPort {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return netip.AddrPort{}
	}
	return addrPortOf(p.Addr)
}

// lastEnd says how the last session ended when it ended without Stop, so a
// client whose Stop comes too late learns why there is nothing to stop.
func (s *Server) lastEnd() string {
	s.finishedMu.Lock()
	defer s.finishedMu.Unlock()
	if n := len(s.finished); n > 0 {
		if f := s.finished[n-1]; f.End.Cause != session.CauseStop {
			return fmt.Sprintf(" (session %d ended without Stop: %s)", f.ID, f.End.Cause)
		}
	}
	return ""
}
