package auditrun

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/report"
)

// The committed captures of testdata/make-restart-capture.sh: a grpc-go
// client READY on a healthy server that goes down for 4 s and comes back
// (both ports, whole segments, with the server's record), and the client's
// side only of a close-mode run (a tap that misses the server's answers).
const (
	restartCapture = "real-restart.pcap"
	restartRecord  = "real-restart.record.jsonl"
	oneSided       = "real-onesided.pcap"
)

// decodeReport reads a JSON document.
func decodeReport(t *testing.T, doc string) report.Report {
	t.Helper()
	var r report.Report
	if err := json.Unmarshal([]byte(doc), &r); err != nil {
		t.Fatalf("JSON: %v\n%s", err, doc)
	}
	return r
}

// TestPcapRealRestart: every reading of the restart passes it. The first
// connection's success resets the backoff (interval 1 "reset"), the
// refused attempts back off by the spec, the client is READY again after
// the outage; the server saw only the attempts its port accepted, which is
// one summary line and never a DISAGREE, and its record gives the
// recovery. Bare, the capture's fates say outage.
func TestPcapRealRestart(t *testing.T) {
	p := backoff.DefaultPolicy()
	p.MaxDelay = 2 * time.Second // the run's cap: its Start sent 2000 ms
	// The capture holds both ports: the kernel's reading alone is of the
	// retry port the control port's reading finds.
	port := decodeReport(t, auditFiles(t, FilesConfig{JSON: true}, fixture(restartCapture)).stdout).Port
	readings := []struct {
		name  string
		cfg   FilesConfig
		texts []string // each in the text report
	}{
		{"the kernel alone", FilesConfig{Policy: p, PolicySet: true, Port: port, PortSet: true}, []string{"retry mode outage (inferred from the fates)"}},
		{"the control port's sessions", FilesConfig{Policy: backoff.DefaultPolicy()},
			[]string{"server verdict (Stop): passed=false (not judged)", "the server saw 2 of the 5 attempts of 127.0.0.1: 3 refused while its port was down"}},
		{"the record", FilesConfig{Policy: backoff.DefaultPolicy(), Record: fixture(restartRecord)},
			[]string{"the server saw 2 of the 5 attempts of 127.0.0.1: 3 refused while its port was down", "recovery: attempt 5 came", ": ok; READY"}},
	}
	for _, rd := range readings {
		t.Run(rd.name, func(t *testing.T) {
			text := auditFiles(t, rd.cfg, fixture(restartCapture))
			if v := text.verdict(); v != runPassed {
				t.Fatalf("%s (%v):\n%s%s", v, text.err, text.stdout, text.stderr)
			}
			for _, want := range rd.texts {
				if !strings.Contains(text.stdout, want) {
					t.Errorf("text lacks %q:\n%s", want, text.stdout)
				}
			}
			if strings.Contains(text.stdout, "DISAGREE") {
				t.Errorf("a DISAGREE where kernel and server saw the same attempts:\n%s", text.stdout)
			}
			cfg := rd.cfg
			cfg.JSON = true
			r := decodeReport(t, auditFiles(t, cfg, fixture(restartCapture)).stdout)
			if len(r.Peers) != 1 {
				t.Fatalf("%d peers, want the one client", len(r.Peers))
			}
			pr := r.Peers[0]
			var outcomes []string
			for _, iv := range pr.Intervals {
				outcomes = append(outcomes, string(iv.Outcome))
			}
			if len(pr.Intervals) != 4 || pr.Intervals[0].Term != backoff.TermReset || !pr.Passed {
				t.Errorf("intervals %v (first term %q), passed %v; want 4, the first reset by the READY connection, passed", outcomes, pr.Intervals[0].Term, pr.Passed)
			}
			ready := 0
			for _, s := range pr.States {
				if s.State == "READY" {
					ready++
				}
			}
			if ready != 2 {
				t.Errorf("states %+v: READY %d times, want before and after the outage", pr.States, ready)
			}
			if !r.Mode.Is(backoff.ModeOutage) {
				t.Errorf("retry mode %v, want outage", r.Mode)
			}
		})
	}
}

// TestPcapOneSided: a capture of the client's side alone holds no answer;
// each attempt ended where the next SYN came, and is judged by the backoff
// window, not as a hang, and the report says how many answers it has.
func TestPcapOneSided(t *testing.T) {
	p := backoff.DefaultPolicy()
	p.MaxDelay = 2 * time.Second
	text := auditFiles(t, FilesConfig{Policy: p, PolicySet: true}, fixture(oneSided))
	if v := text.verdict(); v != runPassed {
		t.Fatalf("%s (%v):\n%s%s", v, text.err, text.stdout, text.stderr)
	}
	const want = "answers captured for 0 of 5 attempts; the capture holds no answer and no SYN retransmission for the other 5"
	if !strings.Contains(text.stdout, want) {
		t.Errorf("text lacks %q:\n%s", want, text.stdout)
	}
	r := decodeReport(t, auditFiles(t, FilesConfig{Policy: p, PolicySet: true, JSON: true}, fixture(oneSided)).stdout)
	if len(r.Peers) != 1 || r.Peers[0].Unseen != 5 || len(r.Peers[0].Intervals) != 4 {
		t.Fatalf("peers %+v; want one, 5 attempts unseen, 4 intervals", r.Peers)
	}
	for _, iv := range r.Peers[0].Intervals {
		if iv.Term != "" {
			t.Errorf("interval %d: term %q; an unanswered attempt the next SYN ended is judged by the backoff window", iv.K, iv.Term)
		}
	}
	if _, inferred := r.Mode, r.ModeInferred; inferred {
		t.Errorf("retry mode %v inferred from a capture without answers", r.Mode)
	}
}
