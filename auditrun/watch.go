package auditrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/backoff-audit/audit/capture"
	"github.com/backoff-audit/audit/report"
	"github.com/backoff-audit/audit/watch"
)

// WatchConfig is one run of `audit watch`: a libpcap capture of the SYNs
// to the ports and the segments of their fates, fed to a watch.Watch.
type WatchConfig struct {
	Iface string
	Ports []uint16
	// Write, when set, is a pcap file that receives every captured
	// packet, as `audit live --write` writes it.
	Write      string
	BufferSize int
	// Metrics, when set, is the address the Prometheus exposition is
	// served at (http://Metrics/metrics).
	Metrics string
	// Watch is the auditor's configuration; its Metrics and FatesKnown
	// are set by the run.
	Watch watch.Config
	// OnListen, when set, is told the metrics address once it is bound.
	OnListen func(addr string)
}

// tickEvery is how often a watch looks at the time: chains over, successes
// seen, herd waves complete, gauges set. A chain is judged at most this
// late.
const tickEvery = 250 * time.Millisecond

// Watch runs `audit watch` until ctx ends or the capture fails, then
// judges what is still open and writes the summary. Lines go to out,
// progress and libpcap's counters to errOut. The error says why the run
// could not start, or why the capture ended (an interface that
// disappeared); the Outcome says what was judged either way.
func Watch(ctx context.Context, cfg WatchConfig, out, errOut io.Writer) (Outcome, error) {
	if len(cfg.Ports) == 0 {
		return Outcome{}, errors.New("no --port: name the ports to watch")
	}
	if err := cfg.Watch.Validate(); err != nil {
		return Outcome{}, err
	}
	m, stopMetrics, err := serveMetrics("watch", cfg.Metrics, errOut, cfg.OnListen)
	if err != nil {
		return Outcome{}, err
	}
	defer stopMetrics()
	q := newLiveQueue()
	lc := capture.LiveConfig{Iface: cfg.Iface, Port: cfg.Ports[0], Ports: cfg.Ports[1:], BufferSize: cfg.BufferSize, Segments: q.pushSegment}
	var wf *writeFile
	if cfg.Write != "" {
		if wf, err = createWriteFile(cfg.Write); err != nil {
			return Outcome{}, err
		}
		defer wf.abort()
		lc.Write = wf.f
	}
	lv, err := capture.OpenLive(lc)
	if err != nil {
		return Outcome{}, err
	}
	defer lv.Close()
	if wf != nil {
		if err := wf.commit(); err != nil {
			return Outcome{}, err
		}
	}
	m.AddCapture(cfg.Iface, lv, q.dropped)
	wcfg := cfg.Watch
	wcfg.Metrics, wcfg.FatesKnown = m, true
	w := watch.New(wcfg, out)
	for _, p := range cfg.Ports {
		w.Watch(p)
	}
	inferring := ""
	if c := w.Config(); c.Infer {
		inferring = fmt.Sprintf("; --infer: the policies of each port's last %d chains judged, read every %v", c.InferSample, c.InferEvery)
	}
	fmt.Fprintf(errOut, "audit watch: capturing SYNs to %s and the segments of their fates on %s, %s; policy %v, connect timeout %v%s\n",
		portList(cfg.Ports), cfg.Iface, lv.Timestamps(), wcfg.Policy, wcfg.Policy.MinConnectTimeout, inferring)

	capCtx, stopCapture := context.WithCancel(context.Background())
	defer stopCapture()
	capDone := make(chan error, 1)
	go func() { capDone <- lv.Run(capCtx, q.pushSYN, nil) }()
	runErr := watchLoop(ctx, w, q, capDone)
	if runErr == nil {
		stopCapture()
		runErr = <-capDone
	}
	take(w, q, nil)
	sum, werr := w.Close(time.Now().Round(0))
	if st, err := lv.Stats(); err == nil {
		info := report.LiveInfo{Iface: cfg.Iface, LiveStats: st, NotTaken: q.dropped(), Loopback: isLoopback(cfg.Iface)}
		fmt.Fprintf(errOut, "audit watch: at exit, %s\n", info.StatsLine())
	}
	if ferr := lv.Close(); runErr == nil {
		runErr = ferr
	}
	if wf != nil {
		if ferr := wf.f.Close(); runErr == nil && ferr != nil {
			runErr = fmt.Errorf("--write %s: %w", cfg.Write, ferr)
		}
	}
	if runErr == nil {
		runErr = werr
	}
	return Outcome{Verdict: sum.Verdict()}, runErr
}

// watchLoop feeds w what the capture queues and the time, until ctx ends
// (nil) or the capture does (its error, or nil when it ended by itself).
func watchLoop(ctx context.Context, w *watch.Watch, q *liveQueue, capDone <-chan error) error {
	tick := time.NewTicker(tickEvery)
	defer tick.Stop()
	var batch []liveItem
	for {
		select {
		case <-q.signal:
			batch = take(w, q, batch)
		case <-tick.C:
			w.Tick(time.Now().Round(0)) // wall clock, as the packets'
		case err := <-capDone:
			if err == nil {
				err = errors.New("the capture ended")
			}
			return err
		case <-ctx.Done():
			return nil
		}
	}
}

// take hands w what the queue holds, and returns an array for the next
// batch.
func take(w *watch.Watch, q *liveQueue, buf []liveItem) []liveItem {
	items := q.take(buf)
	for i := range items {
		switch it := &items[i]; it.kind {
		case itemSYN:
			w.AddSYN(it.syn)
		case itemSegment:
			s := it.segment()
			w.AddSegment(&s)
		}
	}
	if cap(items) > keepBatch {
		return nil
	}
	return items[:0]
}

func portList(ports []uint16) string {
	s := "port"
	if len(ports) > 1 {
		s += "s"
	}
	for i, p := range ports {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprintf(" %d", p)
	}
	return s
}
