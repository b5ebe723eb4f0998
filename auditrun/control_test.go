package auditrun

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/report"
)

// controlRun is what testdata/make-control-capture.sh wrote beside each
// capture: the ports, and what the server's Stop answered.
type controlRun struct {
	ControlPort uint16 `json:"control_port"`
	RetryPort   uint16 `json:"retry_port"`
	MaxMS       int32  `json:"max_reconnect_backoff_ms"`
	Stop        struct {
		Passed    bool    `json:"passed"`
		BackoffMS []int32 `json:"backoff_ms"`
	} `json:"stop"`
}

// TestPcapControlPort reads captures of both ports of a real interop run
// with no record file: a third-party server (Python, C-core) and `audit
// server`, each with the C-core client. The audit must find the control
// port by itself, form the session from its Start and Stop, judge it by
// the cap Start sent, and agree with what the server's Stop answered.
func TestPcapControlPort(t *testing.T) {
	for _, name := range []string{"control-ccore", "control-audit"} {
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(fixture(name + ".json"))
			if err != nil {
				t.Fatal(err)
			}
			var run controlRun
			if err := json.Unmarshal(b, &run); err != nil {
				t.Fatal(err)
			}
			capPath := fixture(name + ".pcap")
			r := auditFiles(t, FilesConfig{JSON: true}, capPath)
			if r.verdict() != runPassed {
				t.Fatalf("%s (%v), want passed\n%s\n%s", r.verdict(), r.err, r.stdout, r.stderr)
			}
			var rep report.Report
			if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
				t.Fatalf("%v\n%s", err, r.stdout)
			}
			if rep.Record == nil || rep.Record.ControlPort != run.ControlPort || rep.Port != run.RetryPort {
				t.Fatalf("record %+v, port %d; want control port %d, retry port %d", rep.Record, rep.Port, run.ControlPort, run.RetryPort)
			}
			if len(rep.Sessions) != 1 {
				t.Fatalf("%d sessions, want 1", len(rep.Sessions))
			}
			s := rep.Sessions[0]
			if s.Session.MaxMS != run.MaxMS || s.Policy.MaxDelay != backoff.ReferencePolicy(run.MaxMS).MaxDelay {
				t.Errorf("session cap %d ms, policy %v; want the Start's %d ms", s.Session.MaxMS, s.Policy, run.MaxMS)
			}
			if s.Server == nil || s.Server.Passed != run.Stop.Passed {
				t.Fatalf("server verdict %+v, want passed=%v", s.Server, run.Stop.Passed)
			}
			if diff := cmp.Diff(run.Stop.BackoffMS, s.Server.BackoffMS); diff != "" {
				t.Errorf("backoff_ms (-server's answer +report):\n%s", diff)
			}
			cc := s.CrossCheck
			if !cc.Agree || !cc.KernelPassed || cc.ServerPassed != run.Stop.Passed || len(cc.Intervals) != len(run.Stop.BackoffMS) {
				t.Errorf("cross-check agree %v, kernel passed %v, server passed %v, %d intervals; want agreement over %d",
					cc.Agree, cc.KernelPassed, cc.ServerPassed, len(cc.Intervals), len(run.Stop.BackoffMS))
			}
			for _, iv := range cc.Intervals {
				if iv.ServerMS != run.Stop.BackoffMS[iv.K-1] || iv.ShiftMS < -1 || iv.ShiftMS > 1 {
					t.Errorf("interval %+v: server %d ms; on loopback the shift is within 1 ms", iv, run.Stop.BackoffMS[iv.K-1])
				}
			}

			// The same with the control port named, as text.
			r = auditFiles(t, FilesConfig{Control: run.ControlPort}, capPath)
			want := fmt.Sprintf("server's control port %d (its Start and Stop calls", run.ControlPort)
			if r.verdict() != runPassed || !strings.Contains(r.stdout, want) || !strings.Contains(r.stdout, "kernel and server timestamps agree") {
				t.Errorf("control port %d: %s (%v), want passed and %q\n%s\n%s", run.ControlPort, r.verdict(), r.err, want, r.stdout, r.stderr)
			}
		})
	}
}

// TestPcapControlPortErrors: a control port that is not one, and fields
// that do not go together, are input errors.
func TestPcapControlPortErrors(t *testing.T) {
	capPath := fixture("control-ccore.pcap")
	for _, tt := range []struct {
		name string
		cfg  FilesConfig
		want string
	}{
		{"not a control port", FilesConfig{Control: 41427}, "no connection to it in the capture calls"},
		{"with a record", FilesConfig{Control: 39799, Record: "x.jsonl"}, "Control 39799: not with Record"},
		{"with a peer", FilesConfig{Control: 39799, Peers: []string{"127.0.0.1"}}, "Peers: not with Record or Control"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := auditFiles(t, tt.cfg, capPath)
			if r.err == nil || !strings.Contains(r.err.Error(), tt.want) {
				t.Errorf("error %v; want one saying %q", r.err, tt.want)
			}
		})
	}
}
