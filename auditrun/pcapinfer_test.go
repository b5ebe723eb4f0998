package auditrun

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/infer"
	"github.com/backoff-audit/audit/report"
)

// readReport decodes r's JSON report.
func readReport(t *testing.T, r filesRun) report.Report {
	t.Helper()
	var rep report.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v (%v)\n%s", err, r.err, r.stderr)
	}
	return rep
}

// TestPcapInfer reads the real capture of grpc-js and grpc-go clients at
// the default policy with --infer: the verdict is the one without it,
// every peer has its "inferred" reading, and the one policy they run is
// gRPC's default, its jitter compounding, the grpc-js chains that drift
// out of its windows named by the signature; the report is the same read
// whole or as it comes (--port), and --peer keeps a peer's reading and
// the policies of every peer; the text ends with the policies, and the
// page has their table. Sessions of a control port get theirs too.
func TestPcapInfer(t *testing.T) {
	file := fixture("real-compound.pcap.gz")
	without := auditFiles(t, FilesConfig{JSON: true}, file)
	whole := auditFiles(t, FilesConfig{JSON: true, Infer: true}, file)
	if without.verdict() != whole.verdict() || without.Verdict != whole.Verdict {
		t.Errorf("with --infer: %s (%q), without: %s (%q)", whole.verdict(), whole.Verdict, without.verdict(), without.Verdict)
	}
	rep := readReport(t, whole)
	streamed := auditFiles(t, FilesConfig{JSON: true, Infer: true, Port: rep.Port, PortSet: true}, file)
	if diff := cmp.Diff(whole.stdout, streamed.stdout); diff != "" {
		t.Errorf("--port %d: the report differs (-read whole +read as it comes):\n%s", rep.Port, diff)
	}
	for _, p := range rep.Peers {
		var in struct {
			Policy        int             `json:"policy"`
			AgainstPolicy json.RawMessage `json:"against_policy"`
		}
		if err := json.Unmarshal(p.Inferred, &in); err != nil || in.Policy != 1 || in.AgainstPolicy == nil {
			t.Errorf("peer %s: inferred %s (%v), want its reading in policy 1, judged against it", p.Peer, p.Inferred, err)
		}
	}
	one := rep.Peers[len(rep.Peers)/2]
	only := readReport(t, auditFiles(t, FilesConfig{JSON: true, Infer: true, Peers: []string{one.Peer.String()}}, file))
	if len(only.Peers) != 1 {
		t.Fatalf("--peer %s: %d peers", one.Peer, len(only.Peers))
	}
	if got := string(only.Peers[0].Inferred); got != string(one.Inferred) {
		t.Errorf("--peer %s: inferred %s; want %s", one.Peer, got, one.Inferred)
	}
	if diff := cmp.Diff(rep.Policies, only.Policies); diff != "" {
		t.Errorf("--peer %s: policies (-every peer +one):\n%s", one.Peer, diff)
	}
	ps := rep.Policies
	if ps == nil || len(ps.Policies) != 1 || len(ps.Outliers) != 0 {
		t.Fatalf("policies %+v: want one, no outlier", ps)
	}
	p := ps.Policies[0]
	if !p.Default || !p.Compounds || p.Peers != len(rep.Peers) {
		t.Errorf("policy %+v: want gRPC's default, compounding, all %d peers", p, len(rep.Peers))
	}
	named := 0
	for _, s := range p.Signatures {
		if s.Name == backoff.SigCompounding {
			named = s.Peers
		}
	}
	if named == 0 || named != p.Failed {
		t.Errorf("signatures %+v, %d failing: want every failing chain named %q", p.Signatures, p.Failed, backoff.SigCompounding)
	}

	page := filepath.Join(t.TempDir(), "report.html")
	text := auditFiles(t, FilesConfig{Infer: true, HTML: page}, file)
	if i := strings.Index(text.stdout, "\npolicies (--infer"); i < 0 || !strings.Contains(text.stdout[i:], p.Schedule()) {
		t.Errorf("text: no policies section naming %q:\n%s", p.Schedule(), text.stdout)
	}
	html, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(html), `<section id="policies">`) || !strings.Contains(string(html), "compounding jitter (grpc-js)") {
		t.Errorf("the page has no Policies table naming the compounding chains")
	}

	sessions := readReport(t, auditFiles(t, FilesConfig{JSON: true, Infer: true}, fixture("control-ccore171.pcap")))
	if len(sessions.Sessions) == 0 || sessions.Policies == nil || len(sessions.Policies.Policies) != 1 || sessions.Policies.Policies[0].Peers != len(sessions.Peers) {
		t.Errorf("sessions of the control port: policies %+v, want one of every session's chain", sessions.Policies)
	}
}

// chainList is chains as infer.Cluster reads them.
type chainList [][]infer.Attempt

func (cs chainList) Len() int                                          { return len(cs) }
func (cs chainList) Attempts(i int, _ []infer.Attempt) []infer.Attempt { return cs[i] }

// TestInferRealCaptures fits every chain of the committed real captures
// (testdata/README.md says which client and policy made each) and requires
// its inferred policy to be the one the client was configured with
// (infer.Params.Compare: within the tolerances of docs/spec.md §8.5), with
// at least the parameters the chain's length shows determined. The
// grpc-js chains of real-compound.pcap.gz, whose jitter compounds, must
// come out in a policy that reads as compounding. It holds for any run of
// the capture scripts, not only the committed ones.
func TestInferRealCaptures(t *testing.T) {
	ports := realFatesPorts(t)
	onPort := func(port uint16) FilesConfig { return FilesConfig{Port: port, PortSet: true} }
	cap2s := infer.Schedule{InitialMS: 1000, Multiplier: 1.6, Jitter: 0.2, MaxBackoffMS: 2000}
	cap1s := infer.Schedule{InitialMS: 1000, Multiplier: 1.6, Jitter: 0.2, MaxBackoffMS: 1000}
	tests := []struct {
		name       string
		file       string
		cfg        FilesConfig
		configured infer.Schedule
		// determined names the parameters every chain must show:
		// initial, multiplier, jitter, cap, connect timeout.
		determined []string
		// compounds: the policy of most chains reads as compounding.
		compounds bool
	}{
		{"grpc-go, 2 s cap, SYNs only", "real-grpc-go.pcap", FilesConfig{}, cap2s, []string{"initial", "jitter", "cap"}, false},
		{"grpc-js and grpc-go, the default", "real-compound.pcap.gz", FilesConfig{}, infer.GRPCDefault, []string{"initial", "multiplier", "jitter"}, true},
		{"C-core 1.51, 2 s cap, sessions of the control port", "control-ccore.pcap", FilesConfig{}, cap2s, []string{"initial"}, false},
		{"C-core 1.51 with audit server, 2 s cap", "control-audit.pcap", FilesConfig{}, cap2s, []string{"initial"}, false},
		{"C-core 1.71: interval 1 jittered, 2 s cap, 8 sessions", "control-ccore171.pcap", FilesConfig{}, cap2s, []string{"initial"}, false},
		{"grpc-go, 1 s cap, port closes", "real-fates.pcap", onPort(ports["close"]), cap1s, []string{"initial"}, false},
		{"grpc-go, 1 s cap, port refuses", "real-fates.pcap", onPort(ports["refuse"]), cap1s, []string{"initial"}, false},
		{"grpc-go, port hangs: its 20 s connect timeout", "real-fates.pcap", onPort(ports["hang"]), cap1s, []string{"connect timeout"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.JSON = true
			rep := readReport(t, auditFiles(t, tt.cfg, fixture(tt.file)))
			if len(rep.Peers) == 0 {
				t.Fatal("no chain in the report")
			}
			chains := make(chainList, len(rep.Peers))
			for i, pr := range rep.Peers {
				times, endings := make([]time.Time, len(pr.Attempts)), make([]backoff.Ending, len(pr.Attempts))
				for k, a := range pr.Attempts {
					times[k], endings[k] = a.Time, a.Ending
				}
				chains[i] = infer.AttemptsOf(rep.Policy, backoff.Run{Mode: rep.Mode}, times, endings, nil)
				f := infer.FitChain(chains[i])
				if diff := cmp.Diff([]string(nil), f.Compare(tt.configured)); diff != "" {
					t.Errorf("chain %d of %s: parameters not the configured %+v (-want +got):\n%s\n%s", i, pr.Peer, tt.configured, diff, describeFit(&f))
				}
				got := map[string]infer.Estimate{"initial": f.Initial, "multiplier": f.Multiplier, "jitter": f.Jitter,
					"cap": f.MaxBackoff.Estimate, "connect timeout": f.ConnectTimeout}
				for _, name := range tt.determined {
					if e := got[name]; !e.Determined() {
						t.Errorf("chain %d of %s: %s undetermined: %s", i, pr.Peer, name, e.Undetermined)
					}
				}
				if e := f.ConnectTimeout; e.Determined() && (e.Value < 18000 || e.Value > 22000) {
					t.Errorf("chain %d of %s: connect timeout %.0f ms, grpc-go's is 20 s", i, pr.Peer, e.Value)
				}
				t.Logf("%s %s", pr.Peer, describeFit(&f))
			}
			fl := infer.Cluster(chains)
			if len(fl.Policies) == 0 {
				if len(chains) == 1 && infer.FitChain(chains[0]).Intervals == 0 {
					return // one chain, without an interval: nothing to place
				}
				t.Fatalf("no policy in %d chains", len(chains))
			}
			pol := &fl.Policies[0]
			t.Logf("policy of %d chains: %s, initial %.4g [%.4g, %.4g] (interval 1 spreads %.3f), multiplier %v, jitter %v, step correlation %.2f from %d pairs, %d outliers",
				pol.Peers, pol.Shape, pol.Initial.Value, pol.Initial.Low, pol.Initial.High, pol.FirstJitter, pol.Multiplier, pol.Jitter, pol.StepCorrelation, pol.Steps, len(fl.Outliers))
			if pol.Compounds != tt.compounds {
				t.Errorf("the policy of the most chains compounds: %v, want %v (step correlation %.2f from %d pairs)",
					pol.Compounds, tt.compounds, pol.StepCorrelation, pol.Steps)
			}
		})
	}
}

// describeFit is a fit in one line, for failures and -v.
func describeFit(f *infer.Fit) string {
	var b strings.Builder
	b.WriteString(string(f.Shape))
	for _, c := range []struct {
		name string
		e    infer.Estimate
	}{{"initial", f.Initial}, {"×", f.Multiplier}, {"jitter", f.Jitter}, {"cap", f.MaxBackoff.Estimate}, {"connect timeout", f.ConnectTimeout}} {
		b.WriteString(", " + c.name + " ")
		switch {
		case c.name == "cap" && !f.MaxBackoff.Reached && c.e.Determined():
			fmt.Fprintf(&b, "never reached (at least %.4g)", f.MaxBackoff.Above)
			continue
		case !c.e.Determined():
			b.WriteString("undetermined (" + c.e.Undetermined + ")")
			continue
		}
		fmt.Fprintf(&b, "%.4g [%.4g, %.4g]", c.e.Value, c.e.Low, c.e.High)
	}
	return b.String()
}
