package watch

import (
	"bytes"
	"cmp"
	"encoding/json"
	"io"
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/infer"
	"github.com/backoff-audit/audit/metrics"
)

// schedule is a policy the made-up clients run.
type schedule struct {
	name                      string
	initialMS, mult, jitter   float64
	attempts                  int
	wantDefault, firstJitters bool
}

var (
	// fast is 100 ms ×2 without jitter; spec, gRPC's default (its first
	// backoff exact, as grpc-go's and the spec's).
	fast = schedule{name: "100 ms ×2", initialMS: 100, mult: 2, attempts: 6}
	spec = schedule{name: "spec", initialMS: 1000, mult: 1.6, jitter: 0.2, attempts: 7, wantDefault: true}
)

// offsets is one chain of s: its attempts' times from its first.
func (s schedule) offsets(rng *rand.Rand) []time.Duration {
	out := []time.Duration{0}
	at, b := 0.0, s.initialMS
	for k := 1; k < s.attempts; k++ {
		d := b
		if k > 1 && s.jitter > 0 {
			d *= 1 + s.jitter*(2*rng.Float64()-1)
		}
		at += d
		out = append(out, time.Duration(at*float64(time.Millisecond)))
		b *= s.mult
	}
	return out
}

// fleetInput is per peers of each schedule one chain, refused at every
// attempt, their first attempts spread over a minute from start, and
// one chain no schedule explains, from 127.0.<net>.250; then a Tick
// every 250 ms until end. It returns the peers of each schedule.
func fleetInput(rng *rand.Rand, net byte, start, end time.Duration, per int, ss ...schedule) ([]input, [][]string) {
	var in []input
	peers := make([][]string, len(ss))
	for j, s := range ss {
		for i := range per {
			peer := netip.AddrFrom4([4]byte{127, net, byte(j), byte(i + 1)}).String()
			peers[j] = append(peers[j], peer)
			first := start + time.Duration(rng.Float64()*float64(time.Minute))
			for _, o := range s.offsets(rng) {
				in = append(in, input{at: first + o, peer: peer, sport: uint16(40000 + len(in)), seq: uint32(len(in)), refused: true})
			}
		}
	}
	odd := netip.AddrFrom4([4]byte{127, net, 0, 250}).String()
	at := start + 30*time.Second
	for _, d := range ms(0, 50, 3000, 70, 5000) {
		at += d
		in = append(in, input{at: at, peer: odd, sport: uint16(40000 + len(in)), seq: uint32(len(in)), refused: true})
	}
	for t := start; t < end; t += 250 * time.Millisecond {
		in = append(in, input{at: t, tick: true})
	}
	slices.SortStableFunc(in, func(a, b input) int { return cmp.Compare(a.at, b.at) })
	return in, peers
}

// inferLines reads the JSON Lines of a Watch with Infer: the policies
// lines, and by peer the reading of each chain.
func inferLines(t *testing.T, out []byte) (policies []Event, chains map[string]infer.PeerInference) {
	t.Helper()
	chains = map[string]infer.PeerInference{}
	for _, l := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		var e Event
		if err := json.Unmarshal(l, &e); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		switch {
		case e.Event == EventPolicies:
			policies = append(policies, e)
		case e.Chain != nil:
			var pi struct {
				Policy  int
				Outlier bool
			}
			if err := json.Unmarshal(e.Chain.Inferred, &pi); err != nil {
				t.Fatalf("%s's inferred: %v: %s", e.Peer, err, l)
			}
			chains[e.Peer.String()] = infer.PeerInference{Policy: pi.Policy, Outlier: pi.Outlier}
		}
	}
	return policies, chains
}

// found is what a test holds a policy to: its size, whether it is the
// default, and whether its parameters are the schedule's within the
// issue's bounds (initial backoff 10 %, multiplier 0.08, jitter 0.06).
type found struct {
	Peers          int
	Default, Close bool
}

func foundOf(p *infer.PolicyReport, s schedule) found {
	close := p.Initial.Undetermined == "" && math.Abs(p.Initial.Value/s.initialMS-1) <= 0.10 &&
		p.Multiplier.Undetermined == "" && math.Abs(p.Multiplier.Value-s.mult) <= 0.08 &&
		p.Jitter.Undetermined == "" && math.Abs(p.Jitter.Value-s.jitter) <= 0.06
	return found{Peers: p.Peers, Default: p.Default, Close: close}
}

// TestWatchInfer: two fleets of 64 peers, one of 100 ms ×2 without jitter
// and one of gRPC's default, and a chain no schedule explains. The first
// reading of the policies finds both, of the right sizes and parameters,
// and names the outlier; each chain judged after it is placed in its
// schedule's policy, the odd one an outlier; the reading at the end has
// every chain; the text says the same.
func TestWatchInfer(t *testing.T) {
	const per = 64
	rng := rand.New(rand.NewPCG(24, 1))
	// The first fleet's chains are all judged by the first reading, 2 min
	// after the first attempt, and the second's after it and before the
	// next: the end reads them.
	first, peers1 := fleetInput(rng, 1, 0, 125*time.Second, per, fast, spec)
	second, peers2 := fleetInput(rng, 2, 125*time.Second, 238*time.Second, per, fast, spec)
	cfg := Config{Policy: backoff.DefaultPolicy(), FatesKnown: true, JSON: true, Infer: true, InferEvery: 2 * time.Minute}
	var out bytes.Buffer
	w := New(cfg, &out)
	feed(w, append(first, second...))
	if _, err := w.Close(t0.Add(400 * time.Second)); err != nil {
		t.Fatal(err)
	}
	policies, chains := inferLines(t, out.Bytes())
	if len(policies) != 2 {
		t.Fatalf("%d policies lines, want 2 (at 2 min, when the first fleet's chains are all judged, and at the end):\n%s", len(policies), out.String())
	}
	for i, wantPeers := range []int{per, 2 * per} {
		ps := policies[i].Policies
		if len(ps.Policies) != 2 {
			t.Fatalf("reading %d: %d policies, want 2: %+v", i, len(ps.Policies), ps)
		}
		var got, want []found
		for j, s := range []schedule{fast, spec} {
			k := slices.IndexFunc(ps.Policies, func(p infer.PolicyReport) bool {
				return p.Initial.Undetermined == "" && math.Abs(p.Initial.Value/s.initialMS-1) <= 0.10
			})
			if k < 0 {
				t.Fatalf("reading %d: no policy of %s's initial backoff: %+v", i, s.name, ps.Policies)
			}
			got = append(got, foundOf(&ps.Policies[k], s))
			want = append(want, found{Peers: wantPeers, Default: s.wantDefault, Close: true})
			if i == 0 {
				// Each chain of the second fleet runs its schedule's
				// policy of the first reading.
				for _, peer := range peers2[j] {
					if c := chains[peer]; c.Policy != k+1 || c.Outlier {
						t.Errorf("%s (%s) judged after the first reading: policy %d, outlier %v; want policy %d", peer, s.name, c.Policy, c.Outlier, k+1)
					}
				}
			}
		}
		if diff := gocmp.Diff(want, got); diff != "" {
			t.Errorf("reading %d, %s and %s (-want +got):\n%s", i, fast.name, spec.name, diff)
		}
		wantOut := []netip.Addr{netip.MustParseAddr("127.1.0.250")}
		if i == 1 {
			wantOut = append(wantOut, netip.MustParseAddr("127.2.0.250"))
		}
		if diff := gocmp.Diff(wantOut, ps.Outliers, gocmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
			t.Errorf("reading %d's outliers (-want +got):\n%s", i, diff)
		}
	}
	if c := chains["127.2.0.250"]; !c.Outlier {
		t.Errorf("the odd chain judged after the first reading: %+v, want an outlier", c)
	}
	if n := len(peers1[0]) + len(peers1[1]) + len(peers2[0]) + len(peers2[1]) + 2; len(chains) != n {
		t.Errorf("%d chains with a reading, want every one of %d", len(chains), n)
	}

	cfg.JSON = false
	out.Reset()
	w = New(cfg, &out)
	feed(w, append(first, second...))
	if _, err := w.Close(t0.Add(400 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if testing.Verbose() {
		t.Log(out.String())
	}
	for _, want := range []string{
		"port 50052: policies (--infer, docs/spec.md §8): 49.6 % of peers (64 of 129) run ",
		"  #2 64 peers (49.6 %): ",
		"  outliers, no policy explains them (1): 127.1.0.250\n  read from the last 129 chains judged, since 2026-12-01T12:00:",
		"peer 127.2.0.250: failed chain of 5 attempts from ",
		"; inferred: 50 ms ", "; outlier: no policy explains it\n",
		": gRPC's default; policy #", ", passes its windows\n",
		"; 1 chain no policy of its port explained (outliers)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, out.String())
		}
	}
}

// TestWatchInferBounded feeds ten times the sample's bound, in chains
// (short ones) or in attempts (long ones): the sample holds at most its
// chains and attempts, its last reading reads no more, and the policies
// are read again only when a chain came since.
func TestWatchInferBounded(t *testing.T) {
	const bound = 20
	tests := []struct {
		name      string
		attempts  int
		wantChain int // the chains the sample holds at the end
	}{
		{"short chains: the count binds", 4, bound},
		{"long chains: the attempts bind", 30, bound * SampleAttempts / 30},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := New(Config{Policy: backoff.DefaultPolicy(), FatesKnown: true, Infer: true, InferSample: bound, InferEvery: 10 * time.Second}, io.Discard)
			s := schedule{initialMS: 10, mult: 1, attempts: tt.attempts}
			var in []input
			for i := range 10 * bound {
				peer := netip.AddrFrom4([4]byte{127, 3, byte(i >> 8), byte(i)}).String()
				for _, o := range s.offsets(nil) {
					in = append(in, input{at: time.Duration(i)*time.Second + o, peer: peer, sport: uint16(1024 + len(in)), seq: uint32(len(in)), refused: true})
				}
				in = append(in, input{at: time.Duration(i)*time.Second + 900*time.Millisecond, tick: true})
			}
			feed(w, in)
			w.Tick(t0.Add(time.Hour)) // every chain judged, and read
			ps := w.ports[server.Port()]
			s2 := &ps.sample
			if len(s2.ring) != bound || s2.n != tt.wantChain || s2.attempts > bound*SampleAttempts {
				t.Errorf("sample: ring of %d, %d chains, %d attempts; want a ring of %d, %d chains, at most %d attempts",
					len(s2.ring), s2.n, s2.attempts, bound, tt.wantChain, bound*SampleAttempts)
			}
			if got := ps.reading.Policies.Peers; got != tt.wantChain {
				t.Errorf("the last reading read %d chains, want %d", got, tt.wantChain)
			}
			read := ps.reading
			w.Tick(t0.Add(2 * time.Hour))
			if ps.reading != read {
				t.Errorf("the policies were read again with no chain since")
			}
		})
	}
}

// TestWatchInferMetrics: a Watch's readings set its port's policy gauges,
// each replacing the last whole: two policies, then, read by another
// Watch on the same series, one, and nothing left of the first two.
func TestWatchInferMetrics(t *testing.T) {
	m := metrics.New()
	rng := rand.New(rand.NewPCG(24, 2))
	readings := []struct {
		schedules  []schedule
		want       []string
		wantParams int // initial backoff, multiplier and jitter of each policy
	}{
		{[]schedule{fast, spec}, []string{
			`audit_policy_outliers{port="50052"} 1`,
			`audit_policy_peers{default="false",policy="1",port="50052"} 64`,
			`audit_policy_peers{default="true",policy="2",port="50052"} 64`,
			`audit_policy_sample_chains{port="50052"} 129`,
		}, 6},
		{[]schedule{spec}, []string{
			`audit_policy_outliers{port="50052"} 1`,
			`audit_policy_peers{default="true",policy="1",port="50052"} 64`,
			`audit_policy_sample_chains{port="50052"} 65`,
		}, 3},
	}
	for i, r := range readings {
		w := New(Config{Policy: backoff.DefaultPolicy(), FatesKnown: true, Infer: true, Metrics: m}, io.Discard)
		in, _ := fleetInput(rng, byte(i+1), 0, 130*time.Second, 64, r.schedules...)
		feed(w, in)
		var got []string
		for l := range strings.Lines(scrapeOf(m)) {
			if strings.HasPrefix(l, "audit_policy_") {
				got = append(got, strings.TrimSpace(l))
			}
		}
		if diff := gocmp.Diff(r.want, filter(got, "_peers", "_outliers", "_sample")); diff != "" {
			t.Errorf("reading %d (-want +got):\n%s", i, diff)
		}
		if n := len(filter(got, "_initial_backoff_seconds", "_multiplier", "_jitter")); n != r.wantParams {
			t.Errorf("reading %d: %d parameter series, want %d:\n%s", i, n, r.wantParams, strings.Join(got, "\n"))
		}
	}
}

// filter is the lines of got whose name has one of parts.
func filter(got []string, parts ...string) []string {
	var out []string
	for _, l := range got {
		name, _, _ := strings.Cut(l, "{")
		for _, p := range parts {
			if strings.Contains(name, p) {
				out = append(out, l)
				break
			}
		}
	}
	return out
}

func scrapeOf(m *metrics.Metrics) string {
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}

// TestWatchInferOnePortATick: when the policies of two ports are due, a
// Tick reads one, the next the other, so that no Tick holds the loop for
// more than one reading; the end reads both again.
func TestWatchInferOnePortATick(t *testing.T) {
	var out bytes.Buffer
	w := New(Config{Policy: backoff.DefaultPolicy(), FatesKnown: true, JSON: true, Infer: true, InferEvery: time.Minute}, &out)
	for i, port := range []uint16{50052, 50053} {
		dst := netip.AddrPortFrom(server.Addr(), port)
		src := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(40000+i))
		for k, at := range ms(0, 1000, 2600) {
			s := attempt.SYN{Time: t0.Add(at), Src: netip.AddrPortFrom(src.Addr(), src.Port()+uint16(10*k)), Dst: dst, Seq: uint32(10*i + k)}
			w.AddSYN(s)
			w.AddSegment(&attempt.Segment{Time: s.Time.Add(50 * time.Microsecond), Src: dst, Dst: s.Src, Ack: s.Seq + 1, Flags: 0x14})
		}
	}
	for _, at := range []time.Duration{30 * time.Second, 60 * time.Second, 60*time.Second + 250*time.Millisecond} {
		w.Tick(t0.Add(at))
	}
	if _, err := w.Close(t0.Add(2 * time.Minute)); err != nil {
		t.Fatal(err)
	}
	type read struct {
		Time string
		Port uint16
	}
	var got []read
	policies, _ := inferLines(t, out.Bytes())
	for _, e := range policies {
		got = append(got, read{e.Time[11:23], e.Port})
	}
	want := []read{{"12:01:00.000", 50052}, {"12:01:00.250", 50053}, {"12:02:00.000", 50052}, {"12:02:00.000", 50053}}
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("readings (-want +got):\n%s", diff)
	}
}
