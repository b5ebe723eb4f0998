package main

// `audit live`: the reference server and a libpcap capture of the SYNs to
// its retry port in one process, or (--attach) the capture alone. Each
// session is judged from the kernel's SYN timestamps, beside the server's
// own verdict, and the two lists are cross-checked (SPEC.md §5).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
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

Ctrl-C or SIGTERM reports what was captured, stops the server and closes the
--write file complete. Capturing needs root, or CAP_NET_RAW and
CAP_NET_ADMIN on the binary. Exit 0 when every verdict passed, 1 when one
failed, 2 when nothing could be judged.`,
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
	var file *os.File
	lc := capture.LiveConfig{Iface: cfg.Iface, Port: uint16(port), BufferSize: cfg.BufferSize}
	if cfg.Write != "" {
		var err error
		if file, err = os.Create(cfg.Write); err != nil {
			return usageError(fmt.Errorf("--write: %w", err))
		}
		defer file.Close()
		lc.Write = file
	}
	live, err := capture.OpenLive(lc)
	if err != nil {
		return usageError(err)
	}
	defer live.Close()
	a := &liveAuditor{cfg: cfg, port: uint16(port), live: live, srv: srv, q: q, out: out, errOut: errOut,
		tracker: analyze.NewTracker(), index: map[attemptID]int{}, skipped: map[string]uint64{}, captureStart: time.Now()}
	if srv != nil {
		fmt.Fprintf(errOut, "audit live: control port %s, retry port %s\n", srv.ControlAddr(), srv.RetryAddr())
	}
	fmt.Fprintf(errOut, "audit live: capturing SYNs to port %d on %s, %s\n", port, cfg.Iface, live.Timestamps())
	err = a.run(ctx)
	if ferr := live.Close(); err == nil && ferr != nil {
		err = ferr
	}
	if file != nil {
		if ferr := file.Close(); err == nil && ferr != nil {
			err = fmt.Errorf("--write %s: %w", cfg.Write, ferr)
		}
	}
	if err != nil {
		return err
	}
	if a.failed > 0 {
		return verdictError("%d of %d sessions failed", a.failed, a.sessions)
	}
	return nil
}

// attemptID identifies an attempt: the SYN's addresses (unmapped) and ISN.
type attemptID struct {
	src, dst netip.AddrPort
	seq      uint32
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

	tracker *analyze.Tracker
	// pending holds the attempts not yet reported, of every address, and
	// index finds one of them to count a retransmission.
	pending []analyze.Attempt
	index   map[attemptID]int
	packets uint64
	syns    uint64
	skipped map[string]uint64

	sess         *liveSession
	ending       bool // sess has ended on the server; waiting for its SYNs
	number       int  // sniff-only session numbers
	captureStart time.Time
	sessions     int
	failed       int
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
		go func() { tailDone <- tailRecord(tailCtx, a.cfg.ServerLog, a.q.pushEvent) }()
	}

	idle := time.NewTimer(time.Hour)
	idle.Stop()
	wait := time.NewTimer(time.Hour)
	wait.Stop()
	waiting := false
	sniffOnly := a.cfg.Attach && a.cfg.ServerLog == ""
	var runErr error
loop:
	for {
		select {
		case <-a.q.signal:
			for _, it := range a.q.take() {
				if a.handle(it) && sniffOnly {
					idle.Reset(a.cfg.idle())
				}
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
			runErr = err
			break loop
		case err := <-tailDone:
			tailDone = nil
			runErr = err
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
		if err := <-capDone; err != nil && runErr == nil {
			runErr = err
		}
	}
	stopTail()
	if tailDone != nil {
		if err := <-tailDone; err != nil && runErr == nil {
			runErr = err
		}
	}
	for _, it := range a.q.take() {
		a.handle(it)
	}
	if a.ending {
		a.finish()
	}
	if a.sess != nil {
		if a.sess.cause == "" {
			a.sess.cause = causeInterrupted
		}
		a.finish()
	}
	if n := len(a.pending); n > 0 { // only with a server side: sniffing, a session holds every SYN
		fmt.Fprintf(a.errOut, "audit live: %d attempts came outside any session (no Start covered them); not judged\n", n)
	}
	if st, err := a.live.Stats(); err == nil {
		fmt.Fprintf(a.errOut, "audit live: at exit, %s\n", liveInfo{Iface: a.cfg.Iface, LiveStats: st}.statsLine())
	}
	return runErr
}

// handle applies one queued item; it reports whether it was a SYN.
func (a *liveAuditor) handle(it liveItem) bool {
	switch {
	case it.syn != nil:
		a.addSYN(*it.syn)
		return true
	case it.event != nil:
		a.addEvent(*it.event)
	default:
		a.packets++
		a.skipped[it.skip]++
	}
	return false
}

func (a *liveAuditor) addSYN(s analyze.SYN) {
	a.packets++
	a.syns++
	at, isNew := a.tracker.Add(s)
	id := attemptID{liveUnmap(at.Src), liveUnmap(at.Dst), at.Seq}
	if !isNew {
		if i, ok := a.index[id]; ok {
			a.pending[i].Retransmits = at.Retransmits
		}
		if !a.cfg.JSON {
			fmt.Fprintf(a.out, "retransmit %s  %-22s (kernel retransmission, not a backoff)\n",
				s.Time.UTC().Format(liveTimeLayout), liveUnmap(s.Src))
		}
		return
	}
	a.index[id] = len(a.pending)
	a.pending = append(a.pending, at)
	if a.sess == nil && a.cfg.Attach && a.cfg.ServerLog == "" {
		a.number++
		a.sess = newSniffSession(a.number, a.cfg.policy(), at)
	}
	if a.cfg.JSON {
		return
	}
	switch {
	case a.sess != nil && a.sess.contains(at.Time) && !a.ending:
		fmt.Fprintln(a.out, a.sess.attemptLine(at))
	default:
		fmt.Fprintf(a.out, "attempt %s  %-22s (outside any session)\n", at.Time.UTC().Format(liveTimeLayout), liveUnmap(at.Src))
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
			a.sess.cause = causeInterrupted
			a.finish()
		}
		a.sess = newServerSession(e)
		if !a.cfg.JSON {
			fmt.Fprintf(a.out, "session %d: Start from %s, max_reconnect_backoff_ms %d (%v)\n",
				e.Session, e.Peer, a.sess.maxMS, a.sess.policy)
		}
	case analyze.EventAccept:
		acc := analyze.Accept{Peer: e.Peer, Time: e.Time}
		switch {
		case a.sess == nil:
		case !a.ending && e.Session == a.sess.number:
			a.sess.accepts = append(a.sess.accepts, acc)
		case a.ending && e.Session == 0:
			a.sess.late = append(a.sess.late, acc) // a SYN from just before Stop
		}
	case analyze.EventStop, analyze.EventExpire:
		if a.sess != nil && e.Session == a.sess.number && !a.ending {
			a.sess.end, a.sess.endTime, a.sess.cause = e.End, e.Time, e.End.Cause
			a.ending = true
		}
	}
}

// caughtUp reports whether the ending session's two lists are complete:
// every accept has its SYN, and every SYN inside the session its accept
// (in the session, or just after it ended). A refused SYN never gets one;
// the catchUp timer bounds the wait for it.
func (a *liveAuditor) caughtUp() bool {
	s := a.sess
	syns, accepts := map[netip.AddrPort]bool{}, map[netip.AddrPort]bool{}
	for _, at := range a.pending {
		syns[liveUnmap(at.Src)] = true
	}
	for _, acc := range append(slices.Clone(s.accepts), s.late...) {
		accepts[liveUnmap(acc.Peer)] = true
	}
	for _, acc := range s.accepts {
		if !syns[liveUnmap(acc.Peer)] {
			return false
		}
	}
	for _, at := range a.pending {
		if s.contains(at.Time) && !accepts[liveUnmap(at.Src)] {
			return false
		}
	}
	return true
}

// finish reports the current session and forgets what it consumed.
func (a *liveAuditor) finish() {
	s := a.sess
	a.sess, a.ending = nil, false
	st, err := a.live.Stats()
	if err != nil {
		fmt.Fprintf(a.errOut, "audit live: %v\n", err)
	}
	info := liveInfo{Iface: a.cfg.Iface, Timestamps: a.live.Timestamps(), LiveStats: st, Write: a.cfg.Write}
	skipped := a.skipped
	capInfo := analyze.CaptureInfo{Packets: a.packets, SYNs: a.syns, Skipped: skipped}
	r := buildLiveReport(s, a.port, a.pending, capInfo, info, a.captureStart)
	// Attempts after a server session's end may belong to the next one.
	var keep []analyze.Attempt
	if s.server && !s.endTime.IsZero() {
		for _, at := range a.pending {
			if at.Time.After(s.endTime) {
				keep = append(keep, at)
			}
		}
	}
	a.pending, a.index = keep, map[attemptID]int{}
	for i, at := range keep {
		a.index[attemptID{liveUnmap(at.Src), liveUnmap(at.Dst), at.Seq}] = i
	}
	a.packets, a.syns, a.skipped = 0, 0, map[string]uint64{}
	a.sessions++
	if !r.Passed() {
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
// packet the decoder skipped (with its reason).
type liveItem struct {
	syn   *analyze.SYN
	event *analyze.RecordEvent
	skip  string
}

// liveQueue hands items from the capture, the server and the record tailer
// to the auditor without ever blocking them: the server's accept loop must
// not wait on the auditor.
type liveQueue struct {
	mu     sync.Mutex
	items  []liveItem
	signal chan struct{}
}

func newLiveQueue() *liveQueue { return &liveQueue{signal: make(chan struct{}, 1)} }

func (q *liveQueue) push(it liveItem) {
	q.mu.Lock()
	q.items = append(q.items, it)
	q.mu.Unlock()
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

func (q *liveQueue) pushSYN(s analyze.SYN)           { q.push(liveItem{syn: &s}) }
func (q *liveQueue) pushEvent(e analyze.RecordEvent) { q.push(liveItem{event: &e}) }
func (q *liveQueue) pushSkip(reason string)          { q.push(liveItem{skip: reason}) }
func (q *liveQueue) take() (items []liveItem) {
	q.mu.Lock()
	items, q.items = q.items, nil
	q.mu.Unlock()
	return items
}

// recordPoll is how often the record file of another server is read.
const recordPoll = 100 * time.Millisecond

// tailRecord follows a record file written by `audit server --record`:
// first the session still open in it, if any, then every event appended
// after, until ctx ends (with one last read). A missing file is waited for.
func tailRecord(ctx context.Context, path string, push func(analyze.RecordEvent)) error {
	var off int64
	var partial []byte
	first := true
	t := time.NewTicker(recordPoll)
	defer t.Stop()
	for {
		done := ctx.Err() != nil
		b, err := readFrom(path, off)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("--server-log: %w", err)
		}
		off += int64(len(b))
		partial = append(partial, b...)
		n := bytes.LastIndexByte(partial, '\n') + 1
		events, err := analyze.ReadRecord(bytes.NewReader(partial[:n]))
		if err != nil {
			return fmt.Errorf("--server-log %s: %w", path, err)
		}
		partial = partial[n:]
		if first && len(b) > 0 {
			events = openSession(events)
		}
		first = first && len(b) == 0
		for _, e := range events {
			push(e)
		}
		if done {
			return nil
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

func readFrom(path string, off int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return nil, err
	}
	return io.ReadAll(bufio.NewReader(f))
}
