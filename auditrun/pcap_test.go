package auditrun

// Tests of AuditFiles, what `audit pcap` runs: the reports of the
// committed captures, the sessions of a record file or a control port
// found in them, and their verdicts.

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/internal/testutil"
	"github.com/backoff-audit/audit/report"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// fixtures is the repository's testdata/, written by capture/internal/gen.
const fixtures = "../testdata"

func fixture(name string) string { return filepath.Join(fixtures, name) }

// result is what a run gave: its outcome, or why nothing was judged.
type result struct {
	Outcome
	err error
}

// filesRun is what one AuditFiles call gave, and what it printed (the
// report, then warnings).
type filesRun struct {
	result
	stdout, stderr string
}

// Readings of a run, as the exit status gives them: nothing could be
// judged (an error, or no data), a verdict failed, or every one passed.
const (
	runError   = "error"
	runNothing = "nothing judged"
	runFailed  = "failed"
	runPassed  = "passed"
)

func (r result) verdict() string {
	switch {
	case r.err != nil:
		return runError
	case r.Nothing != "":
		return runNothing
	case r.Verdict != "" || r.Failed > 0:
		return runFailed
	}
	return runPassed
}

// auditFiles runs AuditFiles on files with cfg, whose zero policy is the
// spec's.
func auditFiles(t *testing.T, cfg FilesConfig, files ...string) filesRun {
	t.Helper()
	if cfg.Policy == (backoff.Policy{}) {
		cfg.Policy = backoff.DefaultPolicy()
	}
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o, err := AuditFiles(ctx, files, cfg, &out, &errOut)
	return filesRun{result: result{o, err}, stdout: out.String(), stderr: errOut.String()}
}

// capped is a configuration whose policy is the spec's with cap d, given
// as a policy flag gives it.
func capped(d time.Duration) FilesConfig {
	p := backoff.DefaultPolicy()
	p.MaxDelay = d
	return FilesConfig{Policy: p, PolicySet: true}
}

// inferred is cfg with --infer.
func inferred(cfg FilesConfig) FilesConfig {
	cfg.Infer = true
	return cfg
}

// TestPcapGolden pins the text report of every fixture; -update rewrites.
func TestPcapGolden(t *testing.T) {
	tests := []struct {
		golden string
		cfg    FilesConfig
		files  []string
	}{
		{"ipv4-ether.txt", FilesConfig{}, []string{"ipv4-ether.pcap"}},
		{"ipv4-ether.txt", FilesConfig{}, []string{"ipv4-ether.pcap.gz"}}, // the same packets
		{"ipv6-ether-ns.txt", FilesConfig{}, []string{"ipv6-ether-ns.pcap"}},
		{"vlan.txt", FilesConfig{}, []string{"vlan.pcap"}},
		{"sll.txt", FilesConfig{}, []string{"sll.pcap"}},
		{"sll2.txt", FilesConfig{}, []string{"sll2.pcap"}},
		{"null.txt", FilesConfig{}, []string{"null.pcap"}},
		{"two-peers.txt", FilesConfig{}, []string{"two-peers.pcapng"}},
		{"two-interfaces.txt", FilesConfig{}, []string{"two-interfaces.pcapng"}},
		{"retransmit.txt", FilesConfig{}, []string{"retransmit.pcap"}},
		{"too-soon.txt", FilesConfig{}, []string{"too-soon.pcap"}},
		{"too-late.txt", FilesConfig{}, []string{"too-late.pcap"}},
		{"no-cap-2s.txt", capped(2 * time.Second), []string{"no-cap.pcap"}},
		{"zero-backoff.txt", FilesConfig{}, []string{"zero-backoff.pcap"}},
		{"mixed.txt", FilesConfig{}, []string{"mixed.pcapng"}},
		{"rotated.txt", FilesConfig{}, []string{"rotated.pcap", "rotated.pcap1", "rotated.pcap2"}},
		{"rotated.txt", FilesConfig{}, []string{"rotated.pcap2", "rotated.pcap", "rotated.pcap1"}}, // any order
		// A real grpc-go client on lo (testdata/make-real-capture.sh); remaking
		// the capture needs -update.
		{"real-grpc-go.txt", capped(2 * time.Second), []string{"real-grpc-go.pcap"}},
		// The same run judged against the default cap fails, and names the
		// 2 s cap the client ran with.
		{"real-grpc-go-default-cap.txt", FilesConfig{}, []string{"real-grpc-go.pcap"}},
		// --infer: two peers of one policy and one without an interval;
		// the grpc-go run, its 2 s cap read from its chain.
		{"mixed-infer.txt", FilesConfig{Infer: true}, []string{"mixed.pcapng"}},
		{"real-grpc-go-infer.txt", inferred(capped(2 * time.Second)), []string{"real-grpc-go.pcap"}},
	}
	for _, tt := range tests {
		name := strings.Join(tt.files, " ")
		if tt.cfg.PolicySet {
			name = "cap " + tt.cfg.Policy.MaxDelay.String() + " " + name
		}
		if tt.cfg.Infer {
			name = "infer " + name
		}
		t.Run(name, func(t *testing.T) {
			var files []string
			for _, f := range tt.files {
				files = append(files, fixture(f))
			}
			r := auditFiles(t, tt.cfg, files...)
			if r.stdout == "" {
				t.Fatalf("no report (%v); stderr:\n%s", r.err, r.stderr)
			}
			testutil.Golden(t, filepath.Join("testdata", tt.golden), []byte(r.stdout), *update)
			// The same audit with the retry port given is read as it
			// comes (stream.Stream) and writes the same report.
			var port int
			if _, err := fmt.Sscanf(r.stdout, "port %d:", &port); err != nil {
				t.Fatalf("no port in the report's first line: %v", err)
			}
			cfg := tt.cfg
			cfg.Port, cfg.PortSet = uint16(port), true
			for _, asJSON := range []bool{false, true} {
				cfg.JSON = asJSON
				tt.cfg.JSON = asJSON
				want, got := auditFiles(t, tt.cfg, files...), auditFiles(t, cfg, files...)
				if diff := cmp.Diff(want.stdout, got.stdout); diff != "" {
					t.Errorf("--port %d, JSON %v: the report differs (-read whole +read as it comes):\n%s", port, asJSON, diff)
				}
			}
		})
	}
}

// TestPcapJSON checks the documented members and the failing-first order.
func TestPcapJSON(t *testing.T) {
	r := auditFiles(t, FilesConfig{JSON: true}, fixture("mixed.pcapng"))
	if r.verdict() != runFailed {
		t.Errorf("%s (%v), want %s; stderr:\n%s", r.verdict(), r.err, runFailed, r.stderr)
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
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatalf("decode: %v\n%s", err, r.stdout)
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
	const line = "every failing peer fits a cap of 2s; the run's cap may be --max_backoff 2s\n"
	tests := []struct {
		name    string
		cfg     FilesConfig
		file    string
		verdict string
		want    int64 // fits_cap_ms
	}{
		{name: "real grpc-go run, default cap", file: "real-grpc-go.pcap", verdict: runFailed, want: 2000},
		{name: "real grpc-go run, its own cap", cfg: capped(2 * time.Second), file: "real-grpc-go.pcap", verdict: runPassed},
		{name: "too late fits no lower cap", file: "too-late.pcap", verdict: runFailed},
		{name: "too soon fits none either", file: "too-soon.pcap", verdict: runFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := auditFiles(t, tt.cfg, fixture(tt.file))
			if r.verdict() != tt.verdict {
				t.Errorf("%s (%v), want %s; stderr:\n%s", r.verdict(), r.err, tt.verdict, r.stderr)
			}
			if got := strings.HasSuffix(r.stdout, " too few attempts\n"+line); got != (tt.want > 0) {
				t.Errorf("cap line after the summary: %v, want %v:\n%s", got, tt.want > 0, r.stdout)
			}
			tt.cfg.JSON = true
			r = auditFiles(t, tt.cfg, fixture(tt.file))
			var doc struct {
				Summary map[string]any `json:"summary"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
				t.Fatalf("decode: %v\n%s", err, r.stdout)
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
	r := auditFiles(t, FilesConfig{}, cut)
	if r.verdict() != runPassed {
		t.Errorf("%s (%v), want %s; stderr:\n%s", r.verdict(), r.err, runPassed, r.stderr)
	}
	if !strings.Contains(r.stderr, "audit: warning: "+cut) {
		t.Errorf("stderr names no truncated file:\n%s", r.stderr)
	}
	if !strings.Contains(r.stdout, "peer 127.0.0.1: 6 attempts") {
		t.Errorf("want the 6 attempts before the cut:\n%s", r.stdout)
	}
}

var benchFile = flag.String("audit.benchfile", "", "capture for BenchmarkPcap, e.g. testdata/bench/syn-2000000-10000-s1.pcap from .ci/bench.sh")

// BenchmarkPcap runs what `audit pcap` runs on -audit.benchfile, the
// report to io.Discard: reading, grouping, verifying and writing.
func BenchmarkPcap(b *testing.B) {
	if *benchFile == "" {
		b.Skip("no -audit.benchfile")
	}
	for _, format := range []string{"text", "json"} {
		b.Run(format, func(b *testing.B) {
			b.ReportAllocs()
			cfg := FilesConfig{Port: 50052, PortSet: true, Policy: backoff.DefaultPolicy(), JSON: format == "json"}
			for b.Loop() {
				if _, err := AuditFiles(context.Background(), []string{*benchFile}, cfg, io.Discard, io.Discard); err != nil {
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
// unless Verbose asks for every table or Peers chooses the peers.
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
		cfg           FilesConfig
		tables, lines int // interval tables, one-line passing peers
	}{
		{name: "default", tables: failing, lines: passing},
		{name: "verbose", cfg: FilesConfig{Verbose: true}, tables: peers},
		{name: "peer", cfg: FilesConfig{Peers: []string{"127.1.0.1", "127.1.0.4"}}, tables: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := auditFiles(t, tt.cfg, path)
			if r.verdict() != runFailed {
				t.Errorf("%s (%v), want %s; stderr:\n%s", r.verdict(), r.err, runFailed, r.stderr)
			}
			if got := strings.Count(r.stdout, "measured ms"); got != tt.tables {
				t.Errorf("%d interval tables, want %d:\n%s", got, tt.tables, r.stdout)
			}
			if got := strings.Count(r.stdout, "; max |jitter| "); got != tt.lines {
				t.Errorf("%d one-line peers, want %d:\n%s", got, tt.lines, r.stdout)
			}
			if tt.lines > 0 && !strings.Contains(r.stdout, fmt.Sprintf("\n%d passing peers, one line each:\npeer 127.1.0.1: 3 attempts, 0 retransmits, passed; strict: passed; max |jitter| 0.00%%\n", passing)) {
				t.Errorf("no heading before the passing peers:\n%s", r.stdout)
			}
		})
	}
	// JSON has every peer in full, whatever their number.
	r := auditFiles(t, FilesConfig{JSON: true}, path)
	var doc report.Report
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Peers) != peers || len(doc.Peers[peers-1].Intervals) != 2 || doc.Summary.Failed != failing {
		t.Errorf("JSON: %d peers, summary %+v; want %d peers with their intervals, %d failed", len(doc.Peers), doc.Summary, peers, failing)
	}
}

// TestPcapStreamedAsWhole: 5 000 peers, each starting 100 ms after the
// one before, their addresses in another order than their starts: read
// as it comes (--port), their chains are handed over in runs as the
// capture passes their ends and read back from the spill in report
// order, and the report, text and JSON, is the one read whole.
func TestPcapStreamedAsWhole(t *testing.T) {
	start := time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)
	dst := netip.MustParseAddrPort("127.0.0.1:50052")
	const peers = 5000
	var syns []attempt.SYN
	for p := range peers {
		gaps := []time.Duration{0, 1000 * time.Millisecond, time.Duration(1400+p%400) * time.Millisecond, 2560 * time.Millisecond}
		if p%7 == 0 {
			gaps[2] = 500 * time.Millisecond // early: fails
		}
		a := uint32(p) * 40503 % 65536 // a scrambled address: not in start order
		ts := start.Add(time.Duration(p) * 100 * time.Millisecond)
		for k, g := range gaps {
			ts = ts.Add(g)
			syns = append(syns, attempt.SYN{Time: ts, Src: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 9, byte(a >> 8), byte(a)}), uint16(30000+k)), Dst: dst, Seq: uint32(10*p + k)})
		}
	}
	slices.SortStableFunc(syns, func(x, y attempt.SYN) int { return x.Time.Compare(y.Time) })
	path := filepath.Join(t.TempDir(), "staggered.pcap")
	writeSYNs(t, path, syns)
	for _, json := range []bool{false, true} {
		whole := auditFiles(t, FilesConfig{JSON: json}, path)
		streamed := auditFiles(t, FilesConfig{JSON: json, Port: 50052, PortSet: true}, path)
		if whole.err != nil || streamed.err != nil {
			t.Fatalf("whole: %v, as it comes: %v", whole.err, streamed.err)
		}
		if diff := cmp.Diff(whole.stdout, streamed.stdout); diff != "" {
			t.Errorf("JSON %v: the report differs (-read whole +read as it comes):\n%s", json, diff)
		}
		if json {
			if n := len(readReport(t, streamed).Peers); n != peers {
				t.Errorf("%d peers in the JSON, want %d", n, peers)
			}
		}
	}
}
