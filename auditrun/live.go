// Package auditrun runs an audit, of capture files or of a live port. Live
// (Run), it is the reference server and a libpcap capture of the SYNs to its
// retry port in one process, or (Attach) the capture alone beside a server
// elsewhere, whose sessions it follows from its record file or from its
// control port, captured too (docs/spec.md §5.6). Each session is judged
// from the kernel's SYN timestamps, beside the server's own verdict, and
// the two lists are cross-checked (docs/spec.md §5). Offline (AuditFiles),
// it reads capture files and judges every peer, or the sessions of a
// server's record file or control port found in them.
package auditrun

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/capture"
	"github.com/backoff-audit/audit/control"
	"github.com/backoff-audit/audit/internal/field"
	"github.com/backoff-audit/audit/internal/text"
	"github.com/backoff-audit/audit/metrics"
	"github.com/backoff-audit/audit/report"
	"github.com/backoff-audit/audit/report/html"
	"github.com/backoff-audit/audit/server"
	"github.com/backoff-audit/audit/session"
)

// Config is one run of the live auditor.
type Config struct {
	// Iface is the interface to capture on.
	Iface string
	// Attach captures only: the server runs elsewhere on this host, and
	// RetryPort is its retry port.
	Attach bool
	// RetryPort is the port to watch with --attach; without it the
	// in-process server's retry port, chosen by Server.RetryAddr.
	RetryPort int
	// Idle ends a sniff-only session; 0 means twice the max backoff plus
	// the tolerance.
	Idle time.Duration
	// MaxMS is the cap a sniff-only session is judged against (0 = default).
	MaxMS int32
	// Record is, with Attach, that server's record file: sessions follow
	// its Start and Stop events and the cross-check runs.
	Record string
	// ControlPort is, with Attach and instead of Record, that server's
	// control port: it is captured too, and sessions follow the Start and
	// Stop calls decoded from it, cross-checked against Stop's backoff_ms
	// (docs/spec.md §5.6).
	ControlPort int
	// Write, when set, is a file that receives every captured packet: a
	// pcap file, or with ControlPort a pcapng file whose two interfaces
	// are the retry port's capture and the control port's.
	Write string
	// HTML, when set, is a page rewritten with each session's report.
	HTML string
	// Herd ends each session's report with the herd of its peers.
	Herd bool
	// JSON writes one JSON report per session instead of text.
	JSON       bool
	BufferSize int
	// Metrics, when set, is the address the Prometheus exposition is
	// served at (http://Metrics/metrics): the attempts as they come, each
	// session's chains when it ends (package metrics).
	Metrics string
	// OnListen, when set, is told the metrics address once it is bound.
	OnListen func(addr string)
	// Server configures the in-process server (without Attach).
	Server server.Config
}

// Outcome is what a run judged: its sessions, how many of them did not
// pass, and what failed in the first that did not; or, for an audit of
// peers without sessions (AuditFiles), why it did not pass.
type Outcome struct {
	Sessions, Failed int
	FirstFailure     string
	Verdict          string
	// Nothing, when set, says that nothing was judged (no attempt to the
	// port, no session) and what was seen instead: not a pass.
	Nothing string
}

// policy is what a sniff-only session is judged against: the cap MaxMS
// and the connect timeout Server.MinConnectTimeout.
func (c Config) policy() backoff.Policy {
	p := backoff.ReferencePolicy(c.MaxMS)
	if c.Server.MinConnectTimeout > 0 {
		p.MinConnectTimeout = c.Server.MinConnectTimeout
	}
	return p
}

// maxAttempts is what one session keeps, the server's MaxAttempts: the
// kernel's list of a session is capped as the server's is, and later
// attempts are counted and make the verdict backoff.Overflow, as there.
func (c Config) maxAttempts() int {
	if c.Server.MaxAttempts > 0 {
		return c.Server.MaxAttempts
	}
	return server.DefaultMaxAttempts
}

func (c Config) idle() time.Duration {
	if c.Idle > 0 {
		return c.Idle
	}
	p := c.policy()
	return 2*p.MaxDelay + p.Tolerance
}

// Run runs the auditor until ctx ends, then reports what it still holds,
// stops the server and closes the capture file. Each session's report goes
// to out as it ends, progress and warnings to errOut. The error says why
// the run could not start or went wrong (a capture or record error); the
// Outcome says what was judged.
func Run(ctx context.Context, cfg Config, out, errOut io.Writer) (Outcome, error) {
	if cfg.Attach && cfg.RetryPort == 0 {
		return Outcome{}, field.Errorf("Attach", nil, "needs %s, the port the server listens on", field.Name("RetryPort"))
	}
	if err := field.Port("RetryPort", cfg.RetryPort, !cfg.Attach); err != nil {
		return Outcome{}, err
	}
	if cfg.Record != "" && !cfg.Attach {
		return Outcome{}, field.Errorf("Record", cfg.Record, "is the record of a server elsewhere to follow, which needs %s", field.Name("Attach"))
	}
	if err := cfg.checkControl(); err != nil {
		return Outcome{}, err
	}
	if err := cfg.checkRanges(); err != nil {
		return Outcome{}, err
	}
	m, stopMetrics, err := serveMetrics("live", cfg.Metrics, errOut, cfg.OnListen)
	if err != nil {
		return Outcome{}, err
	}
	defer stopMetrics()
	q := newLiveQueue()
	var srv *server.Server
	port := cfg.RetryPort
	if !cfg.Attach {
		cfg.Server.OnEvent = q.pushEvent
		if srv, err = server.New(cfg.Server); err != nil {
			return Outcome{}, err
		}
		defer srv.Close()
		port = srv.RetryPort()
	}
	lc := capture.LiveConfig{Iface: cfg.Iface, Port: uint16(port), BufferSize: cfg.BufferSize, Segments: q.pushSegment}
	var out2 *writeFile
	var shared *capture.LiveFile // the control port's capture writes it too
	if cfg.Write != "" {
		if out2, err = createWriteFile(cfg.Write); err != nil {
			return Outcome{}, err
		}
		defer out2.abort()
		if cfg.ControlPort != 0 {
			shared = capture.NewLiveFile(out2.f)
			lc.File = shared
		} else {
			lc.Write = out2.f
		}
	}
	live, err := capture.OpenLive(lc)
	if err != nil {
		return Outcome{}, err
	}
	defer live.Close()
	var ctl *controlFeed
	if cfg.ControlPort != 0 {
		sessions := control.Sessions{Mode: cfg.Server.Mode, MinConnectTimeout: cfg.Server.MinConnectTimeout}
		if ctl, err = openControl(cfg.Iface, uint16(cfg.ControlPort), sessions, shared, q.pushEvent, q.pushWarning); err != nil {
			return Outcome{}, err
		}
		defer ctl.close()
	}
	if out2 != nil {
		// Only now, with the captures open, does the file replace what
		// the user had at that path.
		if err := out2.commit(); err != nil {
			return Outcome{}, err
		}
	}
	m.AddCapture(cfg.Iface, live, q.dropped)
	m.Watch(uint16(port))
	a := &liveAuditor{cfg: cfg, port: uint16(port), live: live, ctl: ctl, srv: srv, q: q, out: out, errOut: errOut, m: m,
		tr: newTracker(), skipped: map[string]uint64{}, captureStart: time.Now(),
		loopback: isLoopback(cfg.Iface)}
	if srv != nil {
		fmt.Fprintf(errOut, "audit live: control port %s, retry port %s\n", srv.ControlAddr(), srv.RetryAddr())
	}
	fmt.Fprintf(errOut, "audit live: capturing SYNs to port %d and the segments of their fates on %s, %s\n", port, cfg.Iface, live.Timestamps())
	if ctl != nil {
		fmt.Fprintf(errOut, "audit live: capturing control port %d whole on %s: sessions follow its Start and Stop calls\n", cfg.ControlPort, cfg.Iface)
	}
	err = a.run(ctx)
	if ferr := live.Close(); err == nil && ferr != nil {
		err = ferr
	}
	if ctl != nil { // before the file it may share is closed
		if ferr := ctl.close(); err == nil && ferr != nil {
			err = ferr
		}
	}
	if out2 != nil {
		if ferr := out2.f.Close(); err == nil && ferr != nil {
			err = field.Errorf("Write", cfg.Write, "%w", ferr)
		}
	}
	o := Outcome{Sessions: a.sessions, Failed: a.failed, FirstFailure: a.firstFailure}
	if a.sessions == 0 && err == nil {
		o.Nothing = fmt.Sprintf("nothing judged: no session ended in the run (%s seen on port %d)", text.Plural(int(a.totalSYNs), "SYN"), a.port)
	}
	return o, err
}

// checkControl vets ControlPort: it names another server's control
// port, so it needs Attach, and it replaces Record.
func (c Config) checkControl() error {
	switch {
	case c.ControlPort == 0:
		return nil
	case c.ControlPort < 0 || c.ControlPort > 65535:
		return field.Port("ControlPort", c.ControlPort, false)
	case !c.Attach:
		return field.Errorf("ControlPort", c.ControlPort, "is the control port of a server elsewhere, which needs %s; without it the in-process server's sessions are followed", field.Name("Attach"))
	case c.Record != "":
		return field.Errorf("ControlPort", c.ControlPort, "not with %s: both say where sessions come from; give one", field.Name("Record"))
	case c.ControlPort == c.RetryPort:
		return field.Errorf("ControlPort", c.ControlPort, "is %s too: they are two ports", field.Name("RetryPort"))
	}
	return nil
}

// newTracker is a tracker of the attempts of a capture whose filter keeps
// the segments that tell their fates (docs/spec.md §7).
func newTracker() *attempt.Tracker {
	t := attempt.NewTracker()
	t.SetFatesKnown(true)
	return t
}

// OutsideKeep bounds the attempts kept outside any session: the newest
// OutsideKeep to 2·OutsideKeep of them; older ones are counted, then
// forgotten. Such an attempt matters only to a session whose Start comes
// after it (a record file is read every recordPoll; at 50 000 SYN/s, 8192
// SYNs are 160 ms), and to the next report's cross-check, which lists it
// as outside the session.
const OutsideKeep = 8192

func isLoopback(iface string) bool {
	ifi, err := net.InterfaceByName(iface)
	return err == nil && ifi.Flags&net.FlagLoopback != 0
}

// liveAuditor owns every piece of state of a run; only run's goroutine
// touches it.
type liveAuditor struct {
	cfg    Config
	port   uint16
	live   *capture.Live
	ctl    *controlFeed // the control port's capture, with ControlPort
	srv    *server.Server
	q      *liveQueue
	out    io.Writer
	errOut io.Writer
	m      *metrics.Metrics // nil without --metrics

	// tr holds the attempts not yet reported, of every address, and
	// tells a retransmission from a new attempt. inside of them are the
	// open session's, at most cfg.maxAttempts() (later ones are counted in
	// sess.dropped, not held); outside those no session holds: with a
	// server side, before a Start or after a Stop. outsideDropped counts
	// the outside ones forgotten since the last report (see OutsideKeep).
	tr              *attempt.Tracker
	inside, outside int
	outsideDropped  int
	packets         uint64
	syns            uint64
	totalSYNs       uint64 // over the whole run, for its exit
	skipped         map[string]uint64
	batch           []liveItem // the queue's last batch, for its array
	loopback        bool

	fold         session.Fold // the server's sessions, from its events
	sess         *liveSession
	ending       bool // sess has ended on the server; waiting for its SYNs
	number       int  // sniff-only session numbers
	captureStart time.Time
	sessions     int
	failed       int
	firstFailure string // what failed in the first session that did
	// capEndCause says why the capture stopped with an error; lastSYN is
	// the time of the last SYN it delivered, where its record ends.
	capEndCause string
	lastSYN     time.Time
	// lastPacket is the time of the last SYN or segment taken in: once it
	// is past a session's end, the capture has delivered every packet of
	// the session, since it delivers them in time order.
	lastPacket time.Time
}

// catchUp bounds the wait, after a session ended, for the SYNs of its
// accepts to come out of the capture buffer; immediate mode makes it
// normally a few µs.
const catchUp = 500 * time.Millisecond

func (a *liveAuditor) run(ctx context.Context) error {
	w := a.startFeeds()
	defer w.stopCapture()
	defer w.stopTail()
	defer w.stopCtl()
	end := runEnd{cause: session.CauseInterrupted}
	a.loop(ctx, w, &end)
	a.shutdown(w, &end)
	a.reportExit()
	return end.err
}

// feeds are the goroutines that fill the auditor's queue besides the
// in-process server: the capture, and the record file or the control
// port's capture it follows.
type feeds struct {
	capDone, tailDone, ctlDone     chan error // nil once read
	stopCapture, stopTail, stopCtl context.CancelFunc
}

func (a *liveAuditor) startFeeds() *feeds {
	w := &feeds{capDone: make(chan error, 1)}
	var capCtx, tailCtx, ctlCtx context.Context
	capCtx, w.stopCapture = context.WithCancel(context.Background())
	tailCtx, w.stopTail = context.WithCancel(context.Background())
	ctlCtx, w.stopCtl = context.WithCancel(context.Background())
	go func() { w.capDone <- a.live.Run(capCtx, a.q.pushSYN, a.q.pushSkip) }()
	if a.ctl != nil {
		w.ctlDone = make(chan error, 1)
		go func() { w.ctlDone <- a.ctl.run(ctlCtx) }()
	}
	if a.cfg.Record != "" {
		w.tailDone = make(chan error, 1)
		go func() { w.tailDone <- tailRecord(tailCtx, a.cfg.Record, a.q.pushEvent, a.q.pushWarning) }()
	}
	return w
}

// runEnd is how a run ends: the error that ends it, if any, and the cause
// an open session then ends by (Ctrl-C or SIGTERM when there is no error).
type runEnd struct {
	err   error
	cause string
}

// fail keeps the first error, and makes it the cause.
func (e *runEnd) fail(what string, err error) {
	if err != nil && e.err == nil {
		e.err, e.cause = err, what+": "+err.Error()
	}
}

// loop applies what the queue brings, ends sessions (once their lists
// are complete, after catchUp at most, or after the idle time of a
// session without a server side), until ctx ends or a feed fails.
func (a *liveAuditor) loop(ctx context.Context, w *feeds, end *runEnd) {
	idle := time.NewTimer(time.Hour)
	idle.Stop()
	wait := time.NewTimer(time.Hour)
	wait.Stop()
	waiting := false
	for {
		select {
		case <-a.q.signal:
			if a.takeQueue() && a.sniffOnly() {
				idle.Reset(a.cfg.idle())
			}
			switch {
			case a.ending && a.caughtUp():
				a.finish()
			case a.ending && !waiting: // the wait counts from the session's end
				wait.Reset(catchUp)
				waiting = true
			}
			if !a.ending && waiting {
				wait.Stop()
				waiting = false
			}
		case <-wait.C:
			waiting = false
			if a.ending {
				a.finish()
			}
		case <-idle.C:
			if a.sess != nil {
				a.sess.cause = session.CauseIdle
				a.sess.EndTime = time.Now().Round(0) // wall clock, as the SYNs
				a.finish()
			}
		case err := <-w.capDone:
			w.capDone = nil
			end.fail(session.CauseCaptureError, err)
			a.captureStopped(end.cause)
			return
		case err := <-w.tailDone:
			w.tailDone = nil
			end.fail(session.CauseRecordError, err)
			return
		case err := <-w.ctlDone:
			// Sessions can no longer end at their Stop: as a capture
			// error, the open one ends here.
			w.ctlDone = nil
			end.fail(session.CauseCaptureError, err)
			a.captureStopped(end.cause)
			return
		case <-ctx.Done():
			return
		}
	}
}

// shutdown stops in the order that loses nothing: the server first (its
// last session ends and reports "server closed"), then the capture, which
// reads what its buffer still holds, then the record file; then it reports
// what is still open.
func (a *liveAuditor) shutdown(w *feeds, end *runEnd) {
	if a.srv != nil {
		if err := a.srv.Close(); err != nil && end.err == nil {
			end.err = err
		}
	}
	w.stopCapture()
	if w.capDone != nil {
		if err := <-w.capDone; err != nil {
			end.fail(session.CauseCaptureError, err)
			a.captureStopped(end.cause)
		}
	}
	w.stopTail()
	if w.tailDone != nil {
		end.fail(session.CauseRecordError, <-w.tailDone)
	}
	w.stopCtl()
	if w.ctlDone != nil {
		if err := <-w.ctlDone; err != nil {
			end.fail(session.CauseCaptureError, err)
			a.captureStopped(end.cause)
		}
	}
	a.takeQueue()
	if a.ending {
		a.finish()
	}
	if a.sess != nil {
		if a.sess.cause == "" {
			a.sess.cause = end.cause
		}
		a.finish()
	}
}

// reportExit says what the run saw outside every report: attempts outside
// any session, libpcap's counters, packets not taken in.
func (a *liveAuditor) reportExit() {
	// Only with a server side: sniffing, a session holds every SYN.
	if n := a.outside + a.outsideDropped; n > 0 {
		fmt.Fprintf(a.errOut, "audit live: %d attempts came outside any session (no Start covered them); not judged", n)
		if a.outsideDropped > 0 {
			fmt.Fprintf(a.errOut, "; the %d oldest were not kept", a.outsideDropped)
		}
		fmt.Fprintln(a.errOut)
	}
	if st, err := a.live.Stats(); err == nil {
		fmt.Fprintf(a.errOut, "audit live: at exit, %s\n", a.info(st).StatsLine())
	}
	if n := a.q.dropped(); n > 0 {
		fmt.Fprintf(a.errOut, "audit live: %d captured packets were not taken in: the auditor was %d behind the capture\n", n, maxQueued)
	}
}

// captureStopped notes that the capture ended with an error: the open
// session ends by it, whatever the server says of that session later, and
// its accepts from now on are explained as after the capture's end.
func (a *liveAuditor) captureStopped(cause string) {
	fmt.Fprintf(a.errOut, "audit live: %s; the open session ends here\n", cause)
	a.capEndCause = cause
	if a.sess != nil {
		a.sess.cause = cause
	}
}

// sniffOnly reports whether sessions are delimited by the SYNs alone.
func (a *liveAuditor) sniffOnly() bool {
	return a.cfg.Attach && a.cfg.Record == "" && a.cfg.ControlPort == 0
}

// takeQueue applies what the queue holds; it reports whether a SYN came.
func (a *liveAuditor) takeQueue() bool {
	items := a.q.take(a.batch)
	syn := false
	for i := range items {
		syn = a.handle(&items[i]) || syn
	}
	clear(items) // the events they point to
	a.batch = nil
	if cap(items) <= keepBatch {
		a.batch = items[:0]
	}
	return syn
}

// handle applies one queued item; it reports whether it was a SYN.
func (a *liveAuditor) handle(it *liveItem) bool {
	switch it.kind {
	case itemSYN:
		a.lastPacket = it.syn.Time
		a.addSYN(it.syn)
		return true
	case itemSegment:
		a.packets++
		a.lastPacket = it.syn.Time
		s := it.segment()
		a.tr.AddSegment(&s)
	case itemEvent:
		a.addEvent(*it.event)
	case itemWarning:
		fmt.Fprintf(a.errOut, "audit live: warning: %s\n", it.text)
	default:
		a.packets++
		a.skipped[it.text]++
	}
	return false
}

// info is the capture's part of a report.
func (a *liveAuditor) info(st attempt.LiveStats) report.LiveInfo {
	info := report.LiveInfo{Iface: a.cfg.Iface, Timestamps: a.live.Timestamps(), LiveStats: st, Write: a.cfg.Write,
		NotTaken: a.q.dropped(), Loopback: a.loopback}
	if a.ctl != nil {
		info.Control = a.ctl.stats()
	}
	return info
}

// finish reports the current session and forgets what it consumed.
func (a *liveAuditor) finish() {
	s := a.sess
	a.sess, a.ending = nil, false
	st, err := a.live.Stats()
	if err != nil {
		fmt.Fprintf(a.errOut, "audit live: %v\n", err)
	}
	s.outsideDropped = a.outsideDropped
	if a.srv != nil && s.End != nil && s.End.Dropped == 0 {
		if ss, ok := a.srv.Session(s.Number); ok {
			s.serverResult = &ss.Result
		}
	}
	if a.capEndCause != "" {
		s.captureEnd, s.captureEndCause = cmp.Or(a.lastSYN, a.captureStart), a.capEndCause
	}
	capInfo := attempt.CaptureInfo{Packets: a.packets, SYNs: a.syns, Skipped: a.skipped}
	attempts := a.tr.List()
	info := a.info(st)
	r := s.report(a.port, attempts, capInfo, &info, a.captureStart)
	for _, pr := range r.Peers.Reports() {
		a.m.Chain(a.port, metrics.EndSession, pr)
	}
	// Attempts after a server session's end may belong to the next one.
	var keep []attempt.Attempt
	if s.server && !s.EndTime.IsZero() {
		for _, at := range attempts {
			if at.Time.After(s.EndTime) {
				keep = append(keep, at)
			}
		}
	}
	a.hold(keep)
	a.outsideDropped = 0
	a.packets, a.syns, a.skipped = 0, 0, map[string]uint64{}
	a.sessions++
	if failed, _, first := r.Failures(); failed > 0 {
		if a.failed == 0 {
			a.firstFailure = first
		}
		a.failed++
	}
	if a.cfg.Herd {
		r.WithHerd()
	}
	if a.cfg.JSON {
		err = r.WriteJSON(a.out)
	} else {
		err = r.WriteText(a.out)
	}
	if a.cfg.HTML != "" {
		if herr := html.WriteFile(a.cfg.HTML, r); herr != nil {
			herr = field.Errorf("HTML", a.cfg.HTML, "%w", herr)
			fmt.Fprintf(a.errOut, "audit live: %v\n", herr)
		}
	}
	if err != nil {
		fmt.Fprintf(a.errOut, "audit live: %v\n", err)
	}
}

// maxQueued bounds the packets (SYNs, segments and skipped ones) the
// queue holds, 9 MiB of items: 0.3 s of a flood of refused SYNs at
// 100 000 SYN/s (each SYN and its RST), should the auditor fall that far
// behind the capture (it takes a packet in well under the capture's time
// for one). Later packets are counted and not queued; server events
// always are.
const maxQueued = 1 << 16

// keepBatch is the largest batch array the auditor keeps for the next
// one: a flood's batches are let go once taken in.
const keepBatch = 4096
