package watch

import (
	"slices"
	"sort"
	"time"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/infer"
	"github.com/backoff-audit/audit/report/herd"
)

// The herd read as it goes: the herd reading (report.Peers.Herd) looks
// at a whole capture's peers and finds the attempts k that many of them
// made within herd.Window of one another. Here a wave is read once
// the attempts around it have come: at least herd.MinPeers peers'
// attempt k within the window, among the peers whose attempt k came
// within three standard deviations of the policy's jitter (WaveSpreadMS)
// of it, judged by the herd's rule (herd.Wave.Judge).

// portState is what a Watch keeps of one port.
type portState struct {
	sum             Counts
	retrying, loops int // set by each Tick
	herd            [waveKs]waveK
	// sample and reading, with Config.Infer: the last chains judged,
	// and the policies last read from them (nil before).
	sample  sample
	reading *infer.Reading
}

// Bounds of the herd read as it goes.
const (
	// waveKs bounds the attempts k a herd is read at: the first ones show
	// a restart and a client that does not jitter.
	waveKs = 32
	// waveKeep bounds the attempt times kept per port and k: when more
	// come, the oldest quarter is let go.
	waveKeep = 1 << 14
	// waveQuiet is the least time between two lines for the same port
	// and k: peers in a tight loop make attempt 0 for ever, a wave every
	// window. Every wave is counted.
	waveQuiet = 10 * time.Second
)

// waveK holds the times of attempt k of every chain of a port that the
// reading may still need, sorted.
type waveK struct {
	times []int64
	// done: windows that start before it were read.
	done int64
	// lastLine is the start of the last wave written, 0 when none.
	lastLine int64
	// lag is how long after a window its neighbours may come: three of
	// the policy's standard deviations; -1 until computed.
	lag int64
}

func (w *Watch) port(port uint16) *portState {
	ps := w.ports[port]
	if ps == nil {
		ps = &portState{}
		for k := range ps.herd {
			ps.herd[k].lag = -1
		}
		w.ports[port] = ps
	}
	return ps
}

// herdAdd notes attempt k of a chain of port, at ns.
func (w *Watch) herdAdd(port uint16, k int, ns int64) {
	if k >= waveKs {
		return
	}
	hk := &w.port(port).herd[k]
	if ns < hk.done {
		return // its windows were read
	}
	if len(hk.times) >= waveKeep {
		hk.times = slices.Delete(hk.times, 0, waveKeep/4)
		hk.done = max(hk.done, hk.times[0])
	}
	i := len(hk.times)
	for i > 0 && hk.times[i-1] > ns {
		i--
	}
	hk.times = slices.Insert(hk.times, i, ns)
}

// herdTick reads the waves of port whose neighbours have all come by now.
func (w *Watch) herdTick(port uint16, ps *portState, now int64) {
	win := int64(herd.Window)
	for k := range ps.herd {
		hk := &ps.herd[k]
		if hk.lag < 0 {
			hk.lag = int64(3 * herd.WaveSpreadMS(w.cfg.Policy, backoff.RetryMode{}, k) * float64(time.Millisecond))
		}
		for w.readWave(port, k, hk, now, win) {
		}
		// What no window from done on can reach is let go.
		cut := sort.Search(len(hk.times), func(i int) bool { return hk.times[i] >= hk.done-hk.lag-win })
		hk.times = slices.Delete(hk.times, 0, cut)
	}
}

// readWave reads the densest complete window from hk.done on, and reports
// whether it read one (then done moves past it).
func (w *Watch) readWave(port uint16, k int, hk *waveK, now, win int64) bool {
	// A window that starts at t is complete once its neighbours had
	// time to come: t + win + lag ≤ now.
	last := now - win - hk.lag
	if now == never {
		last = never
	}
	ts := hk.times
	from := sort.Search(len(ts), func(i int) bool { return ts[i] >= hk.done })
	best, bestAt, j := 0, -1, from
	for i := from; i < len(ts) && ts[i] <= last; i++ {
		for j < len(ts) && ts[j]-ts[i] < win {
			j++
		}
		if n := j - i; n > best {
			best, bestAt = n, i
		}
	}
	if best < herd.MinPeers {
		if last > hk.done {
			hk.done = last
		}
		return false
	}
	start := ts[bestAt]
	if now != never && start+win > last {
		return false // a denser window may start within it, and is not complete
	}
	end := ts[bestAt+best-1]
	lo := sort.Search(len(ts), func(i int) bool { return ts[i] >= start-hk.lag })
	hi := sort.Search(len(ts), func(i int) bool { return ts[i] >= start+win+hk.lag })
	wv := herd.Wave{K: k, Peers: hi - lo, Count: best, SpanMS: float64(end-start) / 1e6}
	hk.done = start + win
	if !wv.Judge(w.cfg.Policy, backoff.RetryMode{}) {
		return true
	}
	ps := w.port(port)
	w.sum.Waves++
	ps.sum.Waves++
	w.cfg.Metrics.Wave(port, wv.Expected)
	if hk.lastLine != 0 && start-hk.lastLine < int64(waveQuiet) {
		w.sum.WavesUnprinted++
		ps.sum.WavesUnprinted++
		return true
	}
	hk.lastLine = start
	w.events = append(w.events, Event{Event: EventHerdWave, Time: timeText(time.Unix(0, start)), Port: port, Wave: &wv, Note: wv.Note()})
	return true
}
