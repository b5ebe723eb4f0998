package infer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/backoff-audit/audit/backoff"
)

// TestAttemptsOf reads each attempt's end by the class the verifier gives
// it: READY resets, a silent accepted connection hangs (timed out when the
// client gave up on it), a refusal fails at once, and an attempt of
// unknown fate is read as the mode says.
func TestAttemptsOf(t *testing.T) {
	p := backoff.DefaultPolicy()
	ms := func(v int) time.Duration { return time.Duration(v) * time.Millisecond }
	tests := []struct {
		name   string
		mode   backoff.RetryMode
		ending backoff.Ending
		gap    time.Duration
		want   Attempt
	}{
		{"refused", backoff.RetryMode{}, backoff.Ending{Fate: backoff.FateRefused, Duration: ms(1)}, ms(1000), Attempt{End: EndFailed, Lasted: ms(1)}},
		{"closed at once", backoff.RetryMode{}, backoff.Ending{Fate: backoff.FateClosed, Duration: ms(2)}, ms(1000), Attempt{End: EndFailed, Lasted: ms(2)}},
		{"ready", backoff.RetryMode{}, backoff.Ending{Fate: backoff.FateClosed, Duration: ms(600), Ready: true, ServerSent: backoff.PayloadH2Settings}, ms(1000),
			Attempt{End: EndSucceeded, Lasted: ms(600)}},
		{"abandoned after the connect timeout", backoff.RetryMode{}, backoff.Ending{Fate: backoff.FateAbandoned, Duration: 20 * time.Second}, 20 * time.Second,
			Attempt{End: EndTimedOut, Lasted: 20 * time.Second}},
		{"unanswered, SYNs sent again", backoff.RetryMode{}, backoff.Ending{Fate: backoff.FateUnanswered, Duration: 3 * time.Second}, 20 * time.Second,
			Attempt{End: EndHung, Lasted: 3 * time.Second}},
		{"unknown fate, close mode", backoff.RetryMode{}, backoff.Ending{}, ms(1000), Attempt{End: EndUnknown}},
		{"unknown fate, hang mode", backoff.RetryMode{Kind: backoff.ModeHang}, backoff.Ending{}, 20 * time.Second, Attempt{End: EndHung}},
		{"unknown fate, settings-close mode", backoff.RetryMode{Kind: backoff.ModeSettingsClose}, backoff.Ending{}, ms(1000), Attempt{End: EndSucceeded}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			times := []time.Time{t0, t0.Add(tt.gap)}
			endings := []backoff.Ending{tt.ending, {Fate: backoff.FateRefused}}
			if tt.ending == (backoff.Ending{}) {
				endings = nil
			}
			got := AttemptsOf(p, backoff.Run{Mode: tt.mode}, times, endings, nil)[0]
			tt.want.At = t0
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("attempt (-want +got):\n%s", diff)
			}
		})
	}
}

// memSource is chains in memory as Read reads them, by chain index.
type memSource struct {
	addrs   []netip.Addr
	chains  [][]time.Time
	endings [][]backoff.Ending
}

func (s *memSource) Times(i int, buf []time.Time) (netip.Addr, []time.Time, int) {
	return s.addrs[i], append(buf[:0], s.chains[i]...), 0
}

func (s *memSource) Endings(i int, _ []backoff.Ending) []backoff.Ending { return s.endings[i] }

// appendPeer is r's reading of chain i, stored at index.
func (s *memSource) appendPeer(r *Reading, index, i int) []byte {
	return r.AppendPeer(nil, index, len(s.chains[i]), func(k int) (time.Time, backoff.Ending) { return s.chains[i][k], s.endings[i][k] })
}

// threeSchedules is 300 chains of 8 attempts the server closed at once,
// 100 each of 1 s ×1.6, ×2 and flat, jittered ±10 %.
func threeSchedules() *memSource {
	s := &memSource{}
	for i := range 300 {
		s.addrs = append(s.addrs, netip.AddrFrom4([4]byte{10, 9, byte(i >> 8), byte(i)}))
		base, mult := 1000.0, []float64{1.6, 2, 1}[i%3]
		at := t0.Add(time.Duration(i) * time.Millisecond)
		var times []time.Time
		var endings []backoff.Ending
		for k := range 8 {
			times = append(times, at)
			endings = append(endings, backoff.Ending{Fate: backoff.FateClosed, Accepted: time.Millisecond, Duration: 2 * time.Millisecond})
			// A jitter of ±10 %, drawn from i and k alone.
			u := 0.9 + 0.2*float64((i*7+k*13)%17)/16
			at = at.Add(time.Duration(base * u * float64(time.Millisecond)))
			base *= mult
		}
		s.chains, s.endings = append(s.chains, times), append(s.endings, endings)
	}
	return s
}

// TestRead reads three schedules' chains: three policies of 100 peers,
// none failing its own windows, each peer's reading naming its own; the
// same whichever index each chain is stored at, as a streamed capture
// stores them in the order they end; the text names every policy.
func TestRead(t *testing.T) {
	src := threeSchedules()
	order := make([]int32, 300)
	for i := range order {
		order[i] = int32(i)
	}
	p := backoff.DefaultPolicy()
	r := Read(order, src, p, backoff.Run{})
	if n := len(r.Policies.Policies); n != 3 {
		t.Fatalf("%d policies, want the 3 schedules", n)
	}
	for _, q := range r.Policies.Policies {
		if q.Peers != 100 || q.Failed != 0 {
			t.Errorf("policy %d (%s): %d peers, %d failing its own windows; want 100 and 0", q.Policy, q.Schedule(), q.Peers, q.Failed)
		}
	}
	peers := make([]string, 300)
	for i := range peers {
		peers[i] = string(src.appendPeer(r, i, i))
		var in struct {
			Policy        int
			AgainstPolicy *PolicyVerdict `json:"against_policy"`
		}
		if err := json.Unmarshal([]byte(peers[i]), &in); err != nil {
			t.Fatalf("peer %d: %v\n%s", i, err, peers[i])
		}
		if in.Policy == 0 || in.AgainstPolicy == nil || !in.AgainstPolicy.Passed {
			t.Errorf("peer %d: %s, want its policy and a pass against it", i, peers[i])
		}
	}

	// The same chains stored in reverse: the same reading of each.
	rev := &memSource{addrs: slices.Clone(src.addrs), chains: slices.Clone(src.chains), endings: slices.Clone(src.endings)}
	slices.Reverse(rev.addrs)
	slices.Reverse(rev.chains)
	slices.Reverse(rev.endings)
	revOrder := make([]int32, 300)
	for i := range revOrder {
		revOrder[i] = int32(299 - i)
	}
	r2 := Read(revOrder, rev, p, backoff.Run{})
	if diff := cmp.Diff(r.Policies, r2.Policies); diff != "" {
		t.Errorf("policies of the chains stored in reverse (-in order +reversed):\n%s", diff)
	}
	for i := range peers {
		if got := string(rev.appendPeer(r2, 299-i, 299-i)); got != peers[i] {
			t.Errorf("peer %d stored in reverse: %s, want %s", i, got, peers[i])
		}
	}

	r.Policies.Outliers = []netip.Addr{netip.MustParseAddr("10.0.0.7")}
	var b strings.Builder
	w := bufio.NewWriter(&b)
	r.WriteText(w)
	w.Flush()
	for _, want := range []string{
		"policies (--infer, docs/spec.md §8): 33.3 % of peers (100 of 300) run ",
		"#1 100 peers (33.3 %): ", "#2 100 peers (33.3 %): ", "#3 100 peers (33.3 %): ",
		"1 s ×1.6 ±10 %, cap never reached", "1 s ×2 ±10 %, cap never reached", "1 s flat ±10 %",
		"against its own windows: 100 pass, 0 fail",
		"not gRPC's default: jitter", "outliers, no policy explains them (1): 10.0.0.7",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("missing %q in:\n%s", want, b.String())
		}
	}
}

// TestPeerInferenceJSON holds the "inferred" object, written by hand, to
// what encoding/json makes of it as a json.RawMessage (compacted, HTML
// escaped: report's peer writes it as it is), with the members
// docs/spec.md §8 names: every kind of value, a cap never reached, one
// not finite, a connect timeout shown or not, and a reason that
// encoding/json escapes.
func TestPeerInferenceJSON(t *testing.T) {
	est := Estimate{Value: 1000.25, Low: 833.5, High: 1250}
	why := Estimate{Undetermined: "one interval: <flat> & \"growing\" look alike – é"}
	tests := []struct {
		name string
		pi   PeerInference
		keys []string
	}{
		{"growing, cap never reached",
			PeerInference{Policy: 2, Fit: Fit{Intervals: 7, Runs: 1, Params: Params{Shape: ShapeGrowing, Initial: est, Multiplier: est, Jitter: est,
				MaxBackoff: Cap{Above: 16000.5}, ConnectTimeout: why}},
				AgainstPolicy: &PolicyVerdict{Passed: false, FirstFailure: 5, Signatures: []string{backoff.SigCompounding, backoff.SigFirstJittered}}},
			[]string{"policy", "intervals", "runs", "shape", "initial_backoff_ms", "multiplier", "jitter", "max_backoff_ms", "max_backoff_above_ms", "against_policy"}},
		{"outlier, one interval, timed out",
			PeerInference{Outlier: true, Fit: Fit{Intervals: 1, Runs: 1, TimedOut: 2,
				Params: Params{Initial: est, Multiplier: why, Jitter: why, MaxBackoff: Cap{Estimate: why}, ConnectTimeout: why}}},
			[]string{"outlier", "intervals", "runs", "initial_backoff_ms", "multiplier", "jitter", "max_backoff_ms", "connect_timeout_ms"}},
		{"capped, a bound not finite",
			PeerInference{Fit: Fit{Intervals: 4, Runs: 2, TimedOut: 1, Params: Params{Shape: ShapeCapped, Initial: est, Multiplier: why, Jitter: est,
				MaxBackoff: Cap{Reached: true, Estimate: Estimate{Value: 2000, Low: 1800, High: math.Inf(1)}}, ConnectTimeout: est}},
				AgainstPolicy: &PolicyVerdict{Passed: true}},
			[]string{"intervals", "runs", "shape", "initial_backoff_ms", "multiplier", "jitter", "max_backoff_ms", "connect_timeout_ms", "against_policy"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.pi.appendJSON(nil)
			want, err := json.Marshal(json.RawMessage(got))
			if err != nil {
				t.Fatalf("%v\n%s", err, got)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("appendJSON vs encoding/json (-want +got):\n%s", diff)
			}
			var doc map[string]json.RawMessage
			if err := json.Unmarshal(got, &doc); err != nil {
				t.Fatal(err)
			}
			var keys []string
			for k := range doc {
				keys = append(keys, k)
			}
			if diff := cmp.Diff(tt.keys, keys, cmp.Transformer("sort", func(s []string) []string { return slices.Sorted(slices.Values(s)) })); diff != "" {
				t.Errorf("members (-want +got):\n%s", diff)
			}
			var v InferredValue
			if err := json.Unmarshal(doc["initial_backoff_ms"], &v); err != nil || v != inferredValue(est, msDecimals) {
				t.Errorf("initial_backoff_ms read back: %+v, %v", v, err)
			}
			if bytes.Contains(got, []byte("<")) {
				t.Errorf("an unescaped <: %s", got)
			}
		})
	}
}

// TestReadNoChain reads a document without a chain (a record whose
// sessions the capture misses): no policy, and a text that says so.
func TestReadNoChain(t *testing.T) {
	r := Read(nil, &memSource{}, backoff.DefaultPolicy(), backoff.Run{})
	if diff := cmp.Diff(Policies{Policies: []PolicyReport{}, Outliers: []netip.Addr{}}, r.Policies); diff != "" {
		t.Errorf("policies (-want +got):\n%s", diff)
	}
	var b strings.Builder
	w := bufio.NewWriter(&b)
	r.WriteText(w)
	w.Flush()
	if want := "\npolicies (--infer, docs/spec.md §8): no policy found in 0 peers\n"; b.String() != want {
		t.Errorf("text %q, want %q", b.String(), want)
	}
}
