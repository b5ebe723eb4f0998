package metrics

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/backoff-audit/audit/infer"
)

// The policies a port's clients run, as `audit watch --infer` last read
// them from its sample of chains (docs/spec.md §8.7). A policy is a label
// value, its number in that reading (1 the most run): a port has at most
// a few, and each reading replaces the port's series whole.
var (
	policySampleDesc = prometheus.NewDesc("audit_policy_sample_chains",
		"Chains of the port's sample the policies were last read from (audit watch --infer): the last ones judged, at most --infer_sample.",
		[]string{"port"}, nil)
	policyOutliersDesc = prometheus.NewDesc("audit_policy_outliers",
		"Chains of the port's sample that no policy explains, as last read.", []string{"port"}, nil)
	policyPeersDesc = prometheus.NewDesc("audit_policy_peers",
		"Chains of the port's sample that run the policy, as last read: policy 1 is the one most run, the numbers those of the last policies line; default says it is gRPC's default (docs/spec.md §8.5).",
		[]string{"port", "policy", "default"}, nil)
	policyInitialDesc = prometheus.NewDesc("audit_policy_initial_backoff_seconds",
		"The policy's initial backoff, as last read; absent when undetermined.", []string{"port", "policy"}, nil)
	policyMultiplierDesc = prometheus.NewDesc("audit_policy_multiplier",
		"The policy's multiplier, as last read (1: flat); absent when undetermined.", []string{"port", "policy"}, nil)
	policyJitterDesc = prometheus.NewDesc("audit_policy_jitter",
		"The policy's jitter, a fraction of each backoff (0.2: ±20 %), as last read; absent when undetermined.", []string{"port", "policy"}, nil)
	policyMaxBackoffDesc = prometheus.NewDesc("audit_policy_max_backoff_seconds",
		"The policy's cap on the backoff, as last read; absent when its chains never reached one or it is undetermined.", []string{"port", "policy"}, nil)
)

// policyCollector holds each port's policy series as last read, so that
// a scrape sees one reading whole, never one half replaced.
type policyCollector struct {
	mu    sync.Mutex
	ports map[uint16][]prometheus.Metric
}

func (c *policyCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{policySampleDesc, policyOutliersDesc, policyPeersDesc, policyInitialDesc,
		policyMultiplierDesc, policyJitterDesc, policyMaxBackoffDesc} {
		ch <- d
	}
}

func (c *policyCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ms := range c.ports {
		for _, m := range ms {
			ch <- m
		}
	}
}

// Policies replaces port's policy series with those of ps, a reading of
// its sample.
func (m *Metrics) Policies(port uint16, ps *infer.Policies) {
	if m == nil {
		return
	}
	l := portLabel(port)
	var ms []prometheus.Metric
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ms = append(ms, prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...))
	}
	gauge(policySampleDesc, float64(ps.Peers), l)
	gauge(policyOutliersDesc, float64(len(ps.Outliers)), l)
	for i := range ps.Policies {
		p := &ps.Policies[i]
		n := strconv.Itoa(p.Policy)
		gauge(policyPeersDesc, float64(p.Peers), l, n, strconv.FormatBool(p.Default))
		if p.Initial.Undetermined == "" {
			gauge(policyInitialDesc, p.Initial.Value/1000, l, n)
		}
		if p.Multiplier.Undetermined == "" {
			gauge(policyMultiplierDesc, p.Multiplier.Value, l, n)
		}
		if p.Jitter.Undetermined == "" {
			gauge(policyJitterDesc, p.Jitter.Value, l, n)
		}
		if c := p.MaxBackoff; c != nil && c.Undetermined == "" {
			gauge(policyMaxBackoffDesc, c.Value/1000, l, n)
		}
	}
	m.policies.mu.Lock()
	defer m.policies.mu.Unlock()
	m.policies.ports[port] = ms
}
