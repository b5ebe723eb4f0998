package analyze

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// sampleReport holds a passing, a failing and a too-few peer, with one
// retransmission and an interval 1 that only the strict reading rejects.
func sampleReport() Report {
	tr := NewTracker()
	add := func(src string, seq uint32, gaps ...time.Duration) {
		ap := netip.MustParseAddrPort(src)
		ts := trackStart
		for i, g := range append([]time.Duration{0}, gaps...) {
			ts = ts.Add(g)
			tr.Add(SYN{Time: ts, Src: netip.AddrPortFrom(ap.Addr(), ap.Port()+uint16(i)), Dst: netip.MustParseAddrPort("127.0.0.1:50052"), Seq: seq + uint32(i)})
		}
	}
	// Passes the reference; interval 1 is jittered, which the strict
	// reading rejects.
	add("127.0.0.1:40000", 100, 1180*time.Millisecond+250*time.Microsecond, 1700*time.Millisecond, 2300*time.Millisecond)
	// A kernel retransmission of the first attempt.
	tr.Add(SYN{Time: trackStart.Add(time.Second), Src: netip.MustParseAddrPort("127.0.0.1:40000"), Dst: netip.MustParseAddrPort("127.0.0.1:50052"), Seq: 100})
	// Retries too soon at interval 2.
	add("[::1]:41000", 200, 1000*time.Millisecond, 900*time.Millisecond)
	// Connected once.
	add("10.0.0.9:42000", 300)
	chains := tr.Peers()
	return NewReport(50052, DefaultPolicy(), chains, CaptureInfo{
		Packets: 42, SYNs: uint64(tr.SYNs()),
		Skipped: map[string]uint64{"not IP": 3},
		Files:   []FileInfo{{Path: "x.pcap", Format: "pcap", Bytes: 4096, Packets: 42, SYNs: uint64(tr.SYNs())}},
	})
}

func TestNewReport(t *testing.T) {
	r := sampleReport()
	var order []string
	for _, p := range r.Peers {
		order = append(order, p.Peer.String()+" "+string(p.Verdict))
	}
	wantOrder := []string{"::1 failed", "10.0.0.9 too few attempts", "127.0.0.1 passed"}
	if diff := cmp.Diff(wantOrder, order); diff != "" {
		t.Errorf("peer order (-want +got):\n%s", diff)
	}
	wantSummary := Summary{Peers: 3, Passed: 1, Failed: 1, TooFew: 1}
	if diff := cmp.Diff(wantSummary, r.Summary); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
	if got, want := r.Capture.Attempts, 4+3+1; got != want {
		t.Errorf("capture attempts = %d, want %d", got, want)
	}
	if got := r.Capture.Retransmits; got != 1 {
		t.Errorf("capture retransmits = %d, want 1", got)
	}
	passing := r.Peers[2]
	if passing.Strict.Passed || passing.Strict.FirstFailure != 1 {
		t.Errorf("strict reading of a jittered interval 1 = %+v, want failed at 1", passing.Strict)
	}
	if !r.Peers[1].ReferencePassed || r.Peers[1].Passed {
		t.Errorf("one attempt: passed=%v reference_passed=%v, want false/true", r.Peers[1].Passed, r.Peers[1].ReferencePassed)
	}
}

func TestReportOnly(t *testing.T) {
	r := sampleReport()
	got := r.Only(netip.MustParseAddr("::ffff:127.0.0.1"))
	if len(got.Peers) != 1 || got.Peers[0].Peer != netip.MustParseAddr("127.0.0.1") {
		t.Fatalf("Only(127.0.0.1) kept %v", got.Peers)
	}
	if want := (Summary{Peers: 1, Passed: 1, PassedAll: true}); got.Summary != want {
		t.Errorf("Only summary = %+v, want %+v", got.Summary, want)
	}
	if len(r.Peers) != 3 {
		t.Errorf("Only changed its receiver: %d peers", len(r.Peers))
	}
}

// TestReportJSONSchema pins the member names the issue documents: scripts
// depend on them.
func TestReportJSONSchema(t *testing.T) {
	b, err := json.Marshal(sampleReport())
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	requireKeys(t, "report", doc, "port", "policy", "capture", "peers", "summary")
	requireKeys(t, "policy", doc["policy"], "initial_backoff_ms", "multiplier", "jitter", "max_backoff_ms", "tolerance_ms")
	requireKeys(t, "capture", doc["capture"], "packets", "syns", "attempts", "retransmits", "skipped", "files")
	requireKeys(t, "summary", doc["summary"], "peers", "passed", "failed", "too_few", "passed_all")
	peers := doc["peers"].([]any)
	if len(peers) != 3 {
		t.Fatalf("%d peers, want 3", len(peers))
	}
	for _, p := range peers {
		requireKeys(t, "peer", p, "peer", "passed", "verdict", "strict", "attempts", "intervals")
		for _, a := range p.(map[string]any)["attempts"].([]any) {
			requireKeys(t, "attempt", a, "time", "src_port", "retransmits")
			ts := a.(map[string]any)["time"].(string)
			if _, err := time.Parse(time.RFC3339Nano, ts); err != nil || len(ts) != len("2006-01-02T15:04:05.000000000Z") {
				t.Errorf("attempt time %q: want RFC 3339 with nanoseconds (%v)", ts, err)
			}
		}
		for _, iv := range p.(map[string]any)["intervals"].([]any) {
			requireKeys(t, "interval", iv, "k", "measured_ms", "expected_ms", "min_ms", "max_ms", "ok")
		}
	}
	if got := peers[2].(map[string]any)["attempts"].([]any)[0].(map[string]any)["time"]; got != "2025-01-02T03:04:05.000000000Z" {
		t.Errorf("first attempt time = %v", got)
	}
	// An empty chain still has arrays, never null.
	tooFew := peers[1].(map[string]any)
	if tooFew["intervals"] == nil {
		t.Error("intervals of a one-attempt peer is null, want []")
	}
	// The report reads back.
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("decode report: %v", err)
	}
	if diff := cmp.Diff(sampleReport().Peers[2].Attempts, back.Peers[2].Attempts); diff != "" {
		t.Errorf("attempts round trip (-want +got):\n%s", diff)
	}
}

func requireKeys(t *testing.T, what string, v any, keys ...string) {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Errorf("%s: %T, want a JSON object", what, v)
		return
	}
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			have := slices.Sorted(func(yield func(string) bool) {
				for k := range m {
					if !yield(k) {
						return
					}
				}
			})
			t.Errorf("%s: member %q missing (have %v)", what, k, have)
		}
	}
}

func TestReportTextGolden(t *testing.T) {
	var buf bytes.Buffer
	if err := sampleReport().WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	golden(t, filepath.Join("testdata", "report.golden"), buf.Bytes())
}

func TestCaptureWarnings(t *testing.T) {
	c := CaptureInfo{
		Skipped: map[string]uint64{"truncated TCP header": 2, "not IP": 5},
		Files: []FileInfo{
			{Path: "a.pcap", Packets: 9, Truncated: true},
			{Path: "b.pcap", Packets: 9, Truncated: true, Warnings: []string{"b.pcap: record at offset 99: file ends inside it "}},
		},
	}
	want := []string{
		"a.pcap: truncated after 9 packets",
		"b.pcap: record at offset 99: file ends inside it",
		"skipped 5 packets: not IP",
		"skipped 2 packets: truncated TCP header",
	}
	if diff := cmp.Diff(want, c.Warnings()); diff != "" {
		t.Errorf("Warnings (-want +got):\n%s", diff)
	}
}

// golden compares got with the file, or rewrites the file under -update.
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}
