package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/netip"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/internal/testutil"
	"github.com/backoff-audit/audit/internal/text"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// sampleReport holds a passing, a failing and a too-few peer, with one
// retransmission and an interval 1 that only the strict reading rejects.
func sampleReport() *Audit {
	tr := attempt.NewTracker()
	add := func(src string, seq uint32, gaps ...time.Duration) {
		ap := netip.MustParseAddrPort(src)
		ts := trackStart
		for i, g := range append([]time.Duration{0}, gaps...) {
			ts = ts.Add(g)
			tr.Add(attempt.SYN{Time: ts, Src: netip.AddrPortFrom(ap.Addr(), ap.Port()+uint16(i)), Dst: netip.MustParseAddrPort("127.0.0.1:50052"), Seq: seq + uint32(i)})
		}
	}
	// Passes the reference; interval 1 is jittered, which the strict
	// reading rejects.
	add("127.0.0.1:40000", 100, 1180*time.Millisecond+250*time.Microsecond, 1700*time.Millisecond, 2300*time.Millisecond)
	// A kernel retransmission of the first attempt.
	tr.Add(attempt.SYN{Time: trackStart.Add(time.Second), Src: netip.MustParseAddrPort("127.0.0.1:40000"), Dst: netip.MustParseAddrPort("127.0.0.1:50052"), Seq: 100})
	// Retries too soon at interval 2.
	add("[::1]:41000", 200, 1000*time.Millisecond, 900*time.Millisecond)
	// Connected once.
	add("10.0.0.9:42000", 300)
	return NewAudit(50052, backoff.DefaultPolicy(), backoff.Run{}, Chains(tr.Peers()), attempt.CaptureInfo{
		Packets: 42, SYNs: uint64(tr.SYNs()),
		Skipped: map[string]uint64{"not IP": 3},
		Files:   []attempt.FileInfo{{Path: "x.pcap", Format: "pcap", Bytes: 4096, Packets: 42, SYNs: uint64(tr.SYNs())}},
	})
}

// readBack is what a program reads of a's JSON.
func readBack(t *testing.T, a *Audit) Report {
	t.Helper()
	var js bytes.Buffer
	if err := a.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var r Report
	if err := json.Unmarshal(js.Bytes(), &r); err != nil {
		t.Fatalf("WriteJSON is not a JSON report: %v\n%s", err, js.Bytes())
	}
	return r
}

func TestNewAudit(t *testing.T) {
	a := sampleReport()
	r := Report{Capture: a.Capture, Peers: a.Peers.Reports(), Summary: a.Summary}
	var order []string
	for _, p := range r.Peers {
		order = append(order, p.Peer.String()+" "+string(p.Verdict))
	}
	wantOrder := []string{"::1 failed", "10.0.0.9 too few attempts", "127.0.0.1 passed"}
	if diff := cmp.Diff(wantOrder, order); diff != "" {
		t.Errorf("peer order (-want +got):\n%s", diff)
	}
	// The failing peer came back after 1 s twice: a cap of 1 s fits it.
	wantSummary := Summary{Peers: 3, Passed: 1, Failed: 1, TooFew: 1, FitsCapMS: 1000}
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

func TestAuditOnlyMapped(t *testing.T) {
	a := sampleReport()
	got := a.Only(netip.MustParseAddr("::ffff:127.0.0.1"))
	if got.Peers.Len() != 1 || got.Peers.Peer(0) != netip.MustParseAddr("127.0.0.1") {
		t.Fatalf("Only(127.0.0.1) kept %v", got.Peers.Reports())
	}
	if want := (Summary{Peers: 1, Passed: 1, PassedAll: true}); got.Summary != want {
		t.Errorf("Only summary = %+v, want %+v", got.Summary, want)
	}
	if a.Peers.Len() != 3 {
		t.Errorf("Only changed its receiver: %d peers", a.Peers.Len())
	}
}

// TestReportJSONSchema pins the documented member names: scripts
// depend on them.
func TestReportJSONSchema(t *testing.T) {
	var js bytes.Buffer
	if err := sampleReport().WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	b := js.Bytes()
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
	if diff := cmp.Diff(sampleReport().Peers.Reports()[2].Attempts, back.Peers[2].Attempts); diff != "" {
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
	if err := sampleReport().WriteText(&buf, true); err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, filepath.Join("testdata", "report.golden"), buf.Bytes(), *update)
}

func TestCaptureWarnings(t *testing.T) {
	c := attempt.CaptureInfo{
		Skipped: map[string]uint64{"truncated TCP header": 2, "not IP": 5},
		Files: []attempt.FileInfo{
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

// chainsTracker holds n peers, one in five failing at interval 2, one in
// seven with a single attempt, the others passing; passing peers' jitter
// grows with their address.
func chainsTracker(n int) *attempt.Tracker {
	tr := attempt.NewTracker()
	dst := netip.MustParseAddrPort("127.0.0.1:50052")
	for i := range n {
		src := netip.AddrFrom4([4]byte{10, 9, byte(i >> 8), byte(i)})
		gaps := []time.Duration{0, 1000 * time.Millisecond, 1600*time.Millisecond + time.Duration(i%40)*7*time.Millisecond, 2560 * time.Millisecond}
		switch {
		case i%5 == 1:
			gaps = []time.Duration{0, time.Second, time.Second}
		case i%7 == 3:
			gaps = gaps[:1]
		}
		ts := trackStart.Add(time.Duration(i) * time.Millisecond)
		for k, g := range gaps {
			ts = ts.Add(g)
			tr.Add(attempt.SYN{Time: ts, Src: netip.AddrPortFrom(src, uint16(40000+k)), Dst: dst, Seq: uint32(i*10 + k)})
		}
		if i%11 == 0 { // a kernel retransmission of the first attempt
			tr.Add(attempt.SYN{Time: trackStart.Add(time.Duration(i)*time.Millisecond + time.Second), Src: netip.AddrPortFrom(src, 40000), Dst: dst, Seq: uint32(i * 10)})
		}
	}
	return tr
}

var chainsInfo = attempt.CaptureInfo{Packets: 99, Files: []attempt.FileInfo{{Path: "x.pcap", Format: "pcap", Bytes: 1, Packets: 99}}}

// wantReport builds a report the plain way: every chain's PeerReport,
// sorted failing first.
func wantReport(tr *attempt.Tracker) Report {
	r := Report{Port: 50052, Policy: backoff.DefaultPolicy(), Capture: chainsInfo, Peers: []PeerReport{}}
	r.Capture.Skipped = map[string]uint64{}
	for _, c := range tr.Peers() {
		r.Peers = append(r.Peers, NewPeerReport(r.Policy, c))
		r.Capture.Attempts += len(c.Attempts)
		r.Capture.Retransmits += c.Retransmits()
	}
	slices.SortStableFunc(r.Peers, func(a, b PeerReport) int {
		if c := a.Verdict.Rank() - b.Verdict.Rank(); c != 0 {
			return c
		}
		return a.Peer.Compare(b.Peer)
	})
	r.Summary = summarize(r.Peers)
	return r
}

// only is r with the peers of addrs alone, recounted.
func only(r Report, addrs ...netip.Addr) Report {
	r.Peers = slices.DeleteFunc(slices.Clone(r.Peers), func(p PeerReport) bool { return !slices.Contains(addrs, p.Peer) })
	r.Summary = summarize(r.Peers)
	return r
}

// withChainsFit is r with the cap NewAudit finds for chainsTracker's
// peers: the failing ones retry after 1 s twice, which a 1 s cap passes
// (E2 = min(1600, 1000)).
func withChainsFit(r Report) Report {
	if r.Summary.Failed > 0 {
		r.Summary.FitsCapMS = 1000
	}
	return r
}

// TestAudit checks an Audit of enough peers to verify and write on every
// core against the plain report: its Report, its JSON read back, its text
// with every table.
func TestAudit(t *testing.T) {
	for _, n := range []int{0, 1, 3, TablesUpTo + 5, 3*auditBatch + 17} {
		t.Run(fmt.Sprint(n, " peers"), func(t *testing.T) {
			tr := chainsTracker(n)
			want := withChainsFit(wantReport(tr))
			a := NewAudit(50052, backoff.DefaultPolicy(), backoff.Run{}, tr.Chains(), chainsInfo)
			if diff := cmp.Diff(want.Peers, a.Peers.Reports(), netipOpt); diff != "" {
				t.Fatalf("Peers (-want +got):\n%s", diff)
			}
			if a.Summary != want.Summary {
				t.Errorf("Summary = %+v, want %+v", a.Summary, want.Summary)
			}

			var js bytes.Buffer
			if err := a.WriteJSON(&js); err != nil {
				t.Fatal(err)
			}
			var back Report
			if err := json.Unmarshal(js.Bytes(), &back); err != nil {
				t.Fatalf("WriteJSON is not a JSON report: %v\n%s", err, js.Bytes())
			}
			ignore := cmpopts.IgnoreFields(backoff.Interval{}, "Measured") // not in JSON
			if diff := cmp.Diff(want, back, ignore, netipOpt, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("WriteJSON read back (-want +got):\n%s", diff)
			}
			// The same document as encoding/json makes of the Report.
			var got, wantDoc any
			marshalled, err := json.Marshal(want)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(marshalled, &wantDoc); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(js.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(wantDoc, got); diff != "" {
				t.Errorf("WriteJSON vs json.Marshal(Report) (-want +got):\n%s", diff)
			}
			if lines := bytes.Count(js.Bytes(), []byte(`{"peer":`)); lines != n || n > 0 && bytes.Count(js.Bytes(), []byte("\n    {\"peer\":")) != n {
				t.Errorf("want one line per peer, %d peers:\n%s", n, js.Bytes())
			}

		})
	}
}

// TestAuditTextBrief pins the text of a report of more than TablesUpTo
// peers: failing peers in full, passing peers one line each.
func TestAuditTextBrief(t *testing.T) {
	a := NewAudit(50052, backoff.DefaultPolicy(), backoff.Run{}, chainsTracker(TablesUpTo+5).Chains(), chainsInfo)
	var buf bytes.Buffer
	if err := a.WriteText(&buf, false); err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, filepath.Join("testdata", "audit-brief.golden"), buf.Bytes(), *update)
}

func TestAuditOnly(t *testing.T) {
	tr := chainsTracker(40)
	a := NewAudit(50052, backoff.DefaultPolicy(), backoff.Run{}, tr.Chains(), chainsInfo)
	kept := a.Only(netip.MustParseAddr("::ffff:10.9.0.2"), netip.MustParseAddr("10.9.0.1"), netip.MustParseAddr("10.99.0.1"))
	want := withChainsFit(only(wantReport(tr), netip.MustParseAddr("10.9.0.2"), netip.MustParseAddr("10.9.0.1")))
	if diff := cmp.Diff(want, readBack(t, kept), netipOpt, cmpopts.IgnoreFields(backoff.Interval{}, "Measured"), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Only (-want +got):\n%s", diff)
	}
	if a.Summary.Peers != 40 || a.Only() != a {
		t.Errorf("Only changed its receiver, or Only() is not a no-op: %+v", a.Summary)
	}
}

// TestAppendPeerJSON holds the hand-written encoder to encoding/json, byte
// for byte, over the values a report can hold and some it should not.
func TestAppendPeerJSON(t *testing.T) {
	prs := sampleReport().Peers.Reports()
	odd := prs[0]
	odd.Reason = "a <tag> & \"quote\" \\ \t\x01 \u2028 – é \xff"
	odd.Verdict = backoff.Overflow
	odd.Strict = backoff.Reading{}
	odd.Attempts = nil
	odd.BackoffMS = nil
	ivs := []backoff.Interval{}
	for _, f := range []float64{0, math.Copysign(0, -1), 1e-7, -1e-7, 1e-6, 1e14, 1e15 - 1, 1e15, 1e15 + 2, -1e15, 999999999999999.9, 1e20, 1e21, -1e21, 123.456, 700, -3, 1300, 4096, 1.0 / 3, -17.5, 4096.000001, 1e300, math.SmallestNonzeroFloat64} {
		ivs = append(ivs, backoff.Interval{K: 7, MeasuredMS: f, BackoffMS: -3, ExpectedMS: f, MinMS: -f, MaxMS: f * 3, OK: true, Outcome: backoff.Late, JitterPct: f, StrictOK: true})
	}
	odd.Intervals = ivs
	empty := PeerReport{Peer: netip.MustParseAddr("2001:db8::1"), Attempts: []AttemptReport{}, Intervals: []backoff.Interval{}, BackoffMS: []int32{}}
	zoned := empty
	zoned.Peer = netip.MustParseAddr("fe80::1%<eth0>&é")
	inferred := prs[0] // --infer's member, written by infer as it is
	inferred.Inferred = json.RawMessage(`{"policy":1,"intervals":3,"initial_backoff_ms":{"value":1000.2,"low":833.5,"high":1250.25}}`)
	prs = append(prs, odd, empty, zoned, PeerReport{}, inferred)
	for i, pr := range prs {
		want, err := json.Marshal(pr)
		if err != nil {
			t.Fatal(err)
		}
		// With the policy's windows held as text, and without.
		for _, windows := range []*windowText{nil, newWindowText(sampleReport().Policy)} {
			got, err := appendPeerJSON(nil, &pr, windows)
			if err != nil {
				t.Fatalf("peer %d: %v", i, err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("peer %d (windows held: %v): appendPeerJSON vs json.Marshal (-want +got):\n%s", i, windows != nil, diff)
			}
		}
	}
	bad := prs[0]
	bad.Intervals = []backoff.Interval{{JitterPct: math.NaN()}}
	if _, err := appendPeerJSON(nil, &bad, nil); err == nil {
		t.Error("NaN: no error, want encoding/json's")
	}
}

func TestAppendTime(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	times := []time.Time{{}, trackStart, time.Unix(0, 0), time.Unix(1<<33, 999999999), time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 1, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(0, 2, 29, 1, 2, 3, 4, time.UTC), time.Unix(1e9, 5).In(time.FixedZone("x", -3600))}
	for range 1000 {
		times = append(times, time.Unix(rng.Int64N(1<<35)-1<<34, rng.Int64N(1e9)))
	}
	for _, tm := range times {
		if got, want := string(appendTime(nil, tm)), tm.UTC().Format(text.TimeLayout); got != want {
			t.Errorf("appendTime(%v) = %q, want %q", tm, got, want)
		}
	}
	// A chain's times, seconds apart, through one minuteText: the same
	// text, in whatever order, across minutes and around the years it
	// cannot keep.
	chain := slices.Clone(times)
	for i := range 1000 {
		chain = append(chain, trackStart.Add(time.Duration(i)*1700*time.Millisecond+time.Duration(rng.Int64N(1e9))))
		chain = append(chain, time.Unix(-1, 0).Add(time.Duration(i-500)*1300*time.Millisecond))
	}
	var m minuteText
	for _, order := range [][]time.Time{chain, slices.SortedFunc(slices.Values(chain), time.Time.Compare)} {
		for _, tm := range order {
			if got, want := string(m.append(nil, tm)), tm.UTC().Format(text.TimeLayout); got != want {
				t.Errorf("minuteText.append(%v) = %q, want %q", tm, got, want)
			}
		}
	}
}

func TestAppendIntervalRow(t *testing.T) {
	for _, f := range []float64{0, math.Copysign(0, -1), 0.004, -0.005, 1.25, -43.75, 999.9999, 1180.25, 123456789.123, -1e9, math.Inf(1), math.NaN()} {
		iv := backoff.Interval{K: 12, MeasuredMS: f, ExpectedMS: f, MinMS: -f, MaxMS: f, JitterPct: f, Outcome: backoff.Early, StrictOK: true}
		verdict := string(iv.Outcome) + ", strict: ok"
		window := fmt.Sprintf("%.1f–%.1f", iv.MinMS, iv.MaxMS)
		want := fmt.Sprintf("  %3d %13.3f %12.1f %17s %+8.2f%%  %s\n", iv.K, iv.MeasuredMS, iv.ExpectedMS, window, iv.JitterPct, verdict)
		if got := string(appendIntervalRow(nil, iv)); got != want {
			t.Errorf("%v:\n got %q\nwant %q", f, got, want)
		}
	}
}

type failingWriter struct{ n int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.n--; w.n < 0 {
		return 0, errors.New("disk full")
	}
	return len(p), nil
}

// writePeers stops at the first error, its own or the writer's, and leaves
// no goroutine blocked.
func TestWritePeersError(t *testing.T) {
	a := NewAudit(50052, backoff.DefaultPolicy(), backoff.Run{}, chainsTracker(20*writeBatch).Chains(), chainsInfo)
	before := runtime.NumGoroutine()
	errBad := errors.New("bad peer")
	err := WritePeers(io.Discard, a.Peers, func() struct{} { return struct{}{} }, func(b []byte, _ struct{}, i int, report func() *PeerReport) ([]byte, error) {
		if i == 7*writeBatch+3 {
			return b, errBad
		}
		return append(b, report().Peer.String()...), nil
	})
	if !errors.Is(err, errBad) {
		t.Errorf("format error: %v, want %v", err, errBad)
	}
	if err := a.WriteJSON(&failingWriter{n: 3}); err == nil || err.Error() != "disk full" {
		t.Errorf("writer error: %v, want disk full", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines left behind", n-before)
	}
}

// TestFileInfoJSON: a file's skipped and warnings are always there, {} and
// [] when empty, in the report of an Audit and in a Report's JSON alike.
func TestFileInfoJSON(t *testing.T) {
	tests := []struct {
		name         string
		file         attempt.FileInfo
		wantSkipped  string
		wantWarnings string
	}{
		{name: "nothing skipped, no warning", file: attempt.FileInfo{Path: "a.pcap", Format: "pcap"},
			wantSkipped: `{}`, wantWarnings: `[]`},
		{name: "empty but not nil", file: attempt.FileInfo{Path: "a.pcap", Skipped: map[string]uint64{}, Warnings: []string{}},
			wantSkipped: `{}`, wantWarnings: `[]`},
		{name: "both", file: attempt.FileInfo{Path: "b.pcap", Skipped: map[string]uint64{"not IP": 2}, Truncated: true,
			Warnings: []string{"b.pcap: record at offset 24: file ends inside it"}},
			wantSkipped: `{"not IP":2}`, wantWarnings: `["b.pcap: record at offset 24: file ends inside it"]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info := attempt.CaptureInfo{Files: []attempt.FileInfo{tt.file}}
			a := NewAudit(50052, backoff.DefaultPolicy(), backoff.Run{}, attempt.NewTracker().Chains(), info)
			var js bytes.Buffer
			if err := a.WriteJSON(&js); err != nil {
				t.Fatal(err)
			}
			report, err := json.Marshal(readBack(t, a))
			if err != nil {
				t.Fatal(err)
			}
			for name, doc := range map[string][]byte{"Audit.WriteJSON": js.Bytes(), "json.Marshal(Report)": report} {
				var d struct {
					Capture struct {
						Files []map[string]json.RawMessage `json:"files"`
					} `json:"capture"`
				}
				if err := json.Unmarshal(doc, &d); err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if len(d.Capture.Files) != 1 {
					t.Fatalf("%s: %d files, want 1", name, len(d.Capture.Files))
				}
				f := d.Capture.Files[0]
				if got := string(compactJSON(t, f["skipped"])); got != tt.wantSkipped {
					t.Errorf("%s: skipped = %s, want %s", name, got, tt.wantSkipped)
				}
				if got := string(compactJSON(t, f["warnings"])); got != tt.wantWarnings {
					t.Errorf("%s: warnings = %s, want %s", name, got, tt.wantWarnings)
				}
			}
		})
	}
}

func compactJSON(t *testing.T, b []byte) []byte {
	t.Helper()
	if b == nil {
		return []byte("(absent)")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// appendWholeNS writes what encoding/json writes for float64(ns)/1e6.
func TestAppendWholeNS(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	ns := []int64{0, 1, -1, 999, 1000, 21000, 999999, 1000000, 1000001, 9999999, 10000000, 99999999, 100000000, 999000001, 1000827000, 123456789012, 1e15 - 1, -(1e15 - 1), 86400e9 * 11}
	for range 100000 {
		ns = append(ns, rng.Int64N(2e15)-1e15, rng.Int64N(1e10), rng.Int64N(1e7)*1000)
	}
	for _, n := range ns {
		want, err := json.Marshal(float64(n) / 1e6)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendWholeNS(nil, n); string(got) != string(want) {
			t.Fatalf("appendWholeNS(%d) = %s; encoding/json writes %s", n, got, want)
		}
	}
}

// appendUint and appendInt write what strconv writes, after what b held.
func TestAppendInt(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	vs := []int64{0, 1, -1, 9, 10, 99, 100, 101, 65535, 4294967295, math.MaxInt64, math.MinInt64, math.MinInt64 + 1}
	for p := int64(1); p < 1e18; p *= 10 {
		vs = append(vs, p-1, p, p+1, -p)
	}
	for range 100000 {
		vs = append(vs, rng.Int64(), -rng.Int64(), rng.Int64N(1e6), int64(rng.Uint32()))
	}
	for _, v := range vs {
		if got, want := string(appendInt([]byte("x"), v)), "x"+strconv.FormatInt(v, 10); got != want {
			t.Fatalf("appendInt(%d) = %s, want %s", v, got, want)
		}
		u := uint64(v)
		if got, want := string(appendUint([]byte("x"), u)), "x"+strconv.FormatUint(u, 10); got != want {
			t.Fatalf("appendUint(%d) = %s, want %s", u, got, want)
		}
	}
	if got := string(appendUint(nil, math.MaxUint64)); got != "18446744073709551615" {
		t.Fatalf("appendUint(MaxUint64) = %s", got)
	}
}

// Peers whose intervals come from Verify, written with and without the
// windows held, are what encoding/json writes.
func TestAppendPeerJSONVerified(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	// Every mode's model, so the members a run adds (term, signatures,
	// recovery, reconnects) are held to encoding/json too.
	t1 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	runs := []backoff.Run{{}, {Mode: backoff.RetryMode{Kind: backoff.ModeHang}, End: t1.Add(time.Hour)}, {Mode: backoff.RetryMode{Kind: backoff.ModeGoaway}},
		{Mode: backoff.RetryMode{Kind: backoff.ModeRestart, Down: time.Minute}, Back: t1.Add(10 * time.Minute)}}
	for i, p := range []backoff.Policy{backoff.DefaultPolicy(), backoff.ReferencePolicy(3000), backoff.ReferencePolicy(500), hangPolicy(3 * time.Second)} {
		windows := newWindowText(p)
		for j := range 200 {
			run := runs[(i+j)%len(runs)]
			t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			var c attempt.Chain
			c.Peer = netip.MustParseAddr("127.0.0.1")
			at := t0
			for k := range 2 + rng.IntN(80) {
				at = at.Add(time.Duration(rng.Int64N(int64(200 * time.Second))))
				c.Attempts = append(c.Attempts, attempt.Attempt{Time: at, Src: netip.AddrPortFrom(c.Peer, uint16(40000+k))})
			}
			pr := PeerReportOf(c, backoff.VerifyRun(p, c.Times(), run))
			want, err := json.Marshal(pr)
			if err != nil {
				t.Fatal(err)
			}
			got, err := appendPeerJSON(nil, &pr, windows)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Fatalf("policy %v: appendPeerJSON vs json.Marshal:\n%s\n%s", p, got, want)
			}
		}
	}
}

// failWriter fails every write after the first ok ones.
type failWriter struct{ ok int }

func (w *failWriter) Write(p []byte) (int, error) {
	if w.ok == 0 {
		return 0, errors.New("disk full")
	}
	w.ok--
	return len(p), nil
}

// TestWriteBatches: the items in order whatever goroutine formats them,
// each goroutine with its own state; nothing for no item; the first error
// of format or of the writer stops the writing and is returned.
func TestWriteBatches(t *testing.T) {
	item := func(b []byte, seen *int, i int) ([]byte, error) {
		*seen++
		return strconv.AppendInt(append(b, ' '), int64(i), 10), nil
	}
	for _, n := range []int{0, 1, 7, 1000} {
		var buf bytes.Buffer
		if err := WriteBatches(&buf, n, 3, func() *int { return new(int) }, item); err != nil {
			t.Fatal(err)
		}
		var want []byte
		for i := range n {
			want = strconv.AppendInt(append(want, ' '), int64(i), 10)
		}
		if buf.String() != string(want) {
			t.Errorf("n=%d: got %q", n, buf.String())
		}
	}
	bad := errors.New("bad item")
	err := WriteBatches(io.Discard, 1000, 3, func() *int { return new(int) }, func(b []byte, _ *int, i int) ([]byte, error) {
		if i == 500 {
			return b, bad
		}
		return b, nil
	})
	if !errors.Is(err, bad) {
		t.Errorf("format error: got %v", err)
	}
	if err := WriteBatches(&failWriter{ok: 2}, 1000, 3, func() *int { return new(int) }, item); err == nil || err.Error() != "disk full" {
		t.Errorf("writer error: got %v", err)
	}
}
