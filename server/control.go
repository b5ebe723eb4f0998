package server

import (
	"log/slog"
	"net"
	"sync"
	"time"
)

// controlListener is the control port as gRPC sees it. It bounds the
// connections open at once (Config.MaxControlConns): one beyond the bound
// is closed as soon as it is accepted, so that idle clients can neither
// take the descriptors the retry port needs nor grow the server's memory.
// It also keeps the connections gRPC has not finished its HTTP/2 handshake
// on, so that shutdown can close them: gRPC's Stop and GracefulStop wait
// for every handshake to end.
type controlListener struct {
	net.Listener
	log *slog.Logger
	max int
	mu  sync.Mutex
	// open counts the connections accepted and not yet closed; refused
	// those closed at once for the bound since the last one admitted.
	open, refused int
	closed        bool
	// handshaking holds the connections whose handshake is not known to
	// be over.
	handshaking map[*trackedConn]struct{}
}

func newControlListener(ln net.Listener, max int, log *slog.Logger) *controlListener {
	return &controlListener{Listener: ln, max: max, log: log, handshaking: make(map[*trackedConn]struct{})}
}

// Accept returns the next connection within the bound; those beyond it are
// closed here, and the first of each run of them is logged.
func (l *controlListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		cc := &trackedConn{Conn: c, l: l}
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			c.Close()
			return nil, net.ErrClosed
		}
		if l.open >= l.max {
			l.refused++
			first := l.refused == 1
			l.mu.Unlock()
			c.Close()
			if first {
				l.log.Warn("control port: connection closed at once, as many are open as --max_control_conns allows",
					"peer", c.RemoteAddr().String(), "max_control_conns", l.max)
			}
			continue
		}
		l.open++
		l.refused = 0
		l.handshaking[cc] = struct{}{}
		l.mu.Unlock()
		return cc, nil
	}
}

// shutdown closes the listener and every connection still in its
// handshake; later Accepts fail. It may be called more than once.
func (l *controlListener) shutdown() {
	l.mu.Lock()
	l.closed = true
	conns := l.handshaking
	l.handshaking = make(map[*trackedConn]struct{})
	l.mu.Unlock()
	l.Listener.Close()
	for c := range conns {
		c.Close()
	}
}

// openConns counts the control connections open.
func (l *controlListener) openConns() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

func (l *controlListener) forget(c *trackedConn) {
	l.mu.Lock()
	delete(l.handshaking, c)
	l.mu.Unlock()
}

func (l *controlListener) closedOne() {
	l.mu.Lock()
	l.open--
	l.mu.Unlock()
}

// trackedConn is one control connection. gRPC sets a deadline for its
// handshake (Config's control handshake timeout) and clears it (a zero
// deadline) when the handshake is over, whether it succeeded or not; from
// then on the connection is gRPC's to close, and its Stop does.
type trackedConn struct {
	net.Conn
	l                   *controlListener
	handshake, closeOne sync.Once
}

func (c *trackedConn) SetDeadline(t time.Time) error {
	if t.IsZero() {
		c.handshake.Do(func() { c.l.forget(c) })
	}
	return c.Conn.SetDeadline(t)
}

// Close forgets the connection too: gRPC closes one whose handshake failed
// without clearing its deadline, and the listener must not keep it.
func (c *trackedConn) Close() error {
	c.handshake.Do(func() { c.l.forget(c) })
	c.closeOne.Do(c.l.closedOne)
	return c.Conn.Close()
}
