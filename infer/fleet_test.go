package infer

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// group is a share of a test fleet: n chains of one schedule, or, without
// one, chains whose gaps are drawn anyhow between 50 ms and 5 s.
type group struct {
	s    *schedule
	n    int
	name string
}

// policySummary is what TestCluster holds a policy to.
type policySummary struct {
	Group         string // the group most of its chains come from
	Peers         int
	FirstJittered bool
	Compounds     bool
	Default       bool
	Differs       []string
}

// TestCluster clusters fleets drawn in process, chains of 6 to 11
// attempts (before any 120 s cap: a chain whose compounding jitter drifts
// to a cap that its policy's chains never reached is an outlier): each
// group of a schedule must come out as one policy of its size, with its
// first interval, compounding and default read right; the chains drawn
// anyhow are the outliers.
func TestCluster(t *testing.T) {
	ms300 := schedule{initial: 300, mult: 1.6, jitter: 0.2, cap: 120000}
	double := schedule{initial: 1000, mult: 2, cap: 120000}
	tests := []struct {
		name     string
		groups   []group
		want     []policySummary
		outliers int
	}{
		{"three schedules and chains anyhow",
			[]group{{&specSchedule, 300, "spec"}, {&ms300, 150, "300 ms"}, {&double, 100, "doubling"}, {nil, 5, "anyhow"}},
			[]policySummary{{Group: "spec", Peers: 300, Default: true}, {Group: "300 ms", Peers: 150, Differs: []string{"initial backoff"}},
				{Group: "doubling", Peers: 100, Differs: []string{"multiplier", "jitter"}}},
			5},
		{"C-core since 2024: interval 1 jittered", []group{{&ccoreSchedule, 200, "C-core"}},
			[]policySummary{{Group: "C-core", Peers: 200, FirstJittered: true, Default: true}}, 0},
		{"grpc-js: jitter compounds", []group{{&jsSchedule, 200, "grpc-js"}},
			[]policySummary{{Group: "grpc-js", Peers: 200, Compounds: true, Default: true}}, 0},
		{"one chain is its own policy", []group{{&specSchedule, 1, "spec"}},
			[]policySummary{{Group: "spec", Peers: 1, Default: true}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(5, 6))
			var chains chainList
			var from []string
			for _, g := range tt.groups {
				for range g.n {
					var gaps []float64
					if g.s != nil {
						gaps = g.s.gaps(r, 6+r.IntN(6))
					} else {
						for range 8 {
							gaps = append(gaps, 50+4950*r.Float64())
						}
					}
					chains = append(chains, failing(gaps...))
					from = append(from, g.name)
				}
			}
			fl := Cluster(chains)
			var got []policySummary
			for j, p := range fl.Policies {
				count := map[string]int{}
				for i, of := range fl.Of {
					if of == j {
						count[from[i]]++
					}
				}
				s := policySummary{Peers: p.Peers, FirstJittered: p.FirstJittered, Compounds: p.Compounds, Default: p.Default, Differs: p.Differs}
				for g, n := range count {
					if n > count[s.Group] {
						s.Group = g
					}
				}
				got = append(got, s)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("policies (-want +got):\n%s", diff)
			}
			if len(fl.Outliers) != tt.outliers {
				t.Errorf("%d outliers, want %d", len(fl.Outliers), tt.outliers)
			}
			for _, i := range fl.Outliers {
				if fl.Of[i] != NoPolicy || from[i] != "anyhow" {
					t.Errorf("outlier %d of group %q has policy %d", i, from[i], fl.Of[i])
				}
			}
		})
	}
}

// chainList is chains in memory as Cluster reads them.
type chainList [][]Attempt

func (cs chainList) Len() int                              { return len(cs) }
func (cs chainList) Attempts(i int, _ []Attempt) []Attempt { return cs[i] }

// BenchmarkCluster clusters 10 000 chains of three schedules, as many as
// the 2 M-packet bench capture holds (BENCHMARKS.md).
func BenchmarkCluster(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	var chains chainList
	for i := range 10000 {
		s := []schedule{specSchedule, ccoreSchedule, {initial: 1000, mult: 1, cap: 1000}}[i%3]
		chains = append(chains, failing(s.gaps(r, 2+r.IntN(12))...))
	}
	for b.Loop() {
		Cluster(chains)
	}
}

// ExampleFitChain fits a chain that doubles from 100 ms without jitter.
func ExampleFitChain() {
	var as []Attempt
	at := t0
	for k := range 8 {
		as = append(as, Attempt{At: at, End: EndFailed})
		at = at.Add(100e6 << k) // 100 ms × 2^k
	}
	f := FitChain(as)
	fmt.Printf("%s: initial %.0f ms, ×%.2f, jitter %.2f, cap reached: %v\n",
		f.Shape, f.Initial.Value, f.Multiplier.Value, f.Jitter.Value, f.MaxBackoff.Reached)
	// Output: growing: initial 100 ms, ×2.00, jitter 0.00, cap reached: false
}
