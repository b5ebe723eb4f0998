package main

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestH2Golden: `audit h2` prints the golden reports of the committed
// MaxConnectionAge capture (made and checked in flows, TestMaxAgeGolden).
func TestH2Golden(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			code, stdout, stderr := runAudit(t, "h2", "--format", format, filepath.Join("testdata", "h2", "max-age.pcap"))
			if code != exitOK {
				t.Fatalf("exit %d, want %d; stderr: %s", code, exitOK, stderr)
			}
			golden := map[string]string{"text": "max-age.txt", "json": "max-age.json"}[format]
			want, err := os.ReadFile(filepath.Join("testdata", "h2", golden))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), stdout); diff != "" {
				t.Errorf("(-golden +got):\n%s", diff)
			}
		})
	}
}

// withoutSegment writes a copy of a classic pcap file of Ethernet and
// IPv4 without the n-th TCP segment that carries bytes.
func withoutSegment(t *testing.T, path string, n int) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := append([]byte(nil), b[:24]...)
	for i, off := 0, 24; off+16 <= len(b); {
		end := off + 16 + int(binary.LittleEndian.Uint32(b[off+8:]))
		ip := b[off+16+14 : end]
		ihl := int(ip[0]&0x0f) * 4
		data := int(binary.BigEndian.Uint16(ip[2:])) - ihl - int(ip[ihl+12]>>4)*4
		if data > 0 {
			i++
		}
		if data <= 0 || i != n {
			out = append(out, b[off:end]...)
		}
		off = end
	}
	p := filepath.Join(t.TempDir(), "lost.pcap")
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestH2ExitCodes(t *testing.T) {
	capture := fixture(filepath.Join("h2", "max-age.pcap"))
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	garbage := write("garbage.pcap", []byte("this is not a capture file"))
	whole, err := os.ReadFile(capture)
	if err != nil {
		t.Fatal(err)
	}
	cutHeader := write("cut.pcap", whole[:10])
	// A section header, an interface, then an enhanced packet block whose
	// length says 4 GiB: skipped, the file ends inside it.
	le := binary.LittleEndian
	ng := le.AppendUint32(nil, 0x0a0d0d0a)
	ng = le.AppendUint32(ng, 28)
	ng = le.AppendUint32(ng, 0x1a2b3c4d)
	ng = le.AppendUint16(le.AppendUint16(ng, 1), 0)
	ng = le.AppendUint64(ng, ^uint64(0))
	ng = le.AppendUint32(ng, 28)
	ng = le.AppendUint32(le.AppendUint32(ng, 1), 20)
	ng = le.AppendUint32(le.AppendUint16(le.AppendUint16(ng, 1), 0), 65535)
	ng = le.AppendUint32(ng, 20)
	ng = append(le.AppendUint32(le.AppendUint32(ng, 6), 0xfffffff0), make([]byte, 64)...)
	hugeBlock := write("huge.pcapng", ng)
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string // in stdout, when not ""
		stderr string // in stderr, when not ""
	}{
		{name: "clean", args: []string{capture}, code: exitOK, stdout: "verdict: no problem found"},
		{name: "by port", args: []string{"--port", "50051", capture}, code: exitOK, stdout: "3 connections"},
		{name: "another port", args: []string{"--port", "9", capture}, code: exitUsage, stdout: "verdict: nothing judged: no connection to port 9 in the capture",
			stderr: "nothing judged: no connection to port 9"},
		{name: "header cut short", args: []string{cutHeader}, code: exitUsage, stderr: "nothing judged: no HTTP/2 or TLS connection in the capture"},
		{name: "header cut short, a port given", args: []string{"--port", "50051", cutHeader}, code: exitUsage, stderr: "cut.pcap: pcap file header at offset 0: file ends inside it"},
		{name: "block length of 4 GiB", args: []string{hugeBlock}, code: exitUsage, stderr: "huge.pcapng: enhanced packet block at offset 48: 4294967280 bytes"},
		{name: "SYNs only", args: []string{fixture("real-grpc-go.pcap")}, code: exitUsage, stderr: "nothing judged"},
		{name: "a segment lost", args: []string{withoutSegment(t, capture, 8)}, code: exitFail, stdout: "damaged", stderr: "problem"},
		{name: "not a capture", args: []string{garbage}, code: exitUsage, stderr: "garbage.pcap: unknown file format"},
		{name: "missing file", args: []string{filepath.Join(t.TempDir(), "none.pcap")}, code: exitUsage, stderr: "none.pcap: no such file"},
		{name: "port 0", args: []string{"--port", "0", capture}, code: exitUsage, stderr: "--port 0: not a port (1–65535)"},
		{name: "bad format", args: []string{"--format", "xml", capture}, code: exitUsage, stderr: `--format "xml"`},
		{name: "bad retry policy", args: []string{"--retry_max_attempts", "1", capture}, code: exitUsage, stderr: "--retry_max_attempts 1: must be at least 2"},
		{name: "negative tolerance", args: []string{"--retry_tolerance", "-1ms", capture}, code: exitUsage, stderr: "--retry_tolerance -1ms: must not be negative"},
		{name: "no file", args: nil, code: exitUsage, stderr: "requires at least 1 arg"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runAudit(t, append([]string{"h2"}, tt.args...)...)
			if code != tt.code {
				t.Errorf("exit %d, want %d; stderr: %s", code, tt.code, stderr)
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

// --retry_tolerance widens every retry window: delays far outside a short
// policy's windows are a problem with the default 5 ms, and none with a
// tolerance of two seconds.
func TestH2RetryTolerance(t *testing.T) {
	const capture = "../../testdata/h2/retry-unavailable.pcap"
	short := []string{"h2", "--retry_initial_backoff", "20ms", "--retry_max_backoff", "50ms", capture}
	if code, _, stderr := runAudit(t, short...); code != exitFail {
		t.Errorf("default tolerance: exit %d, want %d\n%s", code, exitFail, stderr)
	}
	if code, stdout, stderr := runAudit(t, append(short, "--retry_tolerance", "2s")...); code != exitOK {
		t.Errorf("--retry_tolerance 2s: exit %d, want %d\n%s%s", code, exitOK, stdout, stderr)
	}
}
