// Package live is the live auditor: the reference server and a libpcap
// capture of the SYNs to its retry port in one process, or (Attach) the
// capture alone beside a server elsewhere, whose sessions it follows from
// its record file or from its control port, captured too (docs/spec.md
// §5.6). Each session is judged from the kernel's SYN timestamps, beside
// the server's own verdict, and the two lists are cross-checked
// (docs/spec.md §5). It also holds the offline form of that cross-check:
// a capture file against a server's record file.
package live

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/backoff-audit/audit/analyze"
	"github.com/backoff-audit/audit/analyze/htmlreport"
	"github.com/backoff-audit/audit/capture"
	"github.com/backoff-audit/audit/server"
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
}

// policy is what a sniff-only session is judged against: the cap of
// --max_reconnect_backoff_ms and the connect timeout of
// --min_connect_timeout_ms.
func (c Config) policy() analyze.Policy {
	p := analyze.ReferencePolicy(c.MaxMS)
	if c.Server.MinConnectTimeout > 0 {
		p.MinConnectTimeout = c.Server.MinConnectTimeout
	}
	return p
}

// maxAttempts is what one session keeps, the server's --max_attempts: the
// kernel's list of a session is capped as the server's is, and later
// attempts are counted and make the verdict analyze.Overflow, as there.
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
	if cfg.Attach && (cfg.RetryPort <= 0 || cfg.RetryPort > 65535) {
		return Outcome{}, fmt.Errorf("--attach needs --retry_port, the port the server listens on")
	}
	if cfg.Record != "" && !cfg.Attach {
		return Outcome{}, errors.New("--record with audit live is the record file to follow, for --attach; without it, write the in-process server's events with audit server --record")
	}
	if err := cfg.checkControl(); err != nil {
		return Outcome{}, err
	}
	if err := cfg.checkRanges(); err != nil {
		return Outcome{}, err
	}
	q := newLiveQueue()
	var srv *server.Server
	port := cfg.RetryPort
	if !cfg.Attach {
		cfg.Server.OnEvent = q.pushEvent
		var err error
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
		var err error
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
		if ctl, err = openControl(cfg.Iface, uint16(cfg.ControlPort), shared, q.pushEvent, q.pushWarning); err != nil {
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
	a := &liveAuditor{cfg: cfg, port: uint16(port), live: live, ctl: ctl, srv: srv, q: q, out: out, errOut: errOut,
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
			err = fmt.Errorf("--write %s: %w", cfg.Write, ferr)
		}
	}
	return Outcome{Sessions: a.sessions, Failed: a.failed, FirstFailure: a.firstFailure}, err
}

// checkControl vets ControlPort: it names another server's control
// port, so it needs Attach, and it replaces Record.
func (c Config) checkControl() error {
	switch {
	case c.ControlPort == 0:
		return nil
	case c.ControlPort < 0 || c.ControlPort > 65535:
		return fmt.Errorf("--control_port %d: not a port", c.ControlPort)
	case !c.Attach:
		return errors.New("--control_port with audit live names the control port of a server elsewhere, for --attach; without --attach the in-process server's sessions are followed")
	case c.Record != "":
		return errors.New("--control_port and --record both say where sessions come from: give one")
	case c.ControlPort == c.RetryPort:
		return fmt.Errorf("--control_port %d is --retry_port too: they are two ports", c.ControlPort)
	}
	return nil
}

// newTracker is a tracker of the attempts of a capture whose filter keeps
// the segments that tell their fates (docs/spec.md §7).
func newTracker() *analyze.Tracker {
	t := analyze.NewTracker()
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

	// tr holds the attempts not yet reported, of every address, and
	// tells a retransmission from a new attempt. inside of them are the
	// open session's, at most cfg.maxAttempts() (later ones are counted in
	// sess.dropped, not held); outside those no session holds: with a
	// server side, before a Start or after a Stop. outsideDropped counts
	// the outside ones forgotten since the last report (see OutsideKeep).
	tr              *analyze.Tracker
	inside, outside int
	outsideDropped  int
	packets         uint64
	syns            uint64
	skipped         map[string]uint64
	batch           []liveItem // the queue's last batch, for its array
	loopback        bool

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
	end := runEnd{cause: analyze.CauseInterrupted}
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
				a.sess.cause = analyze.CauseIdle
				a.sess.endTime = time.Now().Round(0) // wall clock, as the SYNs
				a.finish()
			}
		case err := <-w.capDone:
			w.capDone = nil
			end.fail(analyze.CauseCaptureError, err)
			a.captureStopped(end.cause)
			return
		case err := <-w.tailDone:
			w.tailDone = nil
			end.fail(analyze.CauseRecordError, err)
			return
		case err := <-w.ctlDone:
			// Sessions can no longer end at their Stop: as a capture
			// error, the open one ends here.
			w.ctlDone = nil
			end.fail(analyze.CauseCaptureError, err)
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
			end.fail(analyze.CauseCaptureError, err)
			a.captureStopped(end.cause)
		}
	}
	w.stopTail()
	if w.tailDone != nil {
		end.fail(analyze.CauseRecordError, <-w.tailDone)
	}
	w.stopCtl()
	if w.ctlDone != nil {
		if err := <-w.ctlDone; err != nil {
			end.fail(analyze.CauseCaptureError, err)
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
		a.addSYN(it.syn)
		return true
	case itemSegment:
		a.packets++
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

func (a *liveAuditor) addSYN(s analyze.SYN) {
	a.packets++
	a.syns++
	if a.tr.Retransmit(s) {
		if !a.cfg.JSON {
			fmt.Fprintf(a.out, "retransmit %s  %-22s (kernel retransmission, not a backoff)\n",
				s.Time.UTC().Format(analyze.TimeLayout), analyze.UnmapPort(s.Src))
		}
		return
	}
	a.lastSYN = s.Time
	at := analyze.Attempt{Time: s.Time.UTC(), Src: s.Src, Dst: s.Dst, Seq: s.Seq}
	if a.sess == nil && a.sniffOnly() {
		a.number++
		a.sess = newSniffSession(a.number, a.cfg.policy(), a.cfg.Server.Mode, a.cfg.maxAttempts(), at)
	}
	switch {
	case a.sess == nil || !a.sess.contains(at.Time):
		if a.outside >= 2*OutsideKeep {
			a.forgetOutside()
		}
		a.tr.AddAttempt(at)
		a.outside++
		if !a.cfg.JSON {
			fmt.Fprintf(a.out, "attempt %s  %-22s (outside any session)\n", at.Time.UTC().Format(analyze.TimeLayout), analyze.UnmapPort(at.Src))
		}
	case a.inside >= a.sess.maxAttempts:
		a.sess.dropped++
		if a.sess.dropped == 1 && !a.cfg.JSON { // later ones are only counted: a flood must not flood the output
			fmt.Fprintf(a.out, "attempt %s  %-22s not kept: session %d holds its maximum of %d attempts; "+
				"later ones are counted and the verdict will be %s\n",
				at.Time.UTC().Format(analyze.TimeLayout), analyze.UnmapPort(at.Src), a.sess.number, a.sess.maxAttempts, analyze.Overflow)
		}
	default:
		a.tr.AddAttempt(at)
		a.inside++
		if !a.cfg.JSON {
			fmt.Fprintln(a.out, a.sess.attemptLine(at))
		}
	}
}

// forgetOutside forgets the oldest attempts outside any session, keeping
// the newest OutsideKeep of them.
func (a *liveAuditor) forgetOutside() {
	held := a.tr.List()
	var in, out []analyze.Attempt
	for _, at := range held {
		if a.sess != nil && a.sess.contains(at.Time) {
			in = append(in, at)
		} else {
			out = append(out, at)
		}
	}
	slices.SortStableFunc(out, func(x, y analyze.Attempt) int { return x.Time.Compare(y.Time) })
	n := len(out) - OutsideKeep
	a.outsideDropped += n
	a.hold(append(in, out[n:]...))
}

// hold replaces what the auditor holds: the attempts the open session (if
// any) contains, up to its maximum, and the others outside it.
func (a *liveAuditor) hold(attempts []analyze.Attempt) {
	a.tr, a.inside, a.outside = newTracker(), 0, 0
	for _, at := range attempts {
		switch {
		case a.sess == nil || !a.sess.contains(at.Time):
			a.outside++
		case a.inside < a.sess.maxAttempts:
			a.inside++
		default:
			a.sess.dropped++
			continue
		}
		a.tr.AddAttempt(at)
	}
}

func (a *liveAuditor) addEvent(e analyze.RecordEvent) {
	// Wall clock only, as the record file and the capture have it: an
	// in-process time.Now also carries a monotonic reading, which Sub
	// would prefer, and intervals would differ from the record's by ns.
	e.Time = e.Time.Round(0)
	switch e.Event {
	case analyze.EventStart:
		if a.ending {
			a.finish()
		}
		if a.sess != nil { // a start without the end of the last one
			a.sess.cause = analyze.CauseInterrupted
			a.finish()
		}
		a.sess = newServerSession(e, a.cfg.maxAttempts())
		// Read from the control port, the server's list is Stop's
		// backoff_ms alone.
		a.sess.backoffOnly = a.ctl != nil
		// A record file is read some ms late: SYNs of the session may
		// have come before its Start.
		if a.outside > 0 {
			a.hold(a.tr.List())
		}
		if !a.cfg.JSON {
			fmt.Fprintf(a.out, "session %d: Start from %s, max_reconnect_backoff_ms %d (%v)\n",
				e.Session, e.Peer, a.sess.maxMS, a.sess.policy)
		}
	case analyze.EventAccept:
		acc := analyze.Accept{Peer: e.Peer, Time: e.Time}
		switch {
		case a.sess == nil:
		case e.Overflow: // the server did not keep it either: only counted, in its end
		case !a.ending && e.Session == a.sess.number:
			a.sess.accepts = append(a.sess.accepts, acc)
		case a.ending && e.Session == 0 && len(a.sess.late) < a.sess.maxAttempts:
			a.sess.late = append(a.sess.late, acc) // a SYN from just before Stop
		}
	case analyze.EventRestart:
		if a.sess != nil && e.Session == a.sess.number && !a.ending {
			a.sess.back = e.Time
		}
	case analyze.EventStop, analyze.EventExpire:
		if a.sess != nil && e.Session == a.sess.number && !a.ending {
			a.sess.end, a.sess.endTime = e.End, e.Time
			if a.capEndCause == "" { // a capture error names the end
				a.sess.cause = e.End.Cause
			}
			a.ending = true
		}
	}
}

// caughtUp reports whether the ending session's two lists are complete:
// every accept has its SYN, and every SYN inside the session its accept
// (in the session, or just after it ended). A refused SYN never gets one;
// the catchUp timer bounds the wait for it, and for the lists of a session
// that kept its maximum, which need not hold the same attempts.
func (a *liveAuditor) caughtUp() bool {
	s := a.sess
	if s.dropped > 0 {
		return false
	}
	held := a.tr.List()
	if s.backoffOnly {
		// Its list names no address: caught up once the kernel holds as
		// many attempts in the session as the list has.
		n := 0
		for _, at := range held {
			if s.contains(at.Time) {
				n++
			}
		}
		return s.end != nil && len(s.end.BackoffMS) > 0 && n > len(s.end.BackoffMS)
	}
	syns, accepts := map[netip.AddrPort]bool{}, map[netip.AddrPort]bool{}
	for _, at := range held {
		syns[analyze.UnmapPort(at.Src)] = true
	}
	for _, acc := range append(slices.Clone(s.accepts), s.late...) {
		accepts[analyze.UnmapPort(acc.Peer)] = true
	}
	for _, acc := range s.accepts {
		if !syns[analyze.UnmapPort(acc.Peer)] {
			return false
		}
	}
	for _, at := range held {
		if s.contains(at.Time) && !accepts[analyze.UnmapPort(at.Src)] {
			return false
		}
	}
	return true
}

// info is the capture's part of a report.
func (a *liveAuditor) info(st analyze.LiveStats) analyze.LiveInfo {
	info := analyze.LiveInfo{Iface: a.cfg.Iface, Timestamps: a.live.Timestamps(), LiveStats: st, Write: a.cfg.Write,
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
	if a.srv != nil && s.end != nil && s.end.Dropped == 0 {
		if ss, ok := a.srv.Session(s.number); ok {
			s.serverResult = &ss.Result
		}
	}
	if a.capEndCause != "" {
		s.captureEnd, s.captureEndCause = cmp.Or(a.lastSYN, a.captureStart), a.capEndCause
	}
	capInfo := analyze.CaptureInfo{Packets: a.packets, SYNs: a.syns, Skipped: a.skipped}
	attempts := a.tr.List()
	info := a.info(st)
	r := s.report(a.port, attempts, capInfo, &info, a.captureStart)
	// Attempts after a server session's end may belong to the next one.
	var keep []analyze.Attempt
	if s.server && !s.endTime.IsZero() {
		for _, at := range attempts {
			if at.Time.After(s.endTime) {
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
		r = r.WithHerd()
	}
	if a.cfg.JSON {
		err = json.NewEncoder(a.out).Encode(r)
	} else {
		err = r.WriteText(a.out)
	}
	if a.cfg.HTML != "" {
		if herr := htmlreport.WriteFile(a.cfg.HTML, r, r.Herd()); herr != nil {
			fmt.Fprintf(a.errOut, "audit live: %v\n", herr)
		}
	}
	if err != nil {
		fmt.Fprintf(a.errOut, "audit live: %v\n", err)
	}
}

// liveItem is one thing for the auditor: a SYN, a segment that tells an
// attempt's fate, a server event, a packet the decoder skipped (text is
// the reason), or a warning of the record follower (text is the warning).
// A SYN or a segment is held by value: the capture queues one per packet,
// and a pointer would be an allocation each. A segment is held in syn (its
// time, addresses and sequence number) and ack, flags and sent.
type liveItem struct {
	kind  itemKind
	flags uint8
	ack   uint32
	syn   analyze.SYN
	sent  analyze.Payload
	event *analyze.RecordEvent
	text  string
}

// segment is the segment item it holds.
func (it *liveItem) segment() analyze.Segment {
	return analyze.Segment{Time: it.syn.Time, Src: it.syn.Src, Dst: it.syn.Dst, Seq: it.syn.Seq,
		Ack: it.ack, Flags: it.flags, Sent: it.sent}
}

type itemKind uint8

const (
	itemSYN itemKind = iota
	itemSegment
	itemEvent
	itemSkip
	itemWarning
)

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

// liveQueue hands items from the capture, the server and the record tailer
// to the auditor without ever blocking them: the server's accept loop must
// not wait on the auditor.
type liveQueue struct {
	mu      sync.Mutex
	items   []liveItem
	packets int    // packet items in items
	lost    uint64 // packets not queued: maxQueued were
	signal  chan struct{}
}

func newLiveQueue() *liveQueue { return &liveQueue{signal: make(chan struct{}, 1)} }

func (q *liveQueue) push(it liveItem) {
	q.mu.Lock()
	switch {
	case it.kind == itemEvent || it.kind == itemWarning:
		q.items = append(q.items, it)
	case q.packets >= maxQueued:
		q.lost++
	default:
		q.items = append(q.items, it)
		q.packets++
	}
	q.mu.Unlock()
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

func (q *liveQueue) pushSYN(s analyze.SYN) { q.push(liveItem{kind: itemSYN, syn: s}) }
func (q *liveQueue) pushSegment(v *analyze.SegmentView) {
	s := v.Segment()
	q.push(liveItem{kind: itemSegment, syn: analyze.SYN{Time: s.Time, Src: s.Src, Dst: s.Dst, Seq: s.Seq},
		ack: s.Ack, flags: s.Flags, sent: s.Sent})
}
func (q *liveQueue) pushEvent(e analyze.RecordEvent) { q.push(liveItem{kind: itemEvent, event: &e}) }
func (q *liveQueue) pushSkip(reason string)          { q.push(liveItem{kind: itemSkip, text: reason}) }
func (q *liveQueue) pushWarning(msg string)          { q.push(liveItem{kind: itemWarning, text: msg}) }

// take returns the items queued, and queues the next ones in buf's array.
func (q *liveQueue) take(buf []liveItem) (items []liveItem) {
	q.mu.Lock()
	items, q.items, q.packets = q.items, buf[:0], 0
	q.mu.Unlock()
	return items
}

// dropped counts the packets that were not queued.
func (q *liveQueue) dropped() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.lost
}
