// Package metrics is the Prometheus exposition of an audit that runs on
// (`audit watch`, `audit live`): what came to each audited port and how
// its chains were judged, with libpcap's counters read at each scrape. It
// is written with Prometheus's client library, under its naming
// conventions (https://prometheus.io/docs/practices/naming/): every name
// starts with audit_, counters end in _total, and times are in seconds.
//
// The port is a label; a peer's address never is: a fleet has more
// clients than a time series database wants series. What a peer did is
// in the auditor's lines and reports.
package metrics

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/report"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// How a chain ended: the end label of audit_chains_total.
const (
	// EndSuccess: the chain's last attempt succeeded (backoff.Ending.Succeeded).
	EndSuccess = "success"
	// EndStopped: no attempt came by backoff.ChainEnd: the client stopped
	// retrying.
	EndStopped = "stopped retrying"
	// EndCap: the chain was judged when it reached the most attempts a
	// chain keeps; its later attempts are counted, not kept.
	EndCap = "attempt cap"
	// EndRun: the run ended while the chain went on.
	EndRun = "run end"
	// EndSession: an interop session ended (`audit live`).
	EndSession = "session end"
)

// IntervalReset is the verdict label of an interval after a success: the
// backoff began anew, so it is counted, not judged (backoff.TermReset).
const IntervalReset = "reset"

// Metrics holds the series of one run. Its methods are safe for
// concurrent use, and do nothing on a nil *Metrics, so that a run without
// --metrics calls them all the same.
type Metrics struct {
	reg *prometheus.Registry

	attempts, retransmits, untracked, dropped, forgotten *prometheus.CounterVec
	fates, chains, intervals, signatures, waves          *prometheus.CounterVec
	retrying, storm                                      *prometheus.GaugeVec
	policies                                             *policyCollector

	mu    sync.Mutex
	ports map[uint16]*portSeries
}

// portSeries caches the children of one port that each SYN touches: a
// lookup by label values would cost a hash and an allocation each.
type portSeries struct {
	attempts, retransmits prometheus.Counter
}

// New returns the series of a run, with the Go runtime's and the process's
// own (memory, CPU, open files) beside them.
func New() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), ports: map[uint16]*portSeries{}}
	port := []string{"port"}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "audit", Name: name, Help: help}, append(port, labels...))
		m.reg.MustRegister(v)
		return v
	}
	gauge := func(name, help string) *prometheus.GaugeVec {
		v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "audit", Name: name, Help: help}, port)
		m.reg.MustRegister(v)
		return v
	}
	m.attempts = counter("attempts_total",
		"New TCP connection attempts to the port: the first SYN of each source address, source port and ISN; kernel retransmissions apart (docs/spec.md §5.2).")
	m.retransmits = counter("syn_retransmissions_total",
		"SYNs to the port that repeat an attempt's source, port and ISN: the kernel retransmitting, never judged as a backoff.")
	m.untracked = counter("attempts_untracked_total",
		"Attempts from peers not tracked because the auditor held its most peers (--max-peers): counted, not judged.")
	m.dropped = counter("chain_attempts_dropped_total",
		"Attempts beyond the most a chain keeps (--max-chain): counted, not judged; the chain was judged on those it kept.")
	m.forgotten = counter("peers_forgotten_total",
		"Peers forgotten once idle past their next window: their chain, if any, was judged first.")
	m.fates = counter("attempt_fates_total",
		"Attempts of judged chains by fate, as their segments showed it (docs/spec.md §7.2).", "fate")
	m.chains = counter("chains_total",
		"Chains judged, by the reference reading's verdict (passed, failed, too few attempts, too many attempts) and by how they ended (success, stopped retrying, attempt cap, run end, session end).", "verdict", "end")
	m.intervals = counter("intervals_total",
		"Intervals between consecutive attempts of a peer, by verdict: ok, early, late against their window (docs/spec.md §3.3, §7.3), or reset after a success, not judged.", "verdict")
	m.signatures = counter("chain_signatures_total",
		"Chains that match a known deviation from the spec, by signature (docs/spec.md §7.4).", "signature")
	m.waves = counter("herd_waves_total",
		"Herd waves: at least 10 peers making the same attempt of their chains within 100 ms; expected is false when the policy's jitter should have spread them.", "expected")
	m.retrying = gauge("peers_retrying",
		"Peers whose chain of attempts is open now: they have not succeeded, and have tried again within their window.")
	m.storm = gauge("reconnect_storm_peers",
		"Peers in a tight reconnect loop now: each connection succeeds and drops, and the client, resetting its backoff after each success, comes back faster than the first backoff's window (docs/spec.md §7.3).")
	m.policies = &policyCollector{ports: map[uint16][]prometheus.Metric{}}
	m.reg.MustRegister(m.policies)
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func portLabel(port uint16) string { return strconv.Itoa(int(port)) }

func (m *Metrics) port(port uint16) *portSeries {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.ports[port]
	if s == nil {
		l := portLabel(port)
		s = &portSeries{attempts: m.attempts.WithLabelValues(l), retransmits: m.retransmits.WithLabelValues(l)}
		m.ports[port] = s
	}
	return s
}

// Watch makes every series of port exist from now on, at zero: a rate of
// a series that appears with its first increment misses that increment,
// and an alert on a port that never failed has a series to read.
func (m *Metrics) Watch(port uint16) {
	if m == nil {
		return
	}
	m.port(port)
	l := portLabel(port)
	m.untracked.WithLabelValues(l)
	m.dropped.WithLabelValues(l)
	m.forgotten.WithLabelValues(l)
	for _, v := range []backoff.Verdict{backoff.Passed, backoff.Failed, backoff.TooFew} {
		for _, end := range []string{EndSuccess, EndStopped, EndRun} {
			m.chains.WithLabelValues(l, string(v), end)
		}
	}
	for _, v := range []string{string(backoff.OK), string(backoff.Early), string(backoff.Late), IntervalReset} {
		m.intervals.WithLabelValues(l, v)
	}
	m.waves.WithLabelValues(l, "true")
	m.waves.WithLabelValues(l, "false")
	m.retrying.WithLabelValues(l)
	m.storm.WithLabelValues(l)
}

// Attempt counts a new attempt to port.
func (m *Metrics) Attempt(port uint16) {
	if m != nil {
		m.port(port).attempts.Inc()
	}
}

// Retransmit counts a retransmitted SYN to port.
func (m *Metrics) Retransmit(port uint16) {
	if m != nil {
		m.port(port).retransmits.Inc()
	}
}

// Untracked counts an attempt of a peer the auditor had no room for.
func (m *Metrics) Untracked(port uint16) {
	if m != nil {
		m.untracked.WithLabelValues(portLabel(port)).Inc()
	}
}

// Dropped counts an attempt beyond a chain's cap.
func (m *Metrics) Dropped(port uint16) {
	if m != nil {
		m.dropped.WithLabelValues(portLabel(port)).Inc()
	}
}

// Forgotten counts a peer forgotten after its window.
func (m *Metrics) Forgotten(port uint16) {
	if m != nil {
		m.forgotten.WithLabelValues(portLabel(port)).Inc()
	}
}

// Chain counts one judged chain: its verdict and how it ended (End…), each
// of its intervals by outcome, its signatures, and its attempts' fates.
func (m *Metrics) Chain(port uint16, end string, pr report.PeerReport) {
	if m == nil {
		return
	}
	l := portLabel(port)
	m.chains.WithLabelValues(l, string(pr.Verdict), end).Inc()
	for _, iv := range pr.Intervals {
		v := string(iv.Outcome)
		if iv.Term == backoff.TermReset {
			v = IntervalReset
		}
		m.intervals.WithLabelValues(l, v).Inc()
	}
	for _, s := range pr.Signatures {
		m.signatures.WithLabelValues(l, s.Name).Inc()
	}
	for _, a := range pr.Attempts {
		m.fates.WithLabelValues(l, string(a.Ending.Fate)).Inc()
	}
}

// Connected counts an attempt that succeeded with no failed attempt
// before it, by its fate: a connection, not a chain.
func (m *Metrics) Connected(port uint16, e backoff.Ending) {
	if m != nil {
		m.fates.WithLabelValues(portLabel(port), string(e.Fate)).Inc()
	}
}

// Reset counts the interval from a success to the peer's next attempt:
// the backoff began anew, so it is counted, not judged.
func (m *Metrics) Reset(port uint16) {
	if m != nil {
		m.intervals.WithLabelValues(portLabel(port), IntervalReset).Inc()
	}
}

// Wave counts a herd wave; expected says the policy's jitter explains it.
func (m *Metrics) Wave(port uint16, expected bool) {
	if m != nil {
		m.waves.WithLabelValues(portLabel(port), strconv.FormatBool(expected)).Inc()
	}
}

// Peers sets port's gauges: peers retrying now, and peers in a tight loop.
func (m *Metrics) Peers(port uint16, retrying, tightLoop int) {
	if m == nil {
		return
	}
	l := portLabel(port)
	m.retrying.WithLabelValues(l).Set(float64(retrying))
	m.storm.WithLabelValues(l).Set(float64(tightLoop))
}

// Capture is a live capture whose counters a scrape reads (capture.Live).
type Capture interface {
	Stats() (attempt.LiveStats, error)
}

// AddCapture exposes c's libpcap counters, read at each scrape, and
// notTaken, the captured packets the auditor's queue had no room for.
func (m *Metrics) AddCapture(iface string, c Capture, notTaken func() uint64) {
	if m == nil {
		return
	}
	m.reg.MustRegister(&captureCollector{c: c, labels: []string{iface}})
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "audit", Name: "capture_packets_not_taken_total",
		Help: "Captured packets the auditor did not take in: it was that far behind the capture.", ConstLabels: prometheus.Labels{"iface": iface}},
		func() float64 { return float64(notTaken()) }))
}

// libpcap's counters, as attempt.LiveStats names them.
var (
	receivedDesc = prometheus.NewDesc("audit_capture_packets_received_total",
		"Packets libpcap's filter passed on the interface since the capture opened; on a loopback interface each packet is seen twice, leaving and arriving. A 32-bit counter in libpcap: it wraps, which reads as a counter reset.",
		[]string{"iface"}, nil)
	droppedDesc = prometheus.NewDesc("audit_capture_packets_dropped_total",
		"Packets the kernel dropped because the capture's ring was full (libpcap's ps_drop).", []string{"iface"}, nil)
	ifDroppedDesc = prometheus.NewDesc("audit_capture_packets_interface_dropped_total",
		"Packets the interface or its driver dropped (libpcap's ps_ifdrop).", []string{"iface"}, nil)
)

// captureCollector reads a capture's counters when scraped: libpcap keeps
// them, so polling them would only make them stale.
type captureCollector struct {
	c      Capture
	labels []string
}

func (cc *captureCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- receivedDesc
	ch <- droppedDesc
	ch <- ifDroppedDesc
}

func (cc *captureCollector) Collect(ch chan<- prometheus.Metric) {
	st, err := cc.c.Stats()
	if err != nil { // closed: the run is ending, and its report has the last counts
		ch <- prometheus.NewInvalidMetric(receivedDesc, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(receivedDesc, prometheus.CounterValue, float64(st.Received), cc.labels...)
	ch <- prometheus.MustNewConstMetric(droppedDesc, prometheus.CounterValue, float64(st.Dropped), cc.labels...)
	ch <- prometheus.MustNewConstMetric(ifDroppedDesc, prometheus.CounterValue, float64(st.IfDropped), cc.labels...)
}

// Handler serves the exposition.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Server serves m at http://ADDR/metrics.
type Server struct {
	ln   net.Listener
	srv  *http.Server
	done chan error
	once sync.Once
	err  error
}

// Listen binds addr (host:port; port 0 picks a free one) and serves m's
// exposition at /metrics until Close. An address that cannot be bound is
// an error naming it.
func Listen(addr string, m *Metrics) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("audit: the Prometheus exposition is at /metrics\n"))
	})
	s := &Server{ln: ln, done: make(chan error, 1),
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute}}
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops the server, letting a scrape in progress finish for at most
// a second. It is idempotent.
func (s *Server) Close() error {
	s.once.Do(func() {
		ctx, cancel := contextWithTimeout(time.Second)
		defer cancel()
		if err := s.srv.Shutdown(ctx); err != nil {
			s.srv.Close()
		}
		if err := <-s.done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.err = err
		}
	})
	return s.err
}

func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
