package server

import (
	"net"
	"sync"
	"time"
)

// controlListener is the control port as gRPC sees it. It keeps the
// connections gRPC has not finished its HTTP/2 handshake on, so that
// shutdown can close them: gRPC's Stop and GracefulStop wait for every
// handshake to end, and a client that connects and sends nothing holds one
// open for gRPC's 120 s connection timeout.
type controlListener struct {
	net.Listener
	mu     sync.Mutex
	closed bool
	// handshaking holds the connections whose handshake is not known to
	// be over.
	handshaking map[*trackedConn]struct{}
}

func newControlListener(ln net.Listener) *controlListener {
	return &controlListener{Listener: ln, handshaking: make(map[*trackedConn]struct{})}
}

func (l *controlListener) Accept() (net.Conn, error) {
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
	l.handshaking[cc] = struct{}{}
	l.mu.Unlock()
	return cc, nil
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
		c.Conn.Close()
	}
}

func (l *controlListener) forget(c *trackedConn) {
	l.mu.Lock()
	delete(l.handshaking, c)
	l.mu.Unlock()
}

// trackedConn is one control connection. gRPC sets a deadline for its
// handshake and clears it (a zero deadline) when the handshake is over,
// whether it succeeded or not; from then on the connection is gRPC's to
// close, and its Stop does.
type trackedConn struct {
	net.Conn
	l    *controlListener
	once sync.Once
}

func (c *trackedConn) SetDeadline(t time.Time) error {
	if t.IsZero() {
		c.once.Do(func() { c.l.forget(c) })
	}
	return c.Conn.SetDeadline(t)
}

// Close forgets the connection too: gRPC closes one whose handshake failed
// without clearing its deadline, and the listener must not keep it.
func (c *trackedConn) Close() error {
	c.once.Do(func() { c.l.forget(c) })
	return c.Conn.Close()
}
