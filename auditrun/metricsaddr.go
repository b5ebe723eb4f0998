package auditrun

import (
	"fmt"
	"io"

	"github.com/backoff-audit/audit/metrics"
)

// serveMetrics serves a run's Prometheus exposition at addr, before its
// capture opens, so that an address that cannot be bound fails the run
// at once; it says where on errOut, and onListen, when not nil, is told
// the address. With addr empty there is no exposition: a nil Metrics,
// whose methods do nothing.
func serveMetrics(verb, addr string, errOut io.Writer, onListen func(string)) (*metrics.Metrics, func(), error) {
	if addr == "" {
		return nil, func() {}, nil
	}
	m := metrics.New()
	srv, err := metrics.Listen(addr, m)
	if err != nil {
		return nil, nil, fmt.Errorf("--metrics %s: %w", addr, err)
	}
	fmt.Fprintf(errOut, "audit %s: metrics at http://%s/metrics\n", verb, srv.Addr())
	if onListen != nil {
		onListen(srv.Addr().String())
	}
	return m, func() { srv.Close() }, nil
}
