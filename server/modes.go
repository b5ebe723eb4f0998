package server

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/internal/field"
	"golang.org/x/net/http2"
)

// The retry modes (docs/spec.md §7.1). During a session the retry port
//
//   - close: accepts, stamps and closes each connection, as the interop
//     test's reference does;
//   - refuse: does not listen, so the kernel answers each SYN with a reset;
//   - hang: accepts, stamps, and holds the connection without writing a
//     byte until the client closes it or the session ends;
//   - restart=D: refuses for D from the session's start, then accepts and
//     closes;
//   - settings-close and goaway: accept, stamp, complete TLS with ALPN h2,
//     read the client's HTTP/2 preface, send the server's SETTINGS (and a
//     GOAWAY), and close: the attempt succeeds and the connection dies;
//   - outage=A,D: for A from the session's start, accept, stamp, complete
//     TLS with ALPN h2 and serve HTTP/2, answering every RPC UNAVAILABLE
//     and holding the connection READY; then close every connection and
//     refuse for D; then serve again until the session ends.
//
// Outside sessions the port accepts and closes in every mode.

// initMode checks Config.Mode and prepares what it needs.
func (s *Server) initMode() error {
	m := s.cfg.Mode
	// A mode made by hand rather than by ParseRetryMode must still be one;
	// it is kept as ParseRetryMode spells it (close is the zero value).
	p, err := backoff.ParseRetryMode(m.String())
	if err != nil {
		return field.Errorf("Mode", nil, "%w", err)
	}
	if m.Kind != backoff.ModeRestart && m.Kind != backoff.ModeOutage && (m.Down != 0 || m.Serve != 0) {
		return field.Errorf("Mode", m, "only restart and outage take durations (got %v, %v)", m.Down, m.Serve)
	}
	if m.Kind == backoff.ModeOutage && (m.Serve <= 0 || m.Down <= 0) {
		return field.Errorf("Mode", m, "the server's outage needs how long the port serves, then how long it is down, for example outage=3s,5s")
	}
	s.mode, m = p, p
	if s.cfg.TLSCert != nil && !m.Succeeds() {
		return field.Errorf("TLSCert", nil, "%s %s presents no certificate (only settings-close, goaway and outage do)", field.Name("Mode"), m)
	}
	if !m.ServerSeesAll() && !canStopListening {
		return field.Errorf("Mode", m, "the retry port can stop listening on Linux only")
	}
	if s.cfg.KeyLog != nil && !m.Succeeds() {
		return errKeyLogMode("Mode", m)
	}
	switch m.Kind {
	case backoff.ModeSettingsClose, backoff.ModeGoaway, backoff.ModeOutage:
		cert := s.cfg.TLSCert
		if cert == nil {
			c, err := defaultCertificate()
			if err != nil {
				return err
			}
			cert = &c
		}
		s.tlsConf = &tls.Config{
			Certificates: []tls.Certificate{*cert},
			NextProtos:   []string{http2.NextProtoTLS},
			MinVersion:   tls.VersionTLS12,
			KeyLogWriter: s.cfg.KeyLog,
		}
	}
	return nil
}

// errKeyLogMode is the error of a key log asked of mode m, a mode without
// TLS, which the configuration names modeField.
func errKeyLogMode(modeField string, m backoff.RetryMode) error {
	return field.Errorf("KeyLog", nil, "%s %s makes no TLS connection (only settings-close, goaway and outage do)", field.Name(modeField), m)
}

// heldConn is a retry connection the session's mode keeps open: held
// until the client closes it (hang), or for its handshake (settings-close,
// goaway). Its fields are guarded by Server.mu.
type heldConn struct {
	sess *running
	// idx is the connection's index in sess.Accepts, at its accept stamp.
	idx  int
	at   time.Time
	peer netip.AddrPort
	conn net.Conn // set once serveHeld has it
	// ended is set when the connection leaves Server.held: the client
	// closed it, its handshake ended, or the session ended.
	ended bool
	// sent is set when the server's SETTINGS (and GOAWAY) are written:
	// the handshake is counted as done, whatever the close then meets.
	sent bool
}

// holdLocked decides, for a connection sess keeps in its list, whether the
// mode holds it open; it returns its entry, or nil to close it at once,
// with full set when only the bound on held connections closed it. The
// caller holds mu and acceptMu.
func (s *Server) holdLocked(sess *running, peer netip.AddrPort, t time.Time) (hc *heldConn, full bool) {
	limit := 0
	switch sess.Params.Mode.Kind {
	case backoff.ModeHang, backoff.ModeOutage:
		limit = s.cfg.MaxHeld
	case backoff.ModeSettingsClose, backoff.ModeGoaway:
		limit = s.cfg.MaxHandshakes
	default:
		return nil, false
	}
	// Every mode that holds a connection knows how it ended, which the
	// model reads (docs/spec.md §7.3): whether it hung, or reached READY.
	// Until a handshake is done or has failed its ending is unknown, and
	// the mode says: the client may reconnect as soon as it has the
	// server's SETTINGS, before the handshake's goroutine notes them.
	if len(s.held) >= limit {
		sess.NotHeld++
		sess.endings = append(sess.endings, backoff.Ending{Fate: backoff.FateClosed})
		return nil, true
	}
	var e backoff.Ending
	if sess.Params.Mode.Hangs() {
		e.Fate = backoff.FateOpen
	}
	sess.endings = append(sess.endings, e)
	// The accept is kept when its event is emitted, after this: it is
	// the next of sess.Accepts.
	hc = &heldConn{sess: sess, idx: len(sess.Accepts), at: t, peer: peer}
	s.held[hc] = struct{}{}
	return hc, false
}

// ready notes that hc's connection reached READY: the server's SETTINGS
// went out (settings-close, goaway), or its TLS handshake completed and
// HTTP/2 serves it (outage). The caller holds mu.
func (s *Server) ready(hc *heldConn) {
	e := &hc.sess.endings[hc.idx]
	e.Ready, e.ReadyAfter = true, s.now().Round(0).Sub(hc.at)
}

// heldEnded notes that hc's connection ended with fate f, before the session
// did. The caller holds mu.
func (s *Server) heldEnded(hc *heldConn, f backoff.Fate) {
	e := &hc.sess.endings[hc.idx]
	e.Fate, e.Duration = f, s.now().Round(0).Sub(hc.at)
}

// serveHeld takes over c, the connection of hc, on a goroutine of its own;
// the caller holds acceptMu, so the session cannot end meanwhile.
func (s *Server) serveHeld(hc *heldConn, c net.Conn) {
	s.mu.Lock()
	hc.conn = c
	s.mu.Unlock()
	s.holders.Add(1)
	go func() {
		defer s.holders.Done()
		switch m := hc.sess.Params.Mode; {
		case m.Hangs():
			s.hold(hc, c)
		case m.Is(backoff.ModeOutage):
			s.serve(hc, c)
		default:
			s.handshake(hc, c)
		}
	}()
}

// dropHeld closes a connection that was to be held but could not be
// served (its descriptor could not become a connection).
func (s *Server) dropHeld(hc *heldConn, err error) {
	s.mu.Lock()
	if !hc.ended {
		hc.ended = true
		delete(s.held, hc)
		hc.sess.NotHeld++
		if hc.sess.endings != nil {
			hc.sess.endings[hc.idx] = backoff.Ending{Fate: backoff.FateClosed}
		}
	}
	s.mu.Unlock()
	s.log.Warn("retry connection closed at once: cannot hold it", "peer", hc.peer.String(), "err", err)
}

// releaseHeldLocked ends every held connection's stay (the session ends)
// and returns them for the caller to close once it has let go of mu. A
// held connection's ending stays as it is, open at the end; a handshake
// the end cuts counts as failed.
func (s *Server) releaseHeldLocked() []net.Conn {
	var out []net.Conn
	for hc := range s.held {
		hc.ended = true
		if !hc.sess.Params.Mode.Hangs() && !hc.sent {
			hc.sess.HandshakeErrors++
		}
		if hc.conn != nil {
			out = append(out, hc.conn)
		}
	}
	clear(s.held)
	return out
}

// hold reads and discards what the client sends on a held connection until
// it closes (hang mode), then notes how long it was held. The server never
// writes on it. The session's end closes it first when the client does not.
func (s *Server) hold(hc *heldConn, c net.Conn) {
	var first []byte
	buf := make([]byte, 256)
	for {
		n, err := c.Read(buf)
		if len(first) == 0 && n > 0 {
			first = bytes.Clone(buf[:n])
		}
		if err != nil {
			break
		}
	}
	c.Close()
	s.mu.Lock()
	if hc.ended { // the session's end closed it
		s.mu.Unlock()
		return
	}
	hc.ended = true
	delete(s.held, hc)
	held := s.now().Round(0).Sub(hc.at)
	hc.sess.endings[hc.idx] = backoff.Ending{Fate: backoff.FateAbandoned, Duration: held, ClientSent: payloadOf(first)}
	hc.sess.Abandoned++
	id := hc.sess.ID
	s.mu.Unlock()
	s.log.Info("client closed a held connection", "session", id, "peer", hc.peer.String(), "held", held)
}

// handshake speaks settings-close or goaway on c, within the handshake
// timeout, and counts the outcome in the session.
func (s *Server) handshake(hc *heldConn, c net.Conn) {
	c.SetDeadline(time.Now().Add(s.handshakeTimeout))
	sent := func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if !hc.ended {
			hc.sent = true
			hc.sess.Handshakes++
			s.ready(hc)
		}
	}
	err := h2Exchange(c, s.tlsConf, hc.sess.Params.Mode.Is(backoff.ModeGoaway), sent)
	c.Close()
	s.mu.Lock()
	if hc.ended { // the session's end cut it, and counted it
		s.mu.Unlock()
		return
	}
	hc.ended = true
	delete(s.held, hc)
	s.heldEnded(hc, backoff.FateClosed)
	failed := err != nil && !hc.sent
	if failed {
		hc.sess.HandshakeErrors++
	}
	id := hc.sess.ID
	s.mu.Unlock()
	if failed {
		s.log.Info("retry connection closed before the server's SETTINGS", "session", id,
			"peer", hc.peer.String(), "err", err)
	}
}

// serve holds a connection READY in outage mode: TLS with ALPN h2, then
// HTTP/2 served until the client closes it, the port goes down or the
// session ends (which close it), every RPC answered UNAVAILABLE.
func (s *Server) serve(hc *heldConn, c net.Conn) {
	c.SetDeadline(time.Now().Add(s.handshakeTimeout))
	tc := tls.Server(c, s.tlsConf)
	err := tc.Handshake()
	if err == nil && tc.ConnectionState().NegotiatedProtocol != http2.NextProtoTLS {
		err = fmt.Errorf("the client did not offer ALPN %s", http2.NextProtoTLS)
	}
	s.mu.Lock()
	if err == nil && !hc.ended {
		hc.sent = true
		hc.sess.Handshakes++
		s.ready(hc)
	}
	s.mu.Unlock()
	if err == nil {
		c.SetDeadline(time.Time{})
		(&http2.Server{}).ServeConn(tc, &http2.ServeConnOpts{Handler: http.HandlerFunc(unavailable)})
	}
	c.Close()
	s.mu.Lock()
	if hc.ended { // the port's going down or the session's end closed it
		s.mu.Unlock()
		return
	}
	hc.ended = true
	delete(s.held, hc)
	if err != nil {
		hc.sess.HandshakeErrors++
		s.heldEnded(hc, backoff.FateClosed)
	} else {
		s.heldEnded(hc, backoff.FateAbandoned)
	}
	s.mu.Unlock()
	if err != nil {
		s.log.Info("retry connection closed before it was READY", "session", hc.sess.ID, "peer", hc.peer.String(), "err", err)
	}
}

// unavailable answers a gRPC call UNAVAILABLE, as a server that is up but
// cannot serve yet, after holding it for at most a second: a client that
// makes its call again at once does not spin.
func unavailable(w http.ResponseWriter, r *http.Request) {
	select {
	case <-r.Context().Done():
		return
	case <-time.After(time.Second):
	}
	w.Header().Set("Content-Type", "application/grpc")
	w.Header().Set("Grpc-Status", "14")
	w.Header().Set("Grpc-Message", "the retry port serves no RPC (audit server --retry_mode outage)")
	w.WriteHeader(http.StatusOK)
}

// payloadOf names the first bytes a client sent.
func payloadOf(b []byte) backoff.Payload {
	switch {
	case len(b) == 0:
		return backoff.PayloadNone
	case b[0] == 0x16: // a TLS handshake record
		return backoff.PayloadTLSClientHello
	case bytes.HasPrefix([]byte(http2.ClientPreface), b) || bytes.HasPrefix(b, []byte(http2.ClientPreface)):
		return backoff.PayloadH2Preface
	}
	return backoff.PayloadOther
}
