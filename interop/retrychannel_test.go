package interop

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/backoff-audit/audit/internal/testutil"
	"github.com/backoff-audit/audit/pb"
)

// testCA is a CA and a server certificate it signed for
// DefaultServerHostOverride, made for one test.
type testCA struct {
	caFile string // the CA certificate, PEM
	server tls.Certificate
}

func newTestCA(t *testing.T) testCA {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "interop test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: DefaultServerHostOverride},
		DNSNames:     []string{DefaultServerHostOverride},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644); err != nil {
		t.Fatal(err)
	}
	return testCA{caFile: caFile, server: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}}
}

func TestValidateRetryChannel(t *testing.T) {
	base := Config{ServerHost: "127.0.0.1", ControlPort: 1, RetryPort: 2, InitialBackoffMS: 1000, Deadline: time.Second}
	tests := []struct {
		name   string
		change func(*Config)
		want   string // in the error; empty: valid
	}{
		{name: "defaults", change: func(*Config) {}},
		{name: "plaintext", change: func(c *Config) { c.Plaintext = true }},
		{name: "connect timeout", change: func(c *Config) { c.MinConnectTimeoutMS = 2500 }},
		{name: "negative connect timeout", change: func(c *Config) { c.MinConnectTimeoutMS = -1 }, want: "MinConnectTimeoutMS -1: must not be negative"},
		{name: "roots without TLS", change: func(c *Config) { c.Plaintext, c.CAFile = true, "ca.pem" }, want: "CAFile ca.pem: trusts roots for TLS, and the retry channel is plaintext (Plaintext)"},
		{name: "key log", change: func(c *Config) { c.KeyLog = "keys.log" }},
		{name: "key log without TLS", change: func(c *Config) { c.Plaintext, c.KeyLog = true, "keys.log" },
			want: "KeyLog keys.log: logs TLS secrets, and the retry channel is plaintext (Plaintext)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base
			tt.change(&cfg)
			err := cfg.validate()
			if got := errText(err); (tt.want == "" && err != nil) || !strings.Contains(got, tt.want) {
				t.Errorf("validate() = %q, want %q", got, tt.want)
			}
		})
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestRetryCredentials(t *testing.T) {
	ca := newTestCA(t)
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "missing.pem")
	tests := []struct {
		name         string
		cfg          Config
		wantProtocol string
		wantName     string
		wantErr      string
	}{
		{name: "default: TLS for the C++ client's name", wantProtocol: "tls", wantName: DefaultServerHostOverride},
		{name: "another name", cfg: Config{ServerHostOverride: "x.example"}, wantProtocol: "tls", wantName: "x.example"},
		{name: "roots from a file", cfg: Config{CAFile: ca.caFile}, wantProtocol: "tls", wantName: DefaultServerHostOverride},
		{name: "plaintext", cfg: Config{Plaintext: true}, wantProtocol: "insecure"},
		{name: "missing file", cfg: Config{CAFile: missing}, wantErr: "CAFile " + missing + ": open " + missing},
		{name: "no PEM", cfg: Config{CAFile: notPEM}, wantErr: "CAFile " + notPEM + ": no PEM certificate in it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			creds, err := tt.cfg.retryCredentials(nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("retryCredentials() error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("retryCredentials(): %v", err)
			}
			info := creds.Info()
			// ServerName is deprecated, but the only way to read the name back.
			if diff := cmp.Diff([]string{tt.wantProtocol, tt.wantName}, []string{info.SecurityProtocol, info.ServerName}); diff != "" {
				t.Errorf("protocol, server name (-want +got):\n%s", diff)
			}
		})
	}
}

// blockingServer is a retry port that completes the handshake and serves
// gRPC: its Start counts the call and holds it until the caller's deadline,
// so a retry RPC that reaches it still ends in DEADLINE_EXCEEDED.
type blockingServer struct {
	pb.UnimplementedReconnectServiceServer
	mu     sync.Mutex
	starts int
}

func (s *blockingServer) Start(ctx context.Context, _ *pb.ReconnectParams) (*pb.Empty, error) {
	s.mu.Lock()
	s.starts++
	s.mu.Unlock()
	<-ctx.Done()
	return nil, ctx.Err()
}

func (s *blockingServer) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.starts
}

// startBlocking serves srv on a loopback port, with TLS when cert is set.
func startBlocking(t *testing.T, srv *blockingServer, cert *tls.Certificate) (port int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	var opts []grpc.ServerOption
	if cert != nil {
		opts = append(opts, grpc.Creds(credentials.NewServerTLSFromCert(cert)))
	}
	gs := grpc.NewServer(opts...)
	pb.RegisterReconnectServiceServer(gs, srv)
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	return ln.Addr().(*net.TCPAddr).Port
}

// TestRunRetryChannelSecurity runs the five steps against a retry port
// that completes the handshake: the retry RPC reaches it only when the
// channel's security matches the port's (plaintext with plaintext, TLS
// with the CA that signed the port's certificate and the name in it).
func TestRunRetryChannelSecurity(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	tests := []struct {
		name        string
		cfg         Config
		serverTLS   bool
		wantReached bool
	}{
		{name: "plaintext to plaintext", cfg: Config{Plaintext: true}, wantReached: true},
		{name: "CA file and the certificate's name", cfg: Config{CAFile: ca.caFile}, serverTLS: true, wantReached: true},
		{name: "CA file and another name", cfg: Config{CAFile: ca.caFile, ServerHostOverride: "other.example"}, serverTLS: true},
		{name: "default roots do not trust the port", serverTLS: true},
		{name: "TLS to plaintext", cfg: Config{CAFile: ca.caFile}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			retry := &blockingServer{}
			var cert *tls.Certificate
			if tt.serverTLS {
				cert = &ca.server
			}
			cfg := tt.cfg
			cfg.ServerHost = "127.0.0.1"
			cfg.ControlPort = startCanned(t, &cannedServer{info: &pb.ReconnectInfo{}})
			cfg.RetryPort = startBlocking(t, retry, cert)
			cfg.InitialBackoffMS = 1000
			cfg.Deadline = time.Second
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			rep, err := Run(ctx, cfg)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if rep.Retry.Code != codes.DeadlineExceeded {
				t.Errorf("retry RPC ended in %v (%v), want DeadlineExceeded", rep.Retry.Code, rep.Retry.Err)
			}
			if got := retry.calls() > 0; got != tt.wantReached {
				t.Errorf("retry RPC reached the port: %v, want %v (states %v)", got, tt.wantReached, rep.Retry.States)
			}
		})
	}
}

// startHanging is a retry port that accepts and never answers, so each
// attempt lasts until the client's connect timeout; it returns the port
// and the accept times so far.
func startHanging(t *testing.T) (port int, accepts func() []time.Time) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	var mu sync.Mutex
	var times []time.Time
	var conns []net.Conn
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			times = append(times, time.Now())
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().(*net.TCPAddr).Port, func() []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Time(nil), times...)
	}
}

// TestRunMinConnectTimeout holds MinConnectTimeoutMS to its effect on a
// retry port that hangs: with 300 ms grpc-go gives up on each attempt after
// 300 ms and tries again after its backoff (docs/spec.md §4.2: counted from
// the end of the failed attempt), so no two attempts are closer than that;
// with the default 20 s the 2 s RPC sees one attempt only.
func TestRunMinConnectTimeout(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		timeoutMS    int32
		wantTimeout  time.Duration
		wantAttempts func(int) bool
		want         string
	}{
		{name: "300 ms", timeoutMS: 300, wantTimeout: 300 * time.Millisecond, wantAttempts: func(n int) bool { return n >= 3 }, want: "at least 3"},
		{name: "default 20 s", wantTimeout: 20 * time.Second, wantAttempts: func(n int) bool { return n == 1 }, want: "exactly 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			port, accepts := startHanging(t)
			cfg := Config{
				ServerHost:            "127.0.0.1",
				ControlPort:           startCanned(t, &cannedServer{info: &pb.ReconnectInfo{}}),
				RetryPort:             port,
				InitialBackoffMS:      100,
				MaxReconnectBackoffMS: 200,
				MinConnectTimeoutMS:   tt.timeoutMS,
				Deadline:              2 * time.Second,
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			rep, err := Run(ctx, cfg)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if rep.Connect.MinConnectTimeout != tt.wantTimeout {
				t.Errorf("MinConnectTimeout %v, want %v", rep.Connect.MinConnectTimeout, tt.wantTimeout)
			}
			times := accepts()
			var gaps []time.Duration
			for i := 1; i < len(times); i++ {
				gaps = append(gaps, times[i].Sub(times[i-1]).Round(time.Millisecond))
			}
			t.Logf("min connect timeout %v: %d attempts, gaps %v", rep.Connect.MinConnectTimeout, len(times), gaps)
			if !tt.wantAttempts(len(times)) {
				t.Errorf("%d attempts in %v, want %s", len(times), cfg.Deadline, tt.want)
			}
			for i, g := range gaps {
				// The timeout, then a backoff of at least 100 ms (the first,
				// unjittered) or 200 × 0.8 = 160 ms, less 10 ms for the
				// accept loop's clock.
				if floor := tt.wantTimeout + 90*time.Millisecond; g < floor {
					t.Errorf("gap %d: %v, want at least %v (timeout %v + backoff ≥ 100 ms)", i+1, g, floor, tt.wantTimeout)
				}
			}
		})
	}
}

// TestReportWriteSecurity: the report's first line says how the retry
// channel was secured.
func TestReportWriteSecurity(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{name: "default", want: "(TLS, server name foo.test.google.fr)\n"},
		{name: "plaintext", cfg: Config{Plaintext: true}, want: "(plaintext)\n"},
		{name: "roots", cfg: Config{CAFile: "testdata/tls/ca.pem", ServerHostOverride: "x.example"}, want: "(TLS, server name x.example, roots testdata/tls/ca.pem)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.ServerHost, cfg.ControlPort, cfg.RetryPort, cfg.InitialBackoffMS = "127.0.0.1", 1, 2, 1000
			r := &Report{Config: cfg, Connect: cfg.connectParams(), Server: &pb.ReconnectInfo{}}
			var buf bytes.Buffer
			if err := r.Write(&buf); err != nil {
				t.Fatal(err)
			}
			first, _, _ := strings.Cut(buf.String(), "\n")
			if want := "control 127.0.0.1:1, retry 127.0.0.1:2 " + tt.want; first+"\n" != want {
				t.Errorf("first line %q, want %q", first, strings.TrimSuffix(want, "\n"))
			}
		})
	}
}

// failingServer is a retry port whose Start ends with code after a pause,
// so that a client that makes it again does so at a bounded rate; it
// alternates with code2 when that is set.
type failingServer struct {
	pb.UnimplementedReconnectServiceServer
	code, code2 codes.Code
	pause       time.Duration
	calls       atomic.Int32
}

func (s *failingServer) Start(ctx context.Context, _ *pb.ReconnectParams) (*pb.Empty, error) {
	code := s.code
	if s.calls.Add(1)%2 == 0 && s.code2 != codes.OK {
		code = s.code2
	}
	select {
	case <-time.After(s.pause):
		if code == codes.OK {
			return &pb.Empty{}, nil
		}
		return nil, status.Error(code, "failing on purpose")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TestRunReissue: with Reissue the retry RPC is made again after each
// failure until the deadline, and the last one ends in DEADLINE_EXCEEDED;
// an answer, or no Reissue, ends the retry RPC.
func TestRunReissue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		reissue     bool
		code, code2 codes.Code
		wantCode    codes.Code
		wantMany    string // the codes made again, as the report counts them (Unknown, then Unavailable)
	}{
		{name: "reissue after failures", reissue: true, code: codes.Unavailable, code2: codes.Unknown, wantCode: codes.DeadlineExceeded, wantMany: "Unknown ×%d, Unavailable ×%d"},
		{name: "no reissue", code: codes.Unavailable, wantCode: codes.Unavailable},
		{name: "reissue, but not after an answer", reissue: true, code: codes.OK, wantCode: codes.OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			gs := grpc.NewServer()
			pb.RegisterReconnectServiceServer(gs, &failingServer{code: tt.code, code2: tt.code2, pause: 100 * time.Millisecond})
			go gs.Serve(ln)
			t.Cleanup(gs.Stop)
			cfg := Config{
				ServerHost:       "127.0.0.1",
				ControlPort:      startCanned(t, &cannedServer{info: &pb.ReconnectInfo{}}),
				RetryPort:        ln.Addr().(*net.TCPAddr).Port,
				InitialBackoffMS: 1000,
				Deadline:         time.Second,
				Plaintext:        true,
				Reissue:          tt.reissue,
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			rep, err := Run(ctx, cfg)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			r := rep.Retry
			if r.Code != tt.wantCode {
				t.Errorf("last retry RPC ended in %v (%v), want %v", r.Code, r.Err, tt.wantCode)
			}
			// 1 s of RPCs ending after 100 ms each: about 10.
			if many := r.RPCs >= 5; many != (tt.wantMany != "") || tt.wantMany == "" && r.RPCs != 1 {
				t.Errorf("%d retry RPCs, want many: %v", r.RPCs, tt.wantMany != "")
			}
			if len(r.Early) != r.RPCs-1 {
				t.Errorf("%d early ends kept for %d RPCs", len(r.Early), r.RPCs)
			}
			for i, e := range r.Early {
				if want := []codes.Code{tt.code, tt.code2}[i%2]; e.Code != want || e.At.Before(r.Start) || e.At.After(r.Start.Add(r.Took)) {
					t.Errorf("early end %d: %v at %v, want %v within the retry RPCs' %v", i, e.Code, e.At.Sub(r.Start), want, r.Took)
				}
			}
			var buf bytes.Buffer
			if err := rep.Write(&buf); err != nil {
				t.Fatal(err)
			}
			want := "retry RPC: " + tt.wantCode.String() + " after "
			if tt.wantMany != "" {
				want = fmt.Sprintf("retry RPCs: %d, made again after "+tt.wantMany+"; the last ended in DeadlineExceeded after ",
					r.RPCs, r.EarlyCodes[codes.Unknown], r.EarlyCodes[codes.Unavailable])
			}
			if !strings.Contains(buf.String(), want) {
				t.Errorf("report lacks %q:\n%s", want, buf.String())
			}
		})
	}
}

// startSettingsClose is a plaintext retry port whose connections succeed
// and drop at once (docs/spec.md §7.1, settings-close without TLS): it
// reads the client's HTTP/2 preface, sends its SETTINGS and closes.
func startSettingsClose(t *testing.T) (port int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				preface := make([]byte, len(http2.ClientPreface))
				if _, err := io.ReadFull(c, preface); err != nil {
					return
				}
				http2.NewFramer(c, c).WriteSettings()
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return ln.Addr().(*net.TCPAddr).Port
}

var foldedLine = regexp.MustCompile(`^retry channel [A-Z_]+ after \d+\.\d s of 1\.5 s \((\d+) state changes since the last line\)$`)

// TestRunProgressStorm: a channel that reconnects in a tight loop changes
// state hundreds of times, every change is kept (up to MaxKept), and the
// progress lines fold them in: at most one line per minProgressGap.
func TestRunProgressStorm(t *testing.T) {
	t.Parallel()
	var progress testutil.SyncBuffer
	cfg := Config{
		ServerHost:       "127.0.0.1",
		ControlPort:      startCanned(t, &cannedServer{info: &pb.ReconnectInfo{}}),
		RetryPort:        startSettingsClose(t),
		InitialBackoffMS: 1000,
		Deadline:         1500 * time.Millisecond,
		Plaintext:        true,
		Reissue:          true,
		Progress:         &progress,
		ProgressEvery:    400 * time.Millisecond,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	out := strings.TrimSuffix(progress.String(), "\n")
	lines := strings.Split(out, "\n")
	t.Logf("%d state changes kept, %d RPCs; progress:\n%s", len(rep.Retry.States), rep.Retry.RPCs, out)
	if len(rep.Retry.States) < 20 {
		t.Errorf("%d state changes kept, want at least 20 from a tight reconnect loop", len(rep.Retry.States))
	}
	// 1.5 s at one line per 250 ms, and the first line at once.
	if max := int(cfg.Deadline/minProgressGap) + 2; len(lines) > max {
		t.Errorf("%d progress lines in %v, want at most %d", len(lines), cfg.Deadline, max)
	}
	folded := 0
	for _, l := range lines {
		if m := foldedLine.FindStringSubmatch(l); m != nil {
			n, _ := strconv.Atoi(m[1])
			folded += n
		}
	}
	if folded == 0 {
		t.Errorf("no line folds state changes in")
	}
}
