package main

// `audit live`: the reference server and a libpcap capture of the SYNs to
// its retry port in one process, or (--attach) the capture alone. Each
// session is judged from the kernel's SYN timestamps, beside the server's
// own verdict, and the two lists are cross-checked (SPEC.md §5).

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/backoff-audit/audit/analyze"
	"github.com/backoff-audit/audit/capture"
	"github.com/backoff-audit/audit/server"
)

func init() { commands = append(commands, newLiveCmd) }

// liveConfig is one run of `audit live`.
type liveConfig struct {
	Iface  string
	Attach bool
	// RetryPort is the port to watch with --attach; without it the
	// in-process server's retry port, chosen by Server.RetryAddr.
	RetryPort int
	// Idle ends a sniff-only session; 0 means twice the max backoff plus
	// the tolerance.
	Idle time.Duration
	// MaxMS is the cap a sniff-only session is judged against (0 = default).
	MaxMS      int32
	ServerLog  string
	Write      string
	JSON       bool
	BufferSize int
	Server     server.Config
}

// policy is what a sniff-only session is judged against.
func (c liveConfig) policy() analyze.Policy { return analyze.ReferencePolicy(c.MaxMS) }

// maxAttempts is what one session keeps, the server's --max_attempts: the
// kernel's list of a session is capped as the server's is, and later
// attempts are counted and make the verdict analyze.Overflow, as there.
func (c liveConfig) maxAttempts() int {
	if c.Server.MaxAttempts > 0 {
		return c.Server.MaxAttempts
	}
	return server.DefaultMaxAttempts
}

func (c liveConfig) idle() time.Duration {
	if c.Idle > 0 {
		return c.Idle
	}
	p := c.policy()
	return 2*p.MaxDelay + p.Tolerance
}

func newLiveCmd() *cobra.Command {
	var cfg liveConfig
	var fl serverFlags // the flags of `audit server`, with the same names
	var format string
	cmd := &cobra.Command{
		Use:   "live --iface IFACE",
		Short: "Run the reference server and verify each session from the kernel's SYN timestamps",
		Long: `live runs the reference server (the flags of 'audit server') and, in the same
process, captures the SYNs to its retry port with libpcap. While a session
runs it prints one line per attempt; when the session's Stop returns it
prints the kernel's verdict over the SYN timestamps, the server's verdict,
and a cross-check of the two lists: each attempt paired by peer ip and port
with its app delay, attempts only one side saw and why, and a diagnosis of
every interval whose verdict the server's timestamps changed.

With --attach it only captures: the server runs elsewhere on this host and
--retry_port names its port. A session then ends after --idle without a
SYN; with --server-log (that server's --record file) sessions follow its
Start and Stop and the cross-check runs too.

A session keeps at most --max_attempts attempts on either side; later ones
are counted and its verdict is "too many attempts", so a SYN flood cannot
exhaust memory. Of the attempts outside any session only the last 8192 to
16384 are kept, for the next report's cross-check; older ones are counted.

Ctrl-C or SIGTERM reports what was captured, stops the server and closes the
--write file complete; so does a capture error (the session's cause then
says "capture error"). The --write file is flushed when the capture is
idle, at least every 250 ms while SYNs come, and at the end. libpcap's
counters ("received", "dropped") count packets: on a loopback interface the
kernel's capture sees each SYN twice, leaving and arriving, so there they
read two per SYN. Capturing needs root, or CAP_NET_RAW and CAP_NET_ADMIN on
the binary. Exit 0 when every verdict passed, 1 when one failed, 2 when
nothing could be judged.`,
		Example: `  audit live --iface lo --control_port=8080 --retry_port=8081
  audit live --iface lo --attach --retry_port=8081 --server-log=run.jsonl --format=json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format != "text" && format != "json" {
				return usageError(fmt.Errorf("--format %q: must be text or json", format))
			}
			cfg.JSON = format == "json"
			srvCfg, err := fl.config()
			if err != nil {
				return usageError(err)
			}
			cfg.Server, cfg.RetryPort = srvCfg, fl.retryPort
			cfg.Server.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			if fl.record != "" && !cfg.Attach {
				f, err := os.OpenFile(fl.record, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
				if err != nil {
					return usageError(fmt.Errorf("open record file: %w", err))
				}
				defer f.Close()
				cfg.Server.Record = f
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runLive(ctx, cfg, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	fl.register(f, "port that accepts and closes every connection; 0 picks a free port. With --attach: the port to watch")
	f.StringVar(&cfg.Iface, "iface", "lo", "interface to capture on")
	f.BoolVar(&cfg.Attach, "attach", false, "only capture; the server runs elsewhere on this host (--retry_port is its port)")
	f.StringVar(&cfg.ServerLog, "server-log", "", "with --attach: that server's --record file; sessions follow it and the cross-check runs")
	f.DurationVar(&cfg.Idle, "idle", 0, "with --attach and no --server-log: end a session after this long without a SYN (default twice the max backoff plus the tolerance)")
	f.Int32Var(&cfg.MaxMS, "max_reconnect_backoff_ms", 0, "with --attach and no --server-log: the cap sessions are judged against (0 = default 120000)")
	f.StringVar(&cfg.Write, "write", "", "also save every captured packet to this file (pcap, nanosecond timestamps), for 'audit pcap'")
	f.StringVar(&format, "format", "text", "report format: text, or json (one line per session)")
	f.IntVar(&cfg.BufferSize, "buffer", capture.DefaultLiveBuffer, "kernel capture buffer in bytes")
	return cmd
}

// runLive runs the auditor until ctx ends, then reports what it still
// holds, stops the server and closes the capture file. It returns a
// verdictError when any session failed.
func runLive(ctx context.Context, cfg liveConfig, out, errOut io.Writer) error {
	if cfg.Attach && (cfg.RetryPort <= 0 || cfg.RetryPort > 65535) {
		return usageError(fmt.Errorf("--attach needs --retry_port, the port the server listens on"))
	}
	if cfg.ServerLog != "" && !cfg.Attach {
		return usageError(errors.New("--server-log is for --attach; the in-process server reports its events directly"))
	}
	q := newLiveQueue()
	var srv *server.Server
	port := cfg.RetryPort
	if !cfg.Attach {
		cfg.Server.OnEvent = q.pushEvent
		var err error
		if srv, err = server.New(cfg.Server); err != nil {
			return usageError(err)
		}
		defer srv.Close()
		port = srv.RetryPort()
	}
	lc := capture.LiveConfig{Iface: cfg.Iface, Port: uint16(port), BufferSize: cfg.BufferSize}
	var out2 *writeFile
	if cfg.Write != "" {
		var err error
		if out2, err = createWriteFile(cfg.Write); err != nil {
			return usageError(err)
		}
		defer out2.abort()
		lc.Write = out2.f
	}
	live, err := capture.OpenLive(lc)
	if err != nil {
		return usageError(err)
	}
	defer live.Close()
	if out2 != nil {
		// Only now, with the capture open, does the file replace what
		// the user had at that path.
		if err := out2.commit(); err != nil {
			return usageError(err)
		}
	}
	a := &liveAuditor{cfg: cfg, port: uint16(port), live: live, srv: srv, q: q, out: out, errOut: errOut,
		index: map[attemptID]attemptRef{}, skipped: map[string]uint64{}, captureStart: time.Now(),
		loopback: isLoopback(cfg.Iface)}
	if srv != nil {
		fmt.Fprintf(errOut, "audit live: control port %s, retry port %s\n", srv.ControlAddr(), srv.RetryAddr())
	}
	fmt.Fprintf(errOut, "audit live: capturing SYNs to port %d on %s, %s\n", port, cfg.Iface, live.Timestamps())
	err = a.run(ctx)
	if ferr := live.Close(); err == nil && ferr != nil {
		err = ferr
	}
	if out2 != nil {
		if ferr := out2.f.Close(); err == nil && ferr != nil {
			err = fmt.Errorf("--write %s: %w", cfg.Write, ferr)
		}
	}
	if err != nil {
		return err
	}
	return sessionsVerdict(a.failed, a.sessions, a.firstFailure)
}

// writeFile is the --write file: written under a temporary name beside
// the target, so that a run that fails before its capture opens leaves
// what was at the target untouched. A target that is not a regular file
// (a FIFO, /dev/stdout) is written in place.
type writeFile struct {
	f         *os.File
	tmp, path string
}

func createWriteFile(path string) (*writeFile, error) {
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return nil, fmt.Errorf("--write: %w", err)
		}
		return &writeFile{f: f, path: path}, nil
	}
	dir, base := filepath.Split(path)
	f, err := os.CreateTemp(cmp.Or(dir, "."), "."+base+".*.tmp")
	if err != nil {
		return nil, fmt.Errorf("--write %s: %w", path, err)
	}
	// CreateTemp makes the file private; a capture file is as readable
	// as os.Create would have made it.
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("--write %s: %w", path, err)
	}
	return &writeFile{f: f, tmp: f.Name(), path: path}, nil
}

// commit gives the file its name.
func (w *writeFile) commit() error {
	if w.tmp == "" {
		return nil
	}
	if err := os.Rename(w.tmp, w.path); err != nil {
		return fmt.Errorf("--write %s: %w", w.path, err)
	}
	w.tmp = ""
	return nil
}

// abort removes the temporary file of a run that never committed it.
func (w *writeFile) abort() {
	if w.tmp != "" {
		w.f.Close()
		os.Remove(w.tmp)
	}
}

// attemptID identifies an attempt: the SYN's addresses (unmapped) and ISN.
type attemptID struct {
	src, dst netip.AddrPort
	seq      uint32
}

func idOf(at analyze.Attempt) attemptID {
	return attemptID{liveUnmap(at.Src), liveUnmap(at.Dst), at.Seq}
}

// attemptRef finds an attempt the auditor holds: liveAuditor.inside[i],
// or outside[i].
type attemptRef struct {
	outside bool
	i       int
}

// outsideKeep bounds the attempts kept outside any session: the newest
// outsideKeep to 2·outsideKeep of them; older ones are counted, then
// forgotten. Such an attempt matters only to a session whose Start comes
// after it (a record file is read every recordPoll; at 50 000 SYN/s, 8192
// SYNs are 160 ms), and to the next report's cross-check, which lists it
// as outside the session.
const outsideKeep = 8192

func isLoopback(iface string) bool {
	ifi, err := net.InterfaceByName(iface)
	return err == nil && ifi.Flags&net.FlagLoopback != 0
}

// liveAuditor owns every piece of state of a run; only run's goroutine
// touches it.
type liveAuditor struct {
	cfg    liveConfig
	port   uint16
	live   *capture.Live
	srv    *server.Server
	q      *liveQueue
	out    io.Writer
	errOut io.Writer

	// The attempts not yet reported, of every address, each found by its
	// id in index to count a retransmission. inside holds the open
	// session's, at most cfg.maxAttempts() (later ones are counted in
	// sess.dropped, not kept); outside those no session holds: with a
	// server side, before a Start or after a Stop. outsideDropped counts
	// the outside ones forgotten since the last report (see outsideKeep).
	inside         []analyze.Attempt
	outside        []analyze.Attempt
	index          map[attemptID]attemptRef
	outsideDropped int
	packets        uint64
	syns           uint64
	skipped        map[string]uint64
	batch          []liveItem // the queue's last batch, for its array
	loopback       bool

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
	capCtx, stopCapture := context.WithCancel(context.Background())
	defer stopCapture()
	capDone := make(chan error, 1)
	go func() {
		capDone <- a.live.Run(capCtx, a.q.pushSYN, a.q.pushSkip)
	}()
	var tailDone chan error
	tailCtx, stopTail := context.WithCancel(context.Background())
	defer stopTail()
	if a.cfg.ServerLog != "" {
		tailDone = make(chan error, 1)
		warn := func(msg string) { a.q.pushWarning(msg) }
		go func() { tailDone <- tailRecord(tailCtx, a.cfg.ServerLog, a.q.pushEvent, warn) }()
	}

	idle := time.NewTimer(time.Hour)
	idle.Stop()
	wait := time.NewTimer(time.Hour)
	wait.Stop()
	waiting := false
	// runErr is what ends the run with an error; cause is what an open
	// session then ends by (Ctrl-C or SIGTERM when there is no error).
	var runErr error
	cause := causeInterrupted
	fail := func(what string, err error) {
		if err != nil && runErr == nil {
			runErr, cause = err, what+": "+err.Error()
		}
	}
loop:
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
				a.sess.cause = causeIdle
				a.finish()
			}
		case err := <-capDone:
			capDone = nil
			fail(causeCaptureError, err)
			a.captureStopped(cause)
			break loop
		case err := <-tailDone:
			tailDone = nil
			fail(causeServerLogError, err)
			break loop
		case <-ctx.Done():
			break loop
		}
	}

	// Shut down in the order that loses nothing: the server first (its
	// last session ends and reports "server closed"), then the capture,
	// which reads what its buffer still holds, then the record file.
	if a.srv != nil {
		if err := a.srv.Close(); err != nil && runErr == nil {
			runErr = err
		}
	}
	stopCapture()
	if capDone != nil {
		if err := <-capDone; err != nil {
			fail(causeCaptureError, err)
			a.captureStopped(cause)
		}
	}
	stopTail()
	if tailDone != nil {
		fail(causeServerLogError, <-tailDone)
	}
	a.takeQueue()
	if a.ending {
		a.finish()
	}
	if a.sess != nil {
		if a.sess.cause == "" {
			a.sess.cause = cause
		}
		a.finish()
	}
	// Only with a server side: sniffing, a session holds every SYN.
	if n := len(a.outside) + a.outsideDropped; n > 0 {
		fmt.Fprintf(a.errOut, "audit live: %d attempts came outside any session (no Start covered them); not judged", n)
		if a.outsideDropped > 0 {
			fmt.Fprintf(a.errOut, "; the %d oldest were not kept", a.outsideDropped)
		}
		fmt.Fprintln(a.errOut)
	}
	if st, err := a.live.Stats(); err == nil {
		fmt.Fprintf(a.errOut, "audit live: at exit, %s\n", a.info(st).statsLine())
	}
	if n := a.q.dropped(); n > 0 {
		fmt.Fprintf(a.errOut, "audit live: %d captured packets were not taken in: the auditor was %d behind the capture\n", n, maxQueued)
	}
	return runErr
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
func (a *liveAuditor) sniffOnly() bool { return a.cfg.Attach && a.cfg.ServerLog == "" }

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
	case itemEvent:
		a.addEvent(*it.event)
	case itemWarning:
		fmt.Fprintf(a.errOut, "audit live: warning: %s\n", it.skip)
	default:
		a.packets++
		a.skipped[it.skip]++
	}
	return false
}

func (a *liveAuditor) addSYN(s analyze.SYN) {
	a.packets++
	a.syns++
	id := attemptID{liveUnmap(s.Src), liveUnmap(s.Dst), s.Seq}
	if ref, ok := a.index[id]; ok {
		a.attempt(ref).Retransmits++
		if !a.cfg.JSON {
			fmt.Fprintf(a.out, "retransmit %s  %-22s (kernel retransmission, not a backoff)\n",
				s.Time.UTC().Format(liveTimeLayout), liveUnmap(s.Src))
		}
		return
	}
	a.lastSYN = s.Time
	at := analyze.Attempt{Time: s.Time.UTC(), Src: s.Src, Dst: s.Dst, Seq: s.Seq}
	if a.sess == nil && a.sniffOnly() {
		a.number++
		a.sess = newSniffSession(a.number, a.cfg.policy(), a.cfg.maxAttempts(), at)
	}
	switch {
	case a.sess == nil || !a.sess.contains(at.Time):
		a.keepOutside(id, at)
		if !a.cfg.JSON {
			fmt.Fprintf(a.out, "attempt %s  %-22s (outside any session)\n", at.Time.UTC().Format(liveTimeLayout), liveUnmap(at.Src))
		}
	case len(a.inside) >= a.sess.maxAttempts:
		a.sess.dropped++
		if a.sess.dropped == 1 && !a.cfg.JSON { // later ones are only counted: a flood must not flood the output
			fmt.Fprintf(a.out, "attempt %s  %-22s not kept: session %d holds its maximum of %d attempts; "+
				"later ones are counted and the verdict will be %s\n",
				at.Time.UTC().Format(liveTimeLayout), liveUnmap(at.Src), a.sess.number, a.sess.maxAttempts, analyze.Overflow)
		}
	default:
		a.index[id] = attemptRef{i: len(a.inside)}
		a.inside = append(a.inside, at)
		if !a.cfg.JSON {
			fmt.Fprintln(a.out, a.sess.attemptLine(at))
		}
	}
}

func (a *liveAuditor) attempt(ref attemptRef) *analyze.Attempt {
	if ref.outside {
		return &a.outside[ref.i]
	}
	return &a.inside[ref.i]
}

// keepOutside holds an attempt outside any session, forgetting the oldest
// outsideKeep when 2·outsideKeep are held.
func (a *liveAuditor) keepOutside(id attemptID, at analyze.Attempt) {
	if len(a.outside) >= 2*outsideKeep {
		n := len(a.outside) - outsideKeep
		a.outsideDropped += n
		for _, old := range a.outside[:n] {
			delete(a.index, idOf(old))
		}
		a.outside = append(a.outside[:0], a.outside[n:]...)
		for i, kept := range a.outside {
			a.index[idOf(kept)] = attemptRef{outside: true, i: i}
		}
	}
	a.index[id] = attemptRef{outside: true, i: len(a.outside)}
	a.outside = append(a.outside, at)
}

// hold replaces what the auditor holds: the attempts the open session (if
// any) contains go inside, up to its maximum, and the others outside.
func (a *liveAuditor) hold(attempts []analyze.Attempt) {
	a.inside, a.outside = nil, nil
	for _, at := range attempts {
		switch {
		case a.sess == nil || !a.sess.contains(at.Time):
			a.outside = append(a.outside, at)
		case len(a.inside) < a.sess.maxAttempts:
			a.inside = append(a.inside, at)
		default:
			a.sess.dropped++
		}
	}
	a.index = make(map[attemptID]attemptRef, len(a.inside)+len(a.outside))
	for i, at := range a.inside {
		a.index[idOf(at)] = attemptRef{i: i}
	}
	for i, at := range a.outside {
		a.index[idOf(at)] = attemptRef{outside: true, i: i}
	}
}

// held returns every attempt the auditor holds, in a new slice.
func (a *liveAuditor) held() []analyze.Attempt {
	return append(slices.Clone(a.inside), a.outside...)
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
			a.sess.cause = causeInterrupted
			a.finish()
		}
		a.sess = newServerSession(e, a.cfg.maxAttempts())
		// A record file is read some ms late: SYNs of the session may
		// have come before its Start.
		if len(a.outside) > 0 {
			a.hold(a.held())
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
	syns, accepts := map[netip.AddrPort]bool{}, map[netip.AddrPort]bool{}
	for _, list := range [][]analyze.Attempt{a.inside, a.outside} {
		for _, at := range list {
			syns[liveUnmap(at.Src)] = true
		}
	}
	for _, acc := range append(slices.Clone(s.accepts), s.late...) {
		accepts[liveUnmap(acc.Peer)] = true
	}
	for _, acc := range s.accepts {
		if !syns[liveUnmap(acc.Peer)] {
			return false
		}
	}
	for _, list := range [][]analyze.Attempt{a.inside, a.outside} {
		for _, at := range list {
			if s.contains(at.Time) && !accepts[liveUnmap(at.Src)] {
				return false
			}
		}
	}
	return true
}

// info is the capture's part of a report.
func (a *liveAuditor) info(st capture.LiveStats) liveInfo {
	return liveInfo{Iface: a.cfg.Iface, Timestamps: a.live.Timestamps(), LiveStats: st, Write: a.cfg.Write,
		NotTaken: a.q.dropped(), loopback: a.loopback}
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
	if a.capEndCause != "" {
		s.captureEnd, s.captureEndCause = cmp.Or(a.lastSYN, a.captureStart), a.capEndCause
	}
	capInfo := analyze.CaptureInfo{Packets: a.packets, SYNs: a.syns, Skipped: a.skipped}
	attempts := a.held()
	r := buildLiveReport(s, a.port, attempts, capInfo, a.info(st), a.captureStart)
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
	if !r.Passed() {
		if a.failed == 0 {
			a.firstFailure = r.failure()
		}
		a.failed++
	}
	if a.cfg.JSON {
		if err := json.NewEncoder(a.out).Encode(r); err != nil {
			fmt.Fprintf(a.errOut, "audit live: %v\n", err)
		}
		return
	}
	if err := r.WriteText(a.out); err != nil {
		fmt.Fprintf(a.errOut, "audit live: %v\n", err)
	}
}

// liveItem is one thing for the auditor: a SYN, a server event, or a
// packet the decoder skipped (with its reason). A SYN is held by value:
// the capture queues one per packet, and a pointer would be an allocation
// each.
type liveItem struct {
	kind  itemKind
	syn   analyze.SYN
	event *analyze.RecordEvent
	skip  string
}

type itemKind uint8

const (
	itemSYN itemKind = iota
	itemEvent
	itemSkip
	itemWarning // skip holds the text
)

// maxQueued bounds the packets (SYNs and skipped ones) the queue holds,
// 8 MiB of items: 0.6 s of a flood at 100 000 SYN/s, should the auditor
// fall that far behind the capture (it takes a SYN in well under the
// capture's time for one). Later packets are counted and not queued;
// server events always are.
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

func (q *liveQueue) pushSYN(s analyze.SYN)           { q.push(liveItem{kind: itemSYN, syn: s}) }
func (q *liveQueue) pushEvent(e analyze.RecordEvent) { q.push(liveItem{kind: itemEvent, event: &e}) }
func (q *liveQueue) pushSkip(reason string)          { q.push(liveItem{kind: itemSkip, skip: reason}) }
func (q *liveQueue) pushWarning(msg string)          { q.push(liveItem{kind: itemWarning, skip: msg}) }

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

// recordPoll is how often the record file of another server is read.
const recordPoll = 100 * time.Millisecond

// recordChunk bounds what one poll reads of the record file, so that a
// file that grows without end (or /dev/zero) is read a piece at a time.
const recordChunk = 4 << 20

// tailRecord follows a record file written by `audit server --record`:
// first the session still open in it, if any, then every event appended
// after, until ctx ends (with one last read). A missing file is waited
// for. A file that shrinks (truncated) or is replaced (rotated) is read
// again from its start, and warn says so. A line longer than
// analyze.MaxRecordLine is an error naming its offset.
func tailRecord(ctx context.Context, path string, push func(analyze.RecordEvent), warn func(string)) error {
	var (
		off     int64 // bytes of the file taken
		partial []byte
		line    = 1 // number of the line partial starts
		first   = true
		last    os.FileInfo
	)
	t := time.NewTicker(recordPoll)
	defer t.Stop()
	for {
		done := ctx.Err() != nil
		b, fi, err := readFrom(path, off, recordChunk)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("--server-log: %w", err)
		}
		if fi != nil && last != nil && (!os.SameFile(fi, last) || fi.Mode().IsRegular() && fi.Size() < off) {
			what := "truncated"
			if !os.SameFile(fi, last) {
				what = "replaced"
			}
			warn(fmt.Sprintf("--server-log %s was %s; reading it from its start", path, what))
			off, partial, line = 0, nil, 1
			if b, fi, err = readFrom(path, 0, recordChunk); err != nil {
				return fmt.Errorf("--server-log: %w", err)
			}
		}
		if fi != nil {
			last = fi
		}
		lineOff := off - int64(len(partial))
		off += int64(len(b))
		partial = append(partial, b...)
		n := bytes.LastIndexByte(partial, '\n') + 1
		if n == 0 && len(partial) > analyze.MaxRecordLine {
			return fmt.Errorf("--server-log %s: line %d at offset %d is longer than %d bytes", path, line, lineOff, analyze.MaxRecordLine)
		}
		events, err := analyze.ReadRecord(bytes.NewReader(partial[:n]))
		if err != nil {
			return fmt.Errorf("--server-log %s: from line %d at offset %d: %w", path, line, lineOff, err)
		}
		line += bytes.Count(partial[:n], []byte{'\n'})
		partial = append(partial[:0], partial[n:]...)
		if first && len(b) > 0 {
			events = openSession(events)
		}
		first = first && len(b) == 0
		for _, e := range events {
			push(e)
		}
		if done && len(b) < recordChunk {
			return nil
		}
		if len(b) == recordChunk && !done {
			continue // more is there: read on before waiting
		}
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
}

// openSession keeps, of the events already in a record file, those of its
// last session if that session is still open.
func openSession(events []analyze.RecordEvent) []analyze.RecordEvent {
	last := -1
	for i, e := range events {
		if e.Event == analyze.EventStart {
			last = i
		}
	}
	if last < 0 {
		return nil
	}
	var out []analyze.RecordEvent
	for _, e := range events[last:] {
		if e.Event == analyze.EventStop || e.Event == analyze.EventExpire {
			return nil
		}
		if e.Session == events[last].Session {
			out = append(out, e)
		}
	}
	return out
}

// readFrom reads at most max bytes of the file at path from off, and
// returns them with the file's information.
func readFrom(path string, off int64, max int) ([]byte, os.FileInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if fi.Mode().IsRegular() && fi.Size() < off {
		return nil, fi, nil // truncated: the caller starts again
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return nil, fi, err
	}
	b, err := io.ReadAll(io.LimitReader(f, int64(max)))
	return b, fi, err
}
