package watch

import (
	"net/netip"
	"slices"
	"time"
	"unsafe"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/infer"
	"github.com/backoff-audit/audit/report"
)

// The policies read as the chains come (Config.Infer, docs/spec.md §8.7):
// each port keeps the last chains it judged, a sample bounded by chains
// and by attempts; every InferEvery, and at the end, the sample of each
// port that took in a chain since is read again (infer.Read: the
// policies it runs, its outliers), and each chain judged after that is
// read against those policies as it is judged (Reading.ReadChain).

// Defaults of Config's inference.
const (
	// DefaultInferEvery is how often the policies are read again.
	DefaultInferEvery = time.Minute
	// DefaultInferSample is how many chains of each port they are read
	// from, and MaxInferSample the most: a reading holds the auditor's
	// loop, which the capture waits on, for a time linear in the chains
	// (BenchmarkCluster; BENCHMARKS.md, "audit watch").
	DefaultInferSample = 1000
	MaxInferSample     = 10_000
	// SampleAttempts is the attempts a sample keeps per chain it may
	// hold, on average: its bound in bytes. A chain of the spec's policy
	// that ends within a minute has 7.
	SampleAttempts = 8
)

// attemptBytes is what a sample keeps of an attempt: its time and its
// fate, as the verdicts read them.
const attemptBytes = int(unsafe.Sizeof(time.Time{}) + unsafe.Sizeof(backoff.Ending{}))

// SampleBytes is the most a port's sample of chains holds, in bytes: a
// ring of chains, and chains·SampleAttempts attempts.
func SampleBytes(chains int) int {
	return chains * (int(unsafe.Sizeof(sampled{})) + SampleAttempts*attemptBytes)
}

// sampled is a chain of the sample: what infer.Read reads of it.
type sampled struct {
	peer    netip.Addr
	judged  int64 // when, Unix nanoseconds
	times   []time.Time
	endings []backoff.Ending // nil when fates are not known
}

// sample is the last chains a port judged, oldest first from head in a
// ring, at most len(ring) of them and most attempts in all. It is the
// infer.Source the port's policies are read from.
type sample struct {
	ring           []sampled
	head, n        int
	attempts, most int
	// changed says a chain came since the policies were last read.
	changed bool
}

// add keeps c, letting the oldest chains go to make room; a chain of more
// than the most attempts keeps its first ones.
func (s *sample) add(c sampled, chains int) {
	if s.ring == nil {
		s.ring, s.most = make([]sampled, chains), chains*SampleAttempts
	}
	if len(c.times) > s.most {
		c.times = c.times[:s.most]
		if c.endings != nil {
			c.endings = c.endings[:s.most]
		}
	}
	for s.n > 0 && (s.n == len(s.ring) || s.attempts+len(c.times) > s.most) {
		s.attempts -= len(s.ring[s.head].times)
		s.ring[s.head] = sampled{}
		s.head = (s.head + 1) % len(s.ring)
		s.n--
	}
	s.ring[(s.head+s.n)%len(s.ring)] = c
	s.n++
	s.attempts += len(c.times)
	s.changed = true
}

// order is the sample's chains, oldest first, as infer.Read takes them.
func (s *sample) order() []int32 {
	out := make([]int32, s.n)
	for i := range out {
		out[i] = int32((s.head + i) % len(s.ring))
	}
	return out
}

// Times copies chain i's times into buf's array: infer.Read pools the
// arrays it is given back.
func (s *sample) Times(i int, buf []time.Time) (netip.Addr, []time.Time, int) {
	c := &s.ring[i]
	return c.peer, append(buf[:0], c.times...), 0
}

// Endings returns chain i's fates, which infer.Read only reads.
func (s *sample) Endings(i int, _ []backoff.Ending) []backoff.Ending { return s.ring[i].endings }

// inferChain reads the chain of p just judged, of times and endings, by
// its port's latest policies, sets it as pr's reading (in JSON: the text
// writes it from the reading returned), and keeps it in the sample.
func (w *Watch) inferChain(p *peer, ps *portState, times []time.Time, endings []backoff.Ending, at time.Time, pr *report.PeerReport) *infer.PeerInference {
	r := ps.reading
	if r == nil {
		r = w.noReading
	}
	pi := r.ReadChain(times, endings)
	if w.cfg.JSON {
		pr.Inferred, _ = pi.MarshalJSON()
	}
	if pi.Outlier {
		w.sum.Outliers++
		ps.sum.Outliers++
	}
	ps.sample.add(sampled{peer: p.addr, judged: at.UnixNano(), times: times, endings: endings}, w.cfg.InferSample)
	return &pi
}

// inferTick reads again the policies of each port whose sample took in a
// chain since they were last read, once InferEvery has passed since it
// last looked: one port a Tick, so that the auditor's loop, which the
// capture waits on, is never held for more than one reading; at the end
// (final), of every port with a sample. Each reading is a line and the
// port's policy gauges.
func (w *Watch) inferTick(now time.Time, final bool) {
	if !w.cfg.Infer {
		return
	}
	ns := now.UnixNano()
	if final {
		ports := make([]uint16, 0, len(w.ports))
		for port, ps := range w.ports {
			if ps.sample.n > 0 {
				ports = append(ports, port)
			}
		}
		slices.Sort(ports)
		for _, port := range ports {
			w.readPolicies(port, now)
		}
		return
	}
	if w.inferAt == 0 {
		w.inferAt = ns + int64(w.cfg.InferEvery)
	}
	if ns >= w.inferAt {
		w.inferAt = ns + int64(w.cfg.InferEvery)
		start := len(w.due)
		for port, ps := range w.ports {
			if ps.sample.changed && !slices.Contains(w.due, port) {
				w.due = append(w.due, port)
			}
		}
		slices.Sort(w.due[start:])
	}
	if len(w.due) > 0 {
		port := w.due[0]
		w.due = slices.Delete(w.due, 0, 1)
		w.readPolicies(port, now)
	}
}

// readPolicies reads the policies of port's sample: a line, and the
// port's gauges.
func (w *Watch) readPolicies(port uint16, now time.Time) {
	ps := w.ports[port]
	s := &ps.sample
	ps.reading = infer.Read(s.order(), s, w.cfg.Policy, backoff.Run{})
	s.changed = false
	w.cfg.Metrics.Policies(port, &ps.reading.Policies)
	w.events = append(w.events, Event{Event: EventPolicies, Time: timeText(now), Port: port,
		Policies: &ps.reading.Policies, Since: timeText(time.Unix(0, s.ring[s.head].judged))})
}
