// Package server is the reference server of gRPC's connection backoff
// interop test (docs/spec.md §1): grpc.testing.ReconnectService on a control port
// and a retry port that accepts and closes every connection, recording when
// each arrived and from where. It fixes the C++ reference's bugs (docs/spec.md §4)
// and verifies each session with backoff.Verify, the one verifier the packet
// auditor also runs. During a session the retry port may instead fail
// attempts in other ways, its retry mode (docs/spec.md §7.1; Config.Mode).
//
// A Server behaves like net/http/httptest: New listens at once, the chosen
// addresses are exposed, and Close is idempotent and waits for every
// goroutine the server started.
package server

import (
	"cmp"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/pb"
	"github.com/backoff-audit/audit/session"
)

// Defaults of Config's zero fields.
const (
	DefaultControlAddr    = "127.0.0.1:0"
	DefaultRetryAddr      = ":0"
	DefaultSessionTimeout = 15 * time.Minute
	DefaultMaxAttempts    = 10000
	DefaultKeepSessions   = 16
	DefaultMaxWaiting     = 64
	// DefaultMaxHeld bounds the connections hang mode holds at once.
	DefaultMaxHeld = 10000
	// DefaultMaxHandshakes bounds the TLS and HTTP/2 handshakes of the
	// settings-close and goaway modes at once.
	DefaultMaxHandshakes = 256
	// DefaultHandshakeTimeout bounds each connection of the settings-close
	// and goaway modes, from accept to close.
	DefaultHandshakeTimeout = 5 * time.Second
	// DefaultMaxControlConns bounds the control port's connections open
	// at once.
	DefaultMaxControlConns = 256
	// ControlHandshakeTimeout bounds a control connection's HTTP/2
	// handshake (gRPC's connection timeout): a client that connects and
	// says nothing is closed then.
	ControlHandshakeTimeout = 10 * time.Second
	// ControlIdleTimeout ends a control connection with no RPC for this
	// long (gRPC's MaxConnectionIdle: a GOAWAY, after which a client
	// reconnects when it calls again). It is longer than the interop
	// test's 540 s retry RPC, during which its control channel idles.
	ControlIdleTimeout = 15 * time.Minute
)

// Config configures a Server. The zero value is usable.
type Config struct {
	// ControlAddr is the host:port the ReconnectService listens on
	// (plaintext gRPC). Default DefaultControlAddr; port 0 picks a free port.
	ControlAddr string
	// RetryAddr is the host:port of the retry port. Default
	// DefaultRetryAddr: every interface, IPv4 and IPv6 on one dual-stack
	// socket, so a client that resolves localhost to ::1 and 127.0.0.1
	// reaches it either way.
	RetryAddr string
	// SessionTimeout ends a session whose client never called Stop, so
	// that the next Start is not blocked for ever. It counts from Start.
	// Default DefaultSessionTimeout.
	SessionTimeout time.Duration
	// MaxAttempts bounds the connections a session keeps; later ones are
	// counted, written to Record, and make the verdict backoff.Overflow.
	// Default DefaultMaxAttempts.
	MaxAttempts int
	// KeepSessions is how many finished sessions Session can still return.
	// Default DefaultKeepSessions.
	KeepSessions int
	// MaxWaiting bounds the Starts waiting for the running session to end;
	// a Start beyond it gets RESOURCE_EXHAUSTED at once, so callers cannot
	// pile up without limit (each waiting Start holds an RPC and its
	// goroutine). Default DefaultMaxWaiting.
	MaxWaiting int
	// Record, when set, receives one JSON line per event (the format is
	// described in session/record.go). Writes are serialised; the first
	// write error stops recording and is returned by Close.
	Record io.Writer
	// Logger receives the log: one line per interval as connections
	// arrive, and each session's start and end. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock of every timestamp (accepts, session start and end,
	// the restart line, how long a held connection was held). Default
	// time.Now. The session timeout, the restart delay and the handshake
	// timeout run on real time regardless.
	Now func() time.Time

	// Mode is what the retry port does during a session (docs/spec.md §7.1);
	// outside sessions it accepts and closes. The zero value is close.
	// refuse and restart need Linux.
	Mode backoff.RetryMode
	// MinConnectTimeout is MIN_CONNECT_TIMEOUT in the sessions' policy
	// (backoff.Policy.MinConnectTimeout): the least time a client gives
	// one attempt, which bounds how long an attempt hangs in hang mode.
	// Default backoff.DefaultMinConnectTimeout.
	MinConnectTimeout time.Duration
	// MaxHeld bounds the connections hang mode holds open at once; beyond
	// it a connection is accepted, stamped and closed, and counted in
	// Session.NotHeld. Default DefaultMaxHeld.
	MaxHeld int
	// MaxHandshakes bounds the connections of the settings-close and
	// goaway modes in their handshake at once; beyond it a connection is
	// accepted, stamped and closed, and counted in Session.NotHeld.
	// Default DefaultMaxHandshakes.
	MaxHandshakes int
	// MaxControlConns bounds the control port's connections open at once;
	// one more is closed as soon as it is accepted. It is lowered to half
	// the process's descriptor limit when that is smaller, so that the
	// retry port always finds descriptors. Default DefaultMaxControlConns.
	MaxControlConns int
	// TLSCert is the certificate the settings-close and goaway modes
	// present. Default: the committed test certificate
	// (testdata/README.md, "Test certificate").
	TLSCert *tls.Certificate
	// KeyLog, when set, receives the TLS secrets of the settings-close and
	// goaway modes' connections in the NSS key log format
	// (tls.Config.KeyLogWriter), so that any client's connections to them
	// can be decrypted from a capture (audit h2 --keylog). Whoever reads
	// it reads those connections.
	KeyLog io.Writer

	// OnEvent, when set, is called for every start, accept, restart, stop
	// and expire event, the same values (in the same order) that Record
	// receives. Calls are made one at a time from the server's goroutines
	// (the retry accept loop, RPC handlers, the session timer); a slow
	// OnEvent delays the retry port and the end of sessions. It may call
	// Session and the address methods, but not Close.
	OnEvent func(session.RecordEvent)
	// BeforeStamp, when set, is called for each retry connection after
	// accept and before its time is taken with Now, from the accept loop
	// or from whatever ends a session (Stop, the session timeout, Close)
	// while it takes the connections still queued; calls are made one at a
	// time. It is a test hook: blocking in it for one chosen peer delays
	// that connection's server timestamp (and every later accept, and the
	// end of the session), which is how a test makes the server's list
	// disagree with the kernel's.
	BeforeStamp func(peer netip.AddrPort)

	// outsideEvery replaces outsideLogEvery when set (tests).
	outsideEvery time.Duration
	// handshakeTimeout replaces DefaultHandshakeTimeout when set (tests).
	handshakeTimeout time.Duration
	// controlHandshake replaces ControlHandshakeTimeout when set (tests).
	controlHandshake time.Duration
}

// gracefulStopWait bounds how long Close lets running RPCs answer before it
// closes every control connection: shutdown must not wait for a client
// that keeps a channel open.
const gracefulStopWait = 300 * time.Millisecond

// outsideLogEvery is the period of the log's summary of connections outside
// any session: a client that keeps connecting between sessions must not
// flood the log (every connection is still in the record).
const outsideLogEvery = time.Second

// Server is a running reference server.
type Server struct {
	cfg     Config
	log     *slog.Logger
	now     func() time.Time
	control *controlListener
	retry   net.Listener
	grpc    *grpc.Server

	// sem holds one token while a session runs: Start sends, the end of the
	// session receives. It serialises sessions.
	sem       chan struct{}
	closed    chan struct{}
	closeOnce sync.Once
	closeErr  error
	wg        sync.WaitGroup
	// waiting counts Starts blocked on sem; it is bounded by
	// Config.MaxWaiting (tests read it to know a Start really waits).
	waiting atomic.Int32

	// acceptMu serialises taking connections from the retry port's accept
	// queue with the end of sessions: the accept loop takes, stamps and
	// closes connections only while holding it, and whatever ends a
	// session holds it, takes what is still queued, then ends the session.
	// So a connection the kernel completed before a Stop is filed in the
	// session that Stop ends, never in the next one or in none. It is
	// taken before mu.
	acceptMu sync.Mutex
	// retryDone is set, under acceptMu, when Close begins: no connection
	// is recorded after it.
	retryDone bool
	// retryFile, where set, is a second descriptor of the retry listener
	// and retryRaw its raw connection: the accept loop waits on it and
	// takes connections from it, as does the end of a session.
	retryFile *os.File
	retryRaw  syscall.RawConn
	// retryDown is set, under acceptMu, while the retry port does not
	// listen (refuse and restart modes, docs/spec.md §7.1).
	retryDown bool
	// spare is a descriptor kept open (of /dev/null) for the retry port:
	// when accept fails for want of descriptors, it is closed so that the
	// connection can be accepted and stamped at once, then opened again.
	// Guarded by acceptMu; -1 when none is held.
	spare int
	// noFDs counts the retry connections taken with the spare descriptor
	// (tests read it).
	noFDs atomic.Int64

	// mode is Config.Mode, its zero value spelt ModeClose; tlsConf the
	// TLS configuration of the settings-close and goaway modes.
	mode    backoff.RetryMode
	tlsConf *tls.Config
	// handshakeTimeout bounds each connection of those modes.
	handshakeTimeout time.Duration
	// holders counts the goroutines of held connections (held, guarded by
	// mu): Close waits for them after the session's end has closed them.
	holders sync.WaitGroup

	mu      sync.Mutex
	closing bool
	cur     *running
	// fold keeps the sessions' lists from the events the server emits, as
	// every reader of them keeps them (session.Fold): the server's list of
	// a session is its fold's, by construction.
	fold   session.Fold
	lastID int
	// outside counts the connections outside any session not yet in the
	// log, outsideSince is when the first of them came (real time) and
	// outsidePeer the last of them; outsideKick wakes the goroutine that
	// summarises them.
	outside      int
	outsideSince time.Time
	outsidePeer  netip.AddrPort
	outsideKick  chan struct{}
	outsideEvery time.Duration
	// held holds the retry connections kept open (hang mode) or in their
	// handshake (settings-close, goaway): all of the running session's,
	// since its end closes them.
	held map[*heldConn]struct{}

	// finishedMu guards finished. It is never held while taking another
	// lock, so OnEvent (called under emitMu) may call Session.
	finishedMu sync.Mutex
	finished   []*Session // the last KeepSessions, oldest first

	// emitMu orders events: it is taken while mu is still held, so events
	// reach Record and OnEvent in the order the state changed.
	emitMu sync.Mutex
	recErr error
}

// New listens on the control and retry ports and starts serving. The retry
// port is open from this moment (docs/spec.md §4); connections that arrive while
// no session runs are recorded as session 0.
func New(cfg Config) (*Server, error) {
	if cfg.ControlAddr == "" {
		cfg.ControlAddr = DefaultControlAddr
	}
	if cfg.RetryAddr == "" {
		cfg.RetryAddr = DefaultRetryAddr
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = DefaultSessionTimeout
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.KeepSessions <= 0 {
		cfg.KeepSessions = DefaultKeepSessions
	}
	if cfg.MaxWaiting <= 0 {
		cfg.MaxWaiting = DefaultMaxWaiting
	}
	if cfg.MinConnectTimeout <= 0 {
		cfg.MinConnectTimeout = backoff.DefaultMinConnectTimeout
	}
	if cfg.MaxHeld <= 0 {
		cfg.MaxHeld = DefaultMaxHeld
	}
	if cfg.MaxHandshakes <= 0 {
		cfg.MaxHandshakes = DefaultMaxHandshakes
	}
	if cfg.MaxControlConns <= 0 {
		cfg.MaxControlConns = DefaultMaxControlConns
	}
	s := &Server{
		cfg:              cfg,
		log:              cfg.Logger,
		now:              cfg.Now,
		sem:              make(chan struct{}, 1),
		closed:           make(chan struct{}),
		outsideKick:      make(chan struct{}, 1),
		outsideEvery:     outsideLogEvery,
		held:             make(map[*heldConn]struct{}),
		handshakeTimeout: DefaultHandshakeTimeout,
		spare:            -1,
	}
	if err := s.initMode(); err != nil {
		return nil, err
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.now == nil {
		s.now = time.Now
	}
	if cfg.outsideEvery > 0 {
		s.outsideEvery = cfg.outsideEvery
	}
	if cfg.handshakeTimeout > 0 {
		s.handshakeTimeout = cfg.handshakeTimeout
	}
	control, err := listen("control", cfg.ControlAddr)
	if err != nil {
		return nil, err
	}
	maxControl := cfg.MaxControlConns
	if limit := descriptorLimit(); limit > 0 && maxControl > limit/2 {
		maxControl = max(limit/2, 1)
		s.log.Warn("control port: fewer connections at once than --max_control_conns, to leave the retry port descriptors",
			"max_control_conns", maxControl, "descriptor_limit", limit)
	}
	s.control = newControlListener(control, maxControl, s.log)
	if s.retry, err = listen("retry", cfg.RetryAddr); err != nil {
		control.Close()
		return nil, err
	}
	if err := s.initRetry(); err != nil {
		control.Close()
		s.retry.Close()
		return nil, err
	}
	// WaitForHandlers: even a forced Stop returns only after every handler,
	// so no event is emitted after Close.
	s.grpc = grpc.NewServer(grpc.WaitForHandlers(true),
		grpc.ConnectionTimeout(cmp.Or(cfg.controlHandshake, ControlHandshakeTimeout)),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: ControlIdleTimeout}))
	pb.RegisterReconnectServiceServer(s.grpc, service{s: s})
	s.wg.Add(3)
	go func() {
		defer s.wg.Done()
		s.serveControl()
	}()
	go func() {
		defer s.wg.Done()
		s.acceptLoop()
	}()
	go func() {
		defer s.wg.Done()
		s.logOutside()
	}()
	return s, nil
}

// serveControl runs gRPC on the control port until Close. Close stops it
// before or while it serves: ErrServerStopped (Close came before Serve
// began) and the listener closed under it are the normal end; any other
// error means the control port died, which the log must show.
func (s *Server) serveControl() {
	err := s.grpc.Serve(s.control)
	if err == nil || errors.Is(err, grpc.ErrServerStopped) {
		return
	}
	select {
	case <-s.closed:
		if errors.Is(err, net.ErrClosed) {
			return
		}
	default:
	}
	s.log.Error("control port stopped", "addr", s.control.Addr().String(), "err", err)
}

func listen(what, addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("listen on %s port %s: address already in use (is another server running?): %w", what, addr, err)
		}
		return nil, fmt.Errorf("listen on %s port %s: %w", what, addr, err)
	}
	return ln, nil
}

// ControlAddr is the control port's listening address, e.g. "127.0.0.1:40111".
func (s *Server) ControlAddr() string { return s.control.Addr().String() }

// RetryAddr is the retry port's listening address, e.g. "[::]:40112".
func (s *Server) RetryAddr() string { return s.retry.Addr().String() }

// RetryPort is the retry port's number.
func (s *Server) RetryPort() int { return s.retry.Addr().(*net.TCPAddr).Port }

// Close stops serving: both ports stop accepting at once (the connections
// already complete in the retry port's queue are recorded first), Starts
// still waiting for a session get UNAVAILABLE, running RPCs get a moment to
// answer, a running session ends as "expire" with cause "server closed"
// (closing the connections its mode held), and when Close returns every
// event has been written to Record. No client
// can hold it up: it waits at most gracefulStopWait for running RPCs. It
// waits for every goroutine of the server and returns the first Record
// write error. Calls after the first return the same result.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.acceptMu.Lock()
		s.drainQueueLocked()
		s.retryDone = true
		s.mu.Lock()
		s.closing = true
		s.mu.Unlock()
		s.acceptMu.Unlock()
		close(s.closed) // waiting Starts return UNAVAILABLE
		// Never under acceptMu: closing waits for the accept loop to let
		// go of the descriptor, and the loop may be waiting for acceptMu.
		s.retry.Close()
		if s.retryFile != nil {
			s.retryFile.Close()
		}
		s.control.shutdown()
		s.stopGRPC()
		s.wg.Wait()
		s.acceptMu.Lock()
		s.mu.Lock()
		if sess := s.cur; sess != nil {
			s.endLocked(sess, session.CauseClosed, netip.AddrPort{}) // unlocks mu
		} else {
			s.mu.Unlock()
		}
		s.closeSpare()
		s.acceptMu.Unlock()
		s.holders.Wait() // the end of the session closed their connections
		s.flushOutside()
		s.emitMu.Lock()
		s.closeErr = s.recErr
		s.emitMu.Unlock()
	})
	return s.closeErr
}

// stopGRPC lets running RPCs answer (a waiting Start returns at once when
// closed is closed) for at most gracefulStopWait, then closes every
// control connection. A client that does not acknowledge the GOAWAY ping
// would hold GracefulStop for 5 s. gRPC's Stop would still wait for a
// connection in its HTTP/2 handshake, up to its 120 s connection timeout;
// the control listener has closed those already.
func (s *Server) stopGRPC() {
	done := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(done)
	}()
	t := time.NewTimer(gracefulStopWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		s.grpc.Stop()
		<-done
	}
}

// take records one connection taken from the retry port's queue; the
// caller holds acceptMu. It returns the connection's place among the held
// ones when the session's mode keeps it open (serveHeld then takes it
// over), nil when the caller closes it at once.
func (s *Server) take(peer netip.AddrPort) *heldConn {
	if s.cfg.BeforeStamp != nil {
		s.cfg.BeforeStamp(peer)
	}
	return s.accepted(peer)
}

// acceptBackoff is the wait after a failed accept that is not about one
// connection (e.g. EMFILE), as net/http does: it doubles up to a second.
func (s *Server) acceptBackoff(delay time.Duration, err error) (time.Duration, bool) {
	delay = min(max(2*delay, 5*time.Millisecond), time.Second)
	s.log.Warn("retry port accept failed", "err", err, "retry_in", delay)
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-s.closed:
		return delay, false
	case <-t.C:
		return delay, true
	}
}

// addrPortOf converts a connection's address, with an IPv4-mapped IPv6
// address written as IPv4 (docs/spec.md §5, Peers).
func addrPortOf(a net.Addr) netip.AddrPort {
	var ap netip.AddrPort
	switch a := a.(type) {
	case *net.TCPAddr:
		ap = a.AddrPort()
	default:
		ap, _ = netip.ParseAddrPort(a.String())
	}
	return attempt.UnmapPort(ap)
}

// emitLocked hands e to Record and OnEvent. It is called with mu held and
// returns with mu released; taking emitMu before releasing mu keeps events
// in the order of the state changes without calling out under mu.
func (s *Server) emitLocked(e session.RecordEvent) {
	if s.fold.Add(e) == session.Kept && s.cur != nil && s.cur.ID == e.Session {
		s.cur.Accepts = s.fold.Cur.Accepts
	}
	s.emitMu.Lock()
	s.mu.Unlock()
	defer s.emitMu.Unlock()
	if s.cfg.Record != nil && s.recErr == nil {
		if err := session.WriteRecordEvent(s.cfg.Record, e); err != nil {
			s.recErr = fmt.Errorf("write record: %w", err)
			s.log.Error("recording stopped", "err", err)
		}
	}
	if s.cfg.OnEvent != nil {
		s.cfg.OnEvent(e)
	}
}

// Session returns finished session id (numbered from 1), or false when it
// is still running, never existed, or is older than the last KeepSessions.
// A session is kept before its stop or expire event is emitted, so OnEvent
// can fetch it from there. The returned value shares nothing with the server.
func (s *Server) Session(id int) (Session, bool) {
	s.finishedMu.Lock()
	defer s.finishedMu.Unlock()
	for _, f := range s.finished {
		if f.ID == id {
			return f.clone(), true
		}
	}
	return Session{}, false
}

// Sessions returns the finished sessions still kept, oldest first.
func (s *Server) Sessions() []Session {
	s.finishedMu.Lock()
	defer s.finishedMu.Unlock()
	out := make([]Session, len(s.finished))
	for i, f := range s.finished {
		out[i] = f.clone()
	}
	return out
}
