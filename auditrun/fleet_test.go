package auditrun

// The fleet end to end: Debian's real Prometheus scrapes audit watch's
// exposition on loopback while real clients, grpc-go and C-core, reconnect
// to the reference server's retry port; what Prometheus then holds equals
// what audit pcap reports on the file audit watch wrote.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/internal/testutil"
	"github.com/backoff-audit/audit/interop"
	"github.com/backoff-audit/audit/report"
	"github.com/backoff-audit/audit/watch"
)

// requireTool skips, loudly, without the command; in CI, where
// .ci/deps.sh installs it, it fails instead.
func requireTool(t *testing.T, name, pkg string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s missing in CI: .ci/deps.sh installs Debian's %s", name, pkg)
	}
	t.Skipf("SKIPPED, NOT RUN: %s missing (apt-get install %s, or .ci/deps.sh)", name, pkg)
	return ""
}

// proc is a process of a test, its output kept; it is interrupted and
// waited for when the test ends.
type proc struct {
	cmd  *exec.Cmd
	out  testutil.SyncBuffer
	done chan error
}

func startProc(t *testing.T, timeout time.Duration, name string, args ...string) *proc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	p := &proc{cmd: exec.CommandContext(ctx, name, args...), done: make(chan error, 1)}
	p.cmd.Cancel = func() error { return p.cmd.Process.Signal(os.Interrupt) }
	p.cmd.WaitDelay = 5 * time.Second
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start %s: %v", name, err)
	}
	exited := make(chan error, 1)
	go func() { err := p.cmd.Wait(); exited <- err; p.done <- err }()
	t.Cleanup(func() {
		cancel()
		<-exited
		if t.Failed() {
			t.Logf("%s output:\n%s", name, p.out.String())
		}
	})
	return p
}

// promQuery asks Prometheus for an instant vector and returns its samples,
// each keyed by the values of the labels named in by, joined with ",".
func promQuery(ctx context.Context, base, query string, by ...string) (map[string]float64, error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/api/v1/query?query="+url.QueryEscape(query), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string
		Error  string
		Data   struct {
			Result []struct {
				Metric map[string]string
				Value  [2]any
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, err
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query %s: %s", query, r.Error)
	}
	out := map[string]float64{}
	for _, s := range r.Data.Result {
		var key []string
		for _, l := range by {
			key = append(key, s.Metric[l])
		}
		v, err := strconv.ParseFloat(fmt.Sprint(s.Value[1]), 64)
		if err != nil {
			return nil, err
		}
		out[strings.Join(key, ",")] = v
	}
	return out, nil
}

// fleetView is what the test compares: attempts, retransmissions,
// chains by verdict, intervals by verdict, attempts by fate.
type fleetView struct {
	Attempts, Retransmits float64
	Chains                map[string]float64
	Intervals             map[string]float64
	Fates                 map[string]float64
}

// promView reads the view from Prometheus, for port.
func promView(ctx context.Context, base string, port int) (fleetView, error) {
	sel := fmt.Sprintf(`{port="%d"}`, port)
	var v fleetView
	var errs []error
	one := func(q string) float64 {
		m, err := promQuery(ctx, base, q)
		errs = append(errs, err)
		return m[""]
	}
	some := func(q, by string) map[string]float64 {
		m, err := promQuery(ctx, base, q, by)
		errs = append(errs, err)
		for k, n := range m {
			if n == 0 {
				delete(m, k)
			}
		}
		return m
	}
	v.Attempts = one("sum(audit_attempts_total" + sel + ")")
	v.Retransmits = one("sum(audit_syn_retransmissions_total" + sel + ")")
	v.Chains = some("sum by (verdict) (audit_chains_total"+sel+")", "verdict")
	v.Intervals = some("sum by (verdict) (audit_intervals_total"+sel+")", "verdict")
	v.Fates = some("sum by (fate) (audit_attempt_fates_total"+sel+")", "fate")
	return v, errors.Join(errs...)
}

// pcapView reads the view from audit pcap's JSON report.
func pcapView(t *testing.T, doc string) fleetView {
	t.Helper()
	var r report.Report
	if err := json.Unmarshal([]byte(doc), &r); err != nil {
		t.Fatalf("audit pcap JSON: %v\n%s", err, doc)
	}
	v := fleetView{Attempts: float64(r.Capture.Attempts), Retransmits: float64(r.Capture.Retransmits),
		Chains: map[string]float64{}, Intervals: map[string]float64{}, Fates: map[string]float64{}}
	for _, p := range r.Peers {
		v.Chains[string(p.Verdict)]++
		for _, iv := range p.Intervals {
			v.Intervals[string(iv.Outcome)]++
		}
		for _, a := range p.Attempts {
			v.Fates[string(a.Ending.Fate)]++
		}
	}
	return v
}

// TestFleetPrometheus: Prometheus holds the attempts, chains and verdicts
// of audit watch, and they are audit pcap's on the file audit watch wrote.
func TestFleetPrometheus(t *testing.T) {
	t.Parallel()
	requireCapture(t)
	promBin := requireTool(t, "prometheus", "prometheus")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, systemPython, "-c", "import grpc").CombinedOutput(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("python3-grpcio missing in CI: %v\n%s", err, out)
		}
		t.Skipf("SKIPPED, NOT RUN: the C-core client needs python3-grpcio for %s: %v\n%s", systemPython, err, out)
	}
	dir := t.TempDir()
	srv := startServer(t)
	// A 2 s connect timeout ends each chain 4.5–5 s after the clients'
	// last attempt rather than 20 s; the retry port closes every
	// attempt at once, so no verdict depends on it.
	policy := backoff.DefaultPolicy()
	policy.MinConnectTimeout = 2 * time.Second
	written := filepath.Join(dir, "watch.pcap")
	addr := make(chan string, 1)
	var wOut, wErr testutil.SyncBuffer
	wctx, stopWatch := context.WithTimeout(context.Background(), time.Minute)
	defer stopWatch()
	watched := make(chan error, 1)
	go func() {
		_, err := Watch(wctx, WatchConfig{Iface: "lo", Ports: []uint16{uint16(srv.Retry)}, Write: written, Metrics: "127.0.0.1:0",
			Watch: watch.Config{Policy: policy, JSON: true}, OnListen: func(a string) { addr <- a }}, &wOut, &wErr)
		watched <- err
	}()
	target := <-addr
	testutil.WaitFor(t, "the capture to start", watched, func() bool { return strings.Contains(wErr.String(), "capturing SYNs") })

	// Prometheus, scraping every second, with the repository's rules.
	promAddr := freeAddr(t)
	rules, err := filepath.Abs("../deploy/prometheus/audit-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files: [%q]\nscrape_configs:\n  - job_name: audit\n    static_configs:\n      - targets: [%q]\n", rules, target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	prom := startProc(t, time.Minute, promBin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "tsdb"), "--web.listen-address="+promAddr)
	base := "http://" + promAddr
	testutil.WaitFor(t, "Prometheus to be ready", prom.done, func() bool {
		return strings.Contains(prom.out.String(), "Server is ready to receive web requests")
	})

	// Real clients with their default backoff for 8 s, two peers: grpc-go
	// from 127.0.0.1, its attempts closed by the server; C-core from ::1,
	// where the server does not listen, its attempts refused.
	ccore := startProc(t, 30*time.Second, systemPython, "../testdata/clients/ccore_client.py", "--server_host=::1",
		"--server_retry_port="+strconv.Itoa(srv.Retry), "--duration_s=8", "--trace=false")
	gctx, gcancel := context.WithTimeout(ctx, 30*time.Second)
	defer gcancel()
	if _, err := interop.Run(gctx, interop.Config{ServerHost: "127.0.0.1", ControlPort: srv.Control, RetryPort: srv.Retry,
		InitialBackoffMS: 1000, MaxReconnectBackoffMS: 120000, Deadline: 8 * time.Second}); err != nil {
		t.Fatalf("grpc-go client: %v", err)
	}
	if err := <-ccore.done; err != nil {
		t.Fatalf("C-core client: %v\n%s", err, ccore.out.String())
	}

	// Both chains end once their clients are quiet past their window;
	// then Prometheus holds what audit watch counted.
	var got fleetView
	var last error
	for deadline := time.Now().Add(25 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		got, last = promView(ctx, base, srv.Retry)
		retrying, err := promQuery(ctx, base, fmt.Sprintf(`sum(audit_peers_retrying{port="%d"})`, srv.Retry))
		if last == nil && err == nil && got.Chains["passed"]+got.Chains["failed"] >= 2 && retrying[""] == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus never held two judged chains: %+v (%v, %v)", got, last, err)
		}
	}
	time.Sleep(1500 * time.Millisecond) // one scrape more: nothing changes any more
	if got, last = promView(ctx, base, srv.Retry); last != nil {
		t.Fatal(last)
	}
	ruleHealth(t, ctx, base)
	stopWatch()
	if err := <-watched; err != nil {
		t.Fatalf("audit watch: %v\n%s", err, wErr.String())
	}
	if !strings.Contains(wOut.String(), `"event":"summary"`) {
		t.Errorf("audit watch wrote no summary:\n%s", wOut.String())
	}

	r := auditFiles(t, FilesConfig{Policy: policy, PolicySet: true, Port: uint16(srv.Retry), PortSet: true, JSON: true}, written)
	if v := r.verdict(); v != runPassed && v != runFailed {
		t.Fatalf("audit pcap: %s %v\n%s", v, r.err, r.stderr)
	}
	want := pcapView(t, r.stdout)
	if want.Chains["passed"]+want.Chains["failed"] != 2 || want.Attempts < 6 {
		t.Errorf("audit pcap judged %v chains of %v attempts; want 2 chains of 3 or more attempts each", want.Chains, want.Attempts)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Prometheus against audit pcap on audit watch's file (-pcap +prometheus):\n%s", diff)
	}
	t.Logf("Prometheus holds %+v", got)
}

// freeAddr is a loopback address no one listens on, for a child process
// that takes no port 0.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// ruleHealth checks that Prometheus loaded the repository's alert rules
// and evaluates them without error.
func ruleHealth(t *testing.T, ctx context.Context, base string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/api/v1/rules", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r struct {
		Data struct {
			Groups []struct {
				Rules []struct {
					Name, Health, LastError string
				}
			}
		}
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("rules: %v\n%s", err, b)
	}
	n := 0
	for _, g := range r.Data.Groups {
		for _, rule := range g.Rules {
			n++
			if rule.Health != "ok" {
				t.Errorf("rule %s: health %q, %s", rule.Name, rule.Health, rule.LastError)
			}
		}
	}
	if n == 0 {
		t.Errorf("Prometheus loaded no rule:\n%s", b)
	}
}
