package analyze

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestRecordRoundTrip(t *testing.T) {
	t0 := time.Date(2025, 1, 2, 15, 4, 5, 0, time.UTC)
	events := []RecordEvent{
		{
			Event: EventStart, Time: t0, Session: 1,
			Peer:   netip.MustParseAddrPort("127.0.0.1:40112"),
			Params: &SessionParams{MaxReconnectBackoffMS: 0, Policy: ReferencePolicy(0)},
		},
		{Event: EventAccept, Time: t0.Add(210 * time.Millisecond), Session: 1, Peer: netip.MustParseAddrPort("127.0.0.1:40114")},
		{Event: EventAccept, Time: t0.Add(1190*time.Millisecond + 7), Session: 1, Peer: netip.MustParseAddrPort("[::1]:40116"), Overflow: true},
		{Event: EventAccept, Time: t0.Add(2 * time.Second), Session: 0, Peer: netip.MustParseAddrPort("127.0.0.2:1")},
		{
			Event: EventStop, Time: t0.Add(3 * time.Second), Session: 1,
			Peer: netip.MustParseAddrPort("127.0.0.1:40112"),
			End: &SessionEnd{
				Cause: CauseStop, Verdict: Passed, Passed: true, Attempts: 2,
				Chain: netip.MustParseAddr("127.0.0.1"), ChainReason: ChainStartPeer, ChainAttempts: 2,
				BackoffMS: []int32{980}, Foreign: []PeerCount{{Addr: netip.MustParseAddr("::1"), Attempts: 1}},
			},
		},
		{
			Event: EventExpire, Time: t0.Add(4 * time.Second), Session: 2,
			End: &SessionEnd{Cause: CauseTimeout, Verdict: TooFew, Reason: "too few", ChainReason: ChainNone,
				BackoffMS: []int32{}, Foreign: []PeerCount{}},
		},
	}
	var buf bytes.Buffer
	for _, e := range events {
		if err := WriteRecordEvent(&buf, e); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ReadRecord(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(events, got, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) }),
		cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
		cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

func TestRecordLineFormat(t *testing.T) {
	var buf bytes.Buffer
	e := RecordEvent{
		Event: EventAccept, Time: time.Date(2025, 1, 2, 16, 4, 5, 210000000, time.FixedZone("CET", 3600)),
		Session: 3, Peer: netip.MustParseAddrPort("[::ffff:127.0.0.1]:40114"),
	}
	if err := WriteRecordEvent(&buf, e); err != nil {
		t.Fatal(err)
	}
	want := `{"event":"accept","time":"2025-01-02T15:04:05.210000000Z","session":3,"peer":"127.0.0.1:40114"}` + "\n"
	if diff := cmp.Diff(want, buf.String()); diff != "" {
		t.Errorf("line (-want +got):\n%s", diff)
	}

	buf.Reset()
	e = RecordEvent{Event: EventStop, Time: e.Time, Session: 3, End: &SessionEnd{Cause: CauseStop, Verdict: TooFew, ChainReason: ChainNone}}
	if err := WriteRecordEvent(&buf, e); err != nil {
		t.Fatal(err)
	}
	want = `{"event":"stop","time":"2025-01-02T15:04:05.210000000Z","session":3,"end":{"cause":"stop","verdict":"too few attempts","passed":false,"reason":"","attempts":0,"dropped":0,"chain":"","chain_reason":"none","chain_attempts":0,"backoff_ms":[],"foreign":[]}}` + "\n"
	if diff := cmp.Diff(want, buf.String()); diff != "" {
		t.Errorf("line (-want +got):\n%s", diff)
	}
}

func TestReadRecordErrors(t *testing.T) {
	const accept = `{"event":"accept","time":"2025-01-02T15:04:05.210000000Z","session":1,"peer":"127.0.0.1:1"}`
	tests := []struct {
		name    string
		in      string
		wantN   int
		wantErr string
	}{
		{name: "empty", in: "", wantN: 0},
		{name: "good", in: accept + "\n" + accept + "\n", wantN: 2},
		{name: "truncated", in: accept + "\n" + accept[:20], wantN: 1, wantErr: "line 2: truncated"},
		{name: "blank line", in: accept + "\n\n", wantN: 1, wantErr: "line 2:"},
		{name: "not json", in: accept + "\n" + accept + "\nhello\n", wantN: 2, wantErr: "line 3:"},
		{name: "unknown event", in: `{"event":"bye","time":"2025-01-02T15:04:05Z","session":1}` + "\n", wantErr: `line 1: unknown event "bye"`},
		{name: "bad time", in: `{"event":"accept","time":"yesterday","session":1,"peer":"127.0.0.1:1"}` + "\n", wantErr: "line 1: time"},
		{name: "accept without peer", in: `{"event":"accept","time":"2025-01-02T15:04:05Z","session":1}` + "\n", wantErr: "line 1: accept event without peer"},
		{name: "start without params", in: `{"event":"start","time":"2025-01-02T15:04:05Z","session":1,"peer":"127.0.0.1:1"}` + "\n", wantErr: "line 1: start event without params"},
		{name: "stop without end", in: `{"event":"stop","time":"2025-01-02T15:04:05Z","session":1}` + "\n", wantErr: "line 1: stop event without end"},
		{name: "stop in session 0", in: `{"event":"stop","time":"2025-01-02T15:04:05Z","session":0,"end":{}}` + "\n", wantErr: "line 1: stop event with session 0"},
		{name: "year beyond 9999 in UTC", in: `{"event":"accept","time":"9999-12-31T23:30:00-01:00","session":1,"peer":"127.0.0.1:1"}` + "\n", wantErr: "line 1: time"},
		{name: "start with a meaningless policy", in: `{"event":"start","time":"2025-01-02T15:04:05Z","session":1,"peer":"127.0.0.1:1","params":{"max_reconnect_backoff_ms":0,"policy":{"initial_backoff_ms":1000,"multiplier":0,"jitter":0.2,"max_backoff_ms":120000,"min_connect_timeout_ms":20000,"tolerance_ms":100}}}` + "\n", wantErr: "line 1: start event policy: multiplier 0"},
		{name: "unknown field ignored", in: `{"event":"accept","time":"2025-01-02T15:04:05Z","session":1,"peer":"[::1]:9","new":1}` + "\n", wantN: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadRecord(strings.NewReader(tt.in))
			if len(got) != tt.wantN {
				t.Errorf("got %d events, want %d", len(got), tt.wantN)
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}
