package report

import (
	"bytes"
	"encoding/json"
	"math"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/internal/testutil"
)

// fateReport is a report of one peer whose attempts have every fate.
func fateReport() *Audit {
	tr := attempt.NewTracker()
	tr.SetFatesKnown(true)
	srv := fateServer
	at := func(ms float64) time.Time { return trackStart.Add(time.Duration(ms * float64(time.Millisecond))) }
	type try struct {
		ms   float64
		segs []attempt.Segment
	}
	for i, a := range []try{
		{0, []attempt.Segment{{Time: at(0.041), Src: srv, Ack: 101, Flags: flagRST | flagACK}}},
		{1000, nil}, // unanswered, retransmitted below
		{5000, []attempt.Segment{
			{Time: at(5000.02), Src: srv, Seq: 7, Ack: 301, Flags: flagSYN | flagACK},
			{Time: at(5000.1), Seq: 301, Ack: 8, Flags: flagACK, Sent: backoff.PayloadTLSClientHello},
			{Time: at(5000.3), Src: srv, Seq: 8, Ack: 600, Flags: flagFIN | flagACK}}},
		{9000, []attempt.Segment{
			{Time: at(9000.02), Src: srv, Seq: 70, Ack: 401, Flags: flagSYN | flagACK},
			{Time: at(9000.1), Seq: 401, Ack: 71, Flags: flagACK, Sent: backoff.PayloadH2Preface},
			{Time: at(9001), Src: srv, Seq: 71, Ack: 450, Flags: flagACK, Sent: backoff.PayloadH2Settings},
			{Time: at(29000.5), Seq: 450, Ack: 90, Flags: flagFIN | flagACK}}},
		{15000, []attempt.Segment{{Time: at(15000.03), Src: srv, Seq: 9, Ack: 501, Flags: flagSYN | flagACK}}},
	} {
		cli := netip.AddrPortFrom(fateClient.Addr(), 40000+uint16(i))
		tr.Add(attempt.SYN{Time: at(a.ms), Src: cli, Dst: srv, Seq: uint32(100 * (i + 1))})
		if i == 1 {
			tr.Add(attempt.SYN{Time: at(a.ms + 1000), Src: cli, Dst: srv, Seq: 200})
			tr.Add(attempt.SYN{Time: at(a.ms + 3000), Src: cli, Dst: srv, Seq: 200})
		}
		for _, s := range a.segs {
			if !s.Src.IsValid() {
				s.Src, s.Dst = cli, srv
			} else {
				s.Dst = cli
			}
			tr.AddSegment(&s)
		}
	}
	return NewAudit(50052, backoff.DefaultPolicy(), backoff.Run{}, Chains(tr.Peers()), attempt.CaptureInfo{Packets: 20, SYNs: uint64(tr.SYNs())})
}

func TestFatesReportText(t *testing.T) {
	var buf bytes.Buffer
	if err := fateReport().WriteText(&buf, true); err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, filepath.Join("testdata", "report-fates.golden"), buf.Bytes(), *update)
}

// The JSON of every fate: its members, and the report reads back to the
// nanosecond.
func TestFatesReportJSON(t *testing.T) {
	r := fateReport()
	var js bytes.Buffer
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	b := js.Bytes()
	peers := r.Peers.Reports()
	var doc struct {
		Peers []struct {
			Attempts []map[string]any `json:"attempts"`
		} `json:"peers"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	for _, a := range doc.Peers[0].Attempts {
		delete(a, "time")
		delete(a, "seq")
		delete(a, "src_port")
		got = append(got, a)
	}
	want := []map[string]any{
		{"retransmits": 0.0, "fate": "refused", "duration_ms": 0.041, "rst": true},
		{"retransmits": 2.0, "fate": "unanswered", "duration_ms": 3000.0},
		{"retransmits": 0.0, "fate": "closed by server", "accepted_ms": 0.02, "duration_ms": 0.3, "client_sent": "tls client hello"},
		{"retransmits": 0.0, "fate": "abandoned by client", "accepted_ms": 0.02, "duration_ms": 20000.5,
			"client_sent": "http/2 preface", "server_sent": "http/2 settings", "ready_ms": 1.0},
		{"retransmits": 0.0, "fate": "open at end", "accepted_ms": 0.03},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("attempts (-want +got):\n%s", diff)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(peers[0].Attempts, back.Peers[0].Attempts); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	// The hand-written encoder writes the same bytes.
	pr := peers[0]
	pr.Attempts = append(pr.Attempts,
		AttemptReport{Ending: backoff.Ending{Fate: backoff.FateClosed, Accepted: -3, Duration: 2e15}},
		AttemptReport{Ending: backoff.Ending{Fate: backoff.FateRefused, Duration: 123456789, ServerSent: "odd <name>"}},
		AttemptReport{})
	want2, _ := json.Marshal(pr)
	got2, err := appendPeerJSON(nil, &pr, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want2), string(got2)); diff != "" {
		t.Errorf("appendPeerJSON vs json.Marshal (-want +got):\n%s", diff)
	}
}

// A capture of SYNs only says so once, in text and JSON, and every fate is
// unknown; a report without SYNOnly (hand-built, fates unknown) shows no
// table of fates.
func TestFatesReportSYNOnly(t *testing.T) {
	r := sampleReport()
	var plain bytes.Buffer
	r.WriteText(&plain, true)
	if strings.Contains(plain.String(), synOnlyNote) || strings.Contains(plain.String(), "fate") {
		t.Errorf("report without SYNOnly mentions fates:\n%s", plain.String())
	}
	r.Capture.SYNOnly = true
	var buf bytes.Buffer
	r.WriteText(&buf, true)
	if n := strings.Count(buf.String(), synOnlyNote); n != 1 {
		t.Errorf("the note is there %d times, want once:\n%s", n, buf.String())
	}
	var js bytes.Buffer
	r.WriteJSON(&js)
	b := js.Bytes()
	if !strings.Contains(string(b), `"syn_only": true`) || strings.Count(string(b), `"fate":"unknown"`) != 8 {
		t.Errorf("JSON: want syn_only and 8 unknown fates:\n%s", b)
	}
	for _, a := range r.Peers.Reports()[0].Attempts {
		if a.Ending.Fate != backoff.FateUnknown {
			t.Errorf("fate %q, want unknown", a.Ending.Fate)
		}
	}
}

func TestMSText(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0.000"}, {204000, "0.204"}, {20000120000, "20000.120"}, {1499, "0.001"}, {1500, "0.002"},
		{2500, "0.002"}, {2501, "0.003"}, {-400, "-0.000"}, {-1600, "-0.002"}, {math.MaxInt64, "9223372036854.776"},
		{math.MinInt64, "-9223372036854.775"},
	} {
		if got := string(msText(nil, tt.d, true)); got != tt.want {
			t.Errorf("msText(%d) = %q, want %q", tt.d, got, tt.want)
		}
	}
	if got := string(msText(nil, 5, false)); got != "-" {
		t.Errorf("msText(not ok) = %q", got)
	}
}

// TestFatesAlikeText: attempts that all ended alike get one line with the
// range of each time their fate has (one value when all are equal); one
// that differs in its first bytes brings the table back.
func TestFatesAlikeText(t *testing.T) {
	closed := func(acc, dur time.Duration, client backoff.Payload) AttemptReport {
		return AttemptReport{Ending: backoff.Ending{Fate: backoff.FateClosed, Accepted: acc, Duration: dur, ClientSent: client}}
	}
	unanswered := AttemptReport{Ending: backoff.Ending{Fate: backoff.FateUnanswered, Duration: 3 * time.Second}}
	tests := []struct {
		name string
		as   []AttemptReport
		want string
	}{
		{"closed", []AttemptReport{closed(20*time.Microsecond, 200*time.Microsecond, backoff.PayloadH2Preface), closed(30*time.Microsecond, 250*time.Microsecond, backoff.PayloadH2Preface)},
			"  fates: all 2 closed by server, accepted after 0.020–0.030 ms, held 0.180–0.220 ms, ended at 0.200–0.250 ms; client sent http/2 preface, server sent nothing\n"},
		{"unanswered", []AttemptReport{unanswered, unanswered, unanswered},
			"  fates: all 3 unanswered, ended at 3000.000 ms; client sent nothing, server sent nothing\n"},
	}
	for _, tt := range tests {
		if got := string(appendFatesText(nil, tt.as, false)); got != tt.want {
			t.Errorf("%s:\n got %q\nwant %q", tt.name, got, tt.want)
		}
	}
	mixed := []AttemptReport{closed(20*time.Microsecond, 200*time.Microsecond, backoff.PayloadH2Preface), closed(20*time.Microsecond, 200*time.Microsecond, backoff.PayloadTLSClientHello)}
	if got := string(appendFatesText(nil, mixed, false)); !strings.HasPrefix(got, fateHead) || strings.Count(got, "\n") != 3 {
		t.Errorf("mixed first bytes: want the table, got\n%s", got)
	}
}

// TestTrackerClientSent: ClientSent finds an attempt whose client opened
// with the given bytes, and not one whose client sent others or nothing.
func TestTrackerClientSent(t *testing.T) {
	tr := attempt.NewTracker()
	tr.SetFatesKnown(true)
	cli, srv := fateClient, fateServer
	tr.Add(attempt.SYN{Time: trackStart, Src: cli, Dst: srv, Seq: 100})
	if tr.ClientSent(backoff.PayloadH2Preface) {
		t.Fatal("an attempt whose client sent nothing: ClientSent = true")
	}
	tr.AddSegment(&attempt.Segment{Time: trackStart.Add(time.Millisecond), Src: srv, Dst: cli, Seq: 7, Ack: 101, Flags: flagSYN | flagACK})
	tr.AddSegment(&attempt.Segment{Time: trackStart.Add(2 * time.Millisecond), Src: cli, Dst: srv, Seq: 101, Ack: 8, Flags: flagACK, Sent: backoff.PayloadTLSClientHello})
	if tr.ClientSent(backoff.PayloadH2Preface) || !tr.ClientSent(backoff.PayloadTLSClientHello) {
		t.Errorf("ClientSent(preface) = %v, ClientSent(ClientHello) = %v; want false, true",
			tr.ClientSent(backoff.PayloadH2Preface), tr.ClientSent(backoff.PayloadTLSClientHello))
	}
}
