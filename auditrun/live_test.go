package auditrun

// Tests of Run, what `audit live` runs: the auditor on lo with the
// project's server and the grpc-go interop client, in process. They need to capture:
// as root (CI) they all run; elsewhere they skip, loudly. Each test has its
// own server and ports and runs in parallel with the others.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/capture"
	"github.com/backoff-audit/audit/internal/testutil"
	"github.com/backoff-audit/audit/interop"
	"github.com/backoff-audit/audit/report"
	"github.com/backoff-audit/audit/report/herd"
	"github.com/backoff-audit/audit/server"
	"github.com/backoff-audit/audit/session"
)

// liveMaxMS keeps sessions short: every backoff is about a second.
const liveMaxMS = 1000

// requireCapture skips the test, loudly, when this process may not capture.
func requireCapture(t *testing.T) {
	t.Helper()
	l, err := capture.OpenLive(capture.LiveConfig{Iface: "lo", Port: 9})
	if errors.Is(err, os.ErrPermission) {
		t.Skipf("SKIPPED, NOT RUN: live capture needs root or CAP_NET_RAW+CAP_NET_ADMIN: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
}

// liveRun is Run running in this process.
type liveRun struct {
	out, errOut    *testutil.SyncBuffer
	control, retry int
	cancel         context.CancelFunc
	done           chan result
}

var liveAddrs = regexp.MustCompile(`control port \S+:(\d+), retry port \S+:(\d+)`)

// startLive runs Run with cfg (JSON reports, on lo, loopback ports
// unless set) until the test stops it or ends.
func startLive(t *testing.T, cfg Config) *liveRun {
	t.Helper()
	requireCapture(t)
	r := &liveRun{out: &testutil.SyncBuffer{}, errOut: &testutil.SyncBuffer{}, done: make(chan result, 1)}
	cfg.Iface, cfg.JSON = "lo", true
	if cfg.Server.ControlAddr == "" {
		cfg.Server.ControlAddr = "127.0.0.1:0"
	}
	if cfg.Server.RetryAddr == "" {
		cfg.Server.RetryAddr = "127.0.0.1:0"
	}
	cfg.Server.Logger = slog.New(slog.NewTextHandler(r.errOut, nil))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	r.cancel = cancel
	go func() {
		o, err := Run(ctx, cfg, r.out, r.errOut)
		r.done <- result{o, err}
	}()
	t.Cleanup(func() {
		r.cancel()
		<-r.done
		if t.Failed() {
			t.Logf("the run's stdout:\n%s\nstderr:\n%s", r.out, r.errOut)
		}
	})
	r.waitFor(t, "the capture to start", func() bool {
		if m := liveAddrs.FindStringSubmatch(r.errOut.String()); m != nil {
			r.control, _ = strconv.Atoi(m[1])
			r.retry, _ = strconv.Atoi(m[2])
		}
		return strings.Contains(r.errOut.String(), "capturing SYNs")
	})
	return r
}

// waitFor polls cond for up to 20 s; the process's end also ends the wait.
func (r *liveRun) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		select {
		case res := <-r.done:
			r.done <- res
			t.Fatalf("the run ended (%s, %v) while waiting for %s\nstdout:\n%s\nstderr:\n%s", res.verdict(), res.err, what, r.out, r.errOut)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s in 20 s\nstdout:\n%s\nstderr:\n%s", what, r.out, r.errOut)
		}
	}
}

// reports waits for n JSON report lines and returns them, parsed and raw.
func (r *liveRun) reports(t *testing.T, n int) ([]liveJSON, []map[string]json.RawMessage) {
	t.Helper()
	var lines []string
	r.waitFor(t, fmt.Sprintf("%d session reports", n), func() bool {
		lines = strings.FieldsFunc(r.out.String(), func(c rune) bool { return c == '\n' })
		return len(lines) >= n
	})
	return parseLiveReports(t, lines)
}

// stop interrupts the run as Ctrl-C does and returns what it judged.
func (r *liveRun) stop(t *testing.T) result {
	t.Helper()
	r.cancel()
	select {
	case res := <-r.done:
		r.done <- res
		return res
	case <-time.After(20 * time.Second):
		t.Fatal("the run did not end within 20 s of the interrupt")
		return result{}
	}
}

// recordServer is the reference server with its record file, as `audit
// server --record` runs it, on loopback ports, in this process beside the
// auditors that attach to it.
type recordServer struct {
	*server.Server
	Control, Retry int // the chosen ports
	Record         string
}

// startServer runs the server until the test ends.
func startServer(t *testing.T) *recordServer {
	t.Helper()
	s := &recordServer{Record: filepath.Join(t.TempDir(), "record.jsonl")}
	f, err := server.OpenRecord(s.Record, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	s.Server, err = server.New(server.Config{ControlAddr: "127.0.0.1:0", RetryAddr: "127.0.0.1:0", Record: f,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		f.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := errors.Join(s.Close(), f.Close()); err != nil {
			t.Errorf("server: %v", err)
		}
	})
	control, err := netip.ParseAddrPort(s.ControlAddr())
	if err != nil {
		t.Fatal(err)
	}
	s.Control, s.Retry = int(control.Port()), s.RetryPort()
	return s
}

// session returns the end of the server's one session and the accept
// times of its verified chain.
func (s *recordServer) session(t *testing.T) (session.SessionEnd, []time.Time) {
	t.Helper()
	all := s.Sessions()
	if len(all) != 1 || all[0].ID != 1 || all[0].End.Cause != session.CauseStop {
		t.Fatalf("the server ran %d sessions; want session 1 alone, ended by Stop", len(all))
	}
	var times []time.Time
	for _, a := range all[0].Accepts {
		if a.Peer.Addr().Unmap() == all[0].End.VerifiedPeer {
			times = append(times, a.Time)
		}
	}
	return all[0].End, times
}

// liveJSON reads a report line.
type liveJSON struct {
	Port       uint16                `json:"port"`
	Capture    attempt.CaptureInfo   `json:"capture"`
	Peers      []report.PeerReport   `json:"peers"`
	Summary    report.Summary        `json:"summary"`
	Session    report.SessionInfo    `json:"session"`
	Live       report.LiveInfo       `json:"live"`
	Foreign    []session.PeerCount   `json:"foreign"`
	Server     *report.ServerVerdict `json:"server"`
	CrossCheck *session.CrossCheck   `json:"crosscheck"`
	Herd       *herd.Reading         `json:"herd"`
}

func parseLiveReports(t *testing.T, lines []string) ([]liveJSON, []map[string]json.RawMessage) {
	t.Helper()
	var reps []liveJSON
	var raws []map[string]json.RawMessage
	for _, l := range lines {
		var rep liveJSON
		var raw map[string]json.RawMessage
		if err := json.Unmarshal([]byte(l), &rep); err != nil {
			t.Fatalf("report line %q: %v", l, err)
		}
		if err := json.Unmarshal([]byte(l), &raw); err != nil {
			t.Fatal(err)
		}
		reps, raws = append(reps, rep), append(raws, raw)
	}
	return reps, raws
}

// runLiveClient runs the interop client against ports with the short cap.
func runLiveClient(t *testing.T, control, retry int, deadline time.Duration) *interop.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline+30*time.Second)
	defer cancel()
	rep, err := interop.Run(ctx, interop.Config{
		ServerHost: "127.0.0.1", ControlPort: control, RetryPort: retry,
		MaxReconnectBackoffMS: liveMaxMS, InitialBackoffMS: 1000, Deadline: deadline,
	})
	if err != nil {
		t.Fatalf("interop client: %v", err)
	}
	return rep
}

var (
	loopback = netip.MustParseAddr("127.0.0.1")
	netipEq  = cmpopts.EquateComparable(netip.Addr{}, netip.AddrPort{})
)

// checkPairing asserts what every agreeing session shows: the chain's
// attempts pair one to one with the server's list, app delays are never
// negative, and both verdicts say the same.
func checkPairing(t *testing.T, rep liveJSON) {
	t.Helper()
	if len(rep.Peers) != 1 || rep.Peers[0].Peer != loopback {
		t.Fatalf("peers %+v; want only the client's 127.0.0.1", rep.Peers)
	}
	if rep.Server == nil || rep.CrossCheck == nil {
		t.Fatalf("no server verdict or cross-check: server %v, crosscheck %v", rep.Server, rep.CrossCheck)
	}
	cc := rep.CrossCheck
	kernel := rep.Peers[0].Attempts
	var chainPairs []session.Pair
	for _, p := range cc.Pairs {
		if p.Delay < 0 {
			t.Errorf("pair %v:%d: app delay %v < 0", p.Peer, p.SrcPort, p.Delay)
		}
		if !p.Foreign {
			chainPairs = append(chainPairs, p)
		}
	}
	if len(kernel) != len(rep.Server.BackoffMS)+1 || len(chainPairs) != len(kernel) {
		t.Errorf("kernel attempts %d, server attempts %d, chain pairs %d: want one to one",
			len(kernel), len(rep.Server.BackoffMS)+1, len(chainPairs))
	}
	for i := range min(len(kernel), len(chainPairs)) {
		if k, p := kernel[i], chainPairs[i]; !k.Time.Equal(p.KernelTime) || k.SrcPort != p.SrcPort {
			t.Errorf("attempt %d: kernel %v port %d, pair %v port %d", i+1, k.Time, k.SrcPort, p.KernelTime, p.SrcPort)
		}
	}
	if len(cc.KernelOnly) != 0 || len(cc.ServerOnly) != 0 {
		t.Errorf("kernel only %+v, server only %+v; want none", cc.KernelOnly, cc.ServerOnly)
	}
	if cc.KernelPassed != rep.Summary.PassedAll || cc.ServerPassed != rep.Server.Passed {
		t.Errorf("cross-check readings kernel %v server %v; the verdicts say kernel %v server %v",
			cc.KernelPassed, cc.ServerPassed, rep.Summary.PassedAll, rep.Server.Passed)
	}
	if cc.Agree {
		if rep.Summary.PassedAll != rep.Server.Passed || len(cc.Disagreements) != 0 {
			t.Errorf("agree, yet kernel passed %v, server passed %v, disagreements %+v",
				rep.Summary.PassedAll, rep.Server.Passed, cc.Disagreements)
		}
		return
	}
	// On a loaded machine an accept can wait for the scheduler longer than
	// the tolerance, and the verdicts then really differ: that is the
	// auditor's point. Each such interval must be explained by the app
	// delay of the attempt it names.
	if len(cc.Disagreements) == 0 {
		t.Fatalf("no agreement and no disagreement: %+v", cc)
	}
	delays := map[uint16]time.Duration{}
	for _, p := range chainPairs {
		delays[p.SrcPort] = p.Delay
	}
	for _, d := range cc.Disagreements {
		named := delays[d.SrcPort]
		t.Logf("LOADED MACHINE: interval %d: %s", d.K, d.Cause)
		if d.KernelOK == d.ServerOK || float64(2*named)/float64(time.Millisecond) < math.Abs(d.ShiftMS) {
			t.Errorf("disagreement %+v: not explained by attempt %d's app delay %v", d, d.Attempt, named)
		}
	}
}

// The JSON members of a session report, beside the `audit pcap` schema.
func checkLiveJSONFields(t *testing.T, raw map[string]json.RawMessage) {
	t.Helper()
	want := map[string][]string{
		"":           {"port", "policy", "capture", "peers", "summary", "server", "crosscheck", "session", "live", "foreign"},
		"server":     {"passed", "backoff_ms"},
		"crosscheck": {"agree", "pairs", "kernel_only", "server_only", "disagreements", "delay_us"},
		"pair":       {"peer", "src_port", "kernel_time", "accept_time", "delay_us"},
		"live":       {"iface", "timestamps", "received", "dropped", "if_dropped"},
	}
	objects := map[string]map[string]json.RawMessage{"": raw}
	for _, k := range []string{"server", "crosscheck", "live"} {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw[k], &m); err != nil {
			t.Fatalf("%s: %v in %s", k, err, raw[k])
		}
		objects[k] = m
	}
	var pairs []map[string]json.RawMessage
	if err := json.Unmarshal(objects["crosscheck"]["pairs"], &pairs); err != nil || len(pairs) == 0 {
		t.Fatalf("crosscheck.pairs: %v in %s", err, objects["crosscheck"]["pairs"])
	}
	objects["pair"] = pairs[0]
	for obj, keys := range want {
		for _, k := range keys {
			if _, ok := objects[obj][k]; !ok {
				t.Errorf("JSON %q lacks %q", obj, k)
			}
		}
	}
}

func TestLiveEndToEnd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pcapPath, recordPath := filepath.Join(dir, "live.pcap"), filepath.Join(dir, "record.jsonl")
	record, err := os.Create(recordPath)
	if err != nil {
		t.Fatal(err)
	}
	defer record.Close()
	cfg := Config{Write: pcapPath}
	cfg.Server.Record = record
	r := startLive(t, cfg)
	client := runLiveClient(t, r.control, r.retry, 4500*time.Millisecond)
	reps, raws := r.reports(t, 1)
	if res := r.stop(t); res.verdict() != runPassed && reps[0].Summary.PassedAll {
		t.Errorf("Run after a passing session: %s (%v)", res.verdict(), res.err)
	}
	rep := reps[0]
	checkPairing(t, rep)
	checkLiveJSONFields(t, raws[0])
	if diff := cmp.Diff(client.Server.GetBackoffMs(), rep.Server.BackoffMS, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("server backoff_ms: Stop's answer (-client +report):\n%s", diff)
	}
	if rep.Session.Cause != session.CauseStop || rep.Live.Timestamps == "" {
		t.Errorf("session cause %q, timestamps %q; want stop and a timestamp source", rep.Session.Cause, rep.Live.Timestamps)
	}

	// Without a control port the Write file is the retry port's alone,
	// a classic pcap with nanosecond timestamps.
	if st, err := capture.ReadFile(pcapPath, capture.Options{}, func(attempt.SYN) {}); err != nil || st.Format != "pcap (ns)" {
		t.Errorf("Write file: %+v, %v; want a nanosecond pcap", st, err)
	}
	// AuditFiles reads the Write file to the same verdict, to the ns.
	files := capped(time.Second)
	files.JSON, files.Port, files.PortSet = true, uint16(r.retry), true
	f := auditFiles(t, files, pcapPath)
	var offline report.Report
	if err := json.Unmarshal([]byte(f.stdout), &offline); err != nil {
		t.Fatalf("AuditFiles: %v (%v)\n%s\n%s", err, f.err, f.stdout, f.stderr)
	}
	offline.Peers = slices.DeleteFunc(offline.Peers, func(p report.PeerReport) bool { return p.Peer != loopback })
	if len(offline.Peers) != 1 {
		t.Fatalf("AuditFiles peers %+v; want 127.0.0.1", offline.Peers)
	}
	ignore := cmpopts.IgnoreFields(backoff.Interval{}, "Measured") // not in JSON
	if diff := cmp.Diff(rep.Peers[0], offline.Peers[0], netipEq, ignore); diff != "" {
		t.Errorf("kernel verdict: live vs AuditFiles of Write (-live +pcap):\n%s", diff)
	}

	// AuditFiles with the record cross-checks the same lists offline.
	f = auditFiles(t, FilesConfig{JSON: true, Port: uint16(r.retry), PortSet: true, Record: recordPath}, pcapPath)
	var withLog struct {
		Sessions []report.RecordSession `json:"sessions"`
	}
	if err := json.Unmarshal([]byte(f.stdout), &withLog); err != nil || len(withLog.Sessions) != 1 {
		t.Fatalf("AuditFiles with the record: %d sessions, %v (%v)\n%s\n%s", len(withLog.Sessions), err, f.err, f.stdout, f.stderr)
	}
	if diff := cmp.Diff(*rep.CrossCheck, *withLog.Sessions[0].CrossCheck, netipEq, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("cross-check: live vs AuditFiles with the record (-live +offline):\n%s", diff)
	}
}

func TestLiveForeignPeer(t *testing.T) {
	t.Parallel()
	firstAccept := make(chan struct{}, 1)
	cfg := Config{Herd: true}
	cfg.Server.BeforeStamp = func(peer netip.AddrPort) {
		if peer.Addr() == loopback {
			select {
			case firstAccept <- struct{}{}:
			default:
			}
		}
	}
	r := startLive(t, cfg)
	clientDone := make(chan *interop.Report, 1)
	go func() { clientDone <- runLiveClient(t, r.control, r.retry, 4500*time.Millisecond) }()

	// Mid-session, a second source address connects once.
	select {
	case <-firstAccept:
	case <-time.After(20 * time.Second):
		t.Fatal("no accept from the client in 20 s")
	}
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(r.retry)))
	if err != nil {
		t.Fatalf("dial from 127.0.0.2: %v", err)
	}
	foreignPort := c.LocalAddr().(*net.TCPAddr).Port
	c.Close()
	<-clientDone

	reps, _ := r.reports(t, 1)
	rep := reps[0]
	checkPairing(t, rep)
	foreign := netip.MustParseAddr("127.0.0.2")
	if diff := cmp.Diff([]session.PeerCount{{Addr: foreign, Attempts: 1}}, rep.Foreign, netipEq); diff != "" {
		t.Errorf("foreign peers (-want +got):\n%s", diff)
	}
	var found bool
	for _, p := range rep.CrossCheck.Pairs {
		if p.Peer == foreign {
			found = p.Foreign && p.SrcPort == uint16(foreignPort)
		}
	}
	if !found {
		t.Errorf("no foreign pair from 127.0.0.2:%d in %+v", foreignPort, rep.CrossCheck.Pairs)
	}
	// Config.Herd: the session's report ends with the herd of its peers.
	if h := rep.Herd; h == nil || len(rep.Peers) != 1 || h.Peers != 1 || h.Attempts != len(rep.Peers[0].Attempts) {
		t.Errorf("herd %+v; want the verified peer's %d attempts", h, len(rep.Peers[0].Attempts))
	}
}

func TestLiveDelayedAcceptDisagrees(t *testing.T) {
	t.Parallel()
	// The server's accept of attempt 3 is stamped 600 ms late (the
	// tolerance is 100 ms). Closing that connection late also delays
	// grpc-go's next attempt, which counts its backoff from the end of the
	// failed one (docs/spec.md §4): interval 2 is late by the server's clock,
	// interval 3 late by the kernel's.
	const delayed = 3
	var n atomic.Int32
	cfg := Config{}
	cfg.Server.BeforeStamp = func(peer netip.AddrPort) {
		if peer.Addr() == loopback && n.Add(1) == delayed {
			time.Sleep(600 * time.Millisecond)
		}
	}
	r := startLive(t, cfg)
	runLiveClient(t, r.control, r.retry, 5500*time.Millisecond)
	reps, _ := r.reports(t, 1)
	rep := reps[0]
	if len(rep.Peers) != 1 || len(rep.Peers[0].Attempts) < delayed+1 || rep.CrossCheck == nil {
		t.Fatalf("peers %+v, crosscheck %v: want at least %d attempts and a cross-check", rep.Peers, rep.CrossCheck, delayed+1)
	}
	port := rep.Peers[0].Attempts[delayed-1].SrcPort
	type dis struct {
		K, Attempt         int
		SrcPort            uint16
		KernelOK, ServerOK bool
	}
	var got []dis
	for _, d := range rep.CrossCheck.Disagreements {
		got = append(got, dis{d.K, d.Attempt, d.SrcPort, d.KernelOK, d.ServerOK})
		if !strings.Contains(d.Cause, fmt.Sprintf("attempt %d (port %d)", delayed, port)) {
			t.Errorf("interval %d: cause %q does not name attempt %d", d.K, d.Cause, delayed)
		}
	}
	want := []dis{
		{K: delayed - 1, Attempt: delayed, SrcPort: port, KernelOK: true, ServerOK: false},
		{K: delayed, Attempt: delayed, SrcPort: port, KernelOK: false, ServerOK: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("disagreements (-want +got):\n%s", diff)
	}
	if rep.CrossCheck.Agree {
		t.Error("agree = true")
	}
}

func TestLiveAttach(t *testing.T) {
	t.Parallel()
	srv := startServer(t) // the server of `audit server --record`, beside the auditors
	withLog := startLive(t, Config{Attach: true, RetryPort: srv.Retry, Record: srv.Record})
	sniff := startLive(t, Config{Attach: true, RetryPort: srv.Retry, MaxMS: liveMaxMS, Idle: 2500 * time.Millisecond})
	runLiveClient(t, srv.Control, srv.Retry, 4500*time.Millisecond)
	end, times := srv.session(t)

	reps, raws := withLog.reports(t, 1)
	rep := reps[0]
	checkPairing(t, rep)
	checkLiveJSONFields(t, raws[0])
	if rep.Server.Passed != end.Passed || len(times) != len(rep.Peers[0].Attempts) {
		t.Errorf("server passed %v with %d accepts in the record; report says %v with %d attempts",
			end.Passed, len(times), rep.Server.Passed, len(rep.Peers[0].Attempts))
	}
	// Sniffing alone, sessions delimited by Idle, judges the same SYNs alike.
	sreps, _ := sniff.reports(t, 1)
	if sreps[0].Server != nil || sreps[0].CrossCheck != nil {
		t.Errorf("sniff-only report has a server side: %+v %+v", sreps[0].Server, sreps[0].CrossCheck)
	}
	if sreps[0].Session.Cause != session.CauseIdle || len(sreps[0].Peers) != 1 {
		t.Fatalf("sniff-only: cause %q, peers %+v", sreps[0].Session.Cause, sreps[0].Peers)
	}
	// Two captures timestamp each packet on their own, a µs or so apart:
	// the same attempts and the same verdict, not the same nanoseconds.
	if diff := cmp.Diff(verdictOf(rep.Peers[0]), verdictOf(sreps[0].Peers[0])); diff != "" {
		t.Errorf("kernel verdict: with the record vs sniffing only (-log +sniff):\n%s", diff)
	}
}

// With the in-process server, Server.MaxAttempts caps both lists of a session
// alike: the server's and the kernel's verdicts are both "too many
// attempts", and the cross-check pairs the attempts both kept, without
// listing the server's overflow accepts.
func TestLiveMaxAttempts(t *testing.T) {
	t.Parallel()
	const maxAttempts = 2
	cfg := Config{}
	cfg.Server.MaxAttempts = maxAttempts
	r := startLive(t, cfg)
	runLiveClient(t, r.control, r.retry, 4500*time.Millisecond) // 4 or 5 attempts
	reps, _ := r.reports(t, 1)
	rep := reps[0]
	if rep.Server == nil || rep.Server.Verdict != backoff.Overflow || rep.Server.Passed {
		t.Fatalf("server verdict %+v; want %q", rep.Server, backoff.Overflow)
	}
	if len(rep.Peers) != 1 || rep.Peers[0].Verdict != backoff.Overflow || len(rep.Peers[0].Attempts) != maxAttempts ||
		rep.Session.Dropped < 1 || rep.Session.MaxAttempts != maxAttempts {
		t.Fatalf("kernel peers %+v, session %+v; want %d attempts kept, the rest dropped, verdict %q",
			rep.Peers, rep.Session, maxAttempts, backoff.Overflow)
	}
	cc := rep.CrossCheck
	if len(cc.Pairs) != maxAttempts || len(cc.KernelOnly) != 0 || len(cc.ServerOnly) != 0 {
		t.Errorf("cross-check: %d pairs, kernel only %+v, server only %+v; want the %d kept on both sides, paired",
			len(cc.Pairs), cc.KernelOnly, cc.ServerOnly, maxAttempts)
	}
	for i, p := range cc.Pairs {
		if a := rep.Peers[0].Attempts[i]; !p.KernelTime.Equal(a.Time) || p.SrcPort != a.SrcPort {
			t.Errorf("pair %d: %+v; kernel attempt %+v", i+1, p, a)
		}
	}
}

// verdictOf is a peer's verdict without its timestamps.
func verdictOf(p report.PeerReport) (v struct {
	Verdict  backoff.Verdict
	Ports    []uint16
	Seqs     []uint32
	Outcomes []backoff.Outcome
}) {
	v.Verdict = p.Verdict
	for _, a := range p.Attempts {
		v.Ports, v.Seqs = append(v.Ports, a.SrcPort), append(v.Seqs, a.Seq)
	}
	for _, iv := range p.Intervals {
		v.Outcomes = append(v.Outcomes, iv.Outcome)
	}
	return v
}

func TestLiveUsageErrors(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	tests := []struct {
		name string
		cfg  Config
		want []string
	}{
		{"port in use", Config{Iface: "lo", Server: serverConfig("127.0.0.1:0", busy.Addr().String())},
			[]string{"address already in use", busy.Addr().String()}},
		{"unknown interface", Config{Iface: "nosuch0", Server: serverConfig("127.0.0.1:0", "127.0.0.1:0")},
			[]string{"unknown interface", "lo"}},
		{"attach without port", Config{Iface: "lo", Attach: true}, []string{"Attach: needs RetryPort"}},
		{"control port and record", Config{Iface: "lo", Attach: true, RetryPort: 9, ControlPort: 8, Record: "run.jsonl"},
			[]string{"ControlPort 8: not with Record"}},
		{"control port is the retry port", Config{Iface: "lo", Attach: true, RetryPort: 9, ControlPort: 9},
			[]string{"ControlPort 9: is RetryPort too"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, err := Run(ctx, tt.cfg, io.Discard, io.Discard)
			if err == nil {
				t.Fatal("Run judged; want an error: nothing can run")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func serverConfig(control, retry string) (c server.Config) {
	c.ControlAddr, c.RetryAddr = control, retry
	c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return c
}
