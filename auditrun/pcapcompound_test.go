package auditrun

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/report"
)

// TestPcapCompoundingJitter reads testdata/real-compound.pcap.gz: grpc-js
// and grpc-go clients, each from its own loopback address, reconnecting at
// once to one retry port that closes every connection, with the spec's
// default backoff for about 46 s (testdata/make-compound-capture.sh, which
// also writes which address ran which stack to real-compound.peers).
// grpc-js draws each backoff from the previous jittered one (docs/spec.md
// §4.2), so some of its chains drift out of their windows: those carry the
// compounding-jitter signature, naming the first interval that failed.
// grpc-go, the control group, draws from the expected value and carries
// neither that signature nor a jittered first interval. The test holds for
// any run of the script, not only the committed one.
func TestPcapCompoundingJitter(t *testing.T) {
	b, err := os.ReadFile(fixture("real-compound.peers"))
	if err != nil {
		t.Fatal(err)
	}
	stacks := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		addr, stack, _ := strings.Cut(line, " ")
		stacks[addr] = stack
	}
	r := auditFiles(t, FilesConfig{JSON: true}, fixture("real-compound.pcap.gz"))
	var rep report.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v (%v)\n%s", err, r.err, r.stderr)
	}
	if len(rep.Peers) != len(stacks) {
		t.Fatalf("%d peers, want one per client of real-compound.peers (%d)", len(rep.Peers), len(stacks))
	}
	matched := map[string]int{}
	for _, p := range rep.Peers {
		stack := stacks[p.Peer.String()]
		if stack == "" {
			t.Errorf("peer %s: not in real-compound.peers", p.Peer)
			continue
		}
		// Six intervals at least before the cap: enough for a drift.
		if len(p.Intervals) < 6 {
			t.Errorf("peer %s (%s): %d intervals, want at least 6", p.Peer, stack, len(p.Intervals))
		}
		sigs := map[string]backoff.Signature{}
		for _, s := range p.Signatures {
			sigs[s.Name] = s
		}
		comp, ok := sigs[backoff.SigCompounding]
		switch {
		case ok && stack != "grpc-js":
			t.Errorf("peer %s (%s): %q; only grpc-js compounds its jitter", p.Peer, stack, comp.Detail)
		case ok && p.Passed:
			t.Errorf("peer %s passed and carries %q: a chain that stayed in its windows did not drift", p.Peer, comp.Detail)
		case ok:
			k := firstFailed(p.Intervals)
			want := fmt.Sprintf("interval %d drifted to %.0f ms (window %.0f–%.0f ms)",
				k.K, k.MeasuredMS, k.MinMS, k.MaxMS)
			if comp.Seen != "grpc-js" || !strings.Contains(comp.Detail, want) {
				t.Errorf("peer %s: %+v; want seen in grpc-js and %q", p.Peer, comp, want)
			}
			matched[stack]++
		}
		if s, ok := sigs[backoff.SigFirstJittered]; ok && stack == "grpc-go" {
			t.Errorf("peer %s (grpc-go): %q; grpc-go's first backoff is exactly 1 s, from the attempt's end", p.Peer, s.Detail)
		}
		// grpc-go sleeps from the attempt's end: a first connection the
		// server held past the tolerance fails the strict reading, and
		// the signature says why.
		if _, ok := sigs[backoff.SigFromEnd]; (stack == "grpc-go" && p.Strict.Verdict != backoff.Passed) != ok {
			t.Errorf("peer %s (%s): strict %s, signatures %v; the strict failures of grpc-go, and only they, are %q",
				p.Peer, stack, p.Strict.Verdict, p.Signatures, backoff.SigFromEnd)
		}
		t.Logf("%s %-7s passed %-5v max drift %+6.1f %% signatures %d", p.Peer, stack, p.Passed, maxDrift(p.Intervals), len(p.Signatures))
	}
	if matched["grpc-js"] == 0 {
		t.Errorf("no grpc-js chain carries %q", backoff.SigCompounding)
	}
}

func firstFailed(ivs []backoff.Interval) backoff.Interval {
	for _, iv := range ivs {
		if !iv.OK {
			return iv
		}
	}
	return backoff.Interval{}
}

func maxDrift(ivs []backoff.Interval) float64 {
	var d float64
	for _, iv := range ivs {
		if abs := max(iv.JitterPct, -iv.JitterPct); abs > max(d, -d) {
			d = iv.JitterPct
		}
	}
	return d
}
