package auditrun

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/report"
)

// TestPcapFirstJittered reads testdata/control-ccore171.pcap: eight
// interop runs in one capture of the C-core client of gRPC 1.71 (the
// Google Cloud CLI's bundled Python), which jitters its first backoff,
// against `audit server` with a 2 s cap (testdata/make-control-capture.sh).
// Each run is a session of the control port. A session whose interval 1
// lies outside 1000 ± 100 ms passes the reference reading, fails the
// strict one, and carries the "first interval jittered" signature; one
// within it carries none. The C-core of Debian's python3-grpcio (1.51, in
// testdata/control-ccore.pcap) does not jitter its first backoff and
// carries none either.
func TestPcapFirstJittered(t *testing.T) {
	b, err := os.ReadFile(fixture("control-ccore171.json"))
	if err != nil {
		t.Fatal(err)
	}
	var run struct {
		Stops []struct {
			BackoffMS   []int32 `json:"backoff_ms"`
			GRPCVersion string  `json:"grpc_version"`
		} `json:"stops"`
	}
	if err := json.Unmarshal(b, &run); err != nil {
		t.Fatal(err)
	}
	jittered := 0
	for name, sessions := range map[string]int{"control-ccore171.pcap": len(run.Stops), "control-ccore.pcap": 1} {
		r := auditFiles(t, FilesConfig{JSON: true}, fixture(name))
		if r.verdict() != runPassed {
			t.Fatalf("%s: %s (%v); stderr: %s", name, r.verdict(), r.err, r.stderr)
		}
		var rep report.Report
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(rep.Sessions) != sessions || len(rep.Peers) != sessions {
			t.Fatalf("%s: %d sessions, %d chains; want %d of each", name, len(rep.Sessions), len(rep.Peers), sessions)
		}
		for i, p := range rep.Peers {
			if name == "control-ccore171.pcap" {
				if diff := cmp.Diff(run.Stops[i].BackoffMS, rep.Sessions[i].Server.BackoffMS); diff != "" || run.Stops[i].GRPCVersion != "1.71.0" {
					t.Errorf("session %d, gRPC %s: backoff_ms (-client's +report):\n%s", i+1, run.Stops[i].GRPCVersion, diff)
				}
			}
			iv := p.Intervals[0]
			var sig *backoff.Signature
			for _, s := range p.Signatures {
				if s.Name == backoff.SigFirstJittered {
					sig = &s
				}
			}
			outside := math.Abs(iv.MeasuredMS-1000) > 100
			switch {
			case !p.Passed:
				t.Errorf("%s session %d: failed the reference reading: %s", name, i+1, p.Reason)
			case outside != !p.Strict.Passed:
				t.Errorf("%s session %d: interval 1 %.1f ms, strict reading passed %v", name, i+1, iv.MeasuredMS, p.Strict.Passed)
			case outside && sig == nil:
				t.Errorf("%s session %d: interval 1 %.1f ms, no %q signature", name, i+1, iv.MeasuredMS, backoff.SigFirstJittered)
			case !outside && sig != nil:
				t.Errorf("%s session %d: interval 1 %.1f ms within 1000 ± 100 ms, yet %q", name, i+1, iv.MeasuredMS, sig.Detail)
			case sig != nil:
				want := fmt.Sprintf("interval 1 is %.0f ms", iv.MeasuredMS)
				if sig.Seen != "C-core, grpc-java" || !strings.Contains(sig.Detail, want) {
					t.Errorf("%s session %d: %+v; want seen in C-core and %q", name, i+1, *sig, want)
				}
				jittered++
			}
			t.Logf("%s session %d: interval 1 %.1f ms, signatures %d", name, i+1, iv.MeasuredMS, len(p.Signatures))
		}
	}
	if jittered == 0 {
		t.Error("no session of C-core 1.71 jittered its first backoff beyond 1000 ± 100 ms")
	}
}
