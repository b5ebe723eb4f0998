package auditrun

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/report"
	"github.com/backoff-audit/audit/session"
)

// recordRun is one session as a capture and a record file both hold it:
// the client at 127.0.0.1 connecting at the given gaps after the first.
type recordRun struct {
	maxMS     int32
	gaps      []time.Duration
	retryPort uint16
	// serverPassed and serverReason are what the record's Stop says.
	serverPassed bool
	serverReason string
	// day shifts the record's times, for a record of another run.
	day time.Duration
	// uncaptured drops this attempt (from 1) from the capture only.
	uncaptured int
}

var recordEpoch = time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)

// write writes the capture and the record into dir and returns their paths.
func (r recordRun) write(t *testing.T, dir string) (capPath, recPath string) {
	t.Helper()
	client := netip.MustParseAddr("127.0.0.1")
	dst := netip.AddrPortFrom(client, 50052)
	start := recordEpoch.Add(-time.Second)
	times := []time.Time{recordEpoch}
	for _, g := range r.gaps {
		times = append(times, times[len(times)-1].Add(g))
	}
	var syns []attempt.SYN
	var rec bytes.Buffer
	p := backoff.ReferencePolicy(r.maxMS)
	ev := func(e session.RecordEvent) {
		e.Time = e.Time.Add(r.day)
		if err := session.WriteRecordEvent(&rec, e); err != nil {
			t.Fatal(err)
		}
	}
	ev(session.RecordEvent{Event: session.EventStart, Time: start, Session: 1, RetryPort: r.retryPort,
		Peer:   netip.AddrPortFrom(client, 40000),
		Params: &session.SessionParams{MaxReconnectBackoffMS: r.maxMS, Policy: p}})
	for i, tm := range times {
		src := netip.AddrPortFrom(client, uint16(41000+i))
		if i+1 != r.uncaptured {
			syns = append(syns, attempt.SYN{Time: tm, Src: src, Dst: dst, Seq: uint32(1000 + i)})
		}
		// The server stamps each accept 200 µs after its SYN.
		ev(session.RecordEvent{Event: session.EventAccept, Time: tm.Add(200 * time.Microsecond), Session: 1, Peer: src})
	}
	var verdict backoff.Verdict = backoff.Passed
	if !r.serverPassed {
		verdict = backoff.Failed
	}
	ev(session.RecordEvent{Event: session.EventStop, Time: times[len(times)-1].Add(time.Second), Session: 1,
		Peer: netip.AddrPortFrom(client, 40000),
		End: &session.SessionEnd{Cause: session.CauseStop, Verdict: verdict, Passed: r.serverPassed, Reason: r.serverReason,
			Attempts: len(times), VerifiedPeer: client, VerifiedReason: session.VerifiedStartPeer, VerifiedAttempts: len(times)}})
	capPath, recPath = filepath.Join(dir, "run.pcap"), filepath.Join(dir, "run.record.jsonl")
	writeSYNs(t, capPath, syns)
	if err := os.WriteFile(recPath, rec.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return capPath, recPath
}

// Gaps of a client that honours a 3 s cap: 1000, 1600, 2560, then 3000.
var capped3s = []time.Duration{1000 * time.Millisecond, 1600 * time.Millisecond, 2560 * time.Millisecond,
	3000 * time.Millisecond, 3125 * time.Millisecond, 2900 * time.Millisecond}

func TestPcapRecordPolicy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		run     recordRun
		cfg     FilesConfig
		verdict string
		// want are texts stdout must hold, wantFailure how the first
		// failed session failed.
		want        []string
		wantFailure string
	}{
		{
			name:    "each session by its own cap",
			run:     recordRun{maxMS: 3000, gaps: capped3s, serverPassed: true},
			verdict: runPassed,
			want: []string{"policy: each session's own, from its Start line in the record",
				"kernel verdict, from SYN timestamps (policy initial 1s ×1.6 ±20% cap 3s",
				"PASS: 1 peer: 1 passed"},
		},
		{
			name:        "a policy flag overrides the record and says so",
			run:         recordRun{maxMS: 3000, gaps: capped3s, serverPassed: true},
			cfg:         capped(2 * time.Minute),
			verdict:     runFailed,
			want:        []string{"from the command line; it overrides each session's Start line", "interval 4"},
			wantFailure: "session 1: kernel verdict failed, server passed: interval 4: 3000 ms is early",
		},
		{
			name: "the server failed where the kernel passed",
			run: recordRun{maxMS: 3000, gaps: capped3s, serverPassed: false,
				serverReason: "interval 5: 3301 ms is late (expected 3000 ms, window 2300–3700 ms)"},
			verdict:     runFailed,
			wantFailure: "session 1: server verdict failed, kernel passed: interval 5: 3301 ms is late",
		},
		{
			name:    "offline, a missing SYN is not in the capture",
			run:     recordRun{maxMS: 3000, gaps: capped3s, serverPassed: true, uncaptured: 3},
			verdict: runFailed,
			want:    []string{"server only: 127.0.0.1:41002 at 2026-03-04T10:00:02.600200000Z: not in the capture (no SYN from this ip and port is in the capture)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			capPath, recPath := tt.run.write(t, t.TempDir())
			tt.cfg.Record = recPath
			r := auditFiles(t, tt.cfg, capPath)
			if r.verdict() != tt.verdict {
				t.Fatalf("%s (%v); want %s\n%s\n%s", r.verdict(), r.err, tt.verdict, r.stdout, r.stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, r.stdout)
				}
			}
			if strings.Contains(r.stdout+r.stderr, "libpcap") {
				t.Errorf("an offline report speaks of libpcap:\n%s\n%s", r.stdout, r.stderr)
			}
			if tt.wantFailure != "" && (r.Failed != 1 || r.Sessions != 1 || !strings.HasPrefix(r.FirstFailure, tt.wantFailure)) {
				t.Errorf("%d of %d sessions failed, the first %q; want 1 of 1, %q…", r.Failed, r.Sessions, r.FirstFailure, tt.wantFailure)
			}
		})
	}
}

// A record that does not cover the capture is an input error in one line;
// a session outside it is named and left out of the verdict.
func TestPcapRecordCoverage(t *testing.T) {
	t.Parallel()
	t.Run("another day", func(t *testing.T) {
		capPath, recPath := recordRun{gaps: capped3s[:2], serverPassed: true, day: 24 * time.Hour}.write(t, t.TempDir())
		r := auditFiles(t, FilesConfig{Record: recPath}, capPath)
		if r.err == nil || r.stdout != "" || r.stderr != "" || strings.Contains(r.err.Error(), "\n") {
			t.Fatalf("error %v, stdout %q, stderr %q; want an error in one line, and nothing printed", r.err, r.stdout, r.stderr)
		}
		for _, w := range []string{"does not cover the capture", "2026-03-05T09:59:59", "2026-03-04T10:00:00"} {
			if !strings.Contains(r.err.Error(), w) {
				t.Errorf("error %q lacks %q", r.err, w)
			}
		}
	})
	t.Run("another port", func(t *testing.T) {
		capPath, recPath := recordRun{gaps: capped3s[:2], serverPassed: true, retryPort: 50053}.write(t, t.TempDir())
		r := auditFiles(t, FilesConfig{Record: recPath}, capPath)
		if r.err == nil || !strings.Contains(r.err.Error(), "on retry port 50053") || !strings.Contains(r.err.Error(), "port 50052") {
			t.Fatalf("error %v; want one naming both ports", r.err)
		}
	})
	t.Run("one session outside", func(t *testing.T) {
		dir := t.TempDir()
		capPath, recPath := recordRun{maxMS: 3000, gaps: capped3s, serverPassed: true}.write(t, dir)
		// A failed session of another run, a day earlier, appended.
		_, other := recordRun{gaps: capped3s[:2], day: -24 * time.Hour, serverReason: "interval 1: 5 ms is early"}.write(t, t.TempDir())
		b, err := os.ReadFile(other)
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(recPath, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.Write(b)
		f.Close()
		r := auditFiles(t, FilesConfig{Record: recPath}, capPath)
		if r.verdict() != runPassed {
			t.Fatalf("%s (%v); want passed: the session outside is not judged\n%s\n%s", r.verdict(), r.err, r.stdout, r.stderr)
		}
		if !strings.Contains(r.stdout, "outside the capture, not judged: session 1 (2026-03-03T09:59:59") ||
			!strings.Contains(r.stderr, "1 session of "+recPath+" lie outside the capture") {
			t.Errorf("the session outside is not named:\n%s\n%s", r.stdout, r.stderr)
		}
	})
}

// A record torn at its end (the writer hit a full disk) is read up to its
// last whole line, with a warning; the session whose end is lost is open
// until the end of the record and has no server verdict.
func TestPcapRecordTorn(t *testing.T) {
	t.Parallel()
	capPath, recPath := recordRun{maxMS: 3000, gaps: capped3s, serverPassed: true}.write(t, t.TempDir())
	b, err := os.ReadFile(recPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(recPath, b[:len(b)-5], 0o644); err != nil {
		t.Fatal(err)
	}
	r := auditFiles(t, FilesConfig{Record: recPath}, capPath)
	if r.verdict() != runFailed {
		t.Fatalf("%s (%v); want failed (no server verdict)\n%s\n%s", r.verdict(), r.err, r.stdout, r.stderr)
	}
	for _, w := range []string{"torn last line", "the lines before it are used"} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
		}
	}
	if n := strings.Count(r.stderr+r.FirstFailure, recPath); n != 1 {
		t.Errorf("stderr and the failure name the record %d times; want once, in the warning:\n%s\n%s", n, r.stderr, r.FirstFailure)
	}
	if !strings.Contains(r.stdout, "ended by end of the record") || !strings.Contains(r.FirstFailure, "the session did not end with Stop") {
		t.Errorf("the open session is not explained:\n%s\n%s", r.stdout, r.FirstFailure)
	}
}

// The committed real capture and its server record (testdata/README.md)
// cross-check offline without privileges.
func TestPcapServerLog(t *testing.T) {
	t.Parallel()
	const capFile, record = "../testdata/real-grpc-go.pcap", "../testdata/real-grpc-go.record.jsonl"
	r := auditFiles(t, FilesConfig{JSON: true, Record: record}, capFile)
	var rep struct {
		Peers    []report.PeerReport    `json:"peers"`
		Sessions []report.RecordSession `json:"sessions"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || len(rep.Sessions) != 1 || len(rep.Peers) != 1 {
		t.Fatalf("%v: %d sessions, %d peers\n%s\n%s", err, len(rep.Sessions), len(rep.Peers), r.stdout, r.stderr)
	}
	s := rep.Sessions[0]
	cc := s.CrossCheck
	if s.Server == nil || !cc.Agree || cc.KernelPassed != s.Server.Passed || len(cc.Pairs) != len(rep.Peers[0].Attempts) {
		t.Errorf("server %+v, agree %v, kernel passed %v, %d pairs for %d attempts; want one to one and agreeing",
			s.Server, cc.Agree, cc.KernelPassed, len(cc.Pairs), len(rep.Peers[0].Attempts))
	}
	for i, p := range cc.Pairs {
		if a := rep.Peers[0].Attempts[i]; p.Delay < 0 || !p.KernelTime.Equal(a.Time) || p.SrcPort != a.SrcPort {
			t.Errorf("pair %d: %+v; attempt %+v", i+1, p, a)
		}
	}
	// Text: the report, then the session's cross-check.
	text := auditFiles(t, FilesConfig{Record: record}, capFile).stdout
	if !strings.Contains(text, "=== session 1") || !strings.Contains(text, "kernel and server timestamps agree") {
		t.Errorf("text output lacks the session's cross-check:\n%s", text)
	}
}
