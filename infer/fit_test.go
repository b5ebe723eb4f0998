package infer

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// schedule is a client's backoff for the tests: the spec's (docs/spec.md
// §1.1), or a library's variant of it (§4.2).
type schedule struct {
	initial, mult, jitter, cap float64 // ms
	firstJittered, compounds   bool
}

var (
	specSchedule  = schedule{initial: 1000, mult: 1.6, jitter: 0.2, cap: 120000}
	ccoreSchedule = schedule{initial: 1000, mult: 1.6, jitter: 0.2, cap: 120000, firstJittered: true}
	jsSchedule    = schedule{initial: 1000, mult: 1.6, jitter: 0.2, cap: 120000, compounds: true}
)

// gaps draws the n−1 intervals of n failed attempts, each plus 0.2–0.5 ms
// of a client's send.
func (s schedule) gaps(r *rand.Rand, n int) []float64 {
	var gs []float64
	e, last := s.initial, s.initial
	for k := 1; k < n; k++ {
		u := 1 - s.jitter + 2*s.jitter*r.Float64()
		var g float64
		switch {
		case k == 1 && s.firstJittered:
			g = s.initial * u
		case k == 1:
			g = s.initial
		case s.compounds:
			g = min(last*s.mult, s.cap) * u
		default:
			e = min(e*s.mult, s.cap)
			g = e * u
		}
		last = g
		gs = append(gs, g+0.2+0.3*r.Float64())
	}
	return gs
}

var t0 = time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)

// failing is a chain of attempts that fail at once, gaps apart (ms).
func failing(gaps ...float64) []Attempt {
	as := []Attempt{{At: t0, End: EndFailed}}
	for _, g := range gaps {
		as = append(as, Attempt{At: as[len(as)-1].At.Add(time.Duration(g * 1e6)), End: EndFailed})
	}
	return as
}

// geometric returns n gaps from initial, ×mult each, capped.
func geometric(initial, mult, cap float64, n int) []float64 {
	var gs []float64
	for e := initial; len(gs) < n; e = min(e*mult, cap) {
		gs = append(gs, e)
	}
	return gs
}

// fitSummary is what a test holds a fit to: each parameter's value, or
// its reason when undetermined (Cap: −1 when not reached).
type fitSummary struct {
	Intervals, Runs int
	Shape           Shape
	Initial         any
	Multiplier      any
	Jitter          any
	Cap             any
	Above           float64
	ConnectTimeout  any
}

func valueOr(e Estimate) any {
	if !e.Determined() {
		return e.Undetermined
	}
	return e.Value
}

func summarize(f Fit) fitSummary {
	s := fitSummary{Intervals: f.Intervals, Runs: f.Runs, Shape: f.Shape, Initial: valueOr(f.Initial),
		Multiplier: valueOr(f.Multiplier), Jitter: valueOr(f.Jitter), Cap: valueOr(f.MaxBackoff.Estimate),
		Above: f.MaxBackoff.Above, ConnectTimeout: valueOr(f.ConnectTimeout)}
	if !f.MaxBackoff.Reached && f.MaxBackoff.Determined() {
		s.Cap = -1.0
	}
	return s
}

// TestFitChain fits chains of known shape without jitter, so that every
// value is the schedule's but for the noise floor, and the jitter near 0.
func TestFitChain(t *testing.T) {
	timedOut := failing(1000, 2000, 21000, 8000, 16000)
	timedOut[2].End, timedOut[2].Lasted = EndTimedOut, 20*time.Second
	flap := failing(1000, 2000, 4000, 5000, 1000, 2000, 4000)
	flap[3].End = EndSucceeded
	tooShort := "two intervals: growth and jitter look alike"
	one := "one interval: a flat schedule and a growing one look alike"
	none := "no attempt was seen timing out"
	tests := []struct {
		name string
		as   []Attempt
		want fitSummary
	}{
		{"one attempt", failing(), fitSummary{Initial: "no interval: fewer than two attempts", Multiplier: "no interval: fewer than two attempts",
			Jitter: "no interval: fewer than two attempts", Cap: "no interval: fewer than two attempts", ConnectTimeout: none}},
		{"two attempts", failing(1000), fitSummary{Intervals: 1, Runs: 1, Initial: 1000.0, Multiplier: one, Jitter: one, Cap: one, ConnectTimeout: none}},
		{"three attempts", failing(1000, 2000), fitSummary{Intervals: 2, Runs: 1, Initial: 1000.0, Multiplier: tooShort, Jitter: tooShort, Cap: tooShort, ConnectTimeout: none}},
		{"doubling", failing(geometric(1000, 2, 1e9, 8)...), fitSummary{Intervals: 8, Runs: 1, Shape: ShapeGrowing,
			Initial: 1000.0, Multiplier: 2.0, Jitter: 0.0, Cap: -1.0, Above: 128000, ConnectTimeout: none}},
		{"flat", failing(geometric(1000, 1, 1000, 6)...), fitSummary{Intervals: 6, Runs: 1, Shape: ShapeFlat,
			Initial: 1000.0, Multiplier: 1.0, Jitter: 0.0, Cap: -1.0, Above: 1000, ConnectTimeout: none}},
		{"capped", failing(geometric(1000, 2, 8000, 10)...), fitSummary{Intervals: 10, Runs: 1, Shape: ShapeCapped,
			Initial: 1000.0, Multiplier: 2.0, Jitter: 0.0, Cap: 8000.0, ConnectTimeout: none}},
		{"capped at interval 2", failing(1000, 3000, 3000, 3000, 3000, 3000), fitSummary{Intervals: 6, Runs: 1, Shape: ShapeCappedAtOnce,
			Initial: 1000.0, Multiplier: "the level from interval 2 on is the cap: the multiplier that reached it does not show",
			Jitter: 0.0, Cap: 3000.0, ConnectTimeout: none}},
		{"a success starts a new run", flap, fitSummary{Intervals: 6, Runs: 2, Shape: ShapeGrowing,
			Initial: 1000.0, Multiplier: 2.0, Jitter: 0.0, Cap: -1.0, Above: 4000, ConnectTimeout: none}},
		{"the interval after an attempt that timed out is left out", timedOut, fitSummary{Intervals: 4, Runs: 1, Shape: ShapeGrowing,
			Initial: 1000.0, Multiplier: 2.0, Jitter: 0.0, Cap: -1.0, Above: 16000, ConnectTimeout: 20000.0}},
	}
	// Values within 2 %: the noise floor, and the send's 0.2–0.5 ms. Above
	// is a lower bound, within 5 % of the backoff reached.
	above := func(p cmp.Path) bool { return p.Last().String() == ".Above" }
	approx := cmp.Options{
		cmp.FilterPath(func(p cmp.Path) bool { return !above(p) }, cmpopts.EquateApprox(0.02, 1e-3)),
		cmp.FilterPath(above, cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) <= 0.05*max(a, b) })),
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := FitChain(tt.as)
			if diff := cmp.Diff(tt.want, summarize(f), approx); diff != "" {
				t.Errorf("fit (-want +got):\n%s", diff)
			}
			for name, e := range map[string]Estimate{"initial": f.Initial, "multiplier": f.Multiplier, "jitter": f.Jitter,
				"cap": f.MaxBackoff.Estimate, "connect timeout": f.ConnectTimeout} {
				if e.Determined() && (e.Low > e.Value || e.Value > e.High) {
					t.Errorf("%s %g outside its interval [%g, %g]", name, e.Value, e.Low, e.High)
				}
			}
		})
	}
}

// TestShapeChoice holds the choice of a shape (docs/spec.md §8.2) to how
// often chance misleads it, on chains of 5 to 11 intervals drawn with
// seeded jitter (the spec's 12th backoff is capped at 120 s): the rates
// minPenalty was chosen for.
func TestShapeChoice(t *testing.T) {
	tests := []struct {
		name  string
		s     schedule
		want  []Shape
		least float64 // of the chains, at least
	}{
		{"the spec's: growing", specSchedule, []Shape{ShapeGrowing}, 0.97},
		{"grpc-js: growing", jsSchedule, []Shape{ShapeGrowing}, 0.95},
		{"1 s flat ±20 %: flat", schedule{initial: 1000, mult: 1, jitter: 0.2, cap: 1000}, []Shape{ShapeFlat}, 0.90},
		{"×1.1 ±10 %: growing", schedule{initial: 1000, mult: 1.1, jitter: 0.1, cap: 120000}, []Shape{ShapeGrowing}, 0.85},
		{"capped at 5 s (from interval 5): capped", schedule{initial: 1000, mult: 1.6, jitter: 0.2, cap: 5000}, []Shape{ShapeCapped, ShapeCappedAtOnce}, 0.80},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			const n = 2000
			hit := 0
			for range n {
				if f := FitChain(failing(tt.s.gaps(r, 6+r.IntN(7))...)); containsShape(tt.want, f.Shape) {
					hit++
				}
			}
			got := float64(hit) / n
			t.Logf("%v for %.1f %% of the chains", tt.want, 100*got)
			if got < tt.least {
				t.Errorf("%v for %.3f of the chains, want at least %.2f", tt.want, got, tt.least)
			}
		})
	}
}

func containsShape(ss []Shape, s Shape) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// TestIntervalsHoldTheTruth draws chains of 5 to 11 intervals of the
// spec's schedule and of the variants of real libraries (docs/spec.md
// §4.2) and counts how often each determined interval holds the true
// value: what docs/spec.md §8.3 says of them.
func TestIntervalsHoldTheTruth(t *testing.T) {
	tests := []struct {
		name string
		s    schedule
		// least share of determined intervals that hold the truth
		initial, mult, jitter float64
	}{
		{"the spec", specSchedule, 0.99, 0.95, 0.90},
		{"C-core since 2024: interval 1 jittered", ccoreSchedule, 0.95, 0.95, 0.90},
		{"grpc-js: jitter compounds", jsSchedule, 0.99, 0.90, 0.85},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(3, 4))
			var held, seen [3]int
			for range 2000 {
				f := FitChain(failing(tt.s.gaps(r, 6+r.IntN(7))...))
				for i, c := range []struct {
					e Estimate
					v float64
				}{{f.Initial, tt.s.initial}, {f.Multiplier, tt.s.mult}, {f.Jitter, tt.s.jitter}} {
					if c.e.Determined() {
						seen[i]++
						if c.e.Low <= c.v && c.v <= c.e.High {
							held[i]++
						}
					}
				}
			}
			for i, least := range []float64{tt.initial, tt.mult, tt.jitter} {
				got := float64(held[i]) / float64(seen[i])
				t.Logf("%s: %d of %d determined intervals (%.1f %%) hold the truth", []string{"initial", "multiplier", "jitter"}[i], held[i], seen[i], 100*got)
				if got < least {
					t.Errorf("%s: %d of %d intervals (%.3f) hold the truth, want at least %.2f",
						[]string{"initial", "multiplier", "jitter"}[i], held[i], seen[i], got, least)
				}
			}
		})
	}
}

// TestCompare holds Compare to the tolerances of docs/spec.md §8.5, the
// flat reading of a schedule capped at its initial backoff, and a cap
// never reached.
func TestCompare(t *testing.T) {
	est := func(v, lo, hi float64) Estimate { return Estimate{Value: v, Low: lo, High: hi} }
	tests := []struct {
		name string
		p    Params
		s    Schedule
		want []string
	}{
		{"gRPC's default", Params{Initial: est(1000, 950, 1050), Multiplier: est(1.62, 1.5, 1.7), Jitter: est(0.18, 0.1, 0.25), MaxBackoff: Cap{Above: 30000}},
			GRPCDefault, nil},
		{"within the tolerances", Params{Initial: est(1100, 1095, 1105), Multiplier: est(1.7, 1.68, 1.75), Jitter: est(0.25, 0.255, 0.27), MaxBackoff: Cap{Above: 130000}},
			GRPCDefault, nil},
		{"beyond them", Params{Initial: est(1200, 1150, 1250), Multiplier: est(2, 1.9, 2.1), Jitter: est(0, 0, 0.01), MaxBackoff: Cap{Reached: true, Estimate: est(2000, 1900, 2100)}},
			GRPCDefault, []string{"initial backoff", "multiplier", "jitter", "cap"}},
		{"undetermined differs in nothing", Params{Initial: est(1000, 900, 1100), Multiplier: undetermined("short"), Jitter: undetermined("short"), MaxBackoff: Cap{Estimate: undetermined("short")}},
			GRPCDefault, nil},
		{"a schedule capped at its initial backoff is flat", Params{Initial: est(1000, 990, 1010), Multiplier: est(1, 1, 1.02), Jitter: est(0.2, 0.15, 0.25), MaxBackoff: Cap{Above: 1000}},
			Schedule{InitialMS: 1000, Multiplier: 1.6, Jitter: 0.2, MaxBackoffMS: 1000}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.p.Compare(tt.s)); diff != "" {
				t.Errorf("Compare (-want +got):\n%s", diff)
			}
		})
	}
}

// BenchmarkFitChain fits a 14-attempt chain of the spec's schedule, the
// longest of a 540 s interop run.
func BenchmarkFitChain(b *testing.B) {
	as := failing(specSchedule.gaps(rand.New(rand.NewPCG(1, 1)), 14)...)
	for b.Loop() {
		FitChain(as)
	}
}

// BenchmarkFitChainLong fits one chain of 10 000 attempts: the cost per
// attempt, against BenchmarkFitChain's, shows the fit linear.
func BenchmarkFitChainLong(b *testing.B) {
	as := failing(schedule{initial: 10, mult: 1.6, jitter: 0.2, cap: 1000}.gaps(rand.New(rand.NewPCG(1, 1)), 10000)...)
	for b.Loop() {
		FitChain(as)
	}
}
