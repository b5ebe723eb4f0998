package backoff

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// chain turns gaps into attempt times starting at t0.
func chain(gaps ...time.Duration) []time.Time {
	ts := []time.Time{t0}
	for _, g := range gaps {
		ts = append(ts, ts[len(ts)-1].Add(g))
	}
	return ts
}

func msd(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

func TestExpectedSequenceIsTheReferences(t *testing.T) {
	// docs/spec.md §3.5: the float64 values the C++ verifier computes, to the bit.
	want := []float64{1000, 1600, 2560, 4096, 6553.6, 10485.760000000002,
		16777.216000000004, 26843.54560000001, 42949.67296000002, 68719.47673600003,
		109951.16277760005, 120000, 120000}
	p := DefaultPolicy()
	var got []float64
	for k := 1; k <= len(want); k++ {
		got = append(got, p.Expected(k))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Expected(k) (-want +got):\n%s", diff)
	}
	// Verify walks the same sequence as Expected.
	gaps := make([]time.Duration, len(want))
	for i, e := range want {
		gaps[i] = msd(e)
	}
	r := Verify(p, chain(gaps...))
	for i, iv := range r.Intervals {
		if iv.ExpectedMS != want[i] {
			t.Errorf("interval %d expected %v, want %v", iv.K, iv.ExpectedMS, want[i])
		}
	}
}

func TestVerifyWindows(t *testing.T) {
	tests := []struct {
		name     string
		maxMS    int32
		gaps     []time.Duration
		wantOK   []bool
		wantExp  []float64
		verdict  Verdict
		strictOK []bool
	}{
		{name: "first window low edge 700 passes", gaps: []time.Duration{700 * time.Millisecond},
			wantOK: []bool{true}, wantExp: []float64{1000}, verdict: Passed, strictOK: []bool{false}},
		{name: "first window high edge 1300 passes", gaps: []time.Duration{1300 * time.Millisecond},
			wantOK: []bool{true}, wantExp: []float64{1000}, verdict: Passed, strictOK: []bool{false}},
		{name: "699 fails", gaps: []time.Duration{699 * time.Millisecond},
			wantOK: []bool{false}, wantExp: []float64{1000}, verdict: Failed, strictOK: []bool{false}},
		{name: "1301 fails", gaps: []time.Duration{1301 * time.Millisecond},
			wantOK: []bool{false}, wantExp: []float64{1000}, verdict: Failed, strictOK: []bool{false}},
		{name: "1300.999 floors to 1300 and passes", gaps: []time.Duration{msd(1300.999)},
			wantOK: []bool{true}, wantExp: []float64{1000}, verdict: Passed, strictOK: []bool{false}},
		{name: "699.999 floors to 699 and fails", gaps: []time.Duration{msd(699.999)},
			wantOK: []bool{false}, wantExp: []float64{1000}, verdict: Failed, strictOK: []bool{false}},
		{name: "strict: 1000±100 for the first interval", gaps: []time.Duration{900 * time.Millisecond, 1600 * time.Millisecond},
			wantOK: []bool{true, true}, wantExp: []float64{1000, 1600}, verdict: Passed, strictOK: []bool{true, true}},
		{name: "every interval listed after a failure", gaps: []time.Duration{300 * time.Millisecond, 1600 * time.Millisecond, 5 * time.Second},
			wantOK: []bool{false, true, false}, wantExp: []float64{1000, 1600, 2560}, verdict: Failed, strictOK: []bool{false, true, false}},
		{name: "cap 2000: 1000, 1600, 2000, 2000", maxMS: 2000,
			gaps:   []time.Duration{time.Second, 1600 * time.Millisecond, 2 * time.Second, 2 * time.Second},
			wantOK: []bool{true, true, true, true}, wantExp: []float64{1000, 1600, 2000, 2000}, verdict: Passed,
			strictOK: []bool{true, true, true, true}},
		{name: "no cap honoured is late", maxMS: 2000,
			gaps:   []time.Duration{time.Second, 1600 * time.Millisecond, 2560 * time.Millisecond},
			wantOK: []bool{true, true, false}, wantExp: []float64{1000, 1600, 2000}, verdict: Failed,
			strictOK: []bool{true, true, false}},
		{name: "cap below 1000 never caps E1", maxMS: 500,
			gaps:   []time.Duration{time.Second, 500 * time.Millisecond, 500 * time.Millisecond},
			wantOK: []bool{true, true, true}, wantExp: []float64{1000, 500, 500}, verdict: Passed,
			strictOK: []bool{true, true, true}},
		{name: "zero backoff is early", gaps: []time.Duration{0},
			wantOK: []bool{false}, wantExp: []float64{1000}, verdict: Failed, strictOK: []bool{false}},
		{name: "a gap that runs backwards is early", gaps: []time.Duration{-time.Microsecond},
			wantOK: []bool{false}, wantExp: []float64{1000}, verdict: Failed, strictOK: []bool{false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Verify(ReferencePolicy(tt.maxMS), chain(tt.gaps...))
			var ok, strict []bool
			var exp []float64
			for _, iv := range r.Intervals {
				ok = append(ok, iv.OK)
				strict = append(strict, iv.StrictOK)
				exp = append(exp, iv.ExpectedMS)
			}
			if diff := cmp.Diff(tt.wantOK, ok); diff != "" {
				t.Errorf("ok (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.strictOK, strict); diff != "" {
				t.Errorf("strict ok (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantExp, exp); diff != "" {
				t.Errorf("expected (-want +got):\n%s", diff)
			}
			if r.Reference.Verdict != tt.verdict {
				t.Errorf("verdict %q, want %q", r.Reference.Verdict, tt.verdict)
			}
			if r.ReferencePassed != (tt.verdict == Passed) {
				t.Errorf("ReferencePassed %v with %d attempts", r.ReferencePassed, r.Attempts)
			}
			if len(r.BackoffMS) != len(tt.gaps) {
				t.Errorf("backoff_ms has %d entries, want one per interval (%d)", len(r.BackoffMS), len(tt.gaps))
			}
		})
	}
}

func TestVerifyEdgesAreInclusive(t *testing.T) {
	// Every bound of the first 12 windows, to the millisecond: the bound
	// itself passes, one ms beyond it fails (docs/spec.md §3.3).
	p := DefaultPolicy()
	for k := 1; k <= 12; k++ {
		iv := p.Check(k, 0)
		lo, hi := iv.MinMS, iv.MaxMS
		for _, c := range []struct {
			ms   float64
			want bool
		}{{ceil(lo), true}, {ceil(lo) - 1, false}, {floor(hi), true}, {floor(hi) + 1, false}} {
			got := p.Check(k, msd(c.ms)).OK
			if got != c.want {
				t.Errorf("k=%d window [%v, %v]: %v ms ok=%v, want %v", k, lo, hi, c.ms, got, c.want)
			}
		}
	}
}

func ceil(v float64) float64 {
	f := float64(int64(v))
	if f < v {
		f++
	}
	return f
}
func floor(v float64) float64 { return float64(int64(v)) }

func TestTooFewAttempts(t *testing.T) {
	for _, n := range []int{0, 1} {
		r := Verify(DefaultPolicy(), chain(make([]time.Duration, n)...)[:n])
		if r.Passed() || r.Reference.Verdict != TooFew || r.Strict.Verdict != TooFew {
			t.Errorf("%d attempts: passed=%v verdict=%q strict=%q, want too few", n, r.Passed(), r.Reference.Verdict, r.Strict.Verdict)
		}
		if !r.ReferencePassed {
			t.Errorf("%d attempts: the C++ reference passes this (docs/spec.md §4); ReferencePassed should say so", n)
		}
		if !strings.Contains(r.Reason(), "too few") {
			t.Errorf("reason %q", r.Reason())
		}
	}
}

func TestReasonNamesFirstFailure(t *testing.T) {
	r := Verify(DefaultPolicy(), chain(300*time.Millisecond, 480*time.Millisecond))
	want := "interval 1: 300 ms is early (expected 1000 ms, window 700–1300 ms)"
	if got := r.Reason(); got != want {
		t.Errorf("Reason() = %q, want %q", got, want)
	}
	if r.Reference.FirstFailure != 1 {
		t.Errorf("FirstFailure = %d", r.Reference.FirstFailure)
	}
}

func TestLogLineMatchesReferenceFormat(t *testing.T) {
	iv := DefaultPolicy().Check(2, 1700*time.Millisecond)
	want := "retry  2:backoff   1.70s,expected backoff   1.60s, jitter 6.25%"
	if got := iv.LogLine(); got != want {
		t.Errorf("LogLine() = %q, want %q", got, want)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Policy)
		want   string
	}{
		{"defaults", func(*Policy) {}, ""},
		{"negative jitter", func(p *Policy) { p.Jitter = -0.1 }, "jitter -0.1"},
		{"jitter 1", func(p *Policy) { p.Jitter = 1 }, "jitter 1"},
		{"multiplier below 1", func(p *Policy) { p.Multiplier = 0.5 }, "multiplier 0.5"},
		{"zero initial", func(p *Policy) { p.BaseDelay = 0 }, "initial backoff"},
		{"zero cap", func(p *Policy) { p.MaxDelay = 0 }, "max backoff"},
		{"negative tolerance", func(p *Policy) { p.Tolerance = -time.Millisecond }, "tolerance"},
		{"multiplier +Inf", func(p *Policy) { p.Multiplier = math.Inf(1) }, "multiplier +Inf: must be a finite number"},
		{"multiplier -Inf", func(p *Policy) { p.Multiplier = math.Inf(-1) }, "multiplier -Inf: must be a finite number"},
		{"multiplier NaN", func(p *Policy) { p.Multiplier = math.NaN() }, "multiplier NaN: must be a finite number"},
		{"jitter +Inf", func(p *Policy) { p.Jitter = math.Inf(1) }, "jitter +Inf: must be a finite number"},
		{"jitter -Inf", func(p *Policy) { p.Jitter = math.Inf(-1) }, "jitter -Inf: must be a finite number"},
		{"jitter NaN", func(p *Policy) { p.Jitter = math.NaN() }, "jitter NaN: must be a finite number"},
		{"largest finite multiplier", func(p *Policy) { p.Multiplier = math.MaxFloat64 }, ""},
		{"every field at once", func(p *Policy) {
			*p = Policy{Multiplier: math.NaN(), Jitter: math.Inf(1), MinConnectTimeout: -1, Tolerance: -1}
		}, "initial backoff 0s: must be positive\nmultiplier NaN: must be a finite number\njitter +Inf: must be a finite number\n" +
			"max backoff 0s: must be positive\nmin connect timeout -1ns: must not be negative\ntolerance -1ns: must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := DefaultPolicy()
			tt.mutate(&p)
			err := p.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Validate() = %v, want an error mentioning %q", err, tt.want)
			}
		})
	}
}

func TestPolicyJSONRoundTrip(t *testing.T) {
	p := ReferencePolicy(2000)
	b, err := p.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"initial_backoff_ms":1000,"multiplier":1.6,"jitter":0.2,"max_backoff_ms":2000,"min_connect_timeout_ms":20000,"tolerance_ms":100}`
	if string(b) != want {
		t.Errorf("MarshalJSON = %s, want %s", b, want)
	}
	var back Policy
	if err := back.UnmarshalJSON(b); err != nil {
		t.Fatal(err)
	}
	if back != p {
		t.Errorf("round trip: %+v, want %+v", back, p)
	}
}

// TestPolicyJSONOutOfRange: a policy whose milliseconds do not fit a
// Duration is refused by name, not read as whatever the platform's
// float-to-int conversion makes of it.
func TestPolicyJSONOutOfRange(t *testing.T) {
	const ok = `"initial_backoff_ms":1000,"multiplier":1.6,"jitter":0.2,"max_backoff_ms":120000,"min_connect_timeout_ms":20000`
	tests := []struct {
		name, in, want string
	}{
		{"largest duration", `{"initial_backoff_ms":1000,"multiplier":1.6,"jitter":0.2,"max_backoff_ms":9223372036854,"min_connect_timeout_ms":20000,"tolerance_ms":100}`, ""},
		{"initial backoff beyond a duration", `{"initial_backoff_ms":1e300,"multiplier":1.6,"jitter":0.2,"max_backoff_ms":120000,"min_connect_timeout_ms":20000,"tolerance_ms":100}`,
			"initial_backoff_ms 1e+300: out of range for a duration"},
		{"max backoff just beyond a duration", `{"initial_backoff_ms":1000,"multiplier":1.6,"jitter":0.2,"max_backoff_ms":9223372036855,"min_connect_timeout_ms":20000,"tolerance_ms":100}`,
			"max_backoff_ms 9.223372036855e+12: out of range"},
		{"tolerance far below", `{` + ok + `,"tolerance_ms":-1e19}`, "tolerance_ms -1e+19: out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := DefaultPolicy()
			err := p.UnmarshalJSON([]byte(tt.in))
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("UnmarshalJSON = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("UnmarshalJSON = %v (policy %+v), want an error mentioning %q", err, p, tt.want)
			case tt.want != "" && p != DefaultPolicy():
				t.Errorf("policy changed to %+v by a refused document", p)
			}
		})
	}
}

// TestValidPolicyWritesJSON: whatever policy Validate accepts, verifying a
// chain against it gives numbers JSON can hold, so the report is written.
// A policy it should have refused fails only at the end, in json.Marshal.
func TestValidPolicyWritesJSON(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Policy)
	}{
		{"defaults", func(*Policy) {}},
		{"multiplier +Inf", func(p *Policy) { p.Multiplier = math.Inf(1) }},
		{"largest finite multiplier", func(p *Policy) { p.Multiplier = math.MaxFloat64 }},
		{"jitter just below 1", func(p *Policy) { p.Jitter = math.Nextafter(1, 0) }},
		{"extreme durations", func(p *Policy) {
			p.BaseDelay, p.MaxDelay, p.Tolerance = 1, math.MaxInt64, math.MaxInt64
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := DefaultPolicy()
			tt.mutate(&p)
			if p.Validate() != nil {
				return
			}
			r := Verify(p, chain(time.Second, 30*24*time.Hour, -time.Hour, time.Nanosecond))
			if _, err := json.Marshal(reportedParts(r)); err != nil {
				t.Errorf("Validate accepted %+v, but its result cannot be written: %v", p, err)
			}
		})
	}
}

// reportedParts is what a report writes of a Result: Result itself is
// never marshalled.
func reportedParts(r Result) any {
	return []any{r.Policy, r.Intervals, r.Reference, r.Strict, r.BackoffMS}
}

// TestResultHasNoJSONTags: nothing marshals a Result (reports write a
// PeerReport), so tags on it would describe a document no one writes.
func TestResultHasNoJSONTags(t *testing.T) {
	rt := reflect.TypeFor[Result]()
	for i := range rt.NumField() {
		t.Run(rt.Field(i).Name, func(t *testing.T) {
			if tag, ok := rt.Field(i).Tag.Lookup("json"); ok {
				t.Errorf("Result.%s has json tag %q", rt.Field(i).Name, tag)
			}
		})
	}
}

func FuzzVerify(f *testing.F) {
	f.Add(int64(1000), 1.6, 0.2, int64(120000), int64(100), []byte{0, 1, 2, 3, 4, 5, 6, 7})
	f.Add(int64(1), 1.0, 0.0, int64(1), int64(0), []byte{255, 255, 255, 255, 255, 255, 255, 255, 0})
	f.Fuzz(func(t *testing.T, baseMS int64, mult, jitter float64, capMS, tolMS int64, raw []byte) {
		p := Policy{BaseDelay: time.Duration(baseMS) * time.Millisecond, Multiplier: mult, Jitter: jitter,
			MaxDelay: time.Duration(capMS) * time.Millisecond, Tolerance: time.Duration(tolMS) * time.Millisecond}
		if p.Validate() != nil {
			return
		}
		// Any timestamps: each 4 bytes is a signed gap in microseconds.
		ts := []time.Time{t0}
		for i := 0; i+4 <= len(raw) && i < 4*64; i += 4 {
			g := int32(uint32(raw[i]) | uint32(raw[i+1])<<8 | uint32(raw[i+2])<<16 | uint32(raw[i+3])<<24)
			ts = append(ts, ts[len(ts)-1].Add(time.Duration(g)*time.Microsecond))
		}
		r := Verify(p, ts)
		if len(r.Intervals) != len(ts)-1 || len(r.BackoffMS) != len(r.Intervals) {
			t.Fatalf("%d attempts gave %d intervals, %d backoffs", len(ts), len(r.Intervals), len(r.BackoffMS))
		}
		allOK := true
		for i, iv := range r.Intervals {
			if iv.K != i+1 || iv.MinMS > iv.MaxMS || iv.ExpectedMS > max(Millis(p.MaxDelay), Millis(p.BaseDelay)) {
				t.Fatalf("interval %+v is inconsistent", iv)
			}
			if iv.OK != (float64(iv.BackoffMS) >= iv.MinMS && float64(iv.BackoffMS) <= iv.MaxMS) {
				t.Fatalf("interval %+v: ok disagrees with its own window", iv)
			}
			allOK = allOK && iv.OK
		}
		if r.Passed() != (allOK && len(ts) >= 2) {
			t.Fatalf("passed=%v, all ok=%v, attempts=%d", r.Passed(), allOK, len(ts))
		}
		if _, err := json.Marshal(reportedParts(r)); err != nil {
			t.Fatalf("policy %+v passed Validate, but the result cannot be written: %v", p, err)
		}
	})
}

// TestServerList: a server's list is a verdict on the chain only where
// the server sees every attempt; elsewhere it is not judged, and says why.
func TestServerList(t *testing.T) {
	failing := Verify(DefaultPolicy(), chainAt(t0, 300))
	for _, tt := range []struct {
		mode RetryMode
		want Verdict
	}{
		{RetryMode{}, Failed},
		{RetryMode{Kind: ModeHang}, Failed},
		{RetryMode{Kind: ModeSettingsClose}, Failed},
		{RetryMode{Kind: ModeRefuse}, NotJudged},
		{RetryMode{Kind: ModeRestart, Down: time.Second}, NotJudged},
		{RetryMode{Kind: ModeOutage, Serve: time.Second, Down: time.Second}, NotJudged},
	} {
		r := failing.ServerList(tt.mode)
		if r.Reference.Verdict != tt.want || r.Strict.Verdict != tt.want || (tt.want == NotJudged) != (r.Reason() == r.Skipped && r.Skipped != "") {
			t.Errorf("%v: %s, strict %s, reason %q; want %s", tt.mode, r.Reference.Verdict, r.Strict.Verdict, r.Reason(), tt.want)
		}
	}
}

// TestNoneReady: a client whose channel was never READY judges a server's
// list in a mode whose connections succeed as failed attempts, by the
// backoff; in the other modes the mode alone says how each ended.
func TestNoneReady(t *testing.T) {
	backoffMS := []int32{1000, 300}
	for _, tt := range []struct {
		mode RetryMode
		want Verdict
	}{
		{RetryMode{Kind: ModeSettingsClose}, Failed},
		{RetryMode{Kind: ModeGoaway}, Failed},
		{RetryMode{}, Failed},
		{RetryMode{Kind: ModeHang}, Failed},
	} {
		none := Run{Mode: tt.mode}.NoneReady(len(backoffMS)+1).VerifyBackoff(DefaultPolicy(), backoffMS)
		if none.Reference.Verdict != tt.want {
			t.Errorf("%v, never READY: %s, want %s", tt.mode, none.Reference.Verdict, tt.want)
		}
		if want := VerifyBackoff(DefaultPolicy(), backoffMS, tt.mode); !tt.mode.Succeeds() && !reflect.DeepEqual(none, want) {
			t.Errorf("%v, never READY: %+v; want the mode's own reading %+v", tt.mode, none, want)
		}
	}
	// READY or not, as the mode says, a storm's list is resets.
	if r := VerifyBackoff(DefaultPolicy(), backoffMS, RetryMode{Kind: ModeSettingsClose}); r.Reference.Verdict != Passed {
		t.Errorf("settings-close by the mode: %s, want passed (resets)", r.Reference.Verdict)
	}
}

// A reset interval owes no backoff: its line says so instead of a jitter
// divided by zero.
func TestLogLineReset(t *testing.T) {
	iv := Interval{K: 1, Measured: 5231 * time.Millisecond, Term: TermReset}
	want := "retry  1:backoff   5.23s,expected backoff   0.00s, reset"
	if got := iv.LogLine(); got != want {
		t.Errorf("LogLine() = %q, want %q", got, want)
	}
}
