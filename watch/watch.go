// Package watch audits the clients of production ports as they come: no
// interop server, no session, no end. Each peer's attempts to a port form a
// chain, judged with the model of docs/spec.md §7 (backoff.VerifyRun with
// the attempts' fates, signatures) as soon as it ends: at a success, which
// resets the client's backoff (backoff.Ending.Succeeded), or once the
// client stopped retrying (backoff.ChainEnd). It writes a line per failed
// chain, per signature, per tight reconnect loop and per herd wave (text,
// or JSON Lines), keeps the Prometheus series of package metrics, and
// holds memory bounded by the peers retrying: a chain is freed once
// judged, a peer once idle past its window, and both are capped.
//
// A Watch takes SYNs and segments in capture order and the time from its
// caller (Tick), so that a test drives it with made-up packets and times;
// `audit watch` feeds it from a libpcap capture (package live).
package watch

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"time"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/infer"
	"github.com/backoff-audit/audit/internal/field"
	"github.com/backoff-audit/audit/internal/text"
	"github.com/backoff-audit/audit/metrics"
	"github.com/backoff-audit/audit/report"
)

// Defaults of Config's bounds.
const (
	// DefaultMaxPeers bounds the peers tracked at once.
	DefaultMaxPeers = 100_000
	// DefaultMaxChain bounds the attempts a chain keeps: with the spec's
	// policy, 64 attempts are about 1 h 45 min of retrying, most of it at
	// the cap.
	DefaultMaxChain = 64
)

// Config is what a Watch judges by and how far it may grow.
type Config struct {
	// Policy judges every chain.
	Policy backoff.Policy
	// MaxPeers bounds the peers tracked at once (chains open, or a
	// success being followed for a tight loop); the attempts of other
	// peers are counted and not judged. 0 is DefaultMaxPeers.
	MaxPeers int
	// MaxChain bounds the attempts a chain keeps; when one more comes the
	// chain is judged on those it kept, and later attempts are counted
	// until it ends. 0 is DefaultMaxChain.
	MaxChain int
	// JSON writes JSON Lines instead of text.
	JSON bool
	// FatesKnown says the input holds the segments fates are read from
	// (attempt.Tracker.SetFatesKnown): a live capture with the fate
	// filter does.
	FatesKnown bool
	// Metrics, when not nil, receives every count.
	Metrics *metrics.Metrics
	// Infer reads each judged chain's schedule, and the policies the last
	// InferSample chains of each port run, every InferEvery and at the
	// end (docs/spec.md §8.7).
	Infer bool
	// InferEvery is how often the policies are read again; 0 is
	// DefaultInferEvery.
	InferEvery time.Duration
	// InferSample bounds the chains of each port the policies are read
	// from (and their attempts, SampleBytes); 0 is DefaultInferSample,
	// and it is at most MaxInferSample.
	InferSample int
}

// Validate says which bound is out of range (a field.Error naming it):
// each bound's zero is its default, and anything else must leave a chain
// one interval, a reading at least a second apart and a sample of 1 to
// MaxInferSample chains. The policy is Policy.Validate's.
func (c *Config) Validate() error {
	switch {
	case c.MaxPeers < 0:
		return field.Errorf("MaxPeers", c.MaxPeers, "at least 1 peer")
	case c.MaxChain < 0 || c.MaxChain == 1:
		return field.Errorf("MaxChain", c.MaxChain, "at least 2 attempts (one interval)")
	case c.InferEvery < 0 || c.InferEvery > 0 && c.InferEvery < time.Second:
		return field.Errorf("InferEvery", c.InferEvery, "at least 1s")
	case c.InferSample < 0 || c.InferSample > MaxInferSample:
		return field.Errorf("InferSample", c.InferSample, "1 to %d chains", MaxInferSample)
	}
	if err := c.Policy.Validate(); err != nil {
		return fmt.Errorf("policy: %w", err)
	}
	return nil
}

// Watch is the auditor of chains as they come. It is not safe for
// concurrent use.
type Watch struct {
	cfg   Config
	out   *bufio.Writer
	tr    *attempt.Tracker
	peers map[peerKey]*peer
	held  int // attempts kept in open chains
	ports map[uint16]*portState
	sum   Summary
	// events waits to be written, in order, at the end of each call.
	events []Event
	werr   error
	// inferAt is when the policies are read next (inferTick), 0 before
	// the first packet; due, the ports whose policies are to be read, a
	// Tick each; noReading reads chains before a port's first.
	inferAt   int64
	due       []uint16
	noReading *infer.Reading
}

// peerKey is a peer of one port: its address as As16 spells it, so that
// an IPv4-mapped address is the IPv4 one (docs/spec.md §5.3).
type peerKey struct {
	addr [16]byte
	port uint16
}

// peer is what a Watch holds of one peer of a port.
type peer struct {
	key  peerKey
	addr netip.Addr
	// chain holds the open chain's attempts in time order, at most
	// MaxChain; n counts them all, and last is the latest one's time.
	chain []held
	n     int
	last  int64
	// checked is how many of chain are known not to have succeeded.
	checked int
	// judged says the chain was judged at the cap (EndCap): its later
	// attempts are counted until it ends, and chain is empty.
	judged bool
	// success is the time of the peer's last attempt that succeeded, 0
	// when none since it was tracked; loop the times of its latest
	// successes in a row, for the tight-loop reading; inLoop says a
	// tight loop was reported and goes on.
	success int64
	loop    []int64
	inLoop  bool
}

// held is an attempt of a chain: what finds it again in the tracker.
type held struct {
	ns    int64 // Unix nanoseconds
	dst   [16]byte
	sport uint16
	seq   uint32
}

// loopKeep is how many successes in a row the tight-loop reading looks
// at, and loopMin the fewest it needs: one quick reconnect is no loop.
const (
	loopKeep = 16
	loopMin  = 5
)

// New returns a Watch that writes its lines to out.
func New(cfg Config, out io.Writer) *Watch {
	if cfg.MaxPeers <= 0 {
		cfg.MaxPeers = DefaultMaxPeers
	}
	if cfg.MaxChain <= 0 {
		cfg.MaxChain = DefaultMaxChain
	}
	if cfg.InferEvery <= 0 {
		cfg.InferEvery = DefaultInferEvery
	}
	if cfg.InferSample <= 0 {
		cfg.InferSample = DefaultInferSample
	}
	cfg.InferSample = min(cfg.InferSample, MaxInferSample)
	w := &Watch{cfg: cfg, out: bufio.NewWriter(out), peers: map[peerKey]*peer{}, ports: map[uint16]*portState{}}
	w.tr = w.newTracker()
	if cfg.Infer {
		w.noReading = infer.Read(nil, &sample{}, cfg.Policy, backoff.Run{})
	}
	return w
}

func (w *Watch) newTracker() *attempt.Tracker {
	t := attempt.NewTracker()
	t.SetFatesKnown(w.cfg.FatesKnown)
	return t
}

// Config is what w judges by, its bounds' defaults filled in.
func (w *Watch) Config() Config { return w.cfg }

// Watch makes port's series and summary line exist before any SYN comes.
func (w *Watch) Watch(port uint16) {
	w.port(port)
	w.cfg.Metrics.Watch(port)
}

// AddSYN takes one SYN: a retransmission is counted; a new attempt joins
// its peer's chain, once a chain over by then is judged.
func (w *Watch) AddSYN(s attempt.SYN) {
	port := s.Dst.Port()
	ps := w.port(port)
	if w.cfg.Infer && w.inferAt == 0 {
		w.inferAt = s.Time.UnixNano() + int64(w.cfg.InferEvery)
	}
	if w.tr.Retransmit(s) {
		w.sum.Retransmits++
		ps.sum.Retransmits++
		w.cfg.Metrics.Retransmit(port)
		return
	}
	w.tr.Add(s)
	w.sum.Attempts++
	ps.sum.Attempts++
	w.cfg.Metrics.Attempt(port)
	src := s.Src.Addr().Unmap()
	key := peerKey{addr: src.As16(), port: port}
	p := w.peers[key]
	if p == nil {
		if len(w.peers) >= w.cfg.MaxPeers {
			w.sum.Untracked++
			ps.sum.Untracked++
			w.cfg.Metrics.Untracked(port)
			return
		}
		p = &peer{key: key, addr: src}
		w.peers[key] = p
	} else if p.n > 0 && s.Time.After(w.chainEnd(p)) {
		// Over by this SYN, unless a success ended it later than its
		// last attempt: settle reads the fates, which Tick otherwise
		// does, a batch at a time.
		w.settle(p, s.Time)
	}
	w.addAttempt(p, s)
	w.flush()
}

// AddSegment reads a segment into the fate of its attempt (attempt.Tracker.AddSegment).
func (w *Watch) AddSegment(s *attempt.Segment) { w.tr.AddSegment(s) }

// Tick tells the Watch the time: every chain over by now is judged, every
// success seen so far ends its chain, idle peers are forgotten, herd
// waves complete by now are read, and the gauges are set.
func (w *Watch) Tick(now time.Time) {
	for _, ps := range w.ports {
		ps.retrying, ps.loops = 0, 0
	}
	for _, p := range w.peers {
		if w.settle(p, now) {
			continue
		}
		if p.n == 0 && w.idle(p, now) {
			w.forget(p)
			continue
		}
		ps := w.ports[p.key.port]
		if p.n > 0 {
			ps.retrying++
		}
		if p.inLoop {
			ps.loops++
		}
	}
	for port, ps := range w.ports {
		w.herdTick(port, ps, now.UnixNano())
		w.cfg.Metrics.Peers(port, ps.retrying, ps.loops)
	}
	w.compact()
	w.sortEvents()
	w.flush()
	// After the chains judged by now, which were read by the policies
	// read before.
	w.inferTick(now, false)
	w.flush()
}

// Close judges every chain still open, as the run ends (metrics.EndRun),
// reads the herd waves that remain, and returns the summary, which it
// writes too.
func (w *Watch) Close(now time.Time) (Summary, error) {
	for _, p := range w.peers {
		if !w.settle(p, now) && p.n > 0 {
			w.end(p, metrics.EndRun, time.Time{}, now)
		}
	}
	for port, ps := range w.ports {
		w.herdTick(port, ps, never)
		w.cfg.Metrics.Peers(port, 0, 0)
	}
	w.sortEvents()
	w.inferTick(now, true)
	sum := w.summary()
	w.events = append(w.events, Event{Event: EventSummary, Time: timeText(now), Summary: &sum})
	w.flush()
	if err := w.out.Flush(); w.werr == nil {
		w.werr = err
	}
	return sum, w.werr
}

// settle ends p's chain at each success among its attempts not yet
// checked, and once it is over by now (backoff.ChainEnd); then it forgets
// p, and reports that it did.
func (w *Watch) settle(p *peer, now time.Time) (forgotten bool) {
	for p.checked < len(p.chain) {
		i := p.checked
		a, _ := w.tr.Find(w.attemptOf(p, i))
		switch {
		case a.Ending.Ready:
			w.succeeded(p, i, a)
			continue
		case i == len(p.chain)-1 && !decided(a.Ending) &&
			(a.Ending.Fate.Accepted() || !now.After(w.chainEnd(p))):
			// It may still succeed, or hang: the next SYN or the
			// chain's end decides. One never answered by the chain's
			// end will not succeed: its client stopped retrying.
			return false
		}
		p.checked++
	}
	if p.n > 0 && now.After(w.chainEnd(p)) {
		w.end(p, metrics.EndStopped, now, now)
		w.forget(p)
		return true
	}
	return false
}

// chainEnd is when p's open chain is over (backoff.ChainEnd).
func (w *Watch) chainEnd(p *peer) time.Time {
	return backoff.ChainEnd(w.cfg.Policy, p.n, time.Unix(0, p.last))
}

// decided reports whether an attempt's fate can no longer become a
// success: it ended on the wire. An unanswered attempt is unanswered only
// so far, and an open one may yet succeed.
func decided(e backoff.Ending) bool {
	return e.Fate == backoff.FateRefused || e.Fate == backoff.FateClosed || e.Fate == backoff.FateAbandoned
}

// idle reports whether a peer with no open chain has been quiet past the
// window after its last success: it is no longer reconnecting.
func (w *Watch) idle(p *peer, now time.Time) bool {
	return p.success == 0 || now.After(backoff.ChainEnd(w.cfg.Policy, 1, time.Unix(0, p.success)))
}

// forget frees p.
func (w *Watch) forget(p *peer) {
	w.held -= len(p.chain)
	delete(w.peers, p.key)
	w.sum.Forgotten++
	w.port(p.key.port).sum.Forgotten++
	w.cfg.Metrics.Forgotten(p.key.port)
}

// addAttempt adds the attempt s opened to p's open chain.
func (w *Watch) addAttempt(p *peer, s attempt.SYN) {
	ns := s.Time.UnixNano()
	w.herdAdd(p.key.port, p.n, ns)
	if p.n == 0 {
		p.last = ns
		if p.success != 0 {
			w.cfg.Metrics.Reset(p.key.port)
		}
	}
	p.n++
	p.last = max(p.last, ns)
	if p.judged || len(p.chain) >= w.cfg.MaxChain {
		if !p.judged {
			w.judgeFirst(p, len(p.chain), metrics.EndCap, time.Time{}, s.Time)
			w.held -= len(p.chain)
			p.chain, p.checked, p.judged = nil, 0, true
		}
		w.sum.Dropped++
		w.port(p.key.port).sum.Dropped++
		w.cfg.Metrics.Dropped(p.key.port)
		return
	}
	h := held{ns: ns, dst: s.Dst.Addr().As16(), sport: s.Src.Port(), seq: s.Seq}
	// Capture order is time order but for packets of one instant read
	// from two directions: insert where the time says.
	i := len(p.chain)
	for i > 0 && compareHeld(p.chain[i-1], h) > 0 {
		i--
	}
	p.chain = slices.Insert(p.chain, i, h)
	p.checked = min(p.checked, i)
	w.held++
}

func compareHeld(a, b held) int {
	return cmp.Or(cmp.Compare(a.ns, b.ns), cmp.Compare(a.sport, b.sport), cmp.Compare(a.seq, b.seq))
}

// attemptOf is what the tracker finds chain attempt i of p by.
func (w *Watch) attemptOf(p *peer, i int) attempt.Attempt {
	h := &p.chain[i]
	return attempt.Attempt{Time: time.Unix(0, h.ns).UTC(),
		Src: netip.AddrPortFrom(p.addr, h.sport), Dst: netip.AddrPortFrom(netip.AddrFrom16(h.dst).Unmap(), p.key.port), Seq: h.seq}
}

// succeeded ends p's chain at its attempt i, a success: the attempts up to
// it are a chain judged now, or, alone, a connection. The attempts after
// it begin the next chain.
func (w *Watch) succeeded(p *peer, i int, a attempt.Attempt) {
	reconnect := p.success != 0
	if i == 0 {
		w.cfg.Metrics.Connected(p.key.port, a.Ending)
		w.sum.Connections++
		w.port(p.key.port).sum.Connections++
		if reconnect {
			p.loop = append(p.loop, a.Time.UnixNano())
		} else {
			p.loop = append(p.loop[:0], a.Time.UnixNano())
		}
	} else {
		w.judgeFirst(p, i+1, metrics.EndSuccess, time.Time{}, a.Time)
		p.loop = append(p.loop[:0], a.Time.UnixNano())
	}
	if len(p.loop) > loopKeep {
		p.loop = slices.Delete(p.loop, 0, len(p.loop)-loopKeep)
	}
	p.success = a.Time.UnixNano()
	w.readLoop(p, a.Time)
	n := i + 1
	w.held -= n
	p.chain = slices.Delete(p.chain, 0, n)
	p.n -= n
	p.checked = 0
	if len(p.chain) > 0 {
		p.last = p.chain[len(p.chain)-1].ns
		// The next chain began before the success was read; the
		// interval to its first attempt is a reset one.
		w.cfg.Metrics.Reset(p.key.port)
	}
}

// readLoop reads p's latest successes in a row: a tight loop when each
// connection succeeded and the client came back faster than the first
// backoff's window, as the model's reading of a settings-close chain says
// (backoff.Reconnects). One line when it begins.
func (w *Watch) readLoop(p *peer, at time.Time) {
	loop := false
	var rc *backoff.Reconnects
	if len(p.loop) >= loopMin {
		times := make([]time.Time, len(p.loop))
		for i, ns := range p.loop {
			times[i] = time.Unix(0, ns).UTC()
		}
		rc = backoff.VerifyRun(w.cfg.Policy, times, backoff.Run{Mode: backoff.RetryMode{Kind: backoff.ModeSettingsClose}}).Reconnects
		loop = rc != nil && rc.TightLoop
	}
	switch {
	case loop && !p.inLoop:
		p.inLoop = true
		w.sum.TightLoops++
		w.port(p.key.port).sum.TightLoops++
		addr := p.addr
		w.events = append(w.events, Event{Event: EventTightLoop, Time: timeText(at), Port: p.key.port, Peer: &addr,
			Reconnects: rc, Successes: len(p.loop)})
	case !loop && p.inLoop && len(p.loop) >= loopMin:
		p.inLoop = false
	}
}

// end judges p's open chain, ended as end says at the time at: by the
// run's end (runEnd zero) or, for a client that stopped retrying, at
// runEnd, which then judges its last attempt too (VerifyRun's tail).
func (w *Watch) end(p *peer, end string, runEnd, at time.Time) {
	if !p.judged && len(p.chain) > 0 {
		w.judgeFirst(p, len(p.chain), end, runEnd, at)
	}
	w.held -= len(p.chain)
	p.chain, p.n, p.checked, p.judged = p.chain[:0], 0, 0, false
	if p.inLoop {
		p.inLoop = false
	}
	p.loop = p.loop[:0]
}

// judgeFirst judges the first n attempts of p's chain as one chain that
// ended as end says, at the time at; runEnd is the Run's End (zero: none).
func (w *Watch) judgeFirst(p *peer, n int, end string, runEnd, at time.Time) {
	ch := attempt.Chain{Peer: p.addr, Attempts: make([]attempt.Attempt, n)}
	for i := range n {
		want := w.attemptOf(p, i)
		a, ok := w.tr.Find(want)
		if !ok {
			a = want
		}
		ch.Attempts[i] = a
	}
	var run backoff.Run
	run.End = runEnd
	if w.cfg.FatesKnown {
		run.Endings = ch.Endings()
	}
	times := ch.Times()
	res := backoff.VerifyRun(w.cfg.Policy, times, run)
	pr := report.PeerReportOf(ch, res)
	ps := w.port(p.key.port)
	var inferred *infer.PeerInference
	if w.cfg.Infer {
		inferred = w.inferChain(p, ps, times, run.Endings, at, &pr)
	}
	w.cfg.Metrics.Chain(p.key.port, end, pr)
	w.sum.count(pr.Verdict)
	ps.sum.count(pr.Verdict)
	addr := p.addr
	if pr.Verdict == backoff.Failed {
		if w.sum.FirstFailure == "" {
			w.sum.FirstFailure = fmt.Sprintf("port %d, peer %s: %s", p.key.port, addr, pr.Reason)
		}
		w.events = append(w.events, Event{Event: EventFailedChain, Time: timeText(at), Port: p.key.port, Peer: &addr, End: end, Chain: &pr, inferred: inferred})
	} else if inferred != nil {
		w.events = append(w.events, Event{Event: EventChain, Time: timeText(at), Port: p.key.port, Peer: &addr, End: end, Chain: &pr, inferred: inferred})
	}
	for _, s := range pr.Signatures {
		w.sum.Signatures++
		ps.sum.Signatures++
		w.events = append(w.events, Event{Event: EventSignature, Time: timeText(at), Port: p.key.port, Peer: &addr, Signature: &s})
	}
}

// compact rebuilds the tracker with the attempts of open chains only, once
// it holds more than twice as many besides: it keeps every attempt it
// was given, and a watch runs on.
func (w *Watch) compact() {
	if w.tr.Attempts() <= 2*w.held+compactMin {
		return
	}
	t := w.newTracker()
	for _, p := range w.peers {
		for i := range p.chain {
			if a, ok := w.tr.Find(w.attemptOf(p, i)); ok {
				t.AddAttempt(a)
			}
		}
	}
	w.tr = t
	w.sum.Compactions++
}

// compactMin is the attempts a tracker may hold beyond twice the open
// chains' before it is rebuilt: a rebuild costs their number, and what it
// holds is heap that a flood makes the collector work through
// (BenchmarkWatchFlood; BENCHMARKS.md, "audit watch under the SYN-load
// benchmark").
const compactMin = 1 << 14

// flush writes the events waiting.
func (w *Watch) flush() {
	for i := range w.events {
		if w.werr == nil {
			w.werr = w.write(&w.events[i])
		}
	}
	w.events = w.events[:0]
	if err := w.out.Flush(); w.werr == nil {
		w.werr = err
	}
}

// sortEvents orders the events of one call by time, port and peer: a
// Tick visits peers in no order.
func (w *Watch) sortEvents() {
	slices.SortStableFunc(w.events, func(a, b Event) int {
		return cmp.Or(cmp.Compare(a.Time, b.Time), cmp.Compare(a.Port, b.Port), comparePeer(a.Peer, b.Peer))
	})
}

func comparePeer(a, b *netip.Addr) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return -1
	case b == nil:
		return 1
	}
	return a.Compare(*b)
}

func (w *Watch) write(e *Event) error {
	if w.cfg.JSON {
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		_, err = w.out.Write(append(b, '\n'))
		return err
	}
	_, err := w.out.WriteString(e.Text() + "\n")
	return err
}

// never is a time past every packet's.
const never = int64(1<<63 - 1)

func timeText(t time.Time) string { return t.UTC().Format(text.TimeLayout) }
