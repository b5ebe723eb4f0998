package flows

import (
	"cmp"
	"errors"
	"io"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/capture"
	"github.com/backoff-audit/audit/h2"
	"github.com/backoff-audit/audit/internal/field"
	"github.com/backoff-audit/audit/tlsdec"
)

// Result is what ReadFiles found.
type Result struct {
	// Files lists each file as capture.ReadFile found it.
	Files []attempt.FileInfo `json:"files"`
	// Conns are the decoded connections, in order of start; Findings
	// index them (h2.Finding.Conn).
	Conns    []Conn       `json:"connections"`
	Findings []h2.Finding `json:"findings"`
}

// Reports returns the connections' h2 reports, in the order of Conns.
func (r *Result) Reports() []*h2.Report {
	out := make([]*h2.Report, len(r.Conns))
	for i, c := range r.Conns {
		out[i] = c.Report
	}
	return out
}

// Problems counts the findings that are problems (h2.Finding.Problem).
func (r *Result) Problems() int { return problems(r.Findings) }

func problems(fs []h2.Finding) int {
	n := 0
	for _, f := range fs {
		if f.Problem {
			n++
		}
	}
	return n
}

// ReadFiles reads capture files, in the order given (a rotated set in
// time order; a file named twice is read once, with a warning), through
// one Assembler, and diagnoses the connections decoded. Only the TCP segments of opt.Ports (of every port when it is
// empty) are handed out by the readers. The first file that cannot be
// read stops the read with capture.ReadFile's error, which names the file
// and the offset.
func ReadFiles(paths []string, opt Options, diag h2.DiagnoseOptions) (*Result, error) {
	res := &Result{Conns: []Conn{}}
	files, err := readFiles(paths, opt, func(c Conn) { res.Conns = append(res.Conns, c) })
	if err != nil {
		return nil, err
	}
	res.Files = files
	slices.SortStableFunc(res.Conns, func(x, y Conn) int {
		return compareConns(x.Report.Start, x.Report.Client, y.Report.Start, y.Report.Client)
	})
	res.Findings = h2.Diagnose(res.Reports(), diag)
	if res.Findings == nil {
		res.Findings = []h2.Finding{}
	}
	return res, nil
}

// compareConns orders connections by start, then client: the order of a
// report's connections, those that ended first first among equals.
func compareConns(xStart time.Time, xClient netip.AddrPort, yStart time.Time, yClient netip.AddrPort) int {
	return cmp.Or(xStart.Compare(yStart), xClient.Compare(yClient))
}

// readFiles reads paths through one Assembler, handing each connection to
// done as it ends.
func readFiles(paths []string, opt Options, done func(Conn)) ([]attempt.FileInfo, error) {
	var files []attempt.FileInfo
	a := NewAssembler(opt, done)
	paths, dups := capture.Distinct(paths)
	show := capture.ProgressTo(opt.Progress)
	for i, path := range paths {
		if capture.StopBefore(opt.Done, files, paths[i:]) {
			break
		}
		st, err := capture.ReadFile(path, capture.Options{Payloads: a.Add, PayloadPorts: opt.Ports, Done: opt.Done, Progress: show(path)}, func(attempt.SYN) {})
		if err != nil {
			return nil, err
		}
		files = append(files, st)
	}
	a.Close()
	capture.NoteDuplicates(files, dups)
	return files, nil
}

// AuditOptions are the settings of `audit h2`, as its flags give them.
type AuditOptions struct {
	// Ports are the ports whose every connection is decoded; empty: any
	// port's HTTP/2 connections (Options.Ports).
	Ports []uint
	// Retry, when set, is the retry policy retried RPCs are checked
	// against (h2.DiagnoseOptions.Retry).
	Retry *h2.RetryPolicy
	// Tolerance widens every retry window on both sides
	// (h2.DiagnoseOptions.Tolerance; 0: h2.DefaultTolerance).
	Tolerance time.Duration
	// Format is the report's format, "text" or "json" (Report.Write).
	Format string
	// KeyLog is the path of an NSS key log to decrypt TLS connections
	// with (Options.KeyLog); empty: none.
	KeyLog string
	// Done stops the read (Options.Done).
	Done <-chan struct{}
	// Progress shows the read's progress when it is a terminal
	// (Options.Progress).
	Progress io.Writer
}

// ErrNoConnection is Audit's error when, without --port, the files hold no
// connection to decode: nothing could be judged, as `audit pcap` says of a
// capture with no SYN.
var ErrNoConnection = errors.New("nothing judged: no HTTP/2 or TLS connection in the capture")

// Audit checks opt, reads files as ReadFiles does, and builds the report
// `audit h2` prints. Its errors name the field of opt (field.Error) or the
// file at fault. When, without opt.Ports, no connection was decoded it
// returns the report, whose warnings say what the files held, with
// ErrNoConnection; with opt.Ports, the report's Nothing says so.
func Audit(files []string, opt AuditOptions) (*Report, error) {
	if opt.Format != "text" && opt.Format != "json" {
		return nil, field.Errorf("Format", strconv.Quote(opt.Format), "must be text or json")
	}
	if opt.Retry != nil {
		if err := checkRetry(*opt.Retry); err != nil {
			return nil, err
		}
	}
	var ps []uint16
	for _, p := range opt.Ports {
		if err := field.Port("Ports", int(min(p, math.MaxInt)), false); err != nil {
			return nil, err
		}
		ps = append(ps, uint16(p))
	}
	if opt.Tolerance < 0 {
		return nil, field.Errorf("Tolerance", opt.Tolerance, "must not be negative")
	}
	diag := h2.DiagnoseOptions{Retry: opt.Retry, Tolerance: cmp.Or(opt.Tolerance, h2.DefaultTolerance)}
	var keys *tlsdec.KeyLog
	if opt.KeyLog != "" {
		var err error
		if keys, err = tlsdec.ReadKeyLog(opt.KeyLog); err != nil {
			return nil, field.Errorf("KeyLog", nil, "%w", err)
		}
	}
	var k kept
	read, err := readFiles(files, Options{Ports: ps, Done: opt.Done, KeyLog: keys, Progress: opt.Progress}, k.add)
	if err != nil {
		return nil, err
	}
	rep := &Report{Files: files, Warnings: attempt.CaptureInfo{Files: read}.Warnings(), KeyLog: keys}
	rep.Findings = k.order(diag)
	if rep.Findings == nil {
		rep.Findings = []h2.Finding{} // JSON: [], not null
	}
	rep.Connections = k.Timelines
	rep.Problems = problems(rep.Findings)
	for _, ch := range h2.RetryChains(k.ds) {
		r := Retry{RetryChain: ch}
		if opt.Retry != nil {
			c := h2.CheckRetries(ch, *opt.Retry, diag.Tolerance)
			r.Check = &c
		}
		rep.Retries = append(rep.Retries, r)
	}
	rep.Ports = ps
	if rep.Connections.Len() == 0 && len(ps) == 0 {
		return rep, ErrNoConnection
	}
	return rep, nil
}

// checkRetry checks a retry policy as gRFC A6 ("Validation of
// retryPolicy") does.
func checkRetry(p h2.RetryPolicy) error {
	var errs []error
	if p.MaxAttempts < 2 {
		errs = append(errs, field.Errorf("Retry.MaxAttempts", p.MaxAttempts, "must be at least 2"))
	}
	if p.InitialBackoff <= 0 {
		errs = append(errs, field.Errorf("Retry.InitialBackoff", p.InitialBackoff, "must be positive"))
	}
	if p.MaxBackoff <= 0 {
		errs = append(errs, field.Errorf("Retry.MaxBackoff", p.MaxBackoff, "must be positive"))
	}
	if p.BackoffMultiplier <= 0 {
		errs = append(errs, field.Errorf("Retry.BackoffMultiplier", p.BackoffMultiplier, "must be positive"))
	}
	return errors.Join(errs...)
}
