package server

// The reference server and real clients of the interop test on loopback:
// grpc-go (the interop package's client) and gRPC C-core (python3-grpcio),
// each with the spec's policy and with a deliberately wrong one; and the
// TLS key logs both sides write in a mode whose connections succeed. Each
// test has a server of its own, since the sessions of one serialise.

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/interop"
	"github.com/backoff-audit/audit/tlsdec"
)

// clientConfig is the interop client's configuration for h's ports, as
// `audit client` fills it by default.
func (h *harness) clientConfig() interop.Config {
	_, control, err := net.SplitHostPort(h.s.ControlAddr())
	if err != nil {
		h.t.Fatal(err)
	}
	port, _ := strconv.Atoi(control)
	return interop.Config{ServerHost: "127.0.0.1", ControlPort: port, RetryPort: h.s.RetryPort(),
		InitialBackoffMS: 1000, MinConnectTimeoutMS: 20000}
}

// runGo runs the grpc-go client with cfg and returns its report and what
// it prints.
func runGo(t *testing.T, cfg interop.Config) (*interop.Report, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Deadline+30*time.Second)
	defer cancel()
	rep, err := interop.Run(ctx, cfg)
	if err != nil {
		t.Fatalf("interop client: %v", err)
	}
	var out bytes.Buffer
	if err := rep.Write(&out); err != nil {
		t.Fatal(err)
	}
	return rep, out.String()
}

// session is the server's one session, ended by Stop, and the accept
// times of its verified chain.
func (h *harness) session() (Session, []time.Time) {
	h.t.Helper()
	all := h.s.Sessions()
	if len(all) != 1 || all[0].ID != 1 {
		h.t.Fatalf("the server ran %d sessions; want session 1 alone", len(all))
	}
	return all[0], all[0].Times(all[0].End.VerifiedPeer)
}

// checkChain re-verifies the session's accept times and holds them to
// the server's answer: the same backoffs, each within its window of p.
func checkChain(t *testing.T, p backoff.Policy, ss Session, times []time.Time) backoff.Result {
	t.Helper()
	res := backoff.Verify(p, times)
	if diff := cmp.Diff(ss.End.BackoffMS, res.BackoffMS, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("backoff_ms: server's answer vs its accepts (-stop +accepts):\n%s", diff)
	}
	return res
}

// tableRow is one interval row of the client's table: k, then backoff_ms.
var tableRow = regexp.MustCompile(`(?m)^\s*(\d+)\s+(-?\d+)\s+\d+\.\d\s+`)

func printedBackoffs(t *testing.T, out string) []int32 {
	t.Helper()
	var got []int32
	for i, m := range tableRow.FindAllStringSubmatch(out, -1) {
		if m[1] != strconv.Itoa(i+1) {
			t.Fatalf("table row %d is numbered %s:\n%s", i+1, m[1], out)
		}
		b, err := strconv.ParseInt(m[2], 10, 32)
		if err != nil {
			t.Fatalf("table row %d: %v", i+1, err)
		}
		got = append(got, int32(b))
	}
	return got
}

// grpc-go with the spec's policy, capped at 2 s: passed, with intervals
// that grow 1000 → 1600 → 2000 and stay capped, each within its window;
// the client prints the server's backoffs and both verdicts.
func TestGoClientPasses(t *testing.T) {
	t.Parallel()
	h := start(t, Config{Now: time.Now})
	cfg := h.clientConfig()
	cfg.MaxReconnectBackoffMS, cfg.Deadline = 2000, 10*time.Second
	rep, out := runGo(t, cfg)
	if ok, reason := rep.Verdict(); !ok {
		t.Fatalf("client verdict: %s\n%s", reason, out)
	}
	t.Logf("client:\n%s", out)

	ss, times := h.session()
	if !ss.End.Passed || ss.End.Verdict != backoff.Passed {
		t.Errorf("server verdict %q (passed=%v, reason %q), want passed", ss.End.Verdict, ss.End.Passed, ss.End.Reason)
	}
	res := checkChain(t, backoff.ReferencePolicy(2000), ss, times)
	// 10 s holds at least 1000 + 1920 + 3·2400 ms of backoff: ≥ 4 intervals.
	if len(res.Intervals) < 4 {
		t.Fatalf("%d intervals in 10 s, want at least 4: %v", len(res.Intervals), res.BackoffMS)
	}
	var gotExpected, wantExpected []float64
	for i, iv := range res.Intervals {
		if !iv.OK {
			t.Errorf("interval %d: %d ms outside %.0f–%.0f ms", iv.K, iv.BackoffMS, iv.MinMS, iv.MaxMS)
		}
		gotExpected = append(gotExpected, iv.ExpectedMS)
		wantExpected = append(wantExpected, []float64{1000, 1600, 2000}[min(i, 2)])
	}
	if diff := cmp.Diff(wantExpected, gotExpected); diff != "" {
		t.Errorf("expected backoffs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(ss.End.BackoffMS, printedBackoffs(t, out)); diff != "" {
		t.Errorf("client's table vs server's backoff_ms (-server +client):\n%s", diff)
	}
	if !strings.Contains(out, "server: passed") || !strings.Contains(out, "own check: passed") {
		t.Errorf("client output lacks both verdicts:\n%s", out)
	}
}

// grpc-go with a 300 ms base delay: the server fails it at the first
// interval, and the client's verdict says so.
func TestGoClientWrongPolicy(t *testing.T) {
	t.Parallel()
	h := start(t, Config{Now: time.Now})
	cfg := h.clientConfig()
	cfg.MaxReconnectBackoffMS, cfg.InitialBackoffMS, cfg.Deadline = 2000, 300, 3*time.Second
	rep, _ := runGo(t, cfg)
	if ok, reason := rep.Verdict(); ok || !strings.Contains(reason, "server says failed; interval 1: ") {
		t.Errorf("client verdict %v, %q; want failed: server says failed; interval 1: …", ok, reason)
	}
	ss, times := h.session()
	if ss.End.Passed || ss.End.Verdict != backoff.Failed || !strings.HasPrefix(ss.End.Reason, "interval 1: ") {
		t.Errorf("server verdict %q (passed=%v, reason %q), want failed naming interval 1", ss.End.Verdict, ss.End.Passed, ss.End.Reason)
	}
	res := checkChain(t, backoff.ReferencePolicy(2000), ss, times)
	if res.Reference.FirstFailure != 1 || res.Intervals[0].Outcome != backoff.Early {
		t.Errorf("re-verified: first failure %d (%v), want interval 1 early", res.Reference.FirstFailure, res.Intervals)
	}
}

// pythonResult is the JSON line of testdata/interop/reconnect_client.py.
type pythonResult struct {
	Passed      bool    `json:"passed"`
	BackoffMS   []int32 `json:"backoff_ms"`
	RetryStatus string  `json:"retry_status"`
	GRPCVersion string  `json:"grpc_version"`
}

// runPython runs the C-core client against h; it skips, loudly, where
// python3-grpcio is missing (CI installs it, so there it always runs).
func runPython(t *testing.T, h *harness, args ...string) (pythonResult, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, systemPython, "-c", "import grpc").CombinedOutput(); err != nil {
		t.Skipf("SKIPPED, NOT RUN: interop with C-core needs python3-grpcio for %s (apt-get install python3-grpcio): %v\n%s", systemPython, err, out)
	}
	cfg := h.clientConfig()
	cmd := exec.CommandContext(ctx, systemPython, append([]string{"../testdata/interop/reconnect_client.py", "--server_host=127.0.0.1",
		"--server_control_port=" + strconv.Itoa(cfg.ControlPort), "--server_retry_port=" + strconv.Itoa(cfg.RetryPort)}, args...)...)
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	code := cmd.ProcessState.ExitCode()
	var r pythonResult
	if jerr := json.Unmarshal(out, &r); jerr != nil {
		t.Fatalf("reconnect_client.py exit %d (%v) printed %q: %v\nstderr:\n%s", code, err, out, jerr, &stderr)
	}
	t.Logf("reconnect_client.py (exit %d): %s", code, out)
	if r.RetryStatus != "DEADLINE_EXCEEDED" {
		t.Errorf("retry RPC ended in %s, want DEADLINE_EXCEEDED", r.RetryStatus)
	}
	return r, code
}

// gRPC C-core with its default policy, capped at 2 s, passes.
func TestCCoreClientPasses(t *testing.T) {
	t.Parallel()
	h := start(t, Config{Now: time.Now})
	r, code := runPython(t, h, "--max_reconnect_backoff_ms=2000", "--deadline_s=8")
	if code != 0 || !r.Passed {
		t.Errorf("C-core %s: passed=%v exit %d, want passed and exit 0", r.GRPCVersion, r.Passed, code)
	}
	ss, times := h.session()
	if diff := cmp.Diff(ss.End.BackoffMS, r.BackoffMS, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("backoff_ms (-server +client):\n%s", diff)
	}
	res := checkChain(t, backoff.ReferencePolicy(2000), ss, times)
	// 8 s holds at least 1200 + 1920 + 2400 ms of backoff: ≥ 3 intervals.
	if len(res.Intervals) < 3 || !res.Passed() {
		t.Errorf("re-verified: %d intervals, %s %s; want ≥ 3, passed", len(res.Intervals), res.Reference.Verdict, res.Reason())
	}
}

// C-core told to start at 300 ms fails at the first interval.
func TestCCoreClientWrongPolicy(t *testing.T) {
	t.Parallel()
	h := start(t, Config{Now: time.Now})
	r, code := runPython(t, h, "--max_reconnect_backoff_ms=2000", "--initial_reconnect_backoff_ms=300", "--deadline_s=6")
	if code != 1 || r.Passed {
		t.Errorf("C-core %s with 300 ms: passed=%v exit %d, want failed and exit 1", r.GRPCVersion, r.Passed, code)
	}
	ss, _ := h.session()
	if ss.End.Passed || !strings.HasPrefix(ss.End.Reason, "interval 1: ") {
		t.Errorf("server: passed=%v reason %q, want failed naming interval 1", ss.End.Passed, ss.End.Reason)
	}
	if diff := cmp.Diff(ss.End.BackoffMS, r.BackoffMS, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("backoff_ms (-server +client):\n%s", diff)
	}
}

// The server's and the client's key logs on a goaway retry port hold the
// secrets of the same connections, in the NSS format, in files only their
// owner reads; a key log that was there is appended to and made 0600.
func TestKeyLogWriters(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	serverLog, clientLog := filepath.Join(dir, "server.keylog"), filepath.Join(dir, "client.keylog")
	const before = "# a line that was there\n"
	if err := os.WriteFile(clientLog, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Now: time.Now, Mode: mode(t, "goaway")}
	closeFiles, err := OpenFiles(&cfg, "", serverLog)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeFiles() }) // after the server's Close, which start's cleanup does
	h := start(t, cfg)
	ccfg := h.clientConfig()
	ccfg.CAFile, ccfg.Reissue, ccfg.Deadline, ccfg.KeyLog = "../testdata/tls/server.pem", true, 500*time.Millisecond, clientLog
	runGo(t, ccfg)

	secrets := map[string]map[string]string{} // file → "LABEL RANDOM" → secret
	for _, path := range []string{serverLog, clientLog} {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", filepath.Base(path), st.Mode().Perm())
		}
		k, err := tlsdec.ReadKeyLog(path)
		if err != nil {
			t.Fatal(err)
		}
		if k.Skipped != 0 || k.Connections() == 0 {
			t.Errorf("%s: %s; want lines of the format only, of at least one connection", filepath.Base(path), k.Summary())
		}
		b, _ := os.ReadFile(path)
		secrets[path] = map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if f := strings.Fields(line); len(f) == 3 {
				secrets[path][f[0]+" "+f[1]] = f[2]
			}
		}
	}
	if b, _ := os.ReadFile(clientLog); !strings.HasPrefix(string(b), before) {
		t.Errorf("the client's key log lost what it held before:\n%.200s", b)
	}
	// The server logs every connection to its retry port, the client
	// every one it made: the same secrets, but for the last connection,
	// which the client's end may cut after the server's flight and before
	// the client read it.
	shared := map[string]string{}
	for k := range secrets[clientLog] {
		shared[k] = secrets[serverLog][k]
	}
	if diff := cmp.Diff(secrets[clientLog], shared); diff != "" {
		t.Errorf("secrets by label and random (-client +server)\n%s", diff)
	}
	if missing := len(secrets[serverLog]) - len(secrets[clientLog]); missing > 4 {
		t.Errorf("the server logged %d secrets the client did not, more than one connection's 4", missing)
	}
}
