package main

// Live faults (issue 5, item 4): the capture interface disappears in the
// middle of a session, and SIGINT ends an --attach session. The interface
// is one end of a veth pair whose two ends live in network namespaces the
// test creates and deletes: `audit live` runs in one (`ip netns exec`), a
// bash /dev/tcp sender in the other, and no packet reaches the root
// namespace or leaves the machine. SIGINT with the in-process server is
// TestLiveInterrupt's. Root only (CI); elsewhere the test skips, loudly.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/backoff-audit/audit/analyze"
	"github.com/backoff-audit/audit/capture"
)

// The veth pair's addresses: a link-local /30 that exists only inside the
// test's two namespaces.
var (
	vethCapAddr  = netip.MustParseAddr("169.254.77.1")
	vethPeerAddr = netip.MustParseAddr("169.254.77.2")
)

// faultPort is the retry port inside the capture namespace, which holds
// nothing else.
const faultPort = 50052

// vethNet is a veth pair between two fresh network namespaces.
type vethNet struct {
	capNS, peerNS string
	capIf, peerIf string
}

var vethSeq atomic.Int32

// requireNetns skips the test, loudly, unless it may create network
// namespaces and has the tools it drives.
func requireNetns(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED, NOT RUN: live fault tests create network namespaces and need root")
	}
	for _, tool := range []string{"ip", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("SKIPPED, NOT RUN: live fault tests need %s (apt-get install iproute2 bash): %v", tool, err)
		}
	}
	requireCapture(t)
}

// runIP runs an iproute2 command with a bounded wait.
func runIP(t *testing.T, args ...string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// newVethNet creates the namespaces and the pair, addressed and up. The
// namespaces (and with them the pair) are deleted when the test ends, even
// when it fails; registered first, that cleanup runs after the processes
// inside have been stopped.
func newVethNet(t *testing.T) *vethNet {
	t.Helper()
	id := fmt.Sprintf("%d%c", os.Getpid()%100000, 'a'+vethSeq.Add(1)%26)
	v := &vethNet{capNS: "audit-lf" + id + "-cap", peerNS: "audit-lf" + id + "-peer",
		capIf: "alf" + id + "c", peerIf: "alf" + id + "p"} // interface names stay under 16 bytes
	t.Cleanup(func() {
		for _, ns := range []string{v.capNS, v.peerNS} {
			if err := runIP(t, "netns", "del", ns); err != nil && !strings.Contains(err.Error(), "No such file") {
				t.Errorf("cleanup: %v", err)
			}
		}
	})
	if err := runIP(t, "netns", "add", v.capNS); err != nil {
		t.Skipf("SKIPPED, NOT RUN: cannot create a network namespace: %v", err)
	}
	steps := [][]string{
		{"netns", "add", v.peerNS},
		{"link", "add", v.capIf, "netns", v.capNS, "type", "veth", "peer", "name", v.peerIf, "netns", v.peerNS},
		{"-n", v.capNS, "addr", "add", vethCapAddr.String() + "/30", "dev", v.capIf},
		{"-n", v.peerNS, "addr", "add", vethPeerAddr.String() + "/30", "dev", v.peerIf},
		{"-n", v.capNS, "link", "set", v.capIf, "up"},
		{"-n", v.peerNS, "link", "set", v.peerIf, "up"},
	}
	for _, s := range steps {
		if err := runIP(t, s...); err != nil {
			t.Fatal(err)
		}
	}
	return v
}

// connect makes n TCP connection attempts from the peer namespace to the
// retry port, one after the other: n SYNs, each from its own source port.
// Bash's /dev/tcp needs no binary of ours in the namespace.
func (v *vethNet) connect(t *testing.T, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	script := fmt.Sprintf(`for i in $(seq %d); do (exec 3<>/dev/tcp/%s/%d) 2>/dev/null; done; exit 0`, n, vethCapAddr, faultPort)
	if out, err := exec.CommandContext(ctx, "ip", "netns", "exec", v.peerNS, "bash", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("connect from %s: %v\n%s", v.peerNS, err, out)
	}
}

// fileSYNs reads the --write file as `audit pcap` does.
func fileSYNs(path string) ([]analyze.SYN, capture.FileStats, error) {
	var syns []analyze.SYN
	st, err := capture.ReadFile(path, capture.Options{Port: faultPort}, func(s analyze.SYN) { syns = append(syns, s) })
	return syns, st, err
}

func TestLiveFaults(t *testing.T) {
	t.Parallel()
	requireNetns(t)
	const (
		ifaceGone = "the interface is deleted"
		sigint    = "SIGINT"
	)
	tests := []struct {
		name   string
		attach bool
		syns   int
		fault  string
		// exit is the status `audit live` must end with: 2 for an error,
		// 1 for a session that failed (its SYNs are milliseconds apart).
		exit int
		// stderr lists what the error output must say; %s is the interface.
		stderr []string
	}{
		{name: "interface gone mid-session, attach", attach: true, syns: 5, fault: ifaceGone, exit: exitUsage,
			stderr: []string{"audit: read capture on %s"}},
		{name: "interface gone before any SYN, attach", attach: true, syns: 0, fault: ifaceGone, exit: exitUsage,
			stderr: []string{"audit: read capture on %s"}},
		{name: "interface gone, in-process server", syns: 3, fault: ifaceGone, exit: exitUsage,
			stderr: []string{"audit: read capture on %s", "3 attempts came outside any session"}},
		{name: "SIGINT mid-session, attach", attach: true, syns: 5, fault: sigint, exit: exitFail},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := newVethNet(t)
			pcapPath := filepath.Join(t.TempDir(), "live.pcap")
			args := []string{"netns", "exec", v.capNS, auditBin, "live", "--iface=" + v.capIf,
				"--retry_port=" + strconv.Itoa(faultPort), "--write=" + pcapPath, "--format=json"}
			if tt.attach {
				args = append(args, "--attach", "--idle=5m") // no session ends by itself
			} else {
				args = append(args, "--control_port=0")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			// ip netns exec execs the command itself: the process is audit's.
			cmd := exec.CommandContext(ctx, "ip", args...)
			cmd.WaitDelay = 5 * time.Second
			stdout, stderr := &syncBuffer{}, &syncBuffer{}
			cmd.Stdout, cmd.Stderr = stdout, stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			t.Cleanup(func() {
				cancel()
				<-exited
				if t.Failed() {
					t.Logf("audit live stdout:\n%s\nstderr:\n%s", stdout, stderr)
				}
			})
			r := &liveRun{out: stdout, errOut: stderr, done: exited}
			r.waitFor(t, "the capture to start", func() bool { return strings.Contains(stderr.String(), "capturing SYNs") })

			v.connect(t, tt.syns)
			// Every SYN is in the --write file (flushed per packet) before
			// the fault, so the fault strikes with the session open.
			r.waitFor(t, fmt.Sprintf("%d SYNs in the --write file", tt.syns), func() bool {
				syns, _, err := fileSYNs(pcapPath)
				return err == nil && len(syns) >= tt.syns
			})

			switch tt.fault {
			case ifaceGone:
				if err := runIP(t, "-n", v.capNS, "link", "del", v.capIf); err != nil {
					t.Fatal(err)
				}
			case sigint:
				if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
					t.Fatal(err)
				}
			}
			var code int
			select {
			case err := <-exited:
				exited <- err
				var ee *exec.ExitError
				switch {
				case errors.As(err, &ee) && ee.Exited():
					code = ee.ExitCode()
				case err != nil:
					t.Fatalf("audit live: %v (killed, not exited)", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("audit live did not exit within 30 s of the fault")
			}

			// A clean error: the status, the message, no panic.
			errOut := stderr.String()
			if code != tt.exit {
				t.Errorf("exit status %d; want %d", code, tt.exit)
			}
			for _, w := range tt.stderr {
				if w = strings.ReplaceAll(w, "%s", v.capIf); !strings.Contains(errOut, w) {
					t.Errorf("stderr does not say %q", w)
				}
			}
			for _, bad := range []string{"panic:", "goroutine ", "DATA RACE"} {
				if strings.Contains(errOut, bad) {
					t.Errorf("stderr has %q", bad)
				}
			}
			if !strings.Contains(errOut, "audit live: at exit, libpcap on "+v.capIf) {
				t.Error("no capture statistics at exit")
			}

			// The --write file is complete and holds every SYN sent.
			syns, st, err := fileSYNs(pcapPath)
			if err != nil || st.Truncated || len(syns) != tt.syns {
				t.Fatalf("--write file: %d SYNs, truncated %v, err %v; want %d SYNs, complete", len(syns), st.Truncated, err, tt.syns)
			}
			for _, s := range syns {
				if s.Src.Addr() != vethPeerAddr {
					t.Errorf("SYN from %v; want only the peer namespace's %v", s.Src, vethPeerAddr)
				}
			}

			// The report of what was captured: with --attach, the open
			// session's, which `audit pcap` reads back from the file alike.
			lines := strings.FieldsFunc(stdout.String(), func(c rune) bool { return c == '\n' })
			if !tt.attach || tt.syns == 0 {
				if len(lines) != 0 {
					t.Errorf("stdout has %d lines; want no session report", len(lines))
				}
				return
			}
			reps, _ := parseLiveReports(t, lines)
			if len(reps) != 1 {
				t.Fatalf("%d session reports; want 1", len(reps))
			}
			rep := reps[0]
			t.Logf("session ended by %q; libpcap: %d received, %d dropped", rep.Session.Cause, rep.Live.Received, rep.Live.Dropped)
			if rep.Capture.SYNs != uint64(tt.syns) || len(rep.Peers) != 1 || rep.Peers[0].Peer != vethPeerAddr ||
				len(rep.Peers[0].Attempts) != tt.syns {
				t.Errorf("report: %d SYNs, peers %+v; want %d attempts from %v", rep.Capture.SYNs, rep.Peers, tt.syns, vethPeerAddr)
			}
			if rep.Live.Received != uint64(tt.syns) || rep.Live.Lost() != 0 {
				t.Errorf("libpcap counters %+v; want %d received, none lost", rep.Live.LiveStats, tt.syns)
			}
			if rep.Session.Cause == "" || rep.Session.Cause == causeIdle {
				t.Errorf("session cause %q; want the run's end", rep.Session.Cause)
			}
			out, errb, pcode := runClient(t, time.Minute, auditBin, "pcap", "--format=json", "--port="+strconv.Itoa(faultPort), pcapPath)
			var offline analyze.Report
			if err := json.Unmarshal([]byte(out), &offline); err != nil || len(offline.Peers) != 1 {
				t.Fatalf("audit pcap (exit %d): %v, %d peers\n%s\n%s", pcode, err, len(offline.Peers), out, errb)
			}
			ignore := cmpopts.IgnoreFields(analyze.Interval{}, "Measured") // not in JSON
			if diff := cmp.Diff(rep.Peers[0], offline.Peers[0], netipEq, ignore); diff != "" {
				t.Errorf("kernel verdict: live report vs audit pcap of --write (-live +pcap):\n%s", diff)
			}
		})
	}
}
