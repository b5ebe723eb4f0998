package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fixtures is the repository's testdata/, written by capture/internal/gen.
var fixtures = filepath.Join("..", "..", "testdata")

func fixture(name string) string { return filepath.Join(fixtures, name) }

// runAudit runs the command line in process through run, the function main
// exits with, and returns the exit code and what the command printed.
func runAudit(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code = run(ctx, args, &out, &errOut)
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
			stderr: "--port: the capture holds SYNs to 2 ports, choose the retry port: 50052 (6 SYNs), 50051 (1 SYN)",
		},
		{name: "port with no SYNs", args: []string{"--port", "443", fixture("ipv4-ether.pcap")}, code: exitUsage, stderr: "nothing judged: no connection attempt to port 443"},
		{name: "too soon fails", args: []string{fixture("too-soon.pcap")}, code: exitFail, stdout: "interval 3: 1500 ms is early"},
		{name: "too late fails", args: []string{fixture("too-late.pcap")}, code: exitFail, stdout: "interval 2: 2200 ms is late"},
		{name: "zero backoff fails", args: []string{fixture("zero-backoff.pcap")}, code: exitFail, stdout: "interval 2: 0 ms is early"},
		{name: "uncapped client passes the default cap", args: []string{fixture("no-cap.pcap")}, code: exitOK},
		{name: "uncapped client fails a 2s cap", args: []string{"--max_backoff", "2s", fixture("no-cap.pcap")}, code: exitFail, stdout: "interval 3:"},
		{name: "retransmissions are not attempts", args: []string{fixture("retransmit.pcap")}, code: exitOK, stdout: "8 attempts, 3 retransmits, passed"},
		{name: "too few attempts fails", args: []string{"--peer", "127.0.0.4", fixture("mixed.pcapng")}, code: exitFail, stdout: "too few attempts"},
		{name: "peer filter keeps the passing peer", args: []string{"--peer", "127.0.0.2", fixture("mixed.pcapng")}, code: exitOK, stdout: "PASS: 1 peer"},
		{name: "peer filter matching nothing", args: []string{"--peer", "10.9.9.9", fixture("mixed.pcapng")}, code: exitUsage, stderr: "nothing judged: no connection attempt to port 50052 from [10.9.9.9]"},
		{name: "bad peer", args: []string{"--peer", "localhost", fixture("mixed.pcapng")}, code: exitUsage, stderr: `--peer "localhost": not an IP address`},
		{name: "jitter out of range", args: []string{"--jitter", "1", fixture("ipv4-ether.pcap")}, code: exitUsage, stderr: "policy: jitter 1: must be in [0, 1)"},
		{name: "multiplier below 1", args: []string{"--multiplier", "0.5", fixture("ipv4-ether.pcap")}, code: exitUsage, stderr: "multiplier 0.5: must be at least 1"},
		{
			name: "every bad policy flag is named", args: []string{"--initial_backoff", "0s", "--max_backoff", "-1s", "--tolerance", "-1ms", fixture("ipv4-ether.pcap")},
			code: exitUsage, stderr: "policy: initial backoff 0s: must be positive; max backoff -1s: must be positive; tolerance -1ms: must not be negative",
		},
		{name: "unparsable duration", args: []string{"--initial_backoff", "soon", fixture("ipv4-ether.pcap")}, code: exitUsage, stderr: `--initial_backoff soon: time: invalid duration "soon"`},
		{name: "port out of range", args: []string{"--port", "70000", fixture("ipv4-ether.pcap")}, code: exitUsage, stderr: "--port 70000: not a port (1–65535)"},
		{name: "port zero", args: []string{"--port", "0", fixture("ipv4-ether.pcap")}, code: exitUsage, stderr: "--port 0: not a port (1–65535)"},
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
