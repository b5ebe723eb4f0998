package session

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/backoff-audit/audit/backoff"
	"github.com/google/go-cmp/cmp"
)

func TestRecordRoundTrip(t *testing.T) {
	t0 := time.Date(2025, 1, 2, 15, 4, 5, 0, time.UTC)
	events := []RecordEvent{
		{
			Event: EventStart, Time: t0, Session: 1,
			Peer:   netip.MustParseAddrPort("127.0.0.1:40112"),
			Params: &SessionParams{MaxReconnectBackoffMS: 0, Policy: backoff.ReferencePolicy(0)},
		},
		{Event: EventAccept, Time: t0.Add(210 * time.Millisecond), Session: 1, Peer: netip.MustParseAddrPort("127.0.0.1:40114")},
		{Event: EventAccept, Time: t0.Add(1190*time.Millisecond + 7), Session: 1, Peer: netip.MustParseAddrPort("[::1]:40116"), Overflow: true},
		{Event: EventAccept, Time: t0.Add(2 * time.Second), Session: 0, Peer: netip.MustParseAddrPort("127.0.0.2:1")},
		{
			Event: EventStop, Time: t0.Add(3 * time.Second), Session: 1,
			Peer: netip.MustParseAddrPort("127.0.0.1:40112"),
			End: &SessionEnd{
				Cause: CauseStop, Verdict: backoff.Passed, Passed: true, Attempts: 2,
				VerifiedPeer: netip.MustParseAddr("127.0.0.1"), VerifiedReason: VerifiedStartPeer, VerifiedAttempts: 2,
				BackoffMS: []int32{980}, Foreign: []PeerCount{{Addr: netip.MustParseAddr("::1"), Attempts: 1}},
			},
		},
		{
			Event: EventExpire, Time: t0.Add(4 * time.Second), Session: 2,
			End: &SessionEnd{Cause: CauseTimeout, Verdict: backoff.TooFew, Reason: "too few", VerifiedReason: VerifiedNone,
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
	e = RecordEvent{Event: EventStop, Time: e.Time, Session: 3, End: &SessionEnd{Cause: CauseStop, Verdict: backoff.TooFew, VerifiedReason: VerifiedNone}}
	if err := WriteRecordEvent(&buf, e); err != nil {
		t.Fatal(err)
	}
	want = `{"event":"stop","time":"2025-01-02T15:04:05.210000000Z","session":3,"end":{"cause":"stop","verdict":"too few attempts","passed":false,"reason":"","attempts":0,"dropped":0,"verified_peer":"","verified_reason":"none","verified_attempts":0,"backoff_ms":[],"foreign":[]}}` + "\n"
	if diff := cmp.Diff(want, buf.String()); diff != "" {
		t.Errorf("line (-want +got):\n%s", diff)
	}
}

func TestReadRecordErrors(t *testing.T) {
	const accept = `{"event":"accept","time":"2025-01-02T15:04:05.210000000Z","session":1,"peer":"127.0.0.1:1"}`
	next := len(accept) + 1 // offset of line 2
	tests := []struct {
		name     string
		in       string
		wantN    int
		wantErr  string
		wantTorn bool
	}{
		{name: "empty", in: "", wantN: 0},
		{name: "good", in: accept + "\n" + accept + "\n", wantN: 2},
		{name: "torn last line", in: accept + "\n" + accept[:20], wantN: 1, wantTorn: true,
			wantErr: fmt.Sprintf("read record line 2 at offset %d: torn last line (no newline at end of file): its 20 bytes are ignored", next)},
		{name: "torn line that is whole JSON", in: accept + "\n" + accept, wantN: 1, wantTorn: true,
			wantErr: fmt.Sprintf("read record line 2 at offset %d: torn last line", next)},
		{name: "torn only line", in: accept[:5], wantN: 0, wantTorn: true, wantErr: "read record line 1 at offset 0: torn"},
		{name: "blank line", in: accept + "\n\n", wantN: 1, wantErr: fmt.Sprintf("line 2 at offset %d:", next)},
		{name: "not json", in: accept + "\n" + accept + "\nhello\n", wantN: 2, wantErr: fmt.Sprintf("line 3 at offset %d:", 2*next)},
		{name: "bad line before a torn one", in: "hello\n" + accept, wantErr: "line 1 at offset 0: invalid character"},
		{name: "unknown event", in: `{"event":"bye","time":"2025-01-02T15:04:05Z","session":1}` + "\n", wantErr: `line 1 at offset 0: unknown event "bye"`},
		{name: "bad time", in: `{"event":"accept","time":"yesterday","session":1,"peer":"127.0.0.1:1"}` + "\n", wantErr: "line 1 at offset 0: time"},
		{name: "accept without peer", in: `{"event":"accept","time":"2025-01-02T15:04:05Z","session":1}` + "\n", wantErr: "line 1 at offset 0: accept event without peer"},
		{name: "start without params", in: `{"event":"start","time":"2025-01-02T15:04:05Z","session":1,"peer":"127.0.0.1:1"}` + "\n", wantErr: "line 1 at offset 0: start event without params"},
		{name: "stop without end", in: `{"event":"stop","time":"2025-01-02T15:04:05Z","session":1}` + "\n", wantErr: "line 1 at offset 0: stop event without end"},
		{name: "stop in session 0", in: `{"event":"stop","time":"2025-01-02T15:04:05Z","session":0,"end":{}}` + "\n", wantErr: "line 1 at offset 0: stop event with session 0"},
		{name: "year beyond 9999 in UTC", in: `{"event":"accept","time":"9999-12-31T23:30:00-01:00","session":1,"peer":"127.0.0.1:1"}` + "\n", wantErr: "line 1 at offset 0: time"},
		{name: "start with a meaningless policy", in: `{"event":"start","time":"2025-01-02T15:04:05Z","session":1,"peer":"127.0.0.1:1","params":{"max_reconnect_backoff_ms":0,"policy":{"initial_backoff_ms":1000,"multiplier":0,"jitter":0.2,"max_backoff_ms":120000,"min_connect_timeout_ms":20000,"tolerance_ms":100}}}` + "\n", wantErr: "line 1 at offset 0: start event policy: multiplier 0"},
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
			if torn := errors.Is(err, ErrTornLine); torn != tt.wantTorn {
				t.Errorf("errors.Is(%v, ErrTornLine) = %v, want %v", err, torn, tt.wantTorn)
			}
		})
	}
}

// TestReadRecordLineBound: a line longer than MaxRecordLine is an error
// naming it and its offset, found without reading much past the bound,
// whatever follows; a line of exactly the bound is read.
func TestReadRecordLineBound(t *testing.T) {
	const accept = `{"event":"accept","time":"2025-01-02T15:04:05.210000000Z","session":1,"peer":"127.0.0.1:1"}` + "\n"
	// An accept line padded with spaces (JSON whitespace) to n bytes
	// before its newline.
	padded := func(n int) string {
		return accept[:len(accept)-1] + strings.Repeat(" ", n-(len(accept)-1)) + "\n"
	}
	tests := []struct {
		name    string
		in      io.Reader
		wantN   int
		wantErr string // "" for none
	}{
		{name: "endless zeros", in: endless(0), wantErr: fmt.Sprintf("read record line 1 at offset 0: line longer than %d bytes", MaxRecordLine)},
		{name: "endless zeros after two lines", in: io.MultiReader(strings.NewReader(accept+accept), endless(0)), wantN: 2,
			wantErr: fmt.Sprintf("read record line 3 at offset %d: line longer than %d bytes", 2*len(accept), MaxRecordLine)},
		{name: "endless spaces", in: endless(' '), wantErr: "read record line 1 at offset 0: line longer than"},
		{name: "one byte over, newline after", in: strings.NewReader(accept + padded(MaxRecordLine+1) + accept), wantN: 1,
			wantErr: fmt.Sprintf("read record line 2 at offset %d: line longer than", len(accept))},
		{name: "one byte over, torn", in: strings.NewReader(accept + padded(MaxRecordLine + 1)[:MaxRecordLine+1]), wantN: 1,
			wantErr: fmt.Sprintf("read record line 2 at offset %d: line longer than", len(accept))},
		{name: "exactly the bound", in: strings.NewReader(accept + padded(MaxRecordLine) + accept), wantN: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The test's own limit: ReadRecord must stop long before it.
			const limit = 64 * MaxRecordLine
			lr := &io.LimitedReader{R: tt.in, N: limit}
			got, err := ReadRecord(lr)
			if len(got) != tt.wantN {
				t.Errorf("got %d events, want %d", len(got), tt.wantN)
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("error %v, want one containing %q", err, tt.wantErr)
			}
			if errors.Is(err, ErrTornLine) {
				t.Errorf("error %v: a line over the bound is not a torn line", err)
			}
			if read := limit - lr.N; tt.wantErr != "" && read > 2*MaxRecordLine {
				t.Errorf("read %d bytes before giving up; want at most about the bound, %d", read, MaxRecordLine)
			}
		})
	}
}

// endless is a stream of one byte repeated forever, like /dev/zero.
type endless byte

func (e endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(e)
	}
	return len(p), nil
}

// TestReadRecordTornLineKeepsEvents: a record file whose writer died
// mid-line gives every complete line's events, and the error says which
// line was torn so a caller can warn and go on.
func TestReadRecordTornLineKeepsEvents(t *testing.T) {
	t0 := time.Date(2025, 1, 2, 15, 4, 5, 0, time.UTC)
	var buf bytes.Buffer
	var want []RecordEvent
	for i := range 3 {
		e := RecordEvent{Event: EventAccept, Time: t0.Add(time.Duration(i) * time.Second), Session: 1,
			Peer: netip.MustParseAddrPort("127.0.0.1:40114")}
		if err := WriteRecordEvent(&buf, e); err != nil {
			t.Fatal(err)
		}
		want = append(want, e)
	}
	whole := buf.Len()
	WriteRecordEvent(&buf, want[0])
	for cut := whole + 1; cut < buf.Len(); cut++ {
		got, err := ReadRecord(bytes.NewReader(buf.Bytes()[:cut]))
		if !errors.Is(err, ErrTornLine) {
			t.Fatalf("cut at %d: error %v, want one wrapping ErrTornLine", cut, err)
		}
		wantErr := fmt.Sprintf("read record line 4 at offset %d: torn last line (no newline at end of file): its %d bytes are ignored", whole, cut-whole)
		if err.Error() != wantErr {
			t.Fatalf("cut at %d: error %q, want %q", cut, err, wantErr)
		}
		if diff := cmp.Diff(want, got, recordCmp); diff != "" {
			t.Fatalf("cut at %d: events (-want +got):\n%s", cut, diff)
		}
	}
}

// A record written before the verified peer had its name still reads.
func TestReadRecordEarlierNames(t *testing.T) {
	old := `{"event":"stop","time":"2025-01-02T15:04:07.000000000Z","session":1,"peer":"127.0.0.1:40112","end":{"cause":"stop","verdict":"passed","passed":true,"reason":"","attempts":2,"dropped":0,"chain":"127.0.0.1","chain_reason":"start peer","chain_attempts":2,"backoff_ms":[980],"foreign":[]}}` + "\n"
	events, err := ReadRecord(strings.NewReader(old))
	if err != nil || len(events) != 1 || events[0].End == nil {
		t.Fatalf("ReadRecord = %+v, %v", events, err)
	}
	end := events[0].End
	if end.VerifiedPeer != netip.MustParseAddr("127.0.0.1") || end.VerifiedReason != VerifiedStartPeer || end.VerifiedAttempts != 2 {
		t.Errorf("end %+v; want verified peer 127.0.0.1, start peer, 2 attempts", end)
	}
	var b strings.Builder
	if err := WriteRecordEvent(&b, events[0]); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"verified_peer":"127.0.0.1","verified_reason":"start peer","verified_attempts":2`) || strings.Contains(b.String(), `"chain`) {
		t.Errorf("written back as %s; want the current names only", b.String())
	}
}

// TestRecordRetryMode: a start line carries the session's retry mode, close
// (the zero RetryMode) included; the restart line reads back with its time
// and session.
func TestRecordRetryMode(t *testing.T) {
	const policy = `"policy":{"initial_backoff_ms":1000,"multiplier":1.6,"jitter":0.2,"max_backoff_ms":120000,"min_connect_timeout_ms":20000,"tolerance_ms":100}`
	t0 := time.Date(2025, 1, 2, 15, 4, 5, 0, time.UTC)
	start := func(m backoff.RetryMode) RecordEvent {
		return RecordEvent{Event: EventStart, Time: t0, Session: 1, Peer: netip.MustParseAddrPort("127.0.0.1:40112"),
			Params: &SessionParams{Policy: backoff.ReferencePolicy(0), Mode: m}}
	}
	tests := []struct {
		name string
		e    RecordEvent
		line string
	}{
		{
			name: "close",
			e:    start(backoff.RetryMode{}),
			line: `{"event":"start","time":"2025-01-02T15:04:05.000000000Z","session":1,"peer":"127.0.0.1:40112","params":{"max_reconnect_backoff_ms":0,` + policy + `,"retry_mode":"close"}}`,
		},
		{
			name: "restart",
			e:    start(backoff.RetryMode{Kind: backoff.ModeRestart, Down: 1500 * time.Millisecond}),
			line: `{"event":"start","time":"2025-01-02T15:04:05.000000000Z","session":1,"peer":"127.0.0.1:40112","params":{"max_reconnect_backoff_ms":0,` + policy + `,"retry_mode":"restart=1.5s"}}`,
		},
		{
			name: "hang",
			e:    start(backoff.RetryMode{Kind: backoff.ModeHang}),
			line: `{"event":"start","time":"2025-01-02T15:04:05.000000000Z","session":1,"peer":"127.0.0.1:40112","params":{"max_reconnect_backoff_ms":0,` + policy + `,"retry_mode":"hang"}}`,
		},
		{
			name: "port back",
			e:    RecordEvent{Event: EventRestart, Time: t0.Add(1500 * time.Millisecond), Session: 1},
			line: `{"event":"restart","time":"2025-01-02T15:04:06.500000000Z","session":1}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteRecordEvent(&buf, tt.e); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.line+"\n", buf.String()); diff != "" {
				t.Errorf("line (-want +got):\n%s", diff)
			}
			got, err := ReadRecord(&buf)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]RecordEvent{tt.e}, got, recordCmp); diff != "" {
				t.Errorf("read back (-want +got):\n%s", diff)
			}
		})
	}

	// A start line written before modes existed reads as close.
	old := `{"event":"start","time":"2025-01-02T15:04:05.000000000Z","session":1,"peer":"127.0.0.1:40112","params":{"max_reconnect_backoff_ms":0,` + policy + `}}` + "\n"
	got, err := ReadRecord(strings.NewReader(old))
	if err != nil || len(got) != 1 || !got[0].Params.Mode.Is(backoff.ModeClose) {
		t.Errorf("start line without retry_mode read as %+v, %v; want close", got, err)
	}
}

// TestReadRecordModeErrors: a start line with a mode no server writes, or
// a restart line outside a session, is an error naming the line.
func TestReadRecordModeErrors(t *testing.T) {
	const params = `"params":{"max_reconnect_backoff_ms":0,"policy":{"initial_backoff_ms":1000,"multiplier":1.6,"jitter":0.2,"max_backoff_ms":120000,"min_connect_timeout_ms":20000,"tolerance_ms":100},"retry_mode":`
	tests := []struct {
		name, in, wantErr string
	}{
		{name: "unknown mode", in: `{"event":"start","time":"2025-01-02T15:04:05Z","session":1,"peer":"127.0.0.1:1",` + params + `"sleep"}}`,
			wantErr: `line 1 at offset 0: retry mode "sleep": unknown`},
		{name: "restart without duration", in: `{"event":"start","time":"2025-01-02T15:04:05Z","session":1,"peer":"127.0.0.1:1",` + params + `"restart"}}`,
			wantErr: `line 1 at offset 0: retry mode "restart": restart needs`},
		{name: "restart in session 0", in: `{"event":"restart","time":"2025-01-02T15:04:05Z","session":0}`,
			wantErr: "line 1 at offset 0: restart event with session 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadRecord(strings.NewReader(tt.in + "\n"))
			if len(got) != 0 || err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ReadRecord = %d events, %v; want none and an error containing %q", len(got), err, tt.wantErr)
			}
		})
	}
}
