package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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
// server`, each with the C-core client. audit pcap must find the control
// port by itself, form the session from its Start and Stop, judge it by
// the cap Start sent, and agree with what the server's Stop answered.
func TestPcapControlPort(t *testing.T) {
	for _, name := range []string{"control-ccore", "control-audit"} {
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("..", "..", "testdata", name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			var run controlRun
			if err := json.Unmarshal(b, &run); err != nil {
				t.Fatal(err)
			}
			capPath := filepath.Join("..", "..", "testdata", name+".pcap")
			code, stdout, stderr := runAudit(t, "pcap", "--format=json", capPath)
			if code != 0 {
				t.Fatalf("exit %d, want 0\n%s\n%s", code, stdout, stderr)
			}
			var rep report.Report
			if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
				t.Fatalf("%v\n%s", err, stdout)
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
			code, text, stderr := runAudit(t, "pcap", fmt.Sprintf("--control_port=%d", run.ControlPort), capPath)
			want := fmt.Sprintf("server's control port %d (its Start and Stop calls", run.ControlPort)
			if code != 0 || !strings.Contains(text, want) || !strings.Contains(text, "kernel and server timestamps agree") {
				t.Errorf("--control_port: exit %d, want 0 and %q\n%s\n%s", code, want, text, stderr)
			}
		})
	}
}

// TestPcapControlPortErrors: a control port that is not one, and flags
// that do not go together, are input errors (exit 2).
func TestPcapControlPortErrors(t *testing.T) {
	capPath := filepath.Join("..", "..", "testdata", "control-ccore.pcap")
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"not a control port", []string{"--control_port=41427"}, "no connection to it in the capture calls"},
		{"with --record", []string{"--control_port=39799", "--record=x.jsonl"}, "--control_port with --record"},
		{"with --peer", []string{"--control_port=39799", "--peer=127.0.0.1"}, "--peer with --record or --control_port"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runAudit(t, append(append([]string{"pcap"}, tt.args...), capPath)...)
			if code != 2 || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr, tt.want)
			}
		})
	}
}
