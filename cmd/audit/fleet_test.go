package main

// The fleet end to end: Debian's real Prometheus scrapes `audit watch
// --metrics` on loopback while real clients, grpc-go and C-core, reconnect
// to `audit server`'s retry port; what Prometheus then holds equals what
// `audit pcap` reports on the file `audit watch --write` wrote.

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
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/backoff-audit/audit/capture"
	"github.com/backoff-audit/audit/internal/testutil"
	"github.com/backoff-audit/audit/report"
)

// proc is a process of a test, its output kept; it is interrupted and
// waited for when the test ends.
type proc struct {
	cmd  *exec.Cmd
	out  testutil.SyncBuffer
	done chan struct{}
	err  error
}

func startProc(t *testing.T, timeout time.Duration, name string, args ...string) *proc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	p := &proc{cmd: exec.CommandContext(ctx, name, args...), done: make(chan struct{})}
	p.cmd.Cancel = func() error { return p.cmd.Process.Signal(os.Interrupt) }
	p.cmd.WaitDelay = 5 * time.Second
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		cancel()
		<-p.done
		if t.Failed() {
			t.Logf("%s output:\n%s", name, p.out.String())
		}
	})
	return p
}

// stop signals p and waits for it to exit.
func (p *proc) stop(t *testing.T, sig os.Signal) error {
	t.Helper()
	p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("%s did not exit 20 s after %v:\n%s", p.cmd.Path, sig, p.out.String())
	}
	return p.err
}

// waitOutput waits until p's output matches re, and returns the match.
func (p *proc) waitOutput(t *testing.T, re *regexp.Regexp, within time.Duration) []string {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(20 * time.Millisecond) {
		if m := re.FindStringSubmatch(p.out.String()); m != nil {
			return m
		}
		select {
		case <-p.done:
			t.Fatalf("%s exited (%v) before printing %q:\n%s", p.cmd.Path, p.err, re, p.out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s printed no %q in %v:\n%s", p.cmd.Path, re, within, p.out.String())
		}
	}
}

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

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
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
func pcapView(t *testing.T, doc []byte) fleetView {
	t.Helper()
	var r report.Report
	if err := json.Unmarshal(doc, &r); err != nil {
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

var metricsLine = regexp.MustCompile(`metrics at http://(\S+)/metrics`)

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
	policy := []string{"--min-connect-timeout", "2s"}
	written := filepath.Join(dir, "watch.pcap")
	w := startProc(t, time.Minute, auditBin, append([]string{"watch", "--iface", "lo", "--port", strconv.Itoa(srv.Retry),
		"--metrics", "127.0.0.1:0", "--write", written, "--format", "json"}, policy...)...)
	target := w.waitOutput(t, metricsLine, 10*time.Second)[1]
	w.waitOutput(t, regexp.MustCompile(`capturing SYNs`), 10*time.Second)

	// Prometheus, scraping every second, with the repository's rules.
	promPort := freePort(t)
	rules, err := filepath.Abs("../../deploy/prometheus/audit-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files: [%q]\nscrape_configs:\n  - job_name: audit\n    static_configs:\n      - targets: [%q]\n", rules, target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	prom := startProc(t, time.Minute, promBin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "tsdb"), fmt.Sprintf("--web.listen-address=127.0.0.1:%d", promPort))
	base := fmt.Sprintf("http://127.0.0.1:%d", promPort)
	prom.waitOutput(t, regexp.MustCompile(`Server is ready to receive web requests`), 20*time.Second)

	// Real clients with their default backoff for 8 s: grpc-go from
	// 127.0.0.1, C-core over IPv6 from ::1, two peers.
	clients := []*proc{
		startProc(t, 30*time.Second, auditBin, "client", "--server_host=127.0.0.1", "--server_control_port="+strconv.Itoa(srv.Control),
			"--server_retry_port="+strconv.Itoa(srv.Retry), "--deadline=8s", "--quiet"),
		startProc(t, 30*time.Second, systemPython, "../../testdata/clients/ccore_client.py", "--server_host=::1",
			"--server_retry_port="+strconv.Itoa(srv.Retry), "--duration_s=8", "--trace=false"),
	}
	for _, c := range clients {
		<-c.done
		t.Logf("%s: %v\n%s", c.cmd.Path, c.err, c.out.String())
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
	if err := w.stop(t, syscall.SIGTERM); exitCode(err) != 0 && exitCode(err) != 1 {
		t.Fatalf("audit watch: %v\n%s", err, w.out.String())
	}
	if !strings.Contains(w.out.String(), `"event":"summary"`) {
		t.Errorf("audit watch wrote no summary:\n%s", w.out.String())
	}

	out, stderr, code := runClient(t, 30*time.Second, auditBin, append([]string{"pcap", "--format", "json", "--port", strconv.Itoa(srv.Retry), written}, policy...)...)
	if code != 0 && code != 1 {
		t.Fatalf("audit pcap exit %d:\n%s", code, stderr)
	}
	want := pcapView(t, []byte(out))
	if want.Chains["passed"]+want.Chains["failed"] != 2 || want.Attempts < 6 {
		t.Errorf("audit pcap judged %v chains of %v attempts; want 2 chains of 3 or more attempts each", want.Chains, want.Attempts)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Prometheus against audit pcap on audit watch's file (-pcap +prometheus):\n%s", diff)
	}
	t.Logf("Prometheus holds %+v", got)
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
