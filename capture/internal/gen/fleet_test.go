package main

import (
	"io"
	"math"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	auditattempt "github.com/backoff-audit/audit/attempt"
	auditbackoff "github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/capture"
	"github.com/backoff-audit/audit/infer"
)

// fleetRow is what the inference made of one schedule of a generated
// fleet: the policy that holds most of its chains, how many of them it
// holds, and its parameters (multiplier 1 for a flat schedule).
type fleetRow struct {
	Schedule   string
	InPolicy   int // chains of the schedule in the policy
	Peers      int // chains the policy holds
	Initial    float64
	Multiplier float64
	Jitter     float64
}

// sameRow holds a row to the accuracy docs/spec.md §8 promises on such a
// fleet: every chain of the schedule in one policy of the schedule's size,
// both within 5 %, the initial backoff within 10 %, the multiplier within
// 0.08, the jitter within 0.06.
func sameRow(want, got fleetRow) bool {
	near := func(w, g int) bool { return math.Abs(float64(g-w)) <= 0.05*float64(w) }
	return want.Schedule == got.Schedule && near(want.InPolicy, got.InPolicy) && near(want.Peers, got.Peers) &&
		math.Abs(got.Initial-want.Initial) <= 0.10*want.Initial &&
		math.Abs(got.Multiplier-want.Multiplier) <= 0.08 &&
		math.Abs(got.Jitter-want.Jitter) <= 0.06
}

// TestGeneratedFleet generates a fleet of a few thousand clients with known
// schedules, some of whose chains end early in a connection that succeeds
// or back off anew after one, reads it as `audit pcap` does, and requires
// every schedule with 50 chains or more to come out as one policy of the
// right size with its parameters (sameRow); the small group and the wild
// clients may be policies of their own or outliers.
func TestGeneratedFleet(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fleet.pcap")
	st, err := writeFleet(path, 3000, 1)
	if err != nil {
		t.Fatal(err)
	}
	pt, _, err := capture.ReadFiles([]string{path}, capture.Options{Port: retryPort}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cs := pt.Tracker(retryPort).Chains()
	p := auditbackoff.DefaultPolicy()
	mode, _ := cs.InferMode(p)
	schedule := make([]int, cs.Len())
	for i := range cs.Len() {
		addr, _, _ := cs.Times(i, nil)
		schedule[i] = fleetScheduleOf(addr)
	}
	fl := infer.Cluster(trackerChains{cs, p, auditbackoff.Run{Mode: mode}})

	var want, got []fleetRow
	for s, n := range st.peers {
		if n < 50 {
			continue
		}
		b := fleetSchedules[s].b
		m := b.multiplier
		if b.maxDelay <= b.base {
			m = 1
		}
		want = append(want, fleetRow{Schedule: fleetSchedules[s].name, InPolicy: n, Peers: n,
			Initial: float64(b.base) / 1e6, Multiplier: m, Jitter: b.jitter})
		in := map[int]int{}
		for i, j := range fl.Of {
			if schedule[i] == s && j != infer.NoPolicy {
				in[j]++
			}
		}
		row := fleetRow{Schedule: fleetSchedules[s].name}
		best := infer.NoPolicy
		for j, k := range in {
			if k > row.InPolicy || k == row.InPolicy && j < best {
				best, row.InPolicy = j, k
			}
		}
		if best != infer.NoPolicy {
			pol := fl.Policies[best]
			row.Peers, row.Initial, row.Multiplier, row.Jitter = pol.Peers, pol.Initial.Value, pol.Multiplier.Value, pol.Jitter.Value
		}
		got = append(got, row)
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(sameRow)); diff != "" {
		t.Errorf("policies of the generated fleet (-want +got):\n%s", diff)
	}
	for j, pol := range fl.Policies {
		t.Logf("policy %d: %d peers (%d also explained by another), %s, initial %.4g [%.4g, %.4g] ms, ×%.3g [%.3g, %.3g], jitter %.3g [%.3g, %.3g]",
			j, pol.Peers, pol.Ambiguous, pol.Shape, pol.Initial.Value, pol.Initial.Low, pol.Initial.High,
			pol.Multiplier.Value, pol.Multiplier.Low, pol.Multiplier.High, pol.Jitter.Value, pol.Jitter.Low, pol.Jitter.High)
	}
	t.Logf("%d outliers", len(fl.Outliers))
}

// trackerChains is a Tracker's chains as Cluster reads them, their fates
// read in run under p as audit pcap --infer reads them.
type trackerChains struct {
	cs  *auditattempt.Chains
	p   auditbackoff.Policy
	run auditbackoff.Run
}

func (c trackerChains) Len() int { return c.cs.Len() }

func (c trackerChains) Attempts(i int, buf []infer.Attempt) []infer.Attempt {
	_, times, _ := c.cs.Times(i, nil)
	return infer.AttemptsOf(c.p, c.run, times, c.cs.Endings(i, nil), buf)
}
