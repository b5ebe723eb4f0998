package realclients

// The harness: the in-process server, the three stacks, one run of one
// client, and what the run leaves to check.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"google.golang.org/grpc"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/internal/testutil"
	"github.com/backoff-audit/audit/interop"
	"github.com/backoff-audit/audit/server"
	"github.com/backoff-audit/audit/session"
)

// repoRoot is the module's root seen from this package's directory, where
// go test runs.
const repoRoot = "../.."

// systemPython is Debian's interpreter, the one python3-grpcio installs for
// (docs/spec.md §6.1); a python3 earlier on PATH may lack grpc.
const systemPython = "/usr/bin/python3"

func TestMain(m *testing.M) {
	// A run waits on the client's timers, not on the CPU: unless -parallel
	// is given, every run proceeds at once instead of GOMAXPROCS at a time
	// (2 on the project's machines), which would serialise them.
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		flag.Set("test.parallel", "64")
	}
	os.Exit(m.Run())
}

// args are one run's settings, named after the clients' flags.
type args struct {
	controlPort, retryPort int
	duration               time.Duration
	// maxBackoffMS is sent in Start and set as the client's cap.
	maxBackoffMS int32
	// initialBackoffMS is the client's initial backoff; 0 leaves its
	// default (1000 ms, the spec's, in all three).
	initialBackoffMS int32
	// minConnectMS is the least time an attempt is given: C-core's
	// grpc.min_reconnect_backoff_ms, grpc-go's MinConnectTimeout; grpc-js
	// has none and ignores it. 0 leaves the default (20 s).
	minConnectMS int32
	plaintext    bool
	// caFile and hostOverride are the TLS roots and name; empty: the
	// client's defaults (system roots or a certificate made in memory,
	// foo.test.google.fr).
	caFile, hostOverride string
	// mode is the retry port's, which grpc-go's own check judges in
	// (audit client --retry_mode); the script clients leave the check to
	// the test.
	mode backoff.RetryMode
}

// scriptFlags are the flags both script clients take
// (testdata/README.md, "Real clients").
func (a args) scriptFlags() []string {
	f := []string{
		"--server_host=127.0.0.1",
		"--server_control_port=" + strconv.Itoa(a.controlPort),
		"--server_retry_port=" + strconv.Itoa(a.retryPort),
		"--duration_s=" + strconv.FormatFloat(a.duration.Seconds(), 'f', -1, 64),
		"--max_reconnect_backoff_ms=" + strconv.Itoa(int(a.maxBackoffMS)),
		"--initial_reconnect_backoff_ms=" + strconv.Itoa(int(a.initialBackoffMS)),
		"--min_reconnect_backoff_ms=" + strconv.Itoa(int(a.minConnectMS)),
		"--use_tls=" + strconv.FormatBool(!a.plaintext),
	}
	if a.caFile != "" {
		f = append(f, "--ca_file="+a.caFile)
	}
	if a.hostOverride != "" {
		f = append(f, "--server_host_override="+a.hostOverride)
	}
	return f
}

// clientLine is the one JSON line a script client prints; the grpc-go run
// fills the same fields from interop's report.
type clientLine struct {
	Client        string         `json:"client"`
	Version       string         `json:"version"`
	Runtime       string         `json:"runtime"`
	TLS           bool           `json:"tls"`
	Options       map[string]any `json:"options"`
	Ignored       map[string]int `json:"ignored"`
	StartedUnixMS float64        `json:"started_unix_ms"`
	RetryMS       float64        `json:"retry_ms"`
	RetryStatus   string         `json:"retry_status"`
	RPCs          []rpcEnd       `json:"rpcs"`
	States        []stateAt      `json:"states"`
	Subchannel    []subEvent     `json:"subchannel"`
	Passed        *bool          `json:"passed"`
	BackoffMS     []int32        `json:"backoff_ms"`
	Error         string         `json:"error"`
	// Counts are the totals of the lists above, which keep their first
	// 1000 entries only.
	Counts counts `json:"counts"`
	// own is grpc-go's own check of backoff_ms (interop.Report.Own).
	own *backoff.Result
}

type counts struct {
	Subchannel int            `json:"subchannel"`
	States     int            `json:"states"`
	RPCs       int            `json:"rpcs"`
	RPCStatus  map[string]int `json:"rpc_status"`
}

// stateAt is a channel entering State.
type stateAt struct {
	State  string  `json:"state"`
	UnixMS float64 `json:"unix_ms"`
}

// subEvent is one event of the subchannel's trace: grpc-js gives the
// state entered, C-core the event ("connect_failed" with the backoff it
// drew, or "backoff_elapsed").
type subEvent struct {
	State     string  `json:"state"`
	Event     string  `json:"event"`
	UnixMS    float64 `json:"unix_ms"`
	Error     string  `json:"error"`
	BackoffMS *int    `json:"backoff_ms"`
}

// rpcEnd is the end of one wait-for-ready RPC on the retry channel.
type rpcEnd struct {
	Status string  `json:"status"`
	UnixMS float64 `json:"unix_ms"`
	Error  string  `json:"error"`
}

func unixMS(ms float64) time.Time {
	return time.Unix(0, int64(ms*1e6))
}

func toUnixMS(t time.Time) float64 {
	return float64(t.UnixNano()) / 1e6
}

// stack is one client library and how to run it.
type stack struct {
	name string
	// family is the library whose behaviour the checks know: cCore,
	// grpcGo or grpcJS; jittersFirst is set for a release that jitters
	// its first backoff (docs/spec.md §4.2).
	family       string
	jittersFirst bool
	// missing names what the machine lacks to run the client; "" when
	// nothing. installable says .ci/deps.sh installs it, so CI must have
	// it.
	missing     func() string
	installable bool
	run         func(ctx context.Context, a args) (clientLine, string, error)
}

const (
	cCore  = "c-core"
	grpcGo = "grpc-go"
	grpcJS = "grpc-js"
	// cCoreCLI is the newer C-core of the Python that the Google Cloud
	// CLI bundles (gRPC 1.71 on this machine's image), which jitters its
	// first backoff. No package registry the project reaches serves it,
	// so a machine without the CLI skips it, loudly, CI included.
	cCoreCLI = "c-core-cloud-cli"
)

// cloudPython is the Google Cloud CLI's bundled interpreter.
const cloudPython = "/usr/lib/google-cloud-sdk/platform/bundledpythonunix/bin/python3"

var stacks = []stack{
	{name: cCore, family: cCore, missing: missingCCore, installable: true, run: runCCore(systemPython)},
	{name: grpcGo, family: grpcGo, missing: func() string { return "" }, installable: true, run: runGrpcGo},
	{name: grpcJS, family: grpcJS, missing: missingGrpcJS, installable: true, run: runGrpcJS},
	{name: cCoreCLI, family: cCore, jittersFirst: true, missing: missingCCoreCLI, run: runCCore(cloudPython)},
}

// require skips the test, loudly, when the client cannot run here; in CI
// (CI=true), where .ci/deps.sh installs every runtime it can, it fails
// instead.
func (s stack) require(t *testing.T) {
	t.Helper()
	what := s.missing()
	if what == "" {
		return
	}
	if isCI() && s.installable {
		t.Fatalf("the %s client needs %s; CI must run every client", s.name, what)
	}
	t.Skipf("SKIPPED, NOT RUN: the %s client needs %s", s.name, what)
}

// isCI reports whether the tests run in CI, which installs every runtime
// and runs as root: there nothing may be skipped.
func isCI() bool { return os.Getenv("CI") == "true" }

var missingCCore = sync.OnceValue(func() string {
	return missingGrpcio(systemPython, "python3-grpcio for %s (apt-get install python3-grpcio, or make deps)")
})

var missingCCoreCLI = sync.OnceValue(func() string {
	return missingGrpcio(cloudPython, "the Google Cloud CLI's bundled Python, %s, with its grpcio (apt package google-cloud-cli)")
})

// missingGrpcio says what is missing when python cannot import grpc: what,
// with python in it, then why.
func missingGrpcio(python, what string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, python, "-c", "import grpc").CombinedOutput(); err != nil {
		return fmt.Sprintf(what+": %v: %s", python, err, bytes.TrimSpace(out))
	}
	return ""
}

// grpcJSDir is the grpc-js client's folder, with its package-lock.json.
var grpcJSDir = filepath.Join(repoRoot, "testdata", "clients", "grpcjs")

var missingGrpcJS = sync.OnceValue(func() string {
	if _, err := exec.LookPath("node"); err != nil {
		return "node on PATH (apt-get install nodejs, or make deps)"
	}
	if _, err := os.Stat(filepath.Join(grpcJSDir, "node_modules", "@grpc", "grpc-js", "package.json")); err != nil {
		return "its npm packages (npm ci --prefix testdata/clients/grpcjs, or make deps): " + err.Error()
	}
	return ""
})

// runCCore runs the C-core client with python's grpcio.
func runCCore(python string) func(ctx context.Context, a args) (clientLine, string, error) {
	return func(ctx context.Context, a args) (clientLine, string, error) {
		return runScript(ctx, python, append([]string{filepath.Join(repoRoot, "testdata", "clients", "ccore_client.py")}, a.scriptFlags()...)...)
	}
}

func runGrpcJS(ctx context.Context, a args) (clientLine, string, error) {
	return runScript(ctx, "node", append([]string{filepath.Join(grpcJSDir, "client.js")}, a.scriptFlags()...)...)
}

// runScript runs a script client and reads its JSON line.
func runScript(ctx context.Context, name string, argv ...string) (clientLine, string, error) {
	cmd := exec.CommandContext(ctx, name, argv...)
	cmd.WaitDelay = 5 * time.Second
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	runErr := cmd.Run()
	var line clientLine
	last := bytes.TrimSpace(out.Bytes())
	if i := bytes.LastIndexByte(last, '\n'); i >= 0 {
		last = last[i+1:]
	}
	if err := json.Unmarshal(last, &line); err != nil {
		return line, errb.String(), fmt.Errorf("%s %s: %v (context: %v); stdout %q is no JSON line: %v",
			name, strings.Join(argv, " "), runErr, ctx.Err(), out.String(), err)
	}
	if runErr != nil && line.Error == "" {
		return line, errb.String(), fmt.Errorf("%s %s: %v (context: %v), with no error in its line", name, strings.Join(argv, " "), runErr, ctx.Err())
	}
	return line, errb.String(), nil
}

// runGrpcGo runs interop.Run, the client behind `audit client`, in this
// process, and writes its report as the script clients write their line.
// grpc-go's subchannel is not traced: its attempts are known from the
// server only.
func runGrpcGo(ctx context.Context, a args) (clientLine, string, error) {
	cfg := interop.Config{
		ServerHost:            "127.0.0.1",
		ControlPort:           a.controlPort,
		RetryPort:             a.retryPort,
		MaxReconnectBackoffMS: a.maxBackoffMS,
		InitialBackoffMS:      1000,
		MinConnectTimeoutMS:   a.minConnectMS,
		Deadline:              a.duration,
		Plaintext:             a.plaintext,
		CAFile:                a.caFile,
		ServerHostOverride:    a.hostOverride,
		// As the script clients do: an RPC always waits (harmless where
		// the RPC can only end at its deadline).
		Reissue: true,
		Mode:    a.mode,
	}
	if a.initialBackoffMS > 0 {
		cfg.InitialBackoffMS = a.initialBackoffMS
	}
	line := clientLine{Client: grpcGo, Version: grpc.Version, Runtime: runtime.Version(), TLS: !a.plaintext}
	rep, err := interop.Run(ctx, cfg)
	if err != nil {
		line.Error = err.Error()
		return line, "", nil
	}
	r := rep.Retry
	line.StartedUnixMS = toUnixMS(r.Start)
	line.RetryMS = float64(r.Took) / 1e6
	line.RetryStatus = upperSnake(r.Code.String())
	line.Counts = counts{RPCs: r.RPCs, States: len(r.States), RPCStatus: map[string]int{line.RetryStatus: 1}}
	for _, e := range r.Early {
		st := upperSnake(e.Code.String())
		line.RPCs = append(line.RPCs, rpcEnd{Status: st, UnixMS: toUnixMS(e.At), Error: e.Err.Error()})
	}
	for c, n := range r.EarlyCodes {
		line.Counts.RPCStatus[upperSnake(c.String())] += n
	}
	line.RPCs = append(line.RPCs, rpcEnd{Status: line.RetryStatus, UnixMS: toUnixMS(r.Start.Add(r.Took))})
	for _, s := range r.States {
		line.States = append(line.States, stateAt{State: s.State.String(), UnixMS: toUnixMS(s.At)})
	}
	passed := rep.Server.GetPassed()
	line.Passed, line.BackoffMS = &passed, rep.Server.GetBackoffMs()
	line.own = &rep.Own
	return line, "", nil
}

// upperSnake spells a grpc-go code as the other stacks do:
// DeadlineExceeded → DEADLINE_EXCEEDED.
func upperSnake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if i > 0 && unicode.IsUpper(r) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToUpper(r))
	}
	return b.String()
}

// outcome is what one run left: the client's line, the server's session
// and log, and every reading of the run.
type outcome struct {
	// stack is the client's family (stack.family), what the checks know;
	// jittersFirst is its stack's.
	stack        string
	jittersFirst bool
	mode         backoff.RetryMode
	args         args
	line         clientLine
	stderr       string
	// session is the run's one session as the server's record file has
	// it; chain the server's accept times of its verified peer.
	session session.Session
	chain   []time.Time
	// log is the server's log.
	log string
	// syns are the kernel's timestamps of the verified peer's attempts
	// inside the session, one per attempt (docs/spec.md §5.2), and endings
	// their fates, as audit live read them, when the capture could open;
	// noCapture says why it could not.
	syns      []time.Time
	endings   []backoff.Ending
	noCapture string
	// readings are the run's readings by name, when the capture could open.
	readings readings
}

// end is the session's end; the record holds one for every session run
// checks.
func (o outcome) end() session.SessionEnd { return *o.session.End }

// policy is what the run is judged against (docs/spec.md §7.3): the
// spec's, with the run's cap and connect timeout.
func (o outcome) policy() backoff.Policy { return o.args.policy() }

func (a args) policy() backoff.Policy {
	p := backoff.ReferencePolicy(a.maxBackoffMS)
	if a.minConnectMS > 0 {
		p.MinConnectTimeout = time.Duration(a.minConnectMS) * time.Millisecond
	}
	return p
}

// attempts are the run's attempt times from the best source there is: the
// kernel's SYNs where the capture opened (docs/spec.md §5.1), else the
// server's accepts, which miss every attempt a refusing port turned away.
func (o outcome) attempts() (ts []time.Time, source string) {
	if o.noCapture == "" {
		return o.syns, "kernel"
	}
	return o.chain, "server"
}

// retryEnd is when the client's last retry RPC ended: the end of the run
// as the model's tail reads it.
func (o outcome) retryEnd() time.Time {
	return unixMS(o.line.StartedUnixMS + o.line.RetryMS)
}

// verify judges the attempts with the model of docs/spec.md §7.3 for the
// run's mode, with their fates where the capture shows them, and names
// the known deviations they match (§7.4).
func (o outcome) verify() (backoff.Result, []backoff.Signature) {
	ts, _ := o.attempts()
	run := o.session.Run()
	run.End = o.retryEnd()
	if o.noCapture == "" {
		run.Endings = o.endings
	}
	r := backoff.VerifyRun(o.policy(), ts, run)
	return r, backoff.Signatures(r)
}

// serverResult is the server's reading of its own list: the model over
// its accept times, as Stop's verdict has it.
func (o outcome) serverResult() backoff.Result {
	return backoff.VerifyRun(o.session.Params.Policy, o.chain, o.session.Run())
}

// run starts audit live on loopback in mode, with the readings beside it,
// runs one client of st against its server and returns what all saw. The
// client runs the interop steps itself (Start, the retry channel for
// a.duration, Stop). Where this process cannot capture, the server runs
// alone, and there are no readings.
func run(t *testing.T, st stack, mode backoff.RetryMode, a args) outcome {
	t.Helper()
	awaitTurn()
	a.mode = mode
	dir := t.TempDir()
	var log testutil.SyncBuffer
	cfg := server.Config{
		ControlAddr: "127.0.0.1:0",
		RetryAddr:   "127.0.0.1:0",
		Logger:      slog.New(slog.NewTextHandler(&log, nil)),
		Mode:        mode,
	}
	if a.minConnectMS > 0 {
		// The session's policy, which Stop's verdict uses, has the
		// clients' connect timeout (docs/spec.md §7.3).
		cfg.MinConnectTimeout = time.Duration(a.minConnectMS) * time.Millisecond
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", log.String())
			keepFiles(t, dir)
		}
	})
	o := outcome{stack: st.family, jittersFirst: st.jittersFirst, mode: mode, noCapture: noCapture()}
	var lr *liveReadings
	var record string
	if o.noCapture == "" {
		lr = startReadings(t, cfg, dir, a.policy(), a.minConnectMS > 0)
		a.controlPort, a.retryPort, record = lr.control, lr.retry, lr.record
	} else {
		if isCI() {
			t.Fatalf("no capture, so none of the readings: %s", o.noCapture)
		}
		t.Logf("NO READINGS: only the server's list is checked: %s", o.noCapture)
		record = filepath.Join(dir, "record.jsonl")
		a.controlPort, a.retryPort = serverAlone(t, cfg, record)
	}

	ctx, cancel := context.WithTimeout(context.Background(), a.duration+time.Minute)
	defer cancel()
	line, stderr, err := st.run(ctx, a)
	if err != nil {
		t.Fatalf("%s client: %v\nstderr:\n%s", st.name, err, stderr)
	}
	if line.Error != "" {
		t.Fatalf("%s client: %s\nstderr:\n%s", st.name, line.Error, stderr)
	}
	o.args, o.line, o.stderr = a, line, stderr
	if lr != nil {
		o.readings = lr.finish(t)
		if c := o.readings[readLive].chain(); c != nil {
			for _, at := range c.Attempts {
				o.syns, o.endings = append(o.syns, at.Time), append(o.endings, at.Ending)
			}
		}
	}
	o.log = log.String()
	o.session = recordSession(t, record)
	o.chain = acceptTimes(o.session, o.end().VerifiedPeer)
	return o
}

// startSpacing is the least time between two runs' starts. Started at
// once, the runs' clients (a Python or Node interpreter each) and
// auditors take both cores for seconds, and the servers in this process
// stamp their first accepts 100–400 ms late: a try that says nothing of
// the client. Spaced, the ~40 runs start within 6 s.
const startSpacing = 150 * time.Millisecond

var (
	turnMu   sync.Mutex
	lastTurn time.Time
)

// awaitTurn returns when the run may start: startSpacing after the last.
func awaitTurn() {
	turnMu.Lock()
	defer turnMu.Unlock()
	time.Sleep(time.Until(lastTurn.Add(startSpacing)))
	lastTurn = time.Now()
}

// serverAlone runs the server in this process until the test ends, with
// its record in the file record, and returns its ports.
func serverAlone(t *testing.T, cfg server.Config, record string) (control, retry int) {
	t.Helper()
	f, err := server.OpenRecord(record, cfg.Logger)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Record = f
	srv, err := server.New(cfg)
	if err != nil {
		f.Close()
		t.Fatalf("server.New: %v", err)
	}
	t.Cleanup(func() {
		if err := errors.Join(srv.Close(), f.Close()); err != nil {
			t.Errorf("server: %v", err)
		}
	})
	_, port, err := net.SplitHostPort(srv.ControlAddr())
	if err != nil {
		t.Fatalf("control address %s: %v", srv.ControlAddr(), err)
	}
	control, _ = strconv.Atoi(port)
	return control, srv.RetryPort()
}

// acceptTimes are the server's accept times of addr's chain in s.
func acceptTimes(s session.Session, addr netip.Addr) []time.Time {
	var ts []time.Time
	for _, a := range s.Accepts {
		if a.Peer.Addr().Unmap() == addr {
			ts = append(ts, a.Time)
		}
	}
	return ts
}

// recordSession is the one session of the record file, which must have
// ended.
func recordSession(t *testing.T, path string) session.Session {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	events, err := session.ReadRecord(f)
	if err != nil {
		t.Fatalf("record %s: %v", path, err)
	}
	all := session.Sessions(events)
	if len(all) != 1 || all[0].End == nil {
		t.Fatalf("record %s holds %d sessions, want 1 that ended", path, len(all))
	}
	return all[0]
}

// gaps are the intervals between the server's accepts of the verified
// chain.
func (o outcome) gaps() []time.Duration { return gapsOf(o.chain) }

func gapsOf(ts []time.Time) []time.Duration {
	var g []time.Duration
	for i := 1; i < len(ts); i++ {
		g = append(g, ts[i].Sub(ts[i-1]))
	}
	return g
}

// clientAttempts are the starts of the client's connection attempts as it
// saw them itself, from attempt first (0-based) on: for grpc-js each move
// of the subchannel to CONNECTING, from the first attempt; for C-core each
// end of a backoff, after which it connects at once with an RPC waiting,
// so from the second (its channel state may skip CONNECTING for the
// first). grpc-go's are not traced: none.
func (o outcome) clientAttempts() (ts []time.Time, first int) {
	switch o.stack {
	case grpcJS:
		for _, e := range o.line.Subchannel {
			if e.State == "CONNECTING" {
				ts = append(ts, unixMS(e.UnixMS))
			}
		}
	case cCore:
		first = 1
		for _, e := range o.line.Subchannel {
			if e.Event == "backoff_elapsed" {
				ts = append(ts, unixMS(e.UnixMS))
			}
		}
	}
	return ts, first
}

// connectFailures are C-core's failed attempts: when each failed and the
// backoff it drew (ms from then to the next attempt).
func (o outcome) connectFailures() (at []time.Time, backoffMS []int) {
	for _, e := range o.line.Subchannel {
		if e.Event == "connect_failed" && e.BackoffMS != nil {
			at = append(at, unixMS(e.UnixMS))
			backoffMS = append(backoffMS, *e.BackoffMS)
		}
	}
	return at, backoffMS
}

// summary is the run in a few lines, for go test -v: the figures the
// package's tests measure, each time in ms from the session's Start.
func (o outcome) summary() string {
	var b strings.Builder
	origin := o.session.Start
	rel := func(t time.Time) string { return strconv.FormatFloat(float64(t.Sub(origin))/1e6, 'f', 0, 64) }
	fmt.Fprintf(&b, "%s %s (%s), mode %s, duration %v, cap %d ms", o.line.Client, o.line.Version, o.line.Runtime, o.mode, o.args.duration, o.args.maxBackoffMS)
	if o.args.minConnectMS > 0 {
		fmt.Fprintf(&b, ", min connect %d ms", o.args.minConnectMS)
	}
	if o.args.plaintext {
		b.WriteString(", plaintext")
	} else {
		b.WriteString(", TLS")
	}
	res, sigs := o.verify()
	_, source := o.attempts()
	fmt.Fprintf(&b, "\n  model (§7.3, from the %s's times, T %v): %s, strict %s", source, o.policy().MinConnectTimeout, res.Reference.Verdict, res.Strict.Verdict)
	if r := res.Reason(); r != "" {
		fmt.Fprintf(&b, ": %s", r)
	}
	for _, s := range sigs {
		fmt.Fprintf(&b, "\n  signature: %s (%s)", s.Name, s.Detail)
	}
	if rc := res.Reconnects; rc != nil {
		fmt.Fprintf(&b, "\n  reconnects: %.1f/s, median interval %.1f ms, tight loop %v", rc.PerSecond, rc.MedianMS, rc.TightLoop)
	}
	if rv := res.Recovery; rv != nil {
		fmt.Fprintf(&b, "\n  recovery: attempt %d came %.0f ms after the port's return; the backoff owed %.0f ms (%.0f–%.0f), ok %v",
			rv.Attempt+1, rv.AfterMS, rv.OwedMS, rv.MinMS, rv.MaxMS, rv.OK)
	}
	fmt.Fprintf(&b, "\n  server: %d attempts from the verified peer, at %s ms; intervals %s ms; %s (strict %s)",
		len(o.chain), joinTimes(o.chain, rel), joinMS(o.gaps()), o.end().Verdict, o.serverResult().Strict.Verdict)
	if o.noCapture == "" {
		fmt.Fprintf(&b, "\n  kernel: %d SYNs at %s ms; intervals %s ms", len(o.syns), joinTimes(o.syns, rel), joinMS(gapsOf(o.syns)))
	}
	if ca, first := o.clientAttempts(); ca != nil {
		fmt.Fprintf(&b, "\n  client: attempts %d–%d at %s ms", first+1, first+len(ca), joinTimes(ca, rel))
	}
	if at, bo := o.connectFailures(); len(at) > 0 {
		var parts []string
		for i := range at[:min(len(at), shown)] {
			parts = append(parts, fmt.Sprintf("%s+%d", rel(at[i]), bo[i]))
		}
		fmt.Fprintf(&b, "\n  C-core failures (at+backoff drawn): %s ms%s", strings.Join(parts, " "), more(len(at)))
	}
	var states []string
	for _, s := range o.line.States[:min(len(o.line.States), shown)] {
		states = append(states, s.State+"@"+rel(unixMS(s.UnixMS)))
	}
	fmt.Fprintf(&b, "\n  channel states: %s%s", strings.Join(states, " "), more(max(len(o.line.States), o.line.Counts.States)))
	var rpcs []string
	for _, r := range o.line.RPCs {
		rpcs = append(rpcs, r.Status+"@"+rel(unixMS(r.UnixMS)))
	}
	if len(rpcs) > 6 {
		rpcs = append(rpcs[:3], fmt.Sprintf("… %d in all %v …", o.line.Counts.RPCs, o.line.Counts.RPCStatus), rpcs[len(rpcs)-1])
	}
	fmt.Fprintf(&b, "\n  RPCs: %s; Stop: backoff_ms %v", strings.Join(rpcs, " "), o.line.BackoffMS)
	return b.String()
}

// shown is how many values of a list a summary prints: a reconnect storm
// has thousands.
const shown = 12

func joinTimes(ts []time.Time, rel func(time.Time) string) string {
	var s []string
	for _, t := range ts[:min(len(ts), shown)] {
		s = append(s, rel(t))
	}
	return strings.Join(s, " ") + more(len(ts))
}

func joinMS(ds []time.Duration) string {
	var s []string
	for _, d := range ds[:min(len(ds), shown)] {
		s = append(s, strconv.FormatFloat(float64(d)/1e6, 'f', 1, 64))
	}
	return strings.Join(s, " ") + more(len(ds))
}

func more(n int) string {
	if n <= shown {
		return ""
	}
	return fmt.Sprintf(" … (%d in all)", n)
}
