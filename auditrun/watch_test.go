package auditrun

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/backoff-audit/audit/internal/testutil"
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
