package main

import (
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
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
		name     string
		run      recordRun
		args     []string
		wantCode int
		// want are texts stdout must hold, wantErr the last stderr line.
		want    []string
		wantErr string
	}{
		{
			name:     "each session by its own cap",
			run:      recordRun{maxMS: 3000, gaps: capped3s, serverPassed: true},
			wantCode: exitOK,
			want: []string{"policy: each session's own, from its Start line in the record",
				"kernel verdict, from SYN timestamps (policy initial 1s ×1.6 ±20% cap 3s",
				"PASS: 1 peer: 1 passed"},
		},
		{
			name:     "a policy flag overrides the record and says so",
			run:      recordRun{maxMS: 3000, gaps: capped3s, serverPassed: true},
			args:     []string{"--max-backoff=2m"},
			wantCode: exitFail,
			want:     []string{"from the command line; it overrides each session's Start line", "interval 4"},
			wantErr:  "audit: 1 of 1 session failed; session 1: kernel verdict failed, server passed: interval 4: 3000 ms is early",
		},
		{
			name: "the server failed where the kernel passed",
			run: recordRun{maxMS: 3000, gaps: capped3s, serverPassed: false,
				serverReason: "interval 5: 3301 ms is late (expected 3000 ms, window 2300–3700 ms)"},
			wantCode: exitFail,
			wantErr:  "audit: 1 of 1 session failed; session 1: server verdict failed, kernel passed: interval 5: 3301 ms is late",
		},
		{
			name:     "offline, a missing SYN is not in the capture",
			run:      recordRun{maxMS: 3000, gaps: capped3s, serverPassed: true, uncaptured: 3},
			wantCode: exitFail,
			want:     []string{"server only: 127.0.0.1:41002 at 2026-03-04T10:00:02.600200000Z: not in the capture (no SYN from this ip and port is in the capture)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			capPath, recPath := tt.run.write(t, t.TempDir())
			args := append([]string{"pcap", "--server-log=" + recPath}, tt.args...)
			code, stdout, stderr := runAudit(t, append(args, capPath)...)
			if code != tt.wantCode {
				t.Fatalf("exit %d; want %d\n%s\n%s", code, tt.wantCode, stdout, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout)
				}
			}
			if strings.Contains(stdout+stderr, "libpcap") {
				t.Errorf("an offline report speaks of libpcap:\n%s\n%s", stdout, stderr)
			}
			if tt.wantErr != "" && !strings.HasPrefix(lastLine(stderr), tt.wantErr) {
				t.Errorf("last stderr line %q; want it to start %q", lastLine(stderr), tt.wantErr)
			}
		})
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// A record that does not cover the capture is an input error in one line;
// a session outside it is named and left out of the verdict.
func TestPcapRecordCoverage(t *testing.T) {
	t.Parallel()
	t.Run("another day", func(t *testing.T) {
		capPath, recPath := recordRun{gaps: capped3s[:2], serverPassed: true, day: 24 * time.Hour}.write(t, t.TempDir())
		code, stdout, stderr := runAudit(t, "pcap", "--server-log="+recPath, capPath)
		if code != exitUsage || stdout != "" || strings.Count(stderr, "\n") != 1 {
			t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 and one line", code, stdout, stderr)
		}
		for _, w := range []string{"does not cover the capture", "2026-03-05T09:59:59", "2026-03-04T10:00:00"} {
			if !strings.Contains(stderr, w) {
				t.Errorf("stderr %q lacks %q", stderr, w)
			}
		}
	})
	t.Run("another port", func(t *testing.T) {
		capPath, recPath := recordRun{gaps: capped3s[:2], serverPassed: true, retryPort: 50053}.write(t, t.TempDir())
		code, _, stderr := runAudit(t, "pcap", "--server-log="+recPath, capPath)
		if code != exitUsage || !strings.Contains(stderr, "on retry port 50053") || !strings.Contains(stderr, "port 50052") {
			t.Fatalf("exit %d, stderr %q; want exit 2 naming both ports", code, stderr)
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
		code, stdout, stderr := runAudit(t, "pcap", "--server-log="+recPath, capPath)
		if code != exitOK {
			t.Fatalf("exit %d; want 0: the session outside is not judged\n%s\n%s", code, stdout, stderr)
		}
		if !strings.Contains(stdout, "outside the capture, not judged: session 1 (2026-03-03T09:59:59") ||
			!strings.Contains(stderr, "1 session of "+recPath+" lie outside the capture") {
			t.Errorf("the session outside is not named:\n%s\n%s", stdout, stderr)
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
	code, stdout, stderr := runAudit(t, "pcap", "--record="+recPath, capPath)
	if code != exitFail {
		t.Fatalf("exit %d; want 1 (no server verdict)\n%s\n%s", code, stdout, stderr)
	}
	for _, w := range []string{"torn last line", "the lines before it are used"} {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, stderr)
		}
	}
	if n := strings.Count(stderr, recPath); n != 1 {
		t.Errorf("stderr names the record %d times; want once, in the warning:\n%s", n, stderr)
	}
	if !strings.Contains(stdout, "ended by end of the record") || !strings.Contains(lastLine(stderr), "the session did not end with Stop") {
		t.Errorf("the open session is not explained:\n%s\n%s", stdout, stderr)
	}
}
