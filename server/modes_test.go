package server

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/internal/testutil"
	"github.com/backoff-audit/audit/pb"
	"github.com/backoff-audit/audit/session"
)

func mode(t *testing.T, s string) backoff.RetryMode {
	t.Helper()
	m, err := backoff.ParseRetryMode(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// dialTo connects from local to the retry port at the same family's
// loopback address.
func (h *harness) dialTo(local netip.Addr) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: local.AsSlice()}}
	to := "127.0.0.1"
	if local.Is6() {
		to = "::1"
	}
	return d.DialContext(h.ctx, "tcp", net.JoinHostPort(to, strconv.Itoa(h.s.RetryPort())))
}

// wantRefused dials from local and fails unless the kernel refuses.
func (h *harness) wantRefused(local netip.Addr) {
	h.t.Helper()
	c, err := h.dialTo(local)
	if err == nil {
		c.Close()
		h.t.Fatalf("dial retry port from %v: connected, want connection refused", local)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		h.t.Fatalf("dial retry port from %v: %v, want connection refused", local, err)
	}
}

// closedBy reports whether the server closed c within d: a read ends in
// EOF or a reset, not in the deadline. Nothing may arrive on it.
func closedBy(t *testing.T, c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	n, err := c.Read(make([]byte, 1))
	if n > 0 {
		t.Errorf("server wrote on the retry connection from %v", c.LocalAddr())
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return true
}

// TestStartLineCarriesModeAndMinConnectTimeout: every session's start line
// and Session name its retry mode, and its policy carries the server's
// MIN_CONNECT_TIMEOUT.
func TestStartLineCarriesModeAndMinConnectTimeout(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want session.SessionParams
	}{
		{name: "defaults", want: session.SessionParams{Policy: backoff.ReferencePolicy(0)}},
		{name: "close spelt out", cfg: Config{Mode: backoff.RetryMode{Kind: backoff.ModeClose}},
			want: session.SessionParams{Policy: backoff.ReferencePolicy(0)}},
		{
			name: "hang, 3 s",
			cfg:  Config{Mode: backoff.RetryMode{Kind: backoff.ModeHang}, MinConnectTimeout: 3 * time.Second},
			want: session.SessionParams{Policy: func() backoff.Policy {
				p := backoff.ReferencePolicy(0)
				p.MinConnectTimeout = 3 * time.Second
				return p
			}(), Mode: backoff.RetryMode{Kind: backoff.ModeHang}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rec testutil.SyncBuffer
			tt.cfg.Record = &rec
			h := start(t, tt.cfg)
			if _, err := h.rpc.Start(h.ctx, nil); err != nil {
				t.Fatal(err)
			}
			e := h.waitEvent(session.EventStart)
			if diff := cmp.Diff(tt.want, *e.Params); diff != "" {
				t.Errorf("start params (-want +got):\n%s", diff)
			}
			h.stop()
			ss, _ := h.s.Session(1)
			if ss.Params != tt.want {
				t.Errorf("Session params %+v, want %+v", ss.Params, tt.want)
			}
			events, err := session.ReadRecord(bytes.NewReader(rec.Bytes()))
			if err != nil || len(events) == 0 || *events[0].Params != tt.want {
				t.Errorf("record's start line read back as %+v (%v), want params %+v", events, err, tt.want)
			}
		})
	}
}

// TestNewRefusesBadModes: a mode ParseRetryMode would not give is an error,
// and so is an outage without its durations (a capture's reading).
func TestNewRefusesBadModes(t *testing.T) {
	for _, m := range []backoff.RetryMode{{Kind: "sleep"}, {Kind: backoff.ModeRestart}, {Kind: backoff.ModeHang, Down: time.Second}, {Kind: backoff.ModeOutage}} {
		s, err := New(Config{RetryAddr: "127.0.0.1:0", Mode: m})
		if err == nil {
			s.Close()
			t.Errorf("New with mode %+v: no error", m)
		}
	}
}

// TestRefuseMode: during a session the retry port refuses (the kernel
// resets every SYN) and the verdict says the server saw nothing; before
// and after, it accepts and closes, on the same port, session after
// session, whether the port was chosen by the kernel or given.
func TestRefuseMode(t *testing.T) {
	free := func(t *testing.T) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().String()
	}
	tests := []struct {
		name  string
		addr  func(t *testing.T) string
		peers []string
	}{
		{name: "port 0, IPv4", addr: func(*testing.T) string { return "127.0.0.1:0" }, peers: []string{"127.0.0.1"}},
		{name: "chosen port", addr: free, peers: []string{"127.0.0.1"}},
		{name: "port 0, dual stack", addr: func(*testing.T) string { return ":0" }, peers: []string{"127.0.0.1", "::1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if len(tt.peers) > 1 && !ipv6Loopback(t) {
				t.Skip("no IPv6 loopback")
			}
			var rec testutil.SyncBuffer
			h := start(t, Config{Mode: mode(t, "refuse"), RetryAddr: tt.addr(t), Record: &rec})
			port := h.s.RetryPort()
			for _, p := range tt.peers {
				if e := h.retryEvent(p); e.Session != 0 {
					t.Errorf("before Start: accept in session %d, want 0", e.Session)
				}
			}
			for id := 1; id <= 2; id++ {
				h.startSession(0)
				for _, p := range tt.peers {
					h.wantRefused(netip.MustParseAddr(p))
				}
				info := h.stop()
				stop := h.waitEvent(session.EventStop)
				if info.Passed || stop.End.Passed || stop.End.Verdict != backoff.NotJudged || stop.End.Reason != refuseReason || stop.End.Attempts != 0 {
					t.Errorf("session %d: passed %v, end %+v; want not passed, no attempt, reason %q",
						id, info.Passed, stop.End, refuseReason)
				}
				for _, p := range tt.peers {
					if e := h.retryEvent(p); e.Session != 0 {
						t.Errorf("after session %d: accept in session %d, want 0", id, e.Session)
					}
				}
				if got := h.s.RetryPort(); got != port {
					t.Fatalf("retry port moved from %d to %d", port, got)
				}
				ss, _ := h.s.Session(id)
				if !ss.Params.Mode.Is(backoff.ModeRefuse) {
					t.Errorf("session %d: mode %v, want refuse", id, ss.Params.Mode)
				}
			}
		})
	}
}

// retryEvent makes one retry connection from local, which the server must
// accept and close, and returns its accept event.
func (h *harness) retryEvent(local string) session.RecordEvent {
	h.t.Helper()
	ap := h.dialRetry(local)
	for {
		if e := h.waitEvent(session.EventAccept); e.Peer == ap {
			return e
		}
	}
}

// TestRefuseModeEnds: a refuse session that times out, or that Close
// ends, gives the port back: listening after the timeout, refused after
// Close, which is prompt.
func TestRefuseModeEnds(t *testing.T) {
	lo := netip.MustParseAddr("127.0.0.1")
	h := start(t, Config{Mode: mode(t, "refuse"), SessionTimeout: 200 * time.Millisecond})
	h.startSession(0)
	h.wantRefused(lo)
	if exp := h.waitEvent(session.EventExpire); exp.End.Cause != session.CauseTimeout || exp.End.Reason != refuseReason {
		t.Errorf("expire %+v; want the timeout and the refuse reason", exp.End)
	}
	h.retry("127.0.0.1")

	h.startSession(0)
	h.wantRefused(lo)
	t0 := time.Now()
	if err := h.s.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d > closeBound {
		t.Errorf("Close took %v, want at most %v", d, closeBound)
	}
	if exp := h.waitEvent(session.EventExpire); exp.End.Cause != session.CauseClosed {
		t.Errorf("expire %+v; want server closed", exp.End)
	}
	h.wantRefused(lo)
}

// TestHangHoldsUpToMaxHeld: in hang mode the server holds MaxHeld
// connections open, never writing; the rest it accepts, stamps and closes
// at once, and counts. Stop closes every held one, and each attempt's
// ending says which it was.
func TestHangHoldsUpToMaxHeld(t *testing.T) {
	const maxHeld, dialers = 50, 80
	h := start(t, Config{Mode: mode(t, "hang"), MaxHeld: maxHeld})
	h.startSession(0)
	conns := make([]net.Conn, dialers)
	for i := range conns {
		c, err := dialAndLeave(h.ctx, h.s, netip.MustParseAddr("127.0.0.1"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		conns[i] = c
	}
	for range dialers {
		h.waitEvent(session.EventAccept)
	}
	// The connections closed at once see it within the second; the held
	// ones see nothing.
	closed := make([]bool, dialers)
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() { closed[i] = closedBy(t, c, time.Second) })
	}
	wg.Wait()
	var held []net.Conn
	for i, c := range conns {
		if !closed[i] {
			held = append(held, c)
		}
	}
	if len(held) != maxHeld {
		t.Fatalf("%d connections held, want %d (MaxHeld)", len(held), maxHeld)
	}
	h.s.mu.Lock()
	n := len(h.s.held)
	h.s.mu.Unlock()
	if n != maxHeld {
		t.Errorf("server lists %d held connections, want %d", n, maxHeld)
	}

	h.stop()
	for _, c := range held {
		wg.Go(func() {
			if !closedBy(t, c, testTimeout) {
				t.Errorf("held connection %v still open after Stop", c.LocalAddr())
			}
		})
	}
	wg.Wait()
	ss, _ := h.s.Session(1)
	if ss.NotHeld != dialers-maxHeld || ss.End.Attempts != dialers || ss.Abandoned != 0 {
		t.Errorf("session: %d not held, %d attempts, %d abandoned; want %d, %d, 0",
			ss.NotHeld, ss.End.Attempts, ss.Abandoned, dialers-maxHeld, dialers)
	}
	fates := map[backoff.Fate]int{}
	for _, e := range ss.Endings {
		fates[e.Fate]++
	}
	if want := (map[backoff.Fate]int{backoff.FateOpen: maxHeld, backoff.FateClosed: dialers - maxHeld}); !cmp.Equal(fates, want) {
		t.Errorf("endings by fate %v, want %v", fates, want)
	}
	h.s.mu.Lock()
	n = len(h.s.held)
	h.s.mu.Unlock()
	if n != 0 {
		t.Errorf("%d connections still listed as held after Stop", n)
	}
}

// TestHangEndings: a held connection the client closes ends "abandoned by
// client" after the time it was held, with what the client sent; one
// still held at Stop ends "open at end"; a foreign peer's attempt is not
// among the verified peer's endings.
func TestHangEndings(t *testing.T) {
	h := start(t, Config{Mode: mode(t, "hang")})
	h.startSession(0)
	c1, err := dialAndLeave(h.ctx, h.s, netip.MustParseAddr("127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	if _, err := c1.Write([]byte{0x16, 0x03, 0x01, 0x00, 0x05}); err != nil { // the start of a ClientHello
		t.Fatal(err)
	}
	h.waitEvent(session.EventAccept)
	if closedBy(t, c1, 100*time.Millisecond) {
		t.Fatal("the server closed a connection hang mode holds")
	}
	h.clock.Advance(20 * time.Second)
	c1.Close()
	h.waitFor("the server to see the client's close", func() bool {
		h.s.mu.Lock()
		defer h.s.mu.Unlock()
		return len(h.s.held) == 0
	})
	c2, err := dialAndLeave(h.ctx, h.s, netip.MustParseAddr("127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	h.waitEvent(session.EventAccept)
	c3, err := dialAndLeave(h.ctx, h.s, netip.MustParseAddr("127.0.0.2"))
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	h.waitEvent(session.EventAccept)
	h.stop()
	ss, _ := h.s.Session(1)
	want := []backoff.Ending{
		{Fate: backoff.FateAbandoned, Duration: 20 * time.Second, ClientSent: backoff.PayloadTLSClientHello},
		{Fate: backoff.FateOpen},
	}
	if diff := cmp.Diff(want, ss.Endings); diff != "" {
		t.Errorf("endings (-want +got):\n%s", diff)
	}
	if ss.Abandoned != 1 {
		t.Errorf("%d abandoned, want 1", ss.Abandoned)
	}
	for _, c := range []net.Conn{c2, c3} {
		if !closedBy(t, c, testTimeout) {
			t.Errorf("connection %v still open after Stop", c.LocalAddr())
		}
	}
}

// TestHangVerdict: in hang mode Stop judges by the model of docs/spec.md
// §7.3: after an attempt the client abandoned at its connect timeout, the
// next may come that timeout later (a close-mode window would call it
// late); a client that never gives up on a held connection fails, even
// with a single attempt.
func TestHangVerdict(t *testing.T) {
	lo := netip.MustParseAddr("127.0.0.1")
	t.Run("attempts at the connect timeout", func(t *testing.T) {
		h := start(t, Config{Mode: mode(t, "hang"), MinConnectTimeout: 3 * time.Second})
		h.startSession(0)
		c1, err := dialAndLeave(h.ctx, h.s, lo)
		if err != nil {
			t.Fatal(err)
		}
		h.waitEvent(session.EventAccept)
		h.clock.Advance(3 * time.Second)
		c1.Close()
		h.waitFor("the server to see the client's close", func() bool {
			h.s.mu.Lock()
			defer h.s.mu.Unlock()
			return len(h.s.held) == 0
		})
		c2, err := dialAndLeave(h.ctx, h.s, lo)
		if err != nil {
			t.Fatal(err)
		}
		defer c2.Close()
		h.waitEvent(session.EventAccept)
		info := h.stop()
		ss, _ := h.s.Session(1)
		if !info.Passed || len(info.BackoffMs) != 1 || info.BackoffMs[0] != 3000 {
			t.Errorf("Stop: passed %v, backoff_ms %v (%s); want passed, [3000]", info.Passed, info.BackoffMs, ss.End.Reason)
		}
		if ivs := ss.Result.Intervals; len(ivs) != 1 || ivs[0].Term != backoff.TermConnectTimeout {
			t.Errorf("intervals %+v; want one set by the connect timeout", ivs)
		}
	})
	t.Run("never gives up", func(t *testing.T) {
		h := start(t, Config{Mode: mode(t, "hang"), MinConnectTimeout: 3 * time.Second})
		h.startSession(0)
		c, err := dialAndLeave(h.ctx, h.s, lo)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		h.waitEvent(session.EventAccept)
		h.clock.Advance(30 * time.Second)
		info := h.stop()
		ss, _ := h.s.Session(1)
		if info.Passed || ss.Result.Tail == "" || ss.End.Reason != ss.Result.Tail {
			t.Errorf("Stop: passed %v, reason %q; want a failure: the client never gave up", info.Passed, ss.End.Reason)
		}
	})
}

// TestHangEnds: held connections are closed when the session times out,
// and by Close, which stays prompt.
func TestHangEnds(t *testing.T) {
	t.Run("session timeout", func(t *testing.T) {
		h := start(t, Config{Mode: mode(t, "hang"), SessionTimeout: 300 * time.Millisecond})
		h.startSession(0)
		c, err := dialAndLeave(h.ctx, h.s, netip.MustParseAddr("127.0.0.1"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		h.waitEvent(session.EventAccept)
		h.waitEvent(session.EventExpire)
		if !closedBy(t, c, testTimeout) {
			t.Error("held connection open after the session timed out")
		}
		ss, _ := h.s.Session(1)
		if diff := cmp.Diff([]backoff.Ending{{Fate: backoff.FateOpen}}, ss.Endings); diff != "" {
			t.Errorf("endings (-want +got):\n%s", diff)
		}
	})
	t.Run("Close", func(t *testing.T) {
		h := start(t, Config{Mode: mode(t, "hang")})
		h.startSession(0)
		var conns []net.Conn
		for range 20 {
			c, err := dialAndLeave(h.ctx, h.s, netip.MustParseAddr("127.0.0.1"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			conns = append(conns, c)
		}
		for range conns {
			h.waitEvent(session.EventAccept)
		}
		t0 := time.Now()
		if err := h.s.Close(); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(t0); d > closeBound {
			t.Errorf("Close took %v, want at most %v", d, closeBound)
		}
		for _, c := range conns {
			if !closedBy(t, c, testTimeout) {
				t.Errorf("held connection %v open after Close", c.LocalAddr())
			}
		}
		if exp := h.waitEvent(session.EventExpire); exp.End.Cause != session.CauseClosed || exp.End.Attempts != len(conns) {
			t.Errorf("expire %+v; want server closed with %d attempts", exp.End, len(conns))
		}
	})
}

// TestRestartMode: the port refuses from Start for D, then listens again
// on the same port and accepts and closes; the record's restart line and
// Session.Back say when. A session that ends before D gives the port back
// at its end, without a restart line.
func TestRestartMode(t *testing.T) {
	lo := netip.MustParseAddr("127.0.0.1")
	t.Run("port back during the session", func(t *testing.T) {
		var rec testutil.SyncBuffer
		h := start(t, Config{Mode: mode(t, "restart=400ms"), Record: &rec})
		h.startSession(0)
		h.wantRefused(lo)
		h.clock.Advance(400 * time.Millisecond) // the record's clock; the delay runs on real time
		back := h.waitEvent(session.EventRestart)
		if back.Session != 1 || !back.Time.Equal(h.clock.Now()) {
			t.Errorf("restart event %+v; want session 1 at %v", back, h.clock.Now())
		}
		h.retry("127.0.0.1")
		h.clock.Advance(1000 * time.Millisecond)
		h.retry("127.0.0.1")
		info := h.stop()
		ss, _ := h.s.Session(1)
		if ss.End.Verdict != backoff.NotJudged || info.Passed || !strings.Contains(ss.End.Reason, "saw only the 2 attempts after the port came back") {
			t.Errorf("restart verdict %q passed %v (%s); want not judged: the server saw only the attempts after the return", ss.End.Verdict, info.Passed, ss.End.Reason)
		}
		if !ss.Back.Equal(back.Time) || ss.End.Attempts != 2 || len(info.BackoffMs) != 1 || info.BackoffMs[0] != 1000 {
			t.Errorf("session back %v, %d attempts, backoff_ms %v; want back %v, 2 attempts, [1000]",
				ss.Back, ss.End.Attempts, info.BackoffMs, back.Time)
		}
		events, err := session.ReadRecord(bytes.NewReader(rec.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		var kinds []session.EventKind
		for _, e := range events {
			kinds = append(kinds, e.Event)
		}
		want := []session.EventKind{session.EventStart, session.EventRestart, session.EventAccept, session.EventAccept, session.EventStop}
		if diff := cmp.Diff(want, kinds); diff != "" {
			t.Errorf("record (-want +got):\n%s", diff)
		}
	})
	t.Run("session ends first", func(t *testing.T) {
		var rec testutil.SyncBuffer
		h := start(t, Config{Mode: mode(t, "restart=1h"), Record: &rec})
		h.startSession(0)
		h.wantRefused(lo)
		h.stop()
		h.retry("127.0.0.1")
		ss, _ := h.s.Session(1)
		if !ss.Back.IsZero() {
			t.Errorf("Back %v, want zero: the port came back with the session's end", ss.Back)
		}
		if bytes.Contains(rec.Bytes(), []byte(`"event":"restart"`)) {
			t.Errorf("record has a restart line:\n%s", rec.Bytes())
		}
	})
}

// testRoots trusts the committed test certificate, as clients do.
func testRoots(t *testing.T) *x509.CertPool {
	pem, err := os.ReadFile("../testdata/tls/server.pem")
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		t.Fatal("no certificate in testdata/tls/server.pem")
	}
	return roots
}

// TestSettingsCloseAndGoaway: over TLS 1.2 and 1.3 with ALPN h2 and the
// interop client's server name, the server reads the client's preface and
// answers its SETTINGS, then a GOAWAY (last stream 0, NO_ERROR) in goaway
// mode, then closes.
// settings connects to the retry port as an HTTP/2 client over TLS of
// version: the handshake, ALPN h2, the preface and the client's SETTINGS.
// It returns the connection and its framer once the server's SETTINGS
// came.
func (h *harness) settings(roots *x509.CertPool, version uint16) (*tls.Conn, *http2.Framer) {
	t := h.t
	t.Helper()
	raw, err := dialAndLeave(h.ctx, h.s, netip.MustParseAddr("127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	raw.SetDeadline(time.Now().Add(testTimeout))
	c := tls.Client(raw, &tls.Config{
		RootCAs: roots, ServerName: "foo.test.google.fr", NextProtos: []string{"h2"},
		MinVersion: version, MaxVersion: version,
	})
	if err := c.HandshakeContext(h.ctx); err != nil {
		t.Fatalf("TLS handshake: %v", err)
	}
	if st := c.ConnectionState(); st.NegotiatedProtocol != "h2" || st.Version != version {
		t.Fatalf("negotiated %q over %s, want h2 over %s", st.NegotiatedProtocol, tls.VersionName(st.Version), tls.VersionName(version))
	}
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	f, err := fr.ReadFrame()
	if sf, ok := f.(*http2.SettingsFrame); err != nil || !ok || sf.IsAck() {
		t.Fatalf("first frame %v, %v; want the server's SETTINGS", f, err)
	}
	return c, fr
}

// TestSettingsCloseEndings: the server's model reads how each connection
// it handshook ended (docs/spec.md §7.3): one that got its SETTINGS
// reached READY, so the interval after it is a reset; one whose handshake
// failed did not, so the interval after it is judged by the backoff.
func TestSettingsCloseEndings(t *testing.T) {
	var log testutil.SyncBuffer
	h := start(t, Config{Mode: mode(t, "settings-close"), Logger: slog.New(slog.NewTextHandler(&log, nil))})
	roots := testRoots(t)
	h.startSession(0)
	done := func(what string, handshakes, errs int) {
		h.waitFor(what, func() bool {
			h.s.mu.Lock()
			defer h.s.mu.Unlock()
			return h.s.cur.Handshakes == handshakes && h.s.cur.HandshakeErrors == errs && len(h.s.held) == 0
		})
	}
	c, _ := h.settings(roots, tls.VersionTLS13)
	io.Copy(io.Discard, c) // until the server's close
	c.Close()
	done("the first handshake", 1, 0)
	raw, err := dialAndLeave(h.ctx, h.s, netip.MustParseAddr("127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	raw.Write([]byte("no TLS\r\n\r\n"))
	raw.SetDeadline(time.Now().Add(testTimeout))
	io.Copy(io.Discard, raw)
	raw.Close()
	done("the failed handshake", 1, 1)
	c, _ = h.settings(roots, tls.VersionTLS13)
	io.Copy(io.Discard, c)
	c.Close()
	done("the last handshake", 2, 1)
	h.stop()
	ss, _ := h.s.Session(1)
	var got []bool
	for _, e := range ss.Endings {
		got = append(got, e.Ready)
	}
	if diff := cmp.Diff([]bool{true, false, true}, got); diff != "" {
		t.Errorf("READY of each attempt (-want +got):\n%s", diff)
	}
	ivs := ss.Result.Intervals
	if len(ivs) != 2 || ivs[0].Term != backoff.TermReset || ivs[1].Term == backoff.TermReset || ivs[1].OK {
		t.Errorf("intervals %+v; want a reset, then one judged early", ivs)
	}
	// The log judges them as the verdict does.
	if lines := logLines(log.String(), ivs[1].LogLine()); len(lines) != 1 || !strings.Contains(lines[0], "ok=false") {
		t.Errorf("log lines of interval 2: %q; want one, ok=false", lines)
	}
}

func TestSettingsCloseAndGoaway(t *testing.T) {
	roots := testRoots(t)
	for _, m := range []string{"settings-close", "goaway"} {
		for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
			t.Run(m+" "+tls.VersionName(version), func(t *testing.T) {
				h := start(t, Config{Mode: mode(t, m)})
				h.startSession(0)
				c, fr := h.settings(roots, version)
				if m == "goaway" {
					f, err := fr.ReadFrame()
					ga, ok := f.(*http2.GoAwayFrame)
					if err != nil || !ok || ga.LastStreamID != 0 || ga.ErrCode != http2.ErrCodeNo {
						t.Fatalf("second frame %v, %v; want GOAWAY last stream 0 NO_ERROR", f, err)
					}
				}
				if f, err := fr.ReadFrame(); !errors.Is(err, io.EOF) {
					t.Fatalf("after the server's frames: %v, %v; want the end of the connection", f, err)
				}
				c.Close()
				h.waitFor("the handshake to be counted", func() bool {
					h.s.mu.Lock()
					defer h.s.mu.Unlock()
					return h.s.cur.Handshakes == 1
				})
				h.stop()
				ss, _ := h.s.Session(1)
				if ss.Handshakes != 1 || ss.HandshakeErrors != 0 || ss.End.Attempts != 1 {
					t.Errorf("session: %d handshakes, %d errors, %d attempts; want 1, 0, 1", ss.Handshakes, ss.HandshakeErrors, ss.End.Attempts)
				}
			})
		}
	}
}

// TestGRPCClientTakesTheHandshake: grpc-go completes TLS with the
// committed certificate and the interop client's server name, and takes
// the server's SETTINGS as a working connection: either it sends its
// wait-for-ready RPC on it (only a READY channel does), which fails
// UNAVAILABLE when the connection dies, or it connects again at once, its
// backoff reset by the success (docs/spec.md §7.3), and the RPC runs out
// of time. A client that refused the handshake would back off 1 s instead.
func TestGRPCClientTakesTheHandshake(t *testing.T) {
	for _, m := range []string{"settings-close", "goaway"} {
		t.Run(m, func(t *testing.T) {
			h := start(t, Config{Mode: mode(t, m), Logger: slog.New(slog.DiscardHandler)})
			h.startSession(0)
			creds := credentials.NewTLS(&tls.Config{RootCAs: testRoots(t), ServerName: "foo.test.google.fr"})
			cc, err := grpc.NewClient("passthrough:///"+net.JoinHostPort("127.0.0.1", strconv.Itoa(h.s.RetryPort())),
				grpc.WithTransportCredentials(creds))
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			ctx, cancel := context.WithTimeout(h.ctx, 500*time.Millisecond)
			defer cancel()
			_, err = pb.NewReconnectServiceClient(cc).Stop(ctx, &pb.Empty{}, grpc.WaitForReady(true))
			cc.Close()
			h.stop()
			ss, _ := h.s.Session(1)
			t.Logf("%d attempts: %d handshakes, %d failed; the RPC: %v", ss.End.Attempts, ss.Handshakes, ss.HandshakeErrors, err)
			switch code := status.Code(err); {
			case code == codes.Unavailable && ss.Handshakes >= 1:
			case code == codes.DeadlineExceeded && ss.Handshakes >= 2:
			default:
				t.Errorf("RPC %v after %d handshakes; want UNAVAILABLE after one, or DEADLINE_EXCEEDED after two or more", err, ss.Handshakes)
			}
			if ss.HandshakeErrors > 1 { // the client's Close may cut one
				t.Errorf("%d handshakes failed, want at most 1", ss.HandshakeErrors)
			}
		})
	}
}

// TestHandshakeBounds: a client that connects and sends nothing is closed
// at the handshake timeout, and handshakes beyond MaxHandshakes are closed
// at once and counted.
func TestHandshakeBounds(t *testing.T) {
	h := start(t, Config{Mode: mode(t, "settings-close"), MaxHandshakes: 2, handshakeTimeout: 200 * time.Millisecond})
	h.startSession(0)
	var conns []net.Conn
	for range 3 {
		c, err := dialAndLeave(h.ctx, h.s, netip.MustParseAddr("127.0.0.1"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
		h.waitEvent(session.EventAccept)
	}
	// The third is closed at once; the first two at their timeout, with
	// nothing written on them (a TLS server speaks only after the hello).
	for i, c := range conns {
		if !closedBy(t, c, testTimeout) {
			t.Errorf("silent connection %d still open", i+1)
		}
	}
	h.waitFor("both handshakes to fail", func() bool {
		h.s.mu.Lock()
		defer h.s.mu.Unlock()
		return h.s.cur.HandshakeErrors == 2
	})
	h.stop()
	ss, _ := h.s.Session(1)
	if ss.NotHeld != 1 || ss.HandshakeErrors != 2 || ss.Handshakes != 0 {
		t.Errorf("session: %d not held, %d handshake errors, %d handshakes; want 1, 2, 0", ss.NotHeld, ss.HandshakeErrors, ss.Handshakes)
	}
}

// TestCustomCertificate: Config.TLSCert replaces the committed certificate.
func TestCustomCertificate(t *testing.T) {
	cert, err := tls.LoadX509KeyPair("../testdata/tls/server.pem", "../testdata/tls/server.key")
	if err != nil {
		t.Fatal(err)
	}
	// A certificate the client does not trust: the server must present it.
	other := selfSigned(t)
	for _, tt := range []struct {
		name   string
		cert   *tls.Certificate
		wantOK bool
	}{
		{name: "committed", cert: &cert, wantOK: true},
		{name: "other", cert: &other, wantOK: false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := start(t, Config{Mode: mode(t, "settings-close"), TLSCert: tt.cert})
			h.startSession(0)
			d := tls.Dialer{Config: &tls.Config{RootCAs: testRoots(t), ServerName: "localhost", NextProtos: []string{"h2"}}}
			c, err := d.DialContext(h.ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(h.s.RetryPort())))
			if c != nil {
				c.Close()
			}
			var unknown x509.UnknownAuthorityError
			switch {
			case tt.wantOK && err != nil:
				t.Errorf("dial: %v", err)
			case !tt.wantOK && !errors.As(err, &unknown):
				t.Errorf("dial: %v, want a certificate the client does not trust", err)
			}
			h.stop()
		})
	}
}

// selfSigned makes a certificate for localhost other than the committed one.
func selfSigned(t *testing.T) tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), DNSNames: []string{"localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// bindTCP4 binds a socket without SO_REUSEADDR to 127.0.0.1:port, and
// closes it.
func bindTCP4(port int) error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	return syscall.Bind(fd, &syscall.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}})
}

// TestRefusePortKept: a retry port the kernel chose (port 0) stays the
// server's while it refuses: its socket keeps the port bound, so that no
// other socket gets it, whether it asks for that port or for any.
func TestRefusePortKept(t *testing.T) {
	h := start(t, Config{Mode: mode(t, "refuse"), RetryAddr: "127.0.0.1:0"})
	port := h.s.RetryPort()
	h.startSession(0)
	h.wantRefused(netip.MustParseAddr("127.0.0.1"))
	if err := bindTCP4(port); !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("bind to the refusing retry port %d: %v, want EADDRINUSE: the server gave its port up", port, err)
	}
	h.stop()
	h.retryEvent("127.0.0.1") // listening again, on the same port
}
