// Package interop is the interop client of the connection backoff test: the
// five steps of docs/spec.md §1 run with grpc-go, after the C++
// reconnect_interop_client. It judges with the backoff package's model and never
// imports the server it judges, so that its own check stays independent of it.
package interop

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/big"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/internal/field"
	"github.com/backoff-audit/audit/internal/infile"
	"github.com/backoff-audit/audit/pb"
	"github.com/backoff-audit/audit/tlsdec"
)

// DefaultServerHostOverride is the TLS name the C++ interop client asks
// for (docs/spec.md §2.3). No handshake completes on the interop test's
// retry port; the name is kept so that the ClientHello looks like the
// reference client's.
const DefaultServerHostOverride = "foo.test.google.fr"

// stopTimeout bounds Stop, which runs even after the caller gave up so that
// the server's session ends and the next one can start.
const stopTimeout = 10 * time.Second

// Config is one run of the interop client: the C++ client's flags,
// plus the retry RPC's deadline and the base delay grpc-go is told to use.
// Validation errors name the fields by those flags, which audit client keeps.
type Config struct {
	ServerHost  string
	ControlPort int
	RetryPort   int
	// MaxReconnectBackoffMS is sent in Start and used as grpc-go's MaxDelay;
	// 0 means the default 120000 ms.
	MaxReconnectBackoffMS int32
	// InitialBackoffMS is grpc-go's BaseDelay. Anything but 1000 is a
	// deliberately wrong client, which the server should fail.
	InitialBackoffMS int32
	// MinConnectTimeoutMS is grpc-go's MinConnectTimeout, the least time
	// one attempt is given to connect; 0 means the spec's 20 s
	// (docs/spec.md §1.1). It matters only where an attempt can hang.
	MinConnectTimeoutMS int32
	// Plaintext makes the retry channel plaintext. The interop test's
	// channel is TLS (docs/spec.md §1.3), the zero value.
	Plaintext bool
	// CAFile, when set, holds the PEM roots the retry channel trusts, for
	// a retry port that completes the TLS handshake. Empty: a certificate
	// made in memory, which no server presents (the interop test's port
	// closes every connection before the handshake).
	CAFile string
	// ServerHostOverride is the name TLS asks for and checks the server's
	// certificate against; empty means DefaultServerHostOverride.
	ServerHostOverride string
	// KeyLog, when set, is the file the retry channel's TLS secrets are
	// appended to in the NSS key log format (tls.Config.KeyLogWriter), so
	// that a capture of its connections can be decrypted (audit h2
	// --keylog). Run opens it, mode 0600 (tlsdec.OpenKeyLogWriter).
	KeyLog string
	// Reissue makes the retry RPC again whenever it fails before its
	// deadline. On the interop test's retry port it never does; on a port
	// whose connections succeed and then drop (docs/spec.md §7.1,
	// settings-close and goaway) the RPC fails with its connection
	// (UNAVAILABLE, or UNKNOWN when the connection ends mid-read), and a
	// channel with no RPC waiting has no reason to reconnect. An answer
	// (OK) ends the retry RPCs: a retry port never gives one.
	Reissue bool
	// Deadline is the retry RPC's deadline (the reference uses 540 s).
	Deadline time.Duration
	// Mode is the retry port's mode (`audit server --retry_mode`), which
	// the own check judges the server's list in; the zero Mode is the
	// interop test's. In a mode where the server cannot see every attempt
	// (backoff.RetryMode.ServerSeesAll) neither the server's answer nor the
	// own check judges the chain: only the kernel's SYNs do.
	Mode backoff.RetryMode
	// Progress, when not nil, gets a line per connectivity-state change of
	// the retry channel while the retry RPC waits, and a line every
	// ProgressEvery while the state holds: the RPC can only end at its
	// deadline, minutes away, and would otherwise give no sign of life.
	Progress io.Writer
	// ProgressEvery is the longest silence on Progress; 0 means
	// DefaultProgressEvery.
	ProgressEvery time.Duration
}

// DefaultProgressEvery is often enough to show the client is alive, rare
// enough that a 540 s run prints about a hundred lines.
const DefaultProgressEvery = 5 * time.Second

func (c Config) controlAddr() string {
	return net.JoinHostPort(c.ServerHost, strconv.Itoa(c.ControlPort))
}

func (c Config) retryAddr() string {
	return net.JoinHostPort(c.ServerHost, strconv.Itoa(c.RetryPort))
}

func (c Config) validate() error {
	errs := []error{field.Port("ControlPort", c.ControlPort, false), field.Port("RetryPort", c.RetryPort, false)}
	if c.ServerHost == "" {
		errs = append(errs, field.Errorf("ServerHost", nil, "must not be empty"))
	}
	if c.MaxReconnectBackoffMS < 0 {
		errs = append(errs, field.Errorf("MaxReconnectBackoffMS", c.MaxReconnectBackoffMS, "must not be negative"))
	}
	if c.InitialBackoffMS <= 0 {
		errs = append(errs, field.Errorf("InitialBackoffMS", c.InitialBackoffMS, "must be positive"))
	}
	if c.MinConnectTimeoutMS < 0 {
		errs = append(errs, field.Errorf("MinConnectTimeoutMS", c.MinConnectTimeoutMS, "must not be negative"))
	}
	if c.Plaintext && c.CAFile != "" {
		errs = append(errs, field.Errorf("CAFile", c.CAFile, "trusts roots for TLS, and the retry channel is plaintext (%s)", field.Name("Plaintext")))
	}
	if c.Plaintext && c.KeyLog != "" {
		errs = append(errs, field.Errorf("KeyLog", c.KeyLog, "logs TLS secrets, and the retry channel is plaintext (%s)", field.Name("Plaintext")))
	}
	if c.Deadline <= 0 {
		errs = append(errs, field.Errorf("Deadline", c.Deadline, "must be positive"))
	}
	return errors.Join(errs...)
}

// policy is the policy the session is held to: the spec's, with the cap
// sent in Start and the connect timeout the client was given, which sets
// the windows after an attempt that hung (docs/spec.md §7.3). The client's
// own check uses it, never the (possibly deliberately wrong) backoff
// grpc-go was given.
func (c Config) policy() backoff.Policy {
	p := backoff.ReferencePolicy(c.MaxReconnectBackoffMS)
	if c.MinConnectTimeoutMS > 0 {
		p.MinConnectTimeout = time.Duration(c.MinConnectTimeoutMS) * time.Millisecond
	}
	return p
}

// connectParams is the grpc-go backoff of the retry channel. Every field is
// set: a ConnectParams left partly zero is not grpc-go's default but a
// zero multiplier, no jitter, a zero MaxDelay (retry at once, docs/spec.md §6.3)
// and a zero MinConnectTimeout.
func (c Config) connectParams() grpc.ConnectParams {
	ref := c.policy()
	return grpc.ConnectParams{
		Backoff: grpcbackoff.Config{
			BaseDelay:  time.Duration(c.InitialBackoffMS) * time.Millisecond,
			Multiplier: ref.Multiplier,
			Jitter:     ref.Jitter,
			MaxDelay:   ref.MaxDelay, // never zero: ReferencePolicy maps 0 to 120 s
		},
		MinConnectTimeout: ref.MinConnectTimeout,
	}
}

func (c Config) serverHostOverride() string {
	if c.ServerHostOverride == "" {
		return DefaultServerHostOverride
	}
	return c.ServerHostOverride
}

// Report is what one run saw.
type Report struct {
	Config  Config
	Connect grpc.ConnectParams
	Retry   RetryOutcome
	// Server is Stop's answer.
	Server *pb.ReconnectInfo
	// Own is the client's own check of Server.BackoffMs.
	Own backoff.Result
}

// Run runs the five steps of docs/spec.md §1. An error means nothing was
// judged (the control port is unreachable, Start or Stop failed); a judged
// run returns a report whose verdict says whether it passed.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	rep := &Report{Config: cfg, Connect: cfg.connectParams()}
	// Before Start: a bad CAFile or KeyLog is the caller's mistake, not a
	// session.
	var keylog io.Writer
	if cfg.KeyLog != "" {
		f, err := tlsdec.OpenKeyLogWriter(cfg.KeyLog)
		if err != nil {
			return nil, field.Errorf("KeyLog", nil, "%w", err)
		}
		defer f.Close()
		keylog = f
	}
	creds, err := cfg.retryCredentials(keylog)
	if err != nil {
		return nil, err
	}

	control, err := grpc.NewClient(cfg.controlAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("control channel %s: %w", cfg.controlAddr(), err)
	}
	defer control.Close()
	svc := pb.NewReconnectServiceClient(control)

	// Step 1. Start may wait while another client's session runs; it gets
	// as long as a whole session may take.
	startCtx, cancel := context.WithTimeout(ctx, cfg.Deadline)
	_, err = svc.Start(startCtx, &pb.ReconnectParams{MaxReconnectBackoffMs: cfg.MaxReconnectBackoffMS})
	cancel()
	if err != nil {
		switch {
		case status.Code(err) == codes.Unavailable:
			return nil, fmt.Errorf("control port %s unreachable: %w", cfg.controlAddr(), err)
		case status.Code(err) == codes.DeadlineExceeded && ctx.Err() == nil:
			return nil, fmt.Errorf("start on control port %s: no session began within %v (is another client's session running?): %w",
				cfg.controlAddr(), cfg.Deadline, err)
		}
		return nil, fmt.Errorf("start on control port %s: %w", cfg.controlAddr(), err)
	}

	// Step 2. Whatever happens to the retry RPC, Stop must run.
	rep.Retry = retryRPC(ctx, cfg, creds, rep.Connect)

	// Step 3, even when ctx is done: the server's session must end.
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
	defer cancel()
	info, err := svc.Stop(stopCtx, &pb.Empty{})
	if err != nil {
		return nil, fmt.Errorf("stop on control port %s: %w", cfg.controlAddr(), err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("interrupted after %v of the retry RPC: %w", rep.Retry.Took.Round(time.Millisecond), err)
	}

	// Steps 4 and 5.
	rep.Server = info
	run := backoff.Run{Mode: cfg.Mode}
	if !rep.Retry.Ready() {
		run = run.NoneReady(len(info.GetBackoffMs()) + 1)
	}
	rep.Own = run.VerifyBackoff(cfg.policy(), info.GetBackoffMs())
	return rep, nil
}

// RetryOutcome is how the retry RPC ended; the code must be
// DeadlineExceeded.
type RetryOutcome struct {
	// Code and Err are the last retry RPC's end.
	Code codes.Code
	Err  error
	// Took is the time from the first RPC's start to the last one's end.
	Took time.Duration
	// Start is when the first retry RPC began.
	Start time.Time
	// RPCs is how many retry RPCs were made: 1, or more with Reissue.
	RPCs int
	// Early are the ends of the RPCs made again (Reissue), the first
	// MaxKept of them; EarlyCodes counts them all by code.
	Early      []RPCEnd
	EarlyCodes map[codes.Code]int
	// States are the retry channel's connectivity states from the first
	// RPC's start to the last one's end, the first being the state before
	// it, the first MaxKept of them. A state held only a moment may be
	// missing: grpc-go reports changes, not every state it passed through.
	States []StateChange
}

// Ready reports whether the retry channel was READY at some point of the
// retry RPCs: none of its connections succeeded if it never was.
func (o RetryOutcome) Ready() bool {
	return slices.ContainsFunc(o.States, func(s StateChange) bool { return s.State == connectivity.Ready })
}

// MaxKept bounds RetryOutcome's lists: a channel whose connections succeed
// and drop at once may change state thousands of times a second.
const MaxKept = 1000

// RPCEnd is the end of one retry RPC.
type RPCEnd struct {
	Code codes.Code
	Err  error
	At   time.Time
}

// StateChange is the retry channel entering State at At.
type StateChange struct {
	State connectivity.State
	At    time.Time
}

// retryRPC opens the retry channel with creds and makes one wait-for-ready
// RPC that can only end at its deadline, or, with Reissue, as many as it
// takes to reach it.
func retryRPC(ctx context.Context, cfg Config, creds credentials.TransportCredentials, cp grpc.ConnectParams) RetryOutcome {
	conn, err := grpc.NewClient(cfg.retryAddr(),
		grpc.WithTransportCredentials(creds),
		grpc.WithConnectParams(cp))
	if err != nil {
		return RetryOutcome{Code: codes.Internal, Err: fmt.Errorf("retry channel %s: %w", cfg.retryAddr(), err)}
	}
	defer conn.Close()

	rctx, cancel := context.WithTimeout(ctx, cfg.Deadline)
	defer cancel()
	start := time.Now()
	w := &watcher{conn: conn, progress: cfg.Progress, every: cfg.progressEvery(), start: start, deadline: cfg.Deadline}
	stopWatch := w.run(rctx)
	// Any method does; the reference calls Start on the retry port.
	svc := pb.NewReconnectServiceClient(conn)
	req := &pb.ReconnectParams{MaxReconnectBackoffMs: cfg.MaxReconnectBackoffMS}
	out := RetryOutcome{Start: start}
	for {
		_, err = svc.Start(rctx, req, grpc.WaitForReady(true))
		out.RPCs++
		out.Code, out.Err = status.Code(err), err
		// DeadlineExceeded is the deadline's end even when gRPC's own
		// timer fired a moment before the context's: made again then,
		// the RPC would fail at once, over and over, until the context
		// caught up.
		if !cfg.Reissue || err == nil || rctx.Err() != nil || out.Code == codes.DeadlineExceeded {
			break
		}
		if out.EarlyCodes == nil {
			out.EarlyCodes = map[codes.Code]int{}
		}
		out.EarlyCodes[out.Code]++
		if len(out.Early) < MaxKept {
			out.Early = append(out.Early, RPCEnd{Code: out.Code, Err: err, At: time.Now()})
		}
	}
	out.Took = time.Since(start)
	// No progress line may follow the RPC's end: the caller prints the
	// report next, and Close would add a SHUTDOWN line.
	out.States = stopWatch()
	return out
}

func (c Config) progressEvery() time.Duration {
	if c.ProgressEvery <= 0 {
		return DefaultProgressEvery
	}
	return c.ProgressEvery
}

// minProgressGap is the least time between two progress lines: a channel
// whose connections succeed and drop at once changes state hundreds of
// times a second (docs/spec.md §7.3), which would flood stderr.
const minProgressGap = 250 * time.Millisecond

// watcher follows the retry channel's state while the RPC waits: it keeps
// every change and, when progress is set, writes a line per change (at
// most one per minProgressGap, counting the changes it folds in) and a
// line after every span of silence.
type watcher struct {
	conn     *grpc.ClientConn
	progress io.Writer
	every    time.Duration
	start    time.Time
	deadline time.Duration

	mu     sync.Mutex
	states []StateChange
}

// run watches until stop is called or ctx is done; stop returns once the
// last line is written, with the states seen. Write errors are ignored:
// progress is a courtesy and must not end the run.
func (w *watcher) run(ctx context.Context) (stop func() []StateChange) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	// Read before the RPC leaves IDLE, so that its first change is seen.
	state := w.conn.GetState()
	w.states = []StateChange{{State: state, At: w.start}}
	go func() {
		defer close(done)
		var last time.Time      // of the last line
		var changedAt time.Time // of the last change
		pending := 0            // changes since the last line
		for {
			wctx, wcancel := ctx, context.CancelFunc(func() {})
			if w.progress != nil {
				wait := w.every
				if pending > 0 {
					wait = max(minProgressGap-time.Since(last), 0)
				}
				wctx, wcancel = context.WithTimeout(ctx, wait)
			}
			changed := w.conn.WaitForStateChange(wctx, state)
			wcancel()
			if ctx.Err() != nil {
				return
			}
			if changed {
				state, changedAt = w.conn.GetState(), time.Now()
				pending++
				w.mu.Lock()
				if len(w.states) < MaxKept {
					w.states = append(w.states, StateChange{State: state, At: changedAt})
				}
				w.mu.Unlock()
			}
			if w.progress == nil || pending > 0 && time.Since(last) < minProgressGap {
				continue
			}
			// A change line gives the time of the change, however late
			// it is written.
			still, more, at := "still ", "", time.Now()
			if pending > 0 {
				still, at = "", changedAt
			}
			if pending > 1 {
				more = fmt.Sprintf(" (%d state changes since the last line)", pending)
			}
			fmt.Fprintf(w.progress, "retry channel %s%v after %.1f s of %s s%s\n",
				still, state, at.Sub(w.start).Seconds(), strconv.FormatFloat(w.deadline.Seconds(), 'f', -1, 64), more)
			last, pending = time.Now(), 0
		}
	}()
	return func() []StateChange {
		cancel()
		<-done
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.states
	}
}

// retryCredentials are the retry channel's: plaintext, TLS trusting the
// roots of CAFile, or TLS trusting one certificate made in memory. The
// interop test's retry port closes every connection before the handshake,
// so no certificate is ever presented; the in-memory one only keeps grpc-go
// from reading the system's roots.
func (c Config) retryCredentials(keylog io.Writer) (credentials.TransportCredentials, error) {
	name := c.serverHostOverride()
	switch {
	case c.Plaintext:
		return insecure.NewCredentials(), nil
	case c.CAFile != "":
		pem, err := infile.ReadSmall(c.CAFile)
		if err != nil {
			return nil, field.Errorf("CAFile", c.CAFile, "%w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, field.Errorf("CAFile", c.CAFile, "no PEM certificate in it")
		}
		return c.tlsCredentials(pool, keylog), nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate test key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		DNSNames:              []string{name},
		NotBefore:             time.Unix(0, 0),
		NotAfter:              time.Unix(1<<33, 0),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("create test certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse test certificate: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return c.tlsCredentials(pool, keylog), nil
}

// tlsCredentials are the retry channel's TLS credentials trusting roots,
// as grpc-go's NewClientTLSFromCert makes them, writing their secrets to
// keylog when it is not nil.
func (c Config) tlsCredentials(roots *x509.CertPool, keylog io.Writer) credentials.TransportCredentials {
	return credentials.NewTLS(&tls.Config{ServerName: c.serverHostOverride(), RootCAs: roots, KeyLogWriter: keylog})
}

// Verdict is the run's outcome: it passes only when the retry RPC ended in
// DEADLINE_EXCEEDED, the server said passed and the own check agrees.
// reason names what failed first.
func (r *Report) Verdict() (passed bool, reason string) {
	switch {
	case r.Retry.Code != codes.DeadlineExceeded:
		return false, fmt.Sprintf("retry RPC ended in %v, want DeadlineExceeded: %v", r.Retry.Code, r.Retry.Err)
	case r.Own.Reference.Verdict == backoff.NotJudged:
		return true, "" // the server's answer cannot judge this mode either
	case !r.Server.GetPassed() && !r.Own.Passed():
		return false, "server says failed; " + r.Own.Reason()
	case !r.Server.GetPassed():
		return false, fmt.Sprintf("server says failed, but its %d backoff(s) pass the client's own check", len(r.Server.GetBackoffMs()))
	case !r.Own.Passed():
		return false, "server says passed, but the client's own check fails: " + r.Own.Reason()
	}
	return true, ""
}

// Write prints the run for a person: the setup, the retry RPC, one row per
// interval and both verdicts.
func (r *Report) Write(w io.Writer) error {
	b := r.Connect.Backoff
	ew := &errWriter{w: w}
	ew.printf("control %s, retry %s (%s)\n", r.Config.controlAddr(), r.Config.retryAddr(), r.Config.retrySecurity())
	ew.printf("grpc-go backoff: initial %v ×%g ±%g%% cap %v, min connect timeout %v\n",
		b.BaseDelay, b.Multiplier, b.Jitter*100, b.MaxDelay, r.Connect.MinConnectTimeout)
	if r.Retry.RPCs > 1 {
		ew.printf("retry RPCs: %d, made again after %s; the last ended in %v after %v (want DeadlineExceeded)\n\n",
			r.Retry.RPCs, r.Retry.earlyCodes(), r.Retry.Code, r.Retry.Took.Round(time.Millisecond))
	} else {
		ew.printf("retry RPC: %v after %v (want DeadlineExceeded)\n\n",
			r.Retry.Code, r.Retry.Took.Round(time.Millisecond))
	}

	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	// Numbers align right; the verdict, after the last tab, stays left.
	fmt.Fprint(tw, "k\tbackoff_ms\texpected_ms\twindow_ms\tjitter\t  verdict\n")
	ivs := r.Own.Intervals
	for i := 0; i < len(ivs); i++ {
		iv := ivs[i]
		j := i
		for j < len(ivs) && ivs[j].Term == backoff.TermReset {
			j++
		}
		if j-i >= 3 { // a storm of READY connections: one row
			lo, hi := ivs[i].BackoffMS, ivs[i].BackoffMS
			for _, v := range ivs[i:j] {
				lo, hi = min(lo, v.BackoffMS), max(hi, v.BackoffMS)
			}
			fmt.Fprintf(tw, "%d–%d\t%d–%d\t-\t-\t-\t  %d intervals after READY connections: reset, not judged\n",
				iv.K, ivs[j-1].K, lo, hi, j-i)
			i = j - 1
			continue
		}
		verdict := string(iv.Outcome)
		if iv.Term != "" {
			verdict += " (" + string(iv.Term) + ")"
		}
		fmt.Fprintf(tw, "%d\t%d\t%.1f\t%.0f–%.0f\t%+.2f%%\t  %s\n",
			iv.K, iv.BackoffMS, iv.ExpectedMS, iv.MinMS, iv.MaxMS, iv.JitterPct, verdict)
	}
	tw.Flush()

	server := "failed"
	if r.Server.GetPassed() {
		server = "passed"
	}
	own := string(r.Own.Reference.Verdict)
	if reason := r.Own.Reason(); reason != "" {
		own += ": " + reason
	}
	ew.printf("\nserver: %s (%d backoffs)\nown check: %s (%v)\n",
		server, len(r.Server.GetBackoffMs()), own, r.Own.Policy)
	return ew.err
}

// earlyCodes says how the RPCs made again ended, e.g.
// "Unavailable ×1304, Unknown ×2", in the order of the codes.
func (o RetryOutcome) earlyCodes() string {
	cs := slices.Sorted(maps.Keys(o.EarlyCodes))
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = fmt.Sprintf("%v ×%d", c, o.EarlyCodes[c])
	}
	return strings.Join(parts, ", ")
}

// retrySecurity says how the retry channel is secured, for the report.
func (c Config) retrySecurity() string {
	switch {
	case c.Plaintext:
		return "plaintext"
	case c.CAFile != "":
		return fmt.Sprintf("TLS, server name %s, roots %s", c.serverHostOverride(), c.CAFile)
	}
	return "TLS, server name " + c.serverHostOverride()
}

// errWriter keeps the first write error, so Write can print freely.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

func (e *errWriter) printf(format string, a ...any) { fmt.Fprintf(e, format, a...) }
