package infer

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/backoff-audit/audit/internal/text"
)

// InferredValue is one inferred parameter (docs/spec.md §8.3): in JSON
// {"value", "low", "high"}, or {"undetermined": why}.
type InferredValue struct {
	Value, Low, High float64
	Undetermined     string
}

// inferredValue rounds e to the given decimals.
func inferredValue(e Estimate, decimals int) InferredValue {
	return InferredValue{Value: round(e.Value, decimals), Low: round(e.Low, decimals), High: round(e.High, decimals),
		Undetermined: e.Undetermined}
}

// round rounds v to the given decimals (at most 6).
func round(v float64, decimals int) float64 {
	p := pow10[decimals]
	return math.Round(v*p) / p
}

var pow10 = [...]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6}

// appendEstimate appends e, rounded, as InferredValue's JSON.
func appendEstimate(b []byte, e Estimate, decimals int) []byte {
	return inferredValue(e, decimals).appendJSON(b)
}

func (v InferredValue) appendJSON(b []byte) []byte {
	if v.Undetermined != "" {
		b = append(b, `{"undetermined":`...)
		return append(appendJSONString(b, v.Undetermined), '}')
	}
	b = append(b, `{"value":`...)
	b = appendFinite(b, v.Value)
	b = append(b, `,"low":`...)
	b = appendFinite(b, v.Low)
	b = append(b, `,"high":`...)
	b = appendFinite(b, v.High)
	return append(b, '}')
}

// appendFinite appends v, or null where JSON has no number for it.
func appendFinite(b []byte, v float64) []byte {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return append(b, "null"...)
	}
	return strconv.AppendFloat(b, v, 'f', -1, 64)
}

// appendJSONString appends s as encoding/json writes it: the reasons and
// signature names, plain ASCII, are written as they are.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' || c >= utf8.RuneSelf {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// MarshalJSON writes {"value", "low", "high"} or {"undetermined"}.
func (v InferredValue) MarshalJSON() ([]byte, error) { return v.appendJSON(nil), nil }

// UnmarshalJSON reads what MarshalJSON writes.
func (v *InferredValue) UnmarshalJSON(b []byte) error {
	var j struct {
		Value, Low, High float64
		Undetermined     string
	}
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*v = InferredValue(j)
	return nil
}

// text is the value with its interval, or why it is undetermined.
func (v InferredValue) text(format func(float64) string) string {
	if v.Undetermined != "" {
		return "undetermined (" + v.Undetermined + ")"
	}
	return format(v.Value) + " [" + format(v.Low) + ", " + format(v.High) + "]"
}

// The decimals inferred values keep: a microsecond, a ten-thousandth.
const (
	msDecimals    = 3
	ratioDecimals = 4
)

// inferredCap is the inferred MAX_BACKOFF: Value is nil (JSON null) when
// the chains never reached a cap, and Above (max_backoff_above_ms) is then
// what the cap is at least.
type inferredCap struct {
	Value *InferredValue
	Above float64
}

func inferredCapOf(c Cap) inferredCap {
	if !c.Reached && c.Determined() {
		return inferredCap{Above: round(c.Above, msDecimals)}
	}
	v := inferredValue(c.Estimate, msDecimals)
	return inferredCap{Value: &v}
}

// text is the cap in words.
func (c inferredCap) text(shape Shape) string {
	switch {
	case c.Value != nil:
		return c.Value.text(durationText)
	case shape == ShapeFlat:
		return "none: flat"
	}
	return "never reached (at least " + durationText(c.Above) + ")"
}

// PolicyVerdict is a chain judged against the policy of its fleet it runs
// (docs/spec.md §8.5), by the reference's reading (§3, §7).
type PolicyVerdict struct {
	Passed       bool     `json:"passed"`
	FirstFailure int      `json:"first_failure,omitempty"`
	Signatures   []string `json:"signatures,omitempty"`
}

// PeerInference is what --infer reads of one peer's chain (docs/spec.md
// §8): the schedule that best explains it (Fit), the fleet's policy it
// runs (Policy, from 1; none for an outlier or a chain without an
// interval), and its verdict against that policy.
type PeerInference struct {
	Fit           Fit
	Policy        int
	Outlier       bool
	AgainstPolicy *PolicyVerdict
}

// appendJSON appends the peer's "inferred" object:
//
//	{"policy": 2,                  // the fleet's policy, from 1; absent when none
//	 "outlier": true,              // no policy explains the chain; absent when false
//	 "intervals": 7, "runs": 1,    // intervals read, runs of backoff
//	 "shape": "growing",           // absent below three intervals
//	 "initial_backoff_ms": {"value", "low", "high"} | {"undetermined": why},
//	 "multiplier": …, "jitter": …,
//	 "max_backoff_ms": … | null, "max_backoff_above_ms": 16000, // null: never reached
//	 "connect_timeout_ms": …,      // absent when no attempt timed out
//	 "against_policy": {"passed", "first_failure", "signatures"}} // absent without a policy
//
// It is written for every peer of a large capture: from the fit itself,
// nothing allocated.
func (p *PeerInference) appendJSON(b []byte) []byte {
	f := &p.Fit
	b = append(b, '{')
	if p.Policy > 0 {
		b = append(b, `"policy":`...)
		b = append(strconv.AppendInt(b, int64(p.Policy), 10), ',')
	}
	if p.Outlier {
		b = append(b, `"outlier":true,`...)
	}
	b = append(b, `"intervals":`...)
	b = strconv.AppendInt(b, int64(f.Intervals), 10)
	b = append(b, `,"runs":`...)
	b = strconv.AppendInt(b, int64(f.Runs), 10)
	if f.Shape != "" {
		b = append(b, `,"shape":`...)
		b = appendJSONString(b, string(f.Shape))
	}
	b = append(b, `,"initial_backoff_ms":`...)
	b = appendEstimate(b, f.Initial, msDecimals)
	b = append(b, `,"multiplier":`...)
	b = appendEstimate(b, f.Multiplier, ratioDecimals)
	b = append(b, `,"jitter":`...)
	b = appendEstimate(b, f.Jitter, ratioDecimals)
	b = append(b, `,"max_backoff_ms":`...)
	if c := f.MaxBackoff; !c.Reached && c.Determined() {
		b = append(b, `null,"max_backoff_above_ms":`...)
		b = appendFinite(b, round(c.Above, msDecimals))
	} else {
		b = appendEstimate(b, c.Estimate, msDecimals)
	}
	if f.TimedOut > 0 {
		b = append(b, `,"connect_timeout_ms":`...)
		b = appendEstimate(b, f.ConnectTimeout, msDecimals)
	}
	if v := p.AgainstPolicy; v != nil {
		b = append(b, `,"against_policy":{"passed":`...)
		b = strconv.AppendBool(b, v.Passed)
		if v.FirstFailure > 0 {
			b = append(b, `,"first_failure":`...)
			b = strconv.AppendInt(b, int64(v.FirstFailure), 10)
		}
		if len(v.Signatures) > 0 {
			b = append(b, `,"signatures":[`...)
			for i, s := range v.Signatures {
				if i > 0 {
					b = append(b, ',')
				}
				b = appendJSONString(b, s)
			}
			b = append(b, ']')
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

// SignatureCount is how many chains of a policy carry a signature, judged
// against the policy.
type SignatureCount struct {
	Name  string `json:"name"`
	Seen  string `json:"seen_in"`
	Peers int    `json:"peers"`
}

// PolicyReport is one policy of a fleet (docs/spec.md §8.5).
type PolicyReport struct {
	Policy int `json:"policy"` // from 1, most peers first
	Peers  int `json:"peers"`
	// Share is of every chain read.
	Share float64 `json:"share"`
	// AlsoExplained counts its chains that another policy explains too.
	AlsoExplained   int            `json:"also_explained_by_another"`
	Shape           Shape          `json:"shape"`
	Initial         InferredValue  `json:"initial_backoff_ms"`
	Multiplier      InferredValue  `json:"multiplier"`
	Jitter          InferredValue  `json:"jitter"`
	MaxBackoff      *InferredValue `json:"max_backoff_ms"`
	MaxBackoffAbove float64        `json:"max_backoff_above_ms,omitempty"`
	ConnectTimeout  InferredValue  `json:"connect_timeout_ms"`
	// FirstJitter is how interval 1 spreads around the initial backoff;
	// FirstJittered says it spreads as the later ones do.
	FirstJitter   float64 `json:"first_jitter"`
	FirstJittered bool    `json:"first_jittered"`
	// StepCorrelation, from StepPairs pairs of steps, says whether the
	// jitter compounds (Compounds).
	StepCorrelation float64 `json:"step_correlation"`
	StepPairs       int     `json:"step_pairs"`
	Compounds       bool    `json:"compounds"`
	// Default: gRPC's default policy; Differs names what is not.
	Default bool     `json:"grpc_default"`
	Differs []string `json:"differs_from_default"`
	// Failed counts its chains that fail its own windows, by the
	// reference's reading; Signatures, what they carry.
	Failed     int              `json:"failed"`
	Signatures []SignatureCount `json:"signatures"`
}

// Policies is what --infer reads of a fleet: the policies its chains run,
// most peers first, and the chains that run none (docs/spec.md §8.5).
type Policies struct {
	// Peers counts the chains read; TooShort those without an interval,
	// in no policy and no outlier.
	Peers    int            `json:"peers"`
	TooShort int            `json:"too_short"`
	Policies []PolicyReport `json:"policies"`
	Outliers []netip.Addr   `json:"outliers"`
}

// policyReport is fleet policy j, q, of a fleet of peers chains.
func policyReport(j int, q *Policy, peers int) PolicyReport {
	c := inferredCapOf(q.MaxBackoff)
	return PolicyReport{Policy: j + 1, Peers: q.Peers, Share: round(float64(q.Peers)/float64(max(peers, 1)), 4),
		AlsoExplained: q.Ambiguous, Shape: q.Shape,
		Initial: inferredValue(q.Initial, msDecimals), Multiplier: inferredValue(q.Multiplier, ratioDecimals),
		Jitter: inferredValue(q.Jitter, ratioDecimals), MaxBackoff: c.Value, MaxBackoffAbove: c.Above,
		ConnectTimeout: inferredValue(q.ConnectTimeout, msDecimals),
		FirstJitter:    round(q.FirstJitter, 4), FirstJittered: q.FirstJittered,
		StepCorrelation: round(q.StepCorrelation, 4), StepPairs: q.Steps, Compounds: q.Compounds,
		Default: q.Default, Differs: append([]string{}, q.Differs...), Signatures: []SignatureCount{}}
}

// durationText is a time in ms for a person: "10.4 ms", "300 ms", "1.92 s".
func durationText(ms float64) string {
	if ms < 1000 {
		return strconv.FormatFloat(ms, 'g', 3, 64) + " ms"
	}
	return strconv.FormatFloat(ms/1000, 'g', 3, 64) + " s"
}

func ratioText(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

// Where the signatures of a policy's schedule words were measured, as
// backoff's signatures name them (docs/spec.md §4.2).
const (
	seenJS       = "grpc-js"
	seenCoreJava = "C-core, grpc-java"
)

// Schedule is the policy in a few words: "1 s ×1.6 ±20 %, cap 120 s".
func (p *PolicyReport) Schedule() string {
	var b strings.Builder
	if p.Initial.Undetermined != "" {
		b.WriteString("initial backoff undetermined")
	} else {
		b.WriteString(durationText(p.Initial.Value))
	}
	switch {
	case p.Shape == ShapeFlat:
		b.WriteString(" flat")
	case p.Shape == ShapeCappedAtOnce && p.MaxBackoff != nil:
		b.WriteString(", then " + durationText(p.MaxBackoff.Value) + " from interval 2,")
	case p.Multiplier.Undetermined == "":
		b.WriteString(" ×" + strconv.FormatFloat(p.Multiplier.Value, 'g', 3, 64))
	}
	switch j := p.Jitter; {
	case j.Undetermined != "":
		b.WriteString(", jitter undetermined")
	case j.Value < 0.01:
		b.WriteString(", no jitter")
	default:
		fmt.Fprintf(&b, " ±%.0f %%", j.Value*100)
	}
	switch {
	case p.Shape == ShapeCappedAtOnce || p.Shape == ShapeFlat:
	case p.MaxBackoff != nil && p.MaxBackoff.Undetermined == "":
		b.WriteString(", cap " + durationText(p.MaxBackoff.Value))
	case p.MaxBackoff == nil:
		b.WriteString(", cap never reached")
	}
	if p.Compounds {
		b.WriteString(", jitter compounds (" + seenJS + ")")
	}
	if p.FirstJittered {
		b.WriteString(", interval 1 jittered (" + seenCoreJava + ")")
	}
	if p.Default {
		b.WriteString(": gRPC's default")
	}
	return b.String()
}

// Texts are the policy's parameters in words, each with its interval or
// why it is undetermined: what the text report and the HTML page show.
func (p *PolicyReport) Texts() (initial, multiplier, jitter, maxBackoff, connectTimeout string) {
	return p.Initial.text(durationText), p.Multiplier.text(ratioText), p.Jitter.text(ratioText),
		inferredCap{Value: p.MaxBackoff, Above: p.MaxBackoffAbove}.text(p.Shape), p.ConnectTimeout.text(durationText)
}

// Headline is the fleet in one line: the policy most peers run, and how
// many run something else.
func (ps *Policies) Headline() string {
	placed := ps.Peers - ps.TooShort
	if len(ps.Policies) == 0 {
		return fmt.Sprintf("no policy found in %s", text.Plural(ps.Peers, "peer"))
	}
	top := &ps.Policies[0]
	line := fmt.Sprintf("%.1f %% of peers (%d of %d) run %s", 100*float64(top.Peers)/float64(max(ps.Peers, 1)), top.Peers, ps.Peers, top.Schedule())
	if rest := placed - top.Peers; rest > 0 {
		others := fmt.Sprintf("%d other policies", len(ps.Policies)-1)
		if len(ps.Policies) == 2 {
			others = "1 other policy"
		}
		line += fmt.Sprintf(", and %d run something else: %s, %s", rest, others, text.Plural(len(ps.Outliers), "outlier"))
	}
	if ps.TooShort > 0 {
		line += fmt.Sprintf("; %s without an interval", text.Plural(ps.TooShort, "peer"))
	}
	return line
}

// outliersNamed is how many outliers the text names; JSON has them all.
const outliersNamed = 20

// WriteText writes the "policies" section that ends a text report, after
// a blank line, nothing when r is nil (no --infer); w keeps the first
// error for its Flush.
func (r *Reading) WriteText(w *bufio.Writer) {
	if r == nil {
		return
	}
	w.WriteByte('\n')
	r.Policies.WriteText(w)
}

// WriteText writes the policies: the headline, then each policy and the
// outliers, a line each; w keeps the first error for its Flush.
func (ps *Policies) WriteText(w *bufio.Writer) {
	fmt.Fprintf(w, "policies (--infer, docs/spec.md §8): %s\n", ps.Headline())
	for i := range ps.Policies {
		p := &ps.Policies[i]
		fmt.Fprintf(w, "  #%d %s (%.1f %%): %s\n", p.Policy, text.Plural(p.Peers, "peer"), 100*p.Share, p.Schedule())
		initial, mult, jit, maxBackoff, timeout := p.Texts()
		fmt.Fprintf(w, "     initial %s, multiplier %s, jitter %s, cap %s, connect timeout %s\n", initial, mult, jit, maxBackoff, timeout)
		fmt.Fprintf(w, "     against its own windows: %d pass, %d fail", p.Peers-p.Failed, p.Failed)
		for j, s := range p.Signatures {
			if j == 0 {
				w.WriteString("; signatures:")
			}
			fmt.Fprintf(w, " %s (%s) %d", s.Name, s.Seen, s.Peers)
		}
		if len(p.Differs) > 0 && !p.Default {
			fmt.Fprintf(w, "; not gRPC's default: %s", strings.Join(p.Differs, ", "))
		}
		w.WriteByte('\n')
	}
	if n := len(ps.Outliers); n > 0 {
		names := make([]string, 0, min(n, outliersNamed))
		for _, a := range ps.Outliers[:min(n, outliersNamed)] {
			names = append(names, a.String())
		}
		fmt.Fprintf(w, "  outliers, no policy explains them (%d): %s", n, strings.Join(names, ", "))
		if n > outliersNamed {
			fmt.Fprintf(w, ", and %d more (JSON: policies.outliers)", n-outliersNamed)
		}
		w.WriteByte('\n')
	}
}
