package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// fixtures is the repository's testdata/, written by capture/internal/gen.
var fixtures = filepath.Join("..", "..", "testdata")

func fixture(name string) string { return filepath.Join(fixtures, name) }

// runAudit runs the root command in process and returns what run would
// exit with, and what the command printed.
func runAudit(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	root := newRootCmd()
	root.SetArgs(args)
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := root.ExecuteContext(ctx)
	code = exitOK
	if err != nil {
		errOut.WriteString("audit: " + err.Error() + "\n")
		code = exitUsage
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
		}
	}
	return code, out.String(), errOut.String()
}

func TestPcapExitCodes(t *testing.T) {
	garbage := filepath.Join(t.TempDir(), "garbage.pcap")
	if err := os.WriteFile(garbage, []byte("this is not a capture file"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string // in stdout, when not ""
		stderr string // in stderr, when not ""
	}{
		{name: "port auto-detected", args: []string{fixture("ipv4-ether.pcap")}, code: exitOK, stdout: "port 50052:"},
		{name: "explicit port", args: []string{"--port", "50052", fixture("two-ports.pcap")}, code: exitOK, stdout: "PASS: 1 peer"},
		{
			name: "ambiguous ports are listed", args: []string{fixture("two-ports.pcap")}, code: exitUsage,
			stderr: "choose the retry port with --port: 50052 (6 SYNs), 50051 (1 SYN)",
		},
		{name: "port with no SYNs", args: []string{"--port", "443", fixture("ipv4-ether.pcap")}, code: exitFail, stderr: "no connection attempt to port 443"},
		{name: "too soon fails", args: []string{fixture("too-soon.pcap")}, code: exitFail, stdout: "interval 3: 1500 ms is early"},
		{name: "too late fails", args: []string{fixture("too-late.pcap")}, code: exitFail, stdout: "interval 2: 2200 ms is late"},
		{name: "zero backoff fails", args: []string{fixture("zero-backoff.pcap")}, code: exitFail, stdout: "interval 2: 0 ms is early"},
		{name: "uncapped client passes the default cap", args: []string{fixture("no-cap.pcap")}, code: exitOK},
		{name: "uncapped client fails a 2s cap", args: []string{"--max-backoff", "2s", fixture("no-cap.pcap")}, code: exitFail, stdout: "interval 3:"},
		{name: "retransmissions are not attempts", args: []string{fixture("retransmit.pcap")}, code: exitOK, stdout: "8 attempts, 3 retransmits, passed"},
		{name: "too few attempts fails", args: []string{"--peer", "127.0.0.4", fixture("mixed.pcapng")}, code: exitFail, stdout: "too few attempts"},
		{name: "peer filter keeps the passing peer", args: []string{"--peer", "127.0.0.2", fixture("mixed.pcapng")}, code: exitOK, stdout: "PASS: 1 peer"},
		{name: "peer filter matching nothing", args: []string{"--peer", "10.9.9.9", fixture("mixed.pcapng")}, code: exitFail, stderr: "no connection attempt to port 50052 from [10.9.9.9]"},
		{name: "bad peer", args: []string{"--peer", "localhost", fixture("mixed.pcapng")}, code: exitUsage, stderr: `--peer "localhost": not an IP address`},
		{name: "jitter out of range", args: []string{"--jitter", "1", fixture("ipv4-ether.pcap")}, code: exitUsage, stderr: "policy: jitter 1: must be in [0, 1)"},
		{name: "multiplier below 1", args: []string{"--multiplier", "0.5", fixture("ipv4-ether.pcap")}, code: exitUsage, stderr: "multiplier 0.5: must be at least 1"},
		{
			name: "every bad policy flag is named", args: []string{"--initial-backoff", "0s", "--max-backoff", "-1s", "--tolerance", "-1ms", fixture("ipv4-ether.pcap")},
			code: exitUsage, stderr: "policy: initial backoff 0s: must be positive; max backoff -1s: must be positive; tolerance -1ms: must not be negative",
		},
		{name: "unparsable duration", args: []string{"--initial-backoff", "soon", fixture("ipv4-ether.pcap")}, code: exitUsage, stderr: "initial-backoff"},
		{name: "port out of range", args: []string{"--port", "70000", fixture("ipv4-ether.pcap")}, code: exitUsage, stderr: "--port"},
		{name: "port zero", args: []string{"--port", "0", fixture("ipv4-ether.pcap")}, code: exitUsage, stderr: "--port 0"},
		{name: "bad format", args: []string{"--format", "xml", fixture("ipv4-ether.pcap")}, code: exitUsage, stderr: `--format "xml"`},
		{name: "no file", args: nil, code: exitUsage},
		{name: "missing file named", args: []string{fixture("ipv4-ether.pcap"), "no/such.pcap"}, code: exitUsage, stderr: "no/such.pcap"},
		{name: "not a capture named", args: []string{garbage}, code: exitUsage, stderr: garbage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runAudit(t, append([]string{"pcap"}, tt.args...)...)
			if code != tt.code {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, stdout, stderr)
			}
			if !strings.Contains(stdout, tt.stdout) {
				t.Errorf("stdout lacks %q:\n%s", tt.stdout, stdout)
			}
			if !strings.Contains(stderr, tt.stderr) {
				t.Errorf("stderr lacks %q:\n%s", tt.stderr, stderr)
			}
		})
	}
}

// TestPcapGolden pins the text report of every fixture; -update rewrites.
func TestPcapGolden(t *testing.T) {
	tests := []struct {
		golden string
		args   []string
	}{
		{"ipv4-ether.txt", []string{"ipv4-ether.pcap"}},
		{"ipv4-ether.txt", []string{"ipv4-ether.pcap.gz"}}, // the same packets
		{"ipv6-ether-ns.txt", []string{"ipv6-ether-ns.pcap"}},
		{"vlan.txt", []string{"vlan.pcap"}},
		{"sll.txt", []string{"sll.pcap"}},
		{"sll2.txt", []string{"sll2.pcap"}},
		{"null.txt", []string{"null.pcap"}},
		{"two-peers.txt", []string{"two-peers.pcapng"}},
		{"two-interfaces.txt", []string{"two-interfaces.pcapng"}},
		{"retransmit.txt", []string{"retransmit.pcap"}},
		{"too-soon.txt", []string{"too-soon.pcap"}},
		{"too-late.txt", []string{"too-late.pcap"}},
		{"no-cap-2s.txt", []string{"--max-backoff", "2s", "no-cap.pcap"}},
		{"zero-backoff.txt", []string{"zero-backoff.pcap"}},
		{"mixed.txt", []string{"mixed.pcapng"}},
		{"rotated.txt", []string{"rotated.pcap", "rotated.pcap1", "rotated.pcap2"}},
		{"rotated.txt", []string{"rotated.pcap2", "rotated.pcap", "rotated.pcap1"}}, // any order
		// A real grpc-go client on lo (testdata/make-real-capture.sh); remaking
		// the capture needs -update.
		{"real-grpc-go.txt", []string{"--max-backoff", "2s", "real-grpc-go.pcap"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			args := []string{"pcap"}
			for _, a := range tt.args {
				if strings.HasPrefix(a, "-") || !strings.Contains(a, ".pcap") {
					args = append(args, a)
				} else {
					args = append(args, fixture(a))
				}
			}
			_, stdout, stderr := runAudit(t, args...)
			if stdout == "" {
				t.Fatalf("no report; stderr:\n%s", stderr)
			}
			golden(t, filepath.Join("testdata", tt.golden), stdout)
		})
	}
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}

// TestPcapJSON checks the documented members and the failing-first order.
func TestPcapJSON(t *testing.T) {
	code, stdout, stderr := runAudit(t, "pcap", "--format", "json", fixture("mixed.pcapng"))
	if code != exitFail {
		t.Errorf("exit %d, want %d; stderr:\n%s", code, exitFail, stderr)
	}
	var doc struct {
		Port    int `json:"port"`
		Capture struct {
			Files []struct {
				Path   string `json:"path"`
				Format string `json:"format"`
			} `json:"files"`
			SYNs     int `json:"syns"`
			Attempts int `json:"attempts"`
		} `json:"capture"`
		Peers []struct {
			Peer    string `json:"peer"`
			Verdict string `json:"verdict"`
		} `json:"peers"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("decode: %v\n%s", err, stdout)
	}
	var got []string
	for _, p := range doc.Peers {
		got = append(got, p.Peer+" "+p.Verdict)
	}
	want := []string{"127.0.0.3 failed", "127.0.0.4 too few attempts", "127.0.0.2 passed"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("peers (-want +got):\n%s", diff)
	}
	if doc.Port != 50052 || doc.Capture.SYNs != 11 || doc.Capture.Attempts != 11 {
		t.Errorf("port %d, syns %d, attempts %d; want 50052, 11, 11", doc.Port, doc.Capture.SYNs, doc.Capture.Attempts)
	}
	if len(doc.Capture.Files) != 1 || doc.Capture.Files[0].Format != "pcapng" {
		t.Errorf("files %+v, want one pcapng", doc.Capture.Files)
	}
}

// TestPcapTruncatedFile cuts a fixture inside a record: the packets before
// the cut are judged and a warning names the file.
func TestPcapTruncatedFile(t *testing.T) {
	data, err := os.ReadFile(fixture("ipv4-ether.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), "cut.pcap")
	if err := os.WriteFile(cut, data[:len(data)*2/3+5], 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runAudit(t, "pcap", cut)
	if code != exitOK {
		t.Errorf("exit %d, want %d; stderr:\n%s", code, exitOK, stderr)
	}
	if !strings.Contains(stderr, "audit: warning: "+cut) {
		t.Errorf("stderr names no truncated file:\n%s", stderr)
	}
	if !strings.Contains(stdout, "peer 127.0.0.1: 6 attempts") {
		t.Errorf("want the 6 attempts before the cut:\n%s", stdout)
	}
}
