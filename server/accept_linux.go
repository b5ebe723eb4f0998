package server

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"time"

	"github.com/backoff-audit/audit/analyze"
)

// acceptBatch is how many connections the accept loop takes per hold of
// acceptMu, so that a Stop waiting for the lock is not starved by a flood.
const acceptBatch = 64

// maxDrain bounds what an ending session takes from the queue in one go.
// The queue never holds more than the listen backlog (somaxconn, 4096 by
// default); the bound only stops a flood that arrives as fast as it is
// taken from holding a Stop for ever.
const maxDrain = 1 << 16

// initRetry keeps a duplicate of the retry listener's descriptor: the
// accept loop and the end of a session take connections from it with
// accept4 under acceptMu, so the loop never holds a connection that is
// accepted but not yet stamped. The duplicate is an os.File because a
// net.Listener's raw connection cannot wait for readability (its Read is
// EINVAL) and an os.File's can, through the same poller; the two
// descriptors share the socket, and Close closes both.
func (s *Server) initRetry() error {
	tl, ok := s.retry.(*net.TCPListener)
	if !ok {
		return fmt.Errorf("retry port %s: not a TCP listener", s.retry.Addr())
	}
	f, err := tl.File()
	if err != nil {
		return fmt.Errorf("retry port %s: %w", s.retry.Addr(), err)
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return fmt.Errorf("retry port %s: %w", s.retry.Addr(), err)
	}
	s.retryFile, s.retryRaw = f, rc
	return nil
}

// acceptLoop takes, stamps and closes every retry connection until the
// listener is closed. It waits for the listener to be readable, then under
// acceptMu takes what the queue holds, up to acceptBatch at a time.
func (s *Server) acceptLoop() {
	var delay time.Duration
	for {
		var more bool
		var aerr error
		err := s.retryRaw.Read(func(fd uintptr) bool {
			s.acceptMu.Lock()
			defer s.acceptMu.Unlock()
			if s.retryDone {
				return false // wait for Close to close the listener
			}
			more, aerr = s.takeQueued(int(fd), acceptBatch)
			// Returning false waits for readiness, which the poller
			// reports once per new arrival after EAGAIN: with connections
			// maybe left in the queue, Read must return and be called again.
			return more || aerr != nil
		})
		if err != nil {
			return // closed
		}
		if aerr == nil {
			delay = 0
			continue
		}
		var ok bool
		if delay, ok = s.acceptBackoff(delay, aerr); !ok {
			return
		}
	}
}

// drainQueueLocked takes every connection still in the retry port's accept
// queue, in the kernel's order, and records it; the caller holds acceptMu
// and is about to end the session (or close the server), so connections
// complete before that belong to it.
func (s *Server) drainQueueLocked() {
	if s.retryDone {
		return
	}
	var aerr error
	if err := s.retryRaw.Control(func(fd uintptr) { _, aerr = s.takeQueued(int(fd), maxDrain) }); err != nil {
		return // closed: nothing is queued any more
	}
	if aerr != nil {
		s.log.Warn("retry port: taking the queued connections failed", "err", aerr)
	}
}

// takeQueued accepts, stamps and closes up to limit connections from the
// listening socket fd, which is non-blocking. It reports whether it stopped
// at the limit with the queue perhaps not empty, and an accept error that is
// not about one connection.
func (s *Server) takeQueued(fd, limit int) (more bool, err error) {
	for range limit {
		nfd, sa, err := syscall.Accept4(fd, syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC)
		switch {
		case err == nil:
		case errors.Is(err, syscall.EAGAIN):
			return false, nil
		case errors.Is(err, syscall.EINTR), errors.Is(err, syscall.ECONNABORTED):
			continue // this connection is gone; the next may be there
		default:
			return false, err
		}
		s.take(peerOf(sa))
		syscall.Close(nfd)
	}
	return true, nil
}

// peerOf is a connection's peer as accept4 gave it, an IPv4-mapped IPv6
// address written as IPv4 (docs/spec.md §5.3), as addrPortOf does.
func peerOf(sa syscall.Sockaddr) netip.AddrPort {
	switch sa := sa.(type) {
	case *syscall.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(sa.Port))
	case *syscall.SockaddrInet6:
		a := netip.AddrFrom16(sa.Addr)
		if sa.ZoneId != 0 && !a.Is4In6() {
			a = a.WithZone(zoneName(sa.ZoneId))
		}
		return analyze.UnmapPort(netip.AddrPortFrom(a, uint16(sa.Port)))
	}
	return netip.AddrPort{}
}

// zoneName is an interface's name for a link-local peer's zone, its index
// when the name is unknown (as package net writes it).
func zoneName(id uint32) string {
	if ifi, err := net.InterfaceByIndex(int(id)); err == nil {
		return ifi.Name
	}
	return strconv.Itoa(int(id))
}
