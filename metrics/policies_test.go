package metrics

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/backoff-audit/audit/infer"
)

// TestPolicyExposition: a reading's policies are gauges that pass
// promtool, a parameter undetermined or a cap never reached has none,
// and the next reading of the port replaces them whole.
func TestPolicyExposition(t *testing.T) {
	v := func(x float64) infer.InferredValue { return infer.InferredValue{Value: x, Low: x, High: x} }
	why := infer.InferredValue{Undetermined: "too short"}
	capped := v(120000)
	two := infer.Policies{Peers: 130, Outliers: []netip.Addr{netip.MustParseAddr("10.0.0.7")}, Policies: []infer.PolicyReport{
		{Policy: 1, Peers: 70, Default: true, Initial: v(1000), Multiplier: v(1.6), Jitter: v(0.2), MaxBackoff: &capped},
		{Policy: 2, Peers: 59, Initial: v(100), Multiplier: why, Jitter: v(0)},
	}}
	one := infer.Policies{Peers: 40, Policies: []infer.PolicyReport{{Policy: 1, Peers: 40, Initial: v(100), Multiplier: v(2), Jitter: v(0)}}}
	tests := []struct {
		name  string
		reads []*infer.Policies
		want  map[string]float64
	}{
		{"two policies", []*infer.Policies{&two}, map[string]float64{
			`audit_policy_sample_chains{port="443"}`:                      130,
			`audit_policy_outliers{port="443"}`:                           1,
			`audit_policy_peers{default="true",policy="1",port="443"}`:    70,
			`audit_policy_peers{default="false",policy="2",port="443"}`:   59,
			`audit_policy_initial_backoff_seconds{policy="1",port="443"}`: 1,
			`audit_policy_initial_backoff_seconds{policy="2",port="443"}`: 0.1,
			`audit_policy_multiplier{policy="1",port="443"}`:              1.6,
			`audit_policy_jitter{policy="1",port="443"}`:                  0.2,
			`audit_policy_jitter{policy="2",port="443"}`:                  0,
			`audit_policy_max_backoff_seconds{policy="1",port="443"}`:     120,
		}},
		{"then one: nothing of the first left", []*infer.Policies{&two, &one}, map[string]float64{
			`audit_policy_sample_chains{port="443"}`:                      40,
			`audit_policy_outliers{port="443"}`:                           0,
			`audit_policy_peers{default="false",policy="1",port="443"}`:   40,
			`audit_policy_initial_backoff_seconds{policy="1",port="443"}`: 0.1,
			`audit_policy_multiplier{policy="1",port="443"}`:              2,
			`audit_policy_jitter{policy="1",port="443"}`:                  0,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New()
			for _, ps := range tt.reads {
				m.Policies(443, ps)
			}
			body := scrape(t, m)
			got := map[string]float64{}
			for k, v := range samples(t, body) {
				if strings.HasPrefix(k, "audit_policy_") {
					got[k] = v
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("samples (-want +got):\n%s", diff)
			}
			promtoolCheck(t, body)
		})
	}
}
