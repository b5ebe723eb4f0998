package server

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/backoff-audit/audit/attempt"
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
	s.openSpare()
	return nil
}

// openSpare opens the spare descriptor (Server.spare) if none is held; the
// caller holds acceptMu, or the server is not serving yet. When even that
// fails the retry port goes without one, and says so.
func (s *Server) openSpare() {
	if s.spare >= 0 {
		return
	}
	fd, err := syscall.Open("/dev/null", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		s.log.Warn("retry port: no spare descriptor: out of descriptors, connections wait in the queue and are stamped late", "err", err)
		return
	}
	s.spare = fd
}

// closeSpare closes the spare descriptor; the caller holds acceptMu.
func (s *Server) closeSpare() {
	if s.spare >= 0 {
		syscall.Close(s.spare)
		s.spare = -1
	}
}

// descriptorLimit is the process's limit on open descriptors (ulimit -n),
// 0 when unknown.
func descriptorLimit() int {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil || l.Cur > 1<<30 {
		return 0
	}
	return int(l.Cur)
}

// acceptSpare takes one connection from fd when accept failed for want of
// descriptors: the spare is closed so that accept has one, the connection
// is stamped and closed at once (there is no descriptor to hold it with),
// and the spare is opened again. It reports false, with the accept's
// error, when there was no spare or accepting failed all the same.
func (s *Server) acceptSpare(fd int, aerr error) (bool, error) {
	if s.spare < 0 {
		return false, aerr
	}
	s.closeSpare()
	defer s.openSpare()
	nfd, sa, err := syscall.Accept4(fd, syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC)
	if err != nil {
		return false, err
	}
	if n := s.noFDs.Add(1); n == 1 || n%1000 == 0 {
		s.log.Warn("retry port: out of descriptors; connections are taken with the spare one and closed at once, so their times stay their own",
			"taken", n, "descriptor_limit", descriptorLimit())
	}
	if hc := s.take(peerOf(sa)); hc != nil {
		s.dropHeld(hc, fmt.Errorf("out of descriptors: %w", aerr))
	}
	syscall.Close(nfd)
	return true, nil
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
			if s.retryDown {
				// Not listening (refuse, restart): nothing to take; the
				// next arrival after it listens again wakes the loop.
				return false
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
	if s.retryDone || s.retryDown {
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
// listening socket fd, which is non-blocking; a connection the session's
// mode holds open is handed over instead of closed. It reports whether it stopped
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
		case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
			if ok, err := s.acceptSpare(fd, err); !ok {
				return false, err
			}
			continue
		default:
			return false, err
		}
		if hc := s.take(peerOf(sa)); hc != nil {
			if c, err := fdConn(nfd); err != nil {
				s.dropHeld(hc, err)
			} else {
				s.serveHeld(hc, c)
			}
		} else {
			syscall.Close(nfd)
		}
	}
	return true, nil
}

// fdConn makes an accepted descriptor a net.Conn, which takes a duplicate;
// nfd itself is closed.
func fdConn(nfd int) (net.Conn, error) {
	f := os.NewFile(uintptr(nfd), "retry connection")
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		return nil, fmt.Errorf("hold retry connection: %w", err)
	}
	return c, nil
}

// canStopListening: here the retry port can stop listening and start
// again (portDownLocked, portUpLocked).
const canStopListening = true

// listenBacklog asks for the largest accept queue; the kernel caps it at
// net.core.somaxconn, as it does the one package net asks for.
const listenBacklog = 1<<16 - 1

// portDownLocked makes the retry port stop listening, so that the kernel
// answers every SYN with a reset (refuse and restart modes, docs/spec.md
// §7.1). The connections already in its queue are taken first: they came
// before. The socket stays open, so that portUpLocked listens again on the
// same port with the same options (one dual-stack socket). The caller
// holds acceptMu; nothing here waits for the accept loop.
func (s *Server) portDownLocked() error {
	if s.retryDone || s.retryDown {
		return nil
	}
	s.drainQueueLocked()
	var serr error
	// On Linux, shutting down the reading side of a listening socket
	// disconnects it: it leaves the listening table, and its queue is
	// reset. A socket the kernel chose the port of (port 0) gives the
	// port back then; it binds it again at once, by number, so that the
	// kernel gives it to no other socket that asks for any port while
	// this one is down (a bound socket that does not listen keeps it, and
	// the kernel still resets the SYNs).
	if err := s.retryRaw.Control(func(fd uintptr) {
		sa, err := syscall.Getsockname(int(fd))
		if err != nil {
			serr = err
			return
		}
		if serr = syscall.Shutdown(int(fd), syscall.SHUT_RD); serr != nil {
			return
		}
		if err := syscall.Bind(int(fd), sa); err != nil && !errors.Is(err, syscall.EINVAL) {
			serr = fmt.Errorf("keep the port: bind: %w", err)
		}
	}); err != nil {
		return fmt.Errorf("retry port %s: stop listening: %w", s.retry.Addr(), err)
	}
	if serr != nil {
		return fmt.Errorf("retry port %s: stop listening: %w", s.retry.Addr(), serr)
	}
	s.retryDown = true
	return nil
}

// portUpLocked makes the retry port listen again after portDownLocked.
// The caller holds acceptMu.
func (s *Server) portUpLocked() error {
	if s.retryDone || !s.retryDown {
		return nil
	}
	var serr error
	err := s.retryRaw.Control(func(fd uintptr) {
		sa, err := syscall.Getsockname(int(fd))
		if err != nil {
			serr = err
			return
		}
		// portDownLocked kept the port bound: bind says EINVAL. Should
		// it not have, bind takes the port again.
		if err := syscall.Bind(int(fd), sa); err != nil && !errors.Is(err, syscall.EINVAL) {
			serr = fmt.Errorf("bind: %w", err)
			return
		}
		serr = syscall.Listen(int(fd), listenBacklog)
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("retry port %s: listen again: %w", s.retry.Addr(), err)
	}
	s.retryDown = false
	return nil
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
		return attempt.UnmapPort(netip.AddrPortFrom(a, uint16(sa.Port)))
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
