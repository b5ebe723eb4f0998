package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/backoff-audit/audit/live"
	"github.com/backoff-audit/audit/watch"
)

// exitCode is the status a process exited with; -1 when it did not exit.
func exitCode(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee) && ee.Exited():
		return ee.ExitCode()
	}
	return -1
}

// TestWatchUsage: what audit watch cannot start with is exit 2, with an
// error that names the flag, the address or the interface, and a --write
// file the user had stays as it was.
func TestWatchUsage(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := t.TempDir()
	precious := filepath.Join(dir, "precious.pcap")
	if err := os.WriteFile(precious, []byte("what the user had"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"no interface", []string{"watch", "--port", "50052"}, []string{`required flag(s) "iface" not set`}},
		{"no port", []string{"watch", "--iface", "lo"}, []string{`required flag(s) "port" not set`}},
		{"port 0", []string{"watch", "--iface", "lo", "--port", "0"}, []string{"--port 0: not a port"}},
		{"port too large", []string{"watch", "--iface", "lo", "--port", "50052,70000"}, []string{"--port 70000: not a port"}},
		{"format", []string{"watch", "--iface", "lo", "--port", "1", "--format", "xml"}, []string{`--format "xml"`}},
		{"bounds", []string{"watch", "--iface", "lo", "--port", "1", "--max-chain", "1"}, []string{"--max-chain 1"}},
		{"policy", []string{"watch", "--iface", "lo", "--port", "1", "--multiplier", "0.5"}, []string{"policy: multiplier 0.5"}},
		{"metrics address in use", []string{"watch", "--iface", "lo", "--port", "1", "--metrics", busy.Addr().String()},
			[]string{"--metrics " + busy.Addr().String(), "address already in use"}},
		{"metrics address not an address", []string{"watch", "--iface", "lo", "--port", "1", "--metrics", "nowhere"},
			[]string{"--metrics nowhere"}},
		{"unknown interface, a file kept", []string{"watch", "--iface", "nosuch0", "--port", "1", "--write", precious},
			[]string{"unknown interface", "lo"}},
		{"audit live, metrics address in use", []string{"live", "--control_port=0", "--retry_port=0", "--metrics", busy.Addr().String()},
			[]string{"--metrics " + busy.Addr().String(), "address already in use"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var stdout, stderr bytes.Buffer
			if code := run(ctx, tt.args, &stdout, &stderr); code != exitUsage {
				t.Errorf("exit %d, want %d\n%s", code, exitUsage, &stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr does not say %q:\n%s", w, &stderr)
				}
			}
			if stdout.Len() > 0 {
				t.Errorf("stdout: %q; want nothing", &stdout)
			}
		})
	}
	if b, _ := os.ReadFile(precious); string(b) != "what the user had" {
		t.Errorf("--write file after a failed start holds %q; want it untouched", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d files in the folder; want only the user's (no temporary file left)", len(ents))
	}
}

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
		{"interface gone", "del", exitUsage},
		{"SIGINT", "INT", exitFail},
		{"SIGTERM", "TERM", exitFail},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := newVethNet(t)
			written := filepath.Join(t.TempDir(), "watch.pcap")
			cmd, r := startCapturing(t, "ip", "netns", "exec", v.capNS, auditBin, "watch", "--iface="+v.capIf,
				"--port="+strconv.Itoa(faultPort), "--write="+written, "--format=json")
			stdout, stderr, exited := r.out, r.errOut, r.done
			v.connect(t, 5)
			r.waitFor(t, "5 SYNs in the --write file", func() bool {
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
				t.Fatal("audit watch did not exit within 30 s of the fault")
			}
			if code := exitCode(err); code != tt.exit {
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
	r := startLive(t, live.Config{Metrics: "127.0.0.1:0", OnListen: func(a string) { addr <- a }})
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
