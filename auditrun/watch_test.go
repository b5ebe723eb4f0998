package auditrun

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/infer"
	"github.com/backoff-audit/audit/internal/testutil"
	"github.com/backoff-audit/audit/report"
	"github.com/backoff-audit/audit/watch"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// watchSummary is the summary line of audit watch --format json.
func watchSummary(t *testing.T, out string) watch.Summary {
	t.Helper()
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var e watch.Event
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		if e.Summary != nil {
			return *e.Summary
		}
	}
	t.Fatalf("no summary line in:\n%s", out)
	return watch.Summary{}
}

// TestWatchFaults: an interface that disappears ends audit watch with what
// it judged and exit 2; SIGINT and SIGTERM end it with the summary. The
// --write file is complete either way.
func TestWatchFaults(t *testing.T) {
	t.Parallel()
	requireNetns(t)
	tests := []struct {
		name  string
		fault string
		exit  int
	}{
		// Five SYNs milliseconds apart: the chain fails.
		{"interface gone", "del", 2},
		{"SIGINT", "INT", 1},
		{"SIGTERM", "TERM", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := newVethNet(t)
			written := filepath.Join(t.TempDir(), "watch.pcap")
			cmd, stdout, stderr, exited := startChild(t, v, faultChild{Iface: v.capIf, Write: written, Watch: true})
			v.connect(t, 5)
			testutil.WaitFor(t, "5 SYNs in the Write file", exited, func() bool {
				syns, _, err := fileSYNs(written)
				return err == nil && len(syns) >= 5
			})
			switch tt.fault {
			case "del":
				if err := runIP(t, "-n", v.capNS, "link", "del", v.capIf); err != nil {
					t.Fatal(err)
				}
			case "INT":
				cmd.Process.Signal(syscall.SIGINT)
			case "TERM":
				cmd.Process.Signal(syscall.SIGTERM)
			}
			var err error
			select {
			case err = <-exited:
				exited <- err
			case <-time.After(30 * time.Second):
				t.Fatal("the watch did not exit within 30 s of the fault")
			}
			if code := childExit(err); code != tt.exit {
				t.Errorf("exit %d (%v), want %d", code, err, tt.exit)
			}
			errOut := stderr.String()
			if want := "audit: read capture on " + v.capIf + ": The interface disappeared"; tt.fault == "del" && !strings.Contains(errOut, want) {
				t.Errorf("stderr does not say %q", want)
			}
			for _, bad := range []string{"panic:", "goroutine ", "DATA RACE"} {
				if strings.Contains(errOut, bad) {
					t.Errorf("stderr has %q", bad)
				}
			}
			sum := watchSummary(t, stdout.String())
			want := watch.Counts{Attempts: 5, Chains: 1, Failed: 1}
			// Intervals of milliseconds also match the compounding
			// jitter signature's shape; that is analyze's to say.
			if diff := cmp.Diff(want, sum.Counts, cmpopts.IgnoreFields(watch.Counts{}, "Signatures")); diff != "" {
				t.Errorf("summary (-want +got):\n%s", diff)
			}
			if syns, st, err := fileSYNs(written); err != nil || st.Truncated || len(syns) != 5 {
				t.Errorf("--write file: %d SYNs, truncated %v, err %v; want 5, complete", len(syns), st.Truncated, err)
			}
		})
	}
}

// TestLiveMetrics: audit live --metrics counts the attempts of the retry
// port as they come and each session's chains when it ends, as its
// report has them.
func TestLiveMetrics(t *testing.T) {
	t.Parallel()
	addr := make(chan string, 1)
	r := startLive(t, Config{Metrics: "127.0.0.1:0", OnListen: func(a string) { addr <- a }})
	base := "http://" + <-addr + "/metrics"
	runLiveClient(t, r.control, r.retry, 3500*time.Millisecond)
	reps, _ := r.reports(t, 1)
	rep := reps[0]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", base, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	port := strconv.Itoa(r.retry)
	want := map[string]bool{
		fmt.Sprintf(`audit_attempts_total{port=%q} %d`, port, rep.Capture.Attempts):                                    true,
		fmt.Sprintf(`audit_chains_total{end="session end",port=%q,verdict=%q} 1`, port, rep.Peers[0].Verdict):          true,
		fmt.Sprintf(`audit_intervals_total{port=%q,verdict="ok"} %d`, port, len(rep.Peers[0].Intervals)):               true,
		fmt.Sprintf(`audit_attempt_fates_total{fate="closed by server",port=%q} %d`, port, len(rep.Peers[0].Attempts)): true,
	}
	got := map[string]bool{}
	for _, l := range strings.Split(string(body), "\n") {
		if want[l] {
			got[l] = true
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("exposition lines (-want +got):\n%s\n%s", diff, body)
	}
	if !strings.Contains(string(body), `audit_capture_packets_received_total{iface="lo"}`) {
		t.Error("no libpcap counters in the exposition")
	}
	r.stop(t)
}

// TestWatchInferLive: audit watch --infer on lo, a client refused five
// times at 100 ms ×2: at the end, its chain's line carries its reading
// (its initial backoff its first interval), and the policies line reads
// its one chain.
func TestWatchInferLive(t *testing.T) {
	t.Parallel()
	requireCapture(t)
	port := testutil.ClosedPort(t)
	var wOut, wErr testutil.SyncBuffer
	ctx, stop := context.WithTimeout(context.Background(), time.Minute)
	defer stop()
	watched := make(chan error, 1)
	metricsAt := make(chan string, 1)
	go func() {
		_, err := Watch(ctx, WatchConfig{Iface: "lo", Ports: []uint16{port}, Metrics: "127.0.0.1:0", OnListen: func(a string) { metricsAt <- a },
			Watch: watch.Config{Policy: backoff.DefaultPolicy(), JSON: true, Infer: true, InferEvery: time.Second}}, &wOut, &wErr)
		watched <- err
	}()
	exposition := "http://" + <-metricsAt + "/metrics"
	testutil.WaitFor(t, "the capture to start", watched, func() bool { return strings.Contains(wErr.String(), "capturing SYNs") })
	if !strings.Contains(wErr.String(), "--infer: the policies of each port's last 1000 chains judged, read every 1s") {
		t.Errorf("the first line does not say what --infer reads:\n%s", wErr.String())
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port)))
	for i, wait := range []time.Duration{0, 100, 200, 400, 800} {
		time.Sleep(wait * time.Millisecond)
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Fatalf("attempt %d to %s: connected, want refused", i, addr)
		}
	}
	attempts := fmt.Sprintf("audit_attempts_total{port=%q} 5\n", strconv.Itoa(int(port)))
	testutil.WaitFor(t, "5 attempts taken in", watched, func() bool {
		req, _ := http.NewRequestWithContext(ctx, "GET", exposition, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(body), attempts)
	})
	stop()
	if err := <-watched; err != nil {
		t.Fatal(err)
	}
	var chain *report.PeerReport
	var policies *infer.Policies
	for l := range strings.Lines(wOut.String()) {
		var e watch.Event
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		switch {
		case e.Chain != nil:
			chain = e.Chain
		case e.Policies != nil:
			policies = e.Policies
		}
	}
	if chain == nil || policies == nil {
		t.Fatalf("no chain line or no policies line:\n%s", wOut.String())
	}
	var in struct {
		Initial infer.InferredValue `json:"initial_backoff_ms"`
	}
	if err := json.Unmarshal(chain.Inferred, &in); err != nil {
		t.Fatalf("inferred %s: %v", chain.Inferred, err)
	}
	first := float64(chain.Attempts[1].Time.Sub(chain.Attempts[0].Time)) / 1e6
	type got struct {
		Attempts, Read int
		InitialMS      float64
	}
	if diff := cmp.Diff(got{Attempts: 5, Read: 1, InitialMS: math.Round(first*1000) / 1000},
		got{Attempts: len(chain.Attempts), Read: policies.Peers, InitialMS: in.Initial.Value}); diff != "" {
		t.Errorf("(-want +got):\n%s\n%s", diff, wOut.String())
	}
}
