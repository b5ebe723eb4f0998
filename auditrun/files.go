package auditrun

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/backoff-audit/audit/attempt/stream"
	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/capture"
	"github.com/backoff-audit/audit/internal/field"
	"github.com/backoff-audit/audit/report"
	"github.com/backoff-audit/audit/report/html"
	"github.com/backoff-audit/audit/session"
)

// FilesConfig is what an audit of capture files ('audit pcap') reads and
// writes.
type FilesConfig struct {
	// Port is the retry port; 0 finds it (RetryPort), and PortSet says it
	// was given (then 0 is an error).
	Port    uint16
	PortSet bool
	// Policy judges the peers. With a record or a control port it judges
	// every session only when PolicySet (a policy flag was given);
	// otherwise each session's own Start does.
	Policy    backoff.Policy
	PolicySet bool
	// Mode is what the retry port did; unless ModeSet, it is read from the
	// attempts' fates (Chains.InferMode).
	Mode    backoff.RetryMode
	ModeSet bool
	// Peers keeps only these client addresses in the report.
	Peers []string
	// Record is a record file (`audit server --record`) whose sessions
	// are judged; Control the control port whose Start and Stop calls
	// give them instead (0: detected, when neither Record nor Peers is
	// set).
	Record  string
	Control uint16
	// HTML, when set, is a page to write the report to as well.
	HTML string
	Herd bool
	// Infer reads each peer's policy from its chain, and the policies the
	// peers run (report.Peers.WithInfer, docs/spec.md §8).
	Infer bool
	JSON  bool
	// Verbose gives every peer its interval table in the text report.
	Verbose bool
	// Stdin is what the file "-" reads (capture.Options.Stdin).
	Stdin io.Reader
	// KeyLog is a key log that decrypts the retry port's TLS connections,
	// read in a second pass over the files: their attempts reached READY
	// when the server's SETTINGS came inside (decryptAttempts).
	KeyLog string
}

// validate checks the configuration for files and parses Peers.
func (c FilesConfig) validate(files []string) ([]netip.Addr, error) {
	if c.PortSet {
		if err := field.Port("Port", int(c.Port), false); err != nil {
			return nil, err
		}
	}
	if err := c.Policy.Validate(); err != nil {
		return nil, fmt.Errorf("policy: %s", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	if (c.Record != "" || c.Control != 0) && len(c.Peers) > 0 {
		return nil, field.Errorf("Peers", nil, "not with %s or %s: each session judges its own verified peer", field.Name("Record"), field.Name("Control"))
	}
	if c.Record != "" && c.Control != 0 {
		return nil, field.Errorf("Control", c.Control, "not with %s: both say where sessions come from; give one", field.Name("Record"))
	}
	if n := slices.Index(files, capture.Stdin); n >= 0 {
		if slices.Index(files[n+1:], capture.Stdin) >= 0 {
			return nil, fmt.Errorf("standard input (-) named twice: it can be read once")
		}
		if c.Control != 0 {
			return nil, field.Errorf("Control", c.Control, "not with standard input (-): the control port is read in a second pass over the files, and standard input can be read once")
		}
		if c.KeyLog != "" {
			return nil, field.Errorf("KeyLog", c.KeyLog, "not with standard input (-): the TLS connections are decrypted in a second pass over the files, and standard input can be read once")
		}
	}
	peers := make([]netip.Addr, 0, len(c.Peers))
	for _, s := range c.Peers {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, field.Errorf("Peers", strconv.Quote(s), "not an IP address")
		}
		peers = append(peers, a.Unmap())
	}
	return peers, nil
}

// AuditFiles reads the capture files ("-" is standard input) and writes
// to out the report of their sessions (of the record file, or of the
// control port) or, when there are none, of every peer; warnings go to
// errOut, and progress when it is a terminal. When ctx ends during the
// read, the read stops there and the report covers what was read, without
// the second pass a control port takes. The error says why nothing could
// be judged (bad configuration, unreadable input); the Outcome says what
// was, with Verdict set when the peers' audit did not pass.
func AuditFiles(ctx context.Context, files []string, cfg FilesConfig, out, errOut io.Writer) (Outcome, error) {
	peers, err := cfg.validate(files)
	if err != nil {
		return Outcome{}, err
	}
	if cfg.PortSet && cfg.Record == "" && cfg.Control == 0 {
		return auditStream(ctx, files, cfg, peers, out, errOut)
	}
	pt, info, err := capture.ReadFiles(files, capture.Options{Port: cfg.Port, Done: ctx.Done(), Stdin: cfg.Stdin}, errOut)
	if err != nil {
		return Outcome{}, err
	}
	for _, w := range info.Warnings() {
		fmt.Fprintf(errOut, "audit: warning: %s\n", w)
	}
	control, detect := cfg.Control, cfg.Record == "" && len(peers) == 0 && !slices.Contains(files, capture.Stdin)
	if ctx.Err() != nil {
		if control != 0 {
			fmt.Fprintf(errOut, "audit: warning: read interrupted: control port %d not read, the attempts are audited alone\n", control)
		}
		control, detect = 0, false
	}
	var events []session.RecordEvent
	var recWarnings []string
	var counted int
	port := cfg.Port
	if cfg.Record != "" {
		// Read once (it may be a FIFO), before the port is chosen: its
		// start lines name the retry port.
		first, last := captureSpan(pt)
		if events, recWarnings, counted, err = readRecordFor(cfg.Record, ctx.Done(), first, last); err != nil {
			return Outcome{}, err
		}
		if port == 0 {
			port = recordRetryPort(events, pt)
		}
	}
	ctl, port, err := ChoosePorts(files, pt, port, control, detect, errOut)
	if err != nil {
		return Outcome{}, err
	}
	tr := pt.Tracker(port)
	info.SYNs = uint64(tr.SYNs())
	if cfg.KeyLog != "" && ctx.Err() == nil {
		if err := decryptAttempts(ctx, files, port, cfg.KeyLog, tr, errOut); err != nil {
			return Outcome{}, err
		}
	}
	// Every peer is verified, whatever Peers keeps.
	cs, inferred := tr.Chains(), false
	if !cfg.ModeSet {
		cfg.Mode, inferred = cs.InferMode(cfg.Policy)
	}
	opt := RecordOptions{Path: cfg.Record, Port: port, DefaultPolicy: cfg.Policy, Herd: cfg.Herd, Mode: cfg.Mode, Done: ctx.Done()}
	if cfg.PolicySet {
		opt.Policy = &cfg.Policy
	}
	if cfg.Record != "" || ctl != nil {
		var rep *report.RecordRun
		if cfg.Record != "" {
			warnings := slices.Clip(recWarnings)
			if note := countedNote(cfg.Record, counted); note != "" {
				warnings = append(warnings, note)
			}
			rep, err = auditRecordEvents(opt, events, warnings, tr.Peers(), info)
		} else {
			rep, err = AuditControl(opt, ctl, tr.Peers(), info)
		}
		if err != nil {
			for _, w := range recWarnings { // what the read met explains the error
				fmt.Fprintf(errOut, "audit: warning: %s\n", w)
			}
			return Outcome{}, err
		}
		if cfg.Infer {
			rep.Peers.WithInfer(rep.Mode)
		}
		var o Outcome
		o.Failed, o.Sessions, o.FirstFailure, err = WriteSessions(out, errOut, rep, cfg.JSON, cfg.HTML)
		return o, err
	}
	// The capture runs at least to its last packet of the port: an
	// attempt still held there is judged against its connect deadline.
	aud := report.NewAudit(port, cfg.Policy, backoff.Run{Mode: cfg.Mode, End: tr.Last()}, cs, info)
	return writeAudit(aud, inferred, cfg, peers, out)
}

// auditStream audits the capture files of a known retry port as they are
// read (stream.Stream): each chain is judged once the capture is past its
// end and set aside in a spill, so that memory follows the peers still
// retrying, not the length of the capture; the report is written from
// the spill once the read is done.
func auditStream(ctx context.Context, files []string, cfg FilesConfig, peers []netip.Addr, out, errOut io.Writer) (Outcome, error) {
	st := stream.New(cfg.Port, cfg.Policy, "")
	defer st.Close()
	sec := report.NewSection(cfg.Policy, st)
	st.OnOver = func(from, to int, now time.Time) {
		sec.Add(from, to, backoff.Run{Mode: cfg.Mode, End: now})
	}
	st.OnRevive = sec.Drop
	info, err := capture.ReadInto(files, capture.Options{Port: cfg.Port, Done: ctx.Done(), Stdin: cfg.Stdin}, st, errOut)
	if err != nil {
		return Outcome{}, err
	}
	for _, w := range info.Warnings() {
		fmt.Fprintf(errOut, "audit: warning: %s\n", w)
	}
	if err := st.Finish(); err != nil {
		return Outcome{}, err
	}
	info.SYNs = uint64(st.SYNs())
	inferred := false
	if !cfg.ModeSet {
		cfg.Mode, inferred = sec.Mode()
	}
	run := backoff.Run{Mode: cfg.Mode, End: st.Last()}
	return writeAudit(report.AuditOf(cfg.Port, cfg.Mode, sec.Peers(run), info), inferred, cfg, peers, out)
}

// writeAudit writes the audit of every peer (of peers, when given) as cfg
// asks: text or JSON to out, the page to cfg.HTML; the Outcome says what
// was judged.
func writeAudit(aud *report.Audit, inferred bool, cfg FilesConfig, peers []netip.Addr, out io.Writer) (Outcome, error) {
	port := aud.Port
	if cfg.Infer { // every peer's chain, whatever Only keeps
		aud.Peers.WithInfer(aud.Mode)
	}
	aud = aud.Only(peers...)
	aud.ModeInferred = inferred
	if cfg.Herd {
		aud = aud.WithHerd()
	}
	if err := aud.Write(out, cfg.JSON, cfg.Verbose || len(peers) > 0); err != nil {
		return Outcome{}, err
	}
	if cfg.HTML != "" {
		if err := html.WriteFile(cfg.HTML, aud); err != nil {
			return Outcome{}, field.Errorf("HTML", cfg.HTML, "%w", err)
		}
	}
	if aud.Summary.Peers == 0 {
		return Outcome{Nothing: fmt.Sprintf("nothing judged: %s", peersVerdict(port, aud.Summary, peers))}, nil
	}
	return Outcome{Verdict: peersVerdict(port, aud.Summary, peers)}, nil
}

// peersVerdict says why an audit of peers did not pass, or "" when there
// were peers and every one passed.
func peersVerdict(port uint16, sum report.Summary, peers []netip.Addr) string {
	switch {
	case sum.PassedAll:
		return ""
	case sum.Peers == 0 && len(peers) > 0:
		return fmt.Sprintf("no connection attempt to port %d from %v", port, peers)
	case sum.Peers == 0:
		return fmt.Sprintf("no connection attempt to port %d", port)
	}
	return sum.String()
}
