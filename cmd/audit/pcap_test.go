package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/internal/testutil"
	"github.com/backoff-audit/audit/report"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

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
		// The same run judged against the default cap fails, and names the
		// 2 s cap the client ran with.
		{"real-grpc-go-default-cap.txt", []string{"real-grpc-go.pcap"}},
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
			testutil.Golden(t, filepath.Join("testdata", tt.golden), []byte(stdout), *update)
		})
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

// TestPcapFitsCap: when every failing peer would pass under a lower cap,
// the text says which after the summary and the JSON summary has it in
// fits_cap_ms; otherwise neither does.
func TestPcapFitsCap(t *testing.T) {
	const line = "every failing peer fits a cap of 2s; the run's cap may be --max-backoff 2s\n"
	tests := []struct {
		name string
		args []string
		code int
		want int64 // fits_cap_ms
	}{
		{name: "real grpc-go run, default cap", args: []string{fixture("real-grpc-go.pcap")}, code: exitFail, want: 2000},
		{name: "real grpc-go run, its own cap", args: []string{"--max-backoff", "2s", fixture("real-grpc-go.pcap")}, code: exitOK},
		{name: "too late fits no lower cap", args: []string{fixture("too-late.pcap")}, code: exitFail},
		{name: "too soon fits none either", args: []string{fixture("too-soon.pcap")}, code: exitFail},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runAudit(t, append([]string{"pcap"}, tt.args...)...)
			if code != tt.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tt.code, stderr)
			}
			if got := strings.HasSuffix(stdout, " too few attempts\n"+line); got != (tt.want > 0) {
				t.Errorf("cap line after the summary: %v, want %v:\n%s", got, tt.want > 0, stdout)
			}
			_, stdout, _ = runAudit(t, append([]string{"pcap", "--format", "json"}, tt.args...)...)
			var doc struct {
				Summary map[string]any `json:"summary"`
			}
			if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
				t.Fatalf("decode: %v\n%s", err, stdout)
			}
			got, ok := doc.Summary["fits_cap_ms"]
			if tt.want == 0 && ok || tt.want > 0 && got != float64(tt.want) {
				t.Errorf("summary.fits_cap_ms = %v (present %v), want %d (absent when 0)", got, ok, tt.want)
			}
		})
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

var benchFile = flag.String("audit.benchfile", "", "capture for BenchmarkPcap, e.g. testdata/bench/syn-2000000-10000-s1.pcap from .ci/bench.sh")

// BenchmarkPcap runs `audit pcap` in process on -audit.benchfile, the
// report to io.Discard: reading, grouping, verifying and writing.
func BenchmarkPcap(b *testing.B) {
	if *benchFile == "" {
		b.Skip("no -audit.benchfile")
	}
	for _, format := range []string{"text", "json"} {
		b.Run(format, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				root := newRootCmd()
				root.SetArgs([]string{"pcap", "--format", format, "--port", "50052", *benchFile})
				root.SetOut(io.Discard)
				root.SetErr(io.Discard)
				var ee *exitError
				if err := root.Execute(); err != nil && !(errors.As(err, &ee) && ee.code == exitFail) {
					b.Fatal(err)
				}
			}
		})
	}
}

// writeSYNs writes a pcap (µs, Ethernet) of IPv4 SYNs to 127.0.0.1:50052.
func writeSYNs(t *testing.T, path string, syns []attempt.SYN) {
	t.Helper()
	le := binary.LittleEndian
	var b []byte
	b = le.AppendUint32(b, 0xa1b2c3d4)
	b = le.AppendUint16(b, 2)
	b = le.AppendUint16(b, 4)
	b = append(b, make([]byte, 8)...)
	b = le.AppendUint32(b, 65535)
	b = le.AppendUint32(b, 1) // Ethernet
	for _, s := range syns {
		frame := make([]byte, 14+20+20)
		binary.BigEndian.PutUint16(frame[12:], 0x0800)
		ip := frame[14:]
		ip[0], ip[8], ip[9] = 0x45, 64, 6
		binary.BigEndian.PutUint16(ip[2:], 40)
		src, dst := s.Src.Addr().As4(), s.Dst.Addr().As4()
		copy(ip[12:], src[:])
		copy(ip[16:], dst[:])
		tcp := ip[20:]
		binary.BigEndian.PutUint16(tcp[0:], s.Src.Port())
		binary.BigEndian.PutUint16(tcp[2:], s.Dst.Port())
		binary.BigEndian.PutUint32(tcp[4:], s.Seq)
		tcp[12], tcp[13] = 0x50, 0x02 // 20-byte header, SYN
		b = le.AppendUint32(b, uint32(s.Time.Unix()))
		b = le.AppendUint32(b, uint32(s.Time.Nanosecond()/1000))
		b = le.AppendUint32(b, uint32(len(frame)))
		b = le.AppendUint32(b, uint32(len(frame)))
		b = append(b, frame...)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// With more than report.TablesUpTo peers a passing peer gets one line,
// unless --verbose asks for every table or --peer chooses the peers.
func TestPcapManyPeers(t *testing.T) {
	start := time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)
	dst := netip.MustParseAddrPort("127.0.0.1:50052")
	var syns []attempt.SYN
	const peers = report.TablesUpTo + 10
	for p := range peers {
		gaps := []time.Duration{0, 1000 * time.Millisecond, 1600 * time.Millisecond}
		if p%4 == 0 {
			gaps[2] = 500 * time.Millisecond // early: fails
		}
		ts := start
		for k, g := range gaps {
			ts = ts.Add(g)
			syns = append(syns, attempt.SYN{Time: ts, Src: netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 1, 0, byte(p)}), uint16(40000+k)), Dst: dst, Seq: uint32(100*p + k)})
		}
	}
	path := filepath.Join(t.TempDir(), "many.pcap")
	writeSYNs(t, path, syns)
	const failing, passing = (peers + 3) / 4, peers - (peers+3)/4
	tests := []struct {
		name          string
		args          []string
		tables, lines int // interval tables, one-line passing peers
	}{
		{name: "default", args: []string{path}, tables: failing, lines: passing},
		{name: "verbose", args: []string{"-v", path}, tables: peers},
		{name: "verbose long", args: []string{"--verbose", path}, tables: peers},
		{name: "peer", args: []string{"--peer", "127.1.0.1", "--peer", "127.1.0.4", path}, tables: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runAudit(t, append([]string{"pcap"}, tt.args...)...)
			if code != exitFail {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, exitFail, stderr)
			}
			if got := strings.Count(stdout, "measured ms"); got != tt.tables {
				t.Errorf("%d interval tables, want %d:\n%s", got, tt.tables, stdout)
			}
			if got := strings.Count(stdout, "; max |jitter| "); got != tt.lines {
				t.Errorf("%d one-line peers, want %d:\n%s", got, tt.lines, stdout)
			}
			if tt.lines > 0 && !strings.Contains(stdout, fmt.Sprintf("\n%d passing peers, one line each:\npeer 127.1.0.1: 3 attempts, 0 retransmits, passed; strict: passed; max |jitter| 0.00%%\n", passing)) {
				t.Errorf("no heading before the passing peers:\n%s", stdout)
			}
		})
	}
	// JSON has every peer in full, whatever their number.
	_, stdout, _ := runAudit(t, "pcap", "--format", "json", path)
	var doc report.Report
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Peers) != peers || len(doc.Peers[peers-1].Intervals) != 2 || doc.Summary.Failed != failing {
		t.Errorf("JSON: %d peers, summary %+v; want %d peers with their intervals, %d failed", len(doc.Peers), doc.Summary, peers, failing)
	}
}
