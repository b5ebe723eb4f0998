package control_test

import (
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/control"
	"github.com/backoff-audit/audit/h2"
	"github.com/backoff-audit/audit/session"
)

// TestEventsOfRecording reads the sessions of a real grpc-go client's Start
// and Stop on `audit server` (testdata/h2/start-stop-gzip, as the decoder
// reports it): one session, from the end of Start's answer to the end of
// Stop's, its cap, its caller, Stop's answer.
func TestEventsOfRecording(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "testdata", "h2", "start-stop-gzip.golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var golden struct {
		Reports []*h2.Report `json:"reports"`
	}
	if err := json.Unmarshal(b, &golden); err != nil {
		t.Fatal(err)
	}
	if !control.IsControl(golden.Reports[0]) {
		t.Errorf("IsControl = false for a connection calling Start and Stop")
	}
	caller := netip.MustParseAddrPort("127.0.0.1:44964")
	start := time.Date(2026, 12, 1, 18, 13, 43, 118363302, time.UTC) // the answers' END_STREAM
	stop := time.Date(2026, 12, 1, 18, 13, 43, 119397550, time.UTC)
	want := []session.Session{{
		Number: 1, Start: start, Peer: caller, EndTime: stop, BackoffOnly: true,
		Params: session.SessionParams{MaxReconnectBackoffMS: 2000, Policy: backoff.ReferencePolicy(2000)},
		End: &session.SessionEnd{Cause: session.CauseStop, Verdict: backoff.Failed, BackoffMS: []int32{0},
			Reason:   "Stop answered passed=false; over its backoff_ms, interval 1: 0 ms is early (expected 1000 ms, window 700–1300 ms)",
			Attempts: 2, VerifiedAttempts: 2, Foreign: []session.PeerCount{}},
	}}
	got := control.ServerSessions(control.Calls(golden.Reports), backoff.RetryMode{})
	if diff := cmp.Diff(want, got, cmpopts.EquateComparable(netip.Addr{}, netip.AddrPort{})); diff != "" {
		t.Errorf("sessions (-want +got):\n%s", diff)
	}
}

// TestSessionsRules holds which calls begin and end sessions.
func TestSessionsRules(t *testing.T) {
	t0 := time.Date(2025, 1, 2, 15, 4, 5, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	info := &h2.ReconnectInfo{Passed: true, BackoffMs: []int32{1000}}
	tests := []struct {
		name  string
		calls []control.Call
		want  []session.EventKind
	}{
		{"start, stop", []control.Call{{Kind: control.Start, Time: at(0), Status: "OK"}, {Kind: control.Stop, Time: at(5), Status: "OK", Info: info}},
			[]session.EventKind{session.EventStart, session.EventStop}},
		{"a stop without a start ends nothing", []control.Call{{Kind: control.Stop, Time: at(0), Status: "OK", Info: info}}, nil},
		{"a refused stop ends nothing", []control.Call{{Kind: control.Start, Time: at(0), Status: "OK"}, {Kind: control.Stop, Time: at(5), Status: "FAILED_PRECONDITION"}},
			[]session.EventKind{session.EventStart}},
		{"a failed start begins nothing", []control.Call{{Kind: control.Start, Time: at(0), Status: "UNAVAILABLE"}, {Kind: control.Stop, Time: at(5), Status: "OK", Info: info}}, nil},
		{"a start the capture saw no answer to begins a session", []control.Call{{Kind: control.Start, Time: at(0)}},
			[]session.EventKind{session.EventStart}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []session.EventKind
			for _, e := range control.Events(tt.calls, backoff.RetryMode{}) {
				got = append(got, e.Event)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSessionsTakeWhatTheCallsDoNotSay: the retry mode and the connect
// timeout are the caller's to give; each session's policy is its Start's
// cap with that connect timeout, or the spec's without one.
func TestSessionsTakeWhatTheCallsDoNotSay(t *testing.T) {
	t0 := time.Date(2025, 1, 2, 15, 4, 5, 0, time.UTC)
	hang := backoff.RetryMode{Kind: backoff.ModeHang}
	start := control.Call{Kind: control.Start, Time: t0, Status: "OK", MaxMS: 2000}
	for _, tt := range []struct {
		name    string
		s       control.Sessions
		wantMin time.Duration
	}{
		{"given", control.Sessions{Mode: hang, MinConnectTimeout: 3 * time.Second}, 3 * time.Second},
		{"the spec's", control.Sessions{Mode: hang}, backoff.DefaultMinConnectTimeout},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e, ok := tt.s.Event(start)
			want := backoff.ReferencePolicy(2000)
			want.MinConnectTimeout = tt.wantMin
			if !ok || e.Params == nil || e.Params.Policy != want || e.Params.Mode != hang {
				t.Errorf("Event(Start) = %+v, %v; want a start with policy %v in %v", e.Params, ok, want, hang)
			}
		})
	}
}
