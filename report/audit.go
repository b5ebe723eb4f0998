package report

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/internal/text"
)

// An Audit is a Report in the making: every chain verified and its peer
// put in report order, but each PeerReport built only when it is written,
// then dropped. `audit pcap` writes the report of a capture of 10 000 peers
// this way instead of holding every peer's attempts and intervals at once
// (and then the whole document); NewReport builds a Report from one.
type Audit struct {
	Port   uint16
	Policy backoff.Policy
	Mode   backoff.RetryMode
	// ModeInferred: Mode was read from the fates (InferMode).
	ModeInferred bool
	Capture      attempt.CaptureInfo
	// Summary counts the peers the audit lists (see Only).
	Summary Summary

	run  backoff.Run // what every chain is verified in
	herd *Herd       // written after the summary when set (WithHerd)

	chains chainSource
	peers  []auditPeer // in report order
	// results holds, by chain index, the Verify result of the chains
	// whose intervals fit keptIntervals, so that writing them does not
	// verify them again; the others (nil Intervals) are verified again.
	results []backoff.Result
	fits    bool // Summary.FitsCapMS is looked for
}

// auditPeer is what ordering, counting and a one-line report of a peer
// need, without its attempts and intervals.
type auditPeer struct {
	addr      netip.Addr
	index     int // of its chain
	attempts  int
	retrans   int
	verdict   backoff.Verdict
	passed    bool
	refPassed bool
	strict    backoff.Reading
	maxJitter float64          // the largest |jitter_pct| of its intervals
	fit       backoff.CapRange // for a failing peer: the lower caps it could fit
}

// chainSource is where an Audit reads chains: a []Chain, or a Tracker's
// Chains, which can give a chain's times without building its attempts.
// Both are safe for concurrent reads.
type chainSource interface {
	Len() int
	// Chain returns chain i, in buf's array when it builds one.
	Chain(i int, buf []attempt.Attempt) attempt.Chain
	// Times returns chain i's peer and attempt times (in buf's array) and
	// its retransmits.
	Times(i int, buf []time.Time) (netip.Addr, []time.Time, int)
	// Endings returns chain i's fates in time order (in buf's array), nil
	// when none are known.
	Endings(i int, buf []backoff.Ending) []backoff.Ending
}

type chainSlice []attempt.Chain

func (cs chainSlice) Len() int { return len(cs) }

func (cs chainSlice) Chain(i int, _ []attempt.Attempt) attempt.Chain { return cs[i] }

func (cs chainSlice) Times(i int, buf []time.Time) (netip.Addr, []time.Time, int) {
	c := cs[i]
	retrans := 0
	buf = buf[:0]
	for _, a := range c.Attempts {
		buf = append(buf, a.Time)
		retrans += a.Retransmits
	}
	return c.Peer, buf, retrans
}

func (cs chainSlice) Endings(i int, _ []backoff.Ending) []backoff.Ending { return cs[i].Endings() }

// NewAudit verifies every chain of cs against p in run (VerifyRun) and
// orders the peers as NewReport does. It holds cs: adding SYNs to its
// Tracker before the Audit is written changes what it writes.
//
// It also looks for a lower cap that every failing peer fits
// (Summary.FitsCapMS).
func NewAudit(port uint16, p backoff.Policy, run backoff.Run, cs *attempt.Chains, capture attempt.CaptureInfo) *Audit {
	a := newAudit(port, p, run, cs, capture)
	a.fits = true
	a.Summary.FitsCapMS = a.fitCap()
	return a
}

// auditBatch is the number of chains below which verifying them on more
// than one goroutine costs more than it saves.
const auditBatch = 512

func newAudit(port uint16, p backoff.Policy, run backoff.Run, cs chainSource, capture attempt.CaptureInfo) *Audit {
	n := cs.Len()
	a := &Audit{Port: port, Policy: p, Mode: run.Mode, run: run, Capture: capture, chains: cs, peers: make([]auditPeer, n)}
	a.Capture.Attempts, a.Capture.Retransmits = 0, 0
	if a.Capture.Skipped == nil {
		a.Capture.Skipped = map[string]uint64{}
	}
	if a.Capture.Files == nil {
		a.Capture.Files = []attempt.FileInfo{}
	}
	// Chains are independent: a large capture's are verified on every
	// core, each goroutine on its own share of a.peers.
	workers := max(1, min(runtime.GOMAXPROCS(0), n/auditBatch))
	a.results = make([]backoff.Result, n)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			budget, kept := keptIntervals/workers, 0
			var times []time.Time
			var plateau []float64
			for i := n * w / workers; i < n*(w+1)/workers; i++ {
				ap := auditPeer{index: i}
				ap.addr, times, ap.retrans = cs.Times(i, times)
				ap.attempts = len(times)
				// Each chain in its own fates: a Result holds its Run,
				// so the endings are the chain's own slice.
				run := run
				run.Endings = cs.Endings(i, nil)
				// Verified again when written in full: keeping every
				// Result would hold every interval, which is what an
				// Audit avoids.
				res := backoff.VerifyRun(p, times, run)
				if kept+len(res.Intervals) <= budget {
					kept += len(res.Intervals)
					a.results[i] = res
				}
				ap.verdict, ap.passed = res.Reference.Verdict, res.Reference.Passed
				ap.refPassed, ap.strict, ap.maxJitter = res.ReferencePassed, res.Strict, maxJitter(res.Intervals)
				if ap.verdict == backoff.Failed {
					ap.fit = backoff.CapRangeOf(p, res.Intervals, res.Reference.FirstFailure, &plateau)
				}
				a.peers[i] = ap
			}
		})
	}
	wg.Wait()
	for _, ap := range a.peers {
		a.Capture.Attempts += ap.attempts
		a.Capture.Retransmits += ap.retrans
	}
	slices.SortStableFunc(a.peers, func(x, y auditPeer) int { return peerOrder(x.verdict, x.addr, y.verdict, y.addr) })
	a.Summary = a.summarize()
	return a
}

func (a *Audit) summarize() Summary {
	var s Summary
	for _, p := range a.peers {
		s.count(p.passed, p.verdict)
	}
	return s
}

// Only returns the audit of the peers whose address is in peers
// (IPv4-mapped addresses unmapped), with the summary recounted; the capture
// members are unchanged. With no addresses it returns a as is.
func (a *Audit) Only(peers ...netip.Addr) *Audit {
	if len(peers) == 0 {
		return a
	}
	keep := make(map[netip.Addr]bool, len(peers))
	for _, p := range peers {
		keep[p.Unmap()] = true
	}
	out := *a
	out.peers = nil
	for _, p := range a.peers {
		if keep[p.addr] {
			out.peers = append(out.peers, p)
		}
	}
	out.Summary = out.summarize()
	if out.fits {
		out.Summary.FitsCapMS = out.fitCap()
	}
	return &out
}

// Report builds the whole report.
func (a *Audit) Report() Report {
	r := Report{Port: a.Port, Policy: a.Policy, Mode: a.Mode, ModeInferred: a.ModeInferred, Capture: a.Capture, Summary: a.Summary,
		Peers: make([]PeerReport, len(a.peers))}
	var buf []attempt.Attempt
	for i, p := range a.peers {
		c := a.chains.Chain(p.index, buf)
		r.Peers[i] = a.peerReport(i, c)
		buf = c.Attempts[:0]
	}
	return r
}

// keptIntervals bounds the intervals whose Verify results an Audit keeps
// (about 100 bytes each) for writing: the chains beyond it are verified
// again when written, so memory stays bounded whatever the capture.
const keptIntervals = 1 << 18

// peerReport is the report of the peer at position i in report order; c
// is its chain.
func (a *Audit) peerReport(i int, c attempt.Chain) PeerReport {
	if res := a.results[a.peers[i].index]; res.Intervals != nil || len(c.Attempts) < 2 && res.Reference.Verdict != "" {
		return PeerReportOf(c, res)
	}
	run := a.run
	run.Endings = c.Endings()
	return PeerReportOf(c, backoff.VerifyRun(a.Policy, c.Times(), run))
}

// writeBatch is how many peers a goroutine of writePeers formats at a time.
const writeBatch = 256

// writePeers appends what format makes of each peer to w, in report order
// (WriteBatches). format gets the peer's position in the report and its
// chain (valid until format returns).
func (a *Audit) writePeers(w io.Writer, format func(b []byte, i int, c func() attempt.Chain) ([]byte, error)) error {
	return WriteBatches(w, len(a.peers), writeBatch, func() *[]attempt.Attempt { return new([]attempt.Attempt) },
		func(b []byte, buf *[]attempt.Attempt, i int) ([]byte, error) {
			return format(b, i, func() attempt.Chain {
				c := a.chains.Chain(a.peers[i].index, *buf)
				*buf = c.Attempts[:0]
				return c
			})
		})
}

// WriteJSON writes the report as Report's JSON, one peer at a time: the
// members of the document indented, each peer's object on one line.
func (a *Audit) WriteJSON(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	member := func(name string, v any, last bool) error {
		b, err := json.MarshalIndent(v, "  ", "  ")
		if err != nil {
			return fmt.Errorf("encode %s: %w", name, err)
		}
		fmt.Fprintf(bw, "  %q: %s", name, b)
		if !last {
			bw.WriteByte(',')
		}
		return bw.WriteByte('\n')
	}
	bw.WriteString("{\n")
	if err := member("port", a.Port, false); err != nil {
		return err
	}
	if err := member("policy", a.Policy, false); err != nil {
		return err
	}
	if err := member("retry_mode", a.Mode, false); err != nil {
		return err
	}
	if a.ModeInferred {
		if err := member("retry_mode_inferred", true, false); err != nil {
			return err
		}
	}
	if err := member("capture", a.Capture, false); err != nil {
		return err
	}
	bw.WriteString(`  "peers": [`)
	windows := newWindowText(a.Policy)
	err := a.writePeers(bw, func(b []byte, i int, c func() attempt.Chain) ([]byte, error) {
		pr := a.peerReport(i, c())
		b = append(b, "\n    "...)
		b, err := appendPeerJSON(b, &pr, windows)
		if err != nil {
			return b, fmt.Errorf("encode peer %s: %w", pr.Peer, err)
		}
		if i < len(a.peers)-1 {
			b = append(b, ',')
		}
		return b, nil
	})
	if err != nil {
		return err
	}
	if len(a.peers) > 0 {
		bw.WriteString("\n  ")
	}
	bw.WriteString("],\n")
	if err := member("summary", a.Summary, a.herd == nil); err != nil {
		return err
	}
	if a.herd != nil {
		if err := member("herd", a.herd, true); err != nil {
			return err
		}
	}
	bw.WriteString("}\n")
	return bw.Flush()
}

// TablesUpTo is the number of peers up to which WriteText gives every peer
// its interval table: a fixture, a session, a few clients.
const TablesUpTo = 20

// WriteText writes the report for a person, as Report.WriteText does, but
// for more than TablesUpTo peers a passing peer gets one line (its header
// and its largest jitter), unless tables asks for every table: with 10 000
// peers, 9 000 tables that say ok bury the ones that failed.
func (a *Audit) WriteText(w io.Writer, tables bool) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	writeTextHeader(bw, a.Port, a.Policy, a.Mode, a.ModeInferred, a.Capture)
	brief := !tables && len(a.peers) > TablesUpTo
	err := a.writePeers(bw, func(b []byte, i int, c func() attempt.Chain) ([]byte, error) {
		p := a.peers[i]
		if !brief || !p.passed {
			b = append(b, '\n')
			return appendPeerText(b, a.peerReport(i, c())), nil
		}
		if i == 0 || !a.peers[i-1].passed {
			b = append(b, '\n')
			b = text.AppendPlural(b, a.Summary.Passed, "passing peer")
			b = append(b, ", one line each:\n"...)
		}
		b = appendPeerHeader(b, p.header(""))
		b = append(b, "; max |jitter| "...)
		b = strconv.AppendFloat(b, p.maxJitter, 'f', 2, 64)
		return append(b, "%\n"...), nil
	})
	if err != nil {
		return err
	}
	bw.WriteByte('\n')
	fmt.Fprintln(bw, a.Summary.String())
	if line := a.Summary.CapLine(); line != "" {
		fmt.Fprintln(bw, line)
	}
	if a.herd != nil {
		bw.WriteByte('\n')
		if err := a.herd.WriteText(bw); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// Write writes the report as JSON (WriteJSON) or as text (WriteText, with
// every peer's table when tables is set).
func (a *Audit) Write(w io.Writer, asJSON, tables bool) error {
	if asJSON {
		return a.WriteJSON(w)
	}
	return a.WriteText(w, tables)
}

// WithHerd makes the reports written after it end with the herd reading
// of the audit's peers (Herd): a "herd" member after "summary" in JSON,
// its lines after the summary in text. It costs about as much as
// verifying the chains, so it is asked for, not done always.
func (a *Audit) WithHerd() *Audit {
	h := a.Herd()
	a.herd = &h
	return a
}
