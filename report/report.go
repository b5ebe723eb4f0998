package report

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/netip"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/internal/text"
	"github.com/backoff-audit/audit/session"
)

// Report is what `audit pcap` prints, as text (WriteText) or as JSON. It is
// a plain struct so that the live auditor can embed it and add members.
//
// JSON schema (names are stable; consumers must ignore unknown members):
//
//	{
//	  "port": 50052,                       // the retry port audited
//	  "policy": {"initial_backoff_ms", "multiplier", "jitter", "max_backoff_ms",
//	             "min_connect_timeout_ms", "tolerance_ms"},
//	  "retry_mode": "close",               // what the retry port did (docs/spec.md §7):
//	                                       //   close | refuse | hang | restart=5s |
//	                                       //   settings-close | goaway
//	  "retry_mode_inferred": true,         // only when read from the fates, no flag
//	  "capture": {
//	    "packets", "syns",                 // read, and SYNs to the port
//	    "attempts", "retransmits",         // SYNs grouped by (src, dst, ISN)
//	    "skipped": {"reason": count},      // packets not decoded, by reason
//	    "files": [{"path", "format", "bytes", "packets", "syns",
//	               "skipped": {"reason": count}, "truncated",
//	               "warnings": ["…"]}], // {} and [] when empty
//	    "syn_only": true                   // no TCP segment but SYNs: every fate is
//	                                       //   "unknown"; absent otherwise
//	  },
//	  "peers": [{                          // failing peers first
//	    "peer": "127.0.0.1",               // client address
//	    "passed": false,                   // the reference reading (docs/spec.md §3,
//	    "verdict": "failed",               //   too few attempts fails, §4):
//	                                       //   "passed" | "failed" | "too few attempts"
//	    "reason": "interval 3: …",         // why it did not pass ("" when it did)
//	    "strict": {"passed", "verdict", "first_failure"},
//	                                       // spec-text reading: interval 1 un-jittered
//	    "reference_passed": false,         // the C++ reference's answer, bugs included
//	    "retransmits": 0,                  // retransmitted SYNs over the chain
//	    "attempts": [{"time": "2025-01-02T03:04:05.123456789Z", // RFC 3339, ns, UTC
//	                  "src_port", "seq", "retransmits",
//	                  "fate": "closed by server", // what the wire showed (docs/spec.md §7):
//	                                       //   "refused" | "unanswered" | "closed by server" |
//	                                       //   "abandoned by client" | "open at end" | "unknown"
//	                  "accepted_ms": 0.021,  // SYN to SYN-ACK; only when the server accepted
//	                  "duration_ms": 0.214,  // SYN to the first FIN or RST (to the RST for
//	                                       //   "refused", to the last SYN for "unanswered");
//	                                       //   absent when open at end or unknown
//	                  "client_sent": "tls client hello", // the first bytes each side sent:
//	                  "server_sent": "http/2 settings"}], //   "tls client hello" | "tls server hello" |
//	                                       //   "http/2 preface" | "http/2 settings" | "data";
//	                                       //   absent when that side sent none
//	    "intervals": [{"k", "measured_ms", "backoff_ms", "expected_ms", "min_ms",
//	                   "max_ms", "ok", "outcome", "jitter_pct", "strict_ok",
//	                   "term"}],           // "term" only after a hung or successful
//	                                       //   attempt: "backoff" | "connect timeout" |
//	                                       //   "reset" (docs/spec.md §7)
//	    "backoff_ms": [1000, 1600],        // ReconnectInfo.backoff_ms
//	    "signatures": [{"name", "seen_in", "detail"}],
//	                                       // known deviations the chain matches
//	    "recovery": {"attempt", "after_ms", "owed_ms", "min_ms", "max_ms", "ok"},
//	                                       // restart: the client's return
//	    "reconnects": {"per_second", "median_ms", "tight_loop"}
//	                                       // settings-close, goaway; these three
//	                                       //   are absent when they do not apply
//	  }],
//	  "summary": {"peers", "passed", "failed", "too_few", "passed_all",
//	              "fits_cap_ms"}          // audit pcap only, absent when 0
//	}
//
// A reading beyond one capture's SYNs adds sections after "summary" (see
// sections.go); each is absent when the reading has none:
//
//	"session":    SessionInfo: the session the report judges
//	"live":       LiveInfo: the live capture and libpcap's counters
//	"foreign":    [{"addr", "attempts"}]: addresses of the session outside
//	              the verdict
//	"server":     ServerVerdict: what the server's Stop answered (absent
//	              when the session ended without Stop)
//	"crosscheck": CrossCheck: the server's list against the SYNs
//	"record":     RecordInfo: the record file a capture was read with
//	"sessions":   [RecordSession]: each session of that record judged
type Report struct {
	Port   uint16            `json:"port"`
	Policy backoff.Policy    `json:"policy"`
	Mode   backoff.RetryMode `json:"retry_mode"`
	// ModeInferred is set when Mode was read from the attempts' fates
	// (InferMode) rather than given.
	ModeInferred bool                `json:"retry_mode_inferred,omitempty"`
	Capture      attempt.CaptureInfo `json:"capture"`
	Peers        []PeerReport        `json:"peers"`
	Summary      Summary             `json:"summary"`
	// HerdReading is the herd of the peers (WithHerd), written after the
	// summary in JSON and at the end of the text.
	HerdReading *Herd `json:"herd,omitempty"`

	Session    *SessionInfo        `json:"session,omitempty"`
	Live       *LiveInfo           `json:"live,omitempty"`
	Foreign    []session.PeerCount `json:"foreign,omitzero"`
	Server     *ServerVerdict      `json:"server,omitempty"`
	CrossCheck *session.CrossCheck `json:"crosscheck,omitempty"`
	Record     *RecordInfo         `json:"record,omitempty"`
	Sessions   []RecordSession     `json:"sessions,omitzero"`
}

// PeerReport is the verdict on one peer's chain of attempts.
type PeerReport struct {
	Peer netip.Addr `json:"peer"`
	// Passed and Verdict are the reference reading (docs/spec.md §3 with the
	// fixes of §4).
	Passed  bool            `json:"passed"`
	Verdict backoff.Verdict `json:"verdict"`
	Reason  string          `json:"reason"`
	// Strict is the reading after the spec text, beside the reference's.
	Strict backoff.Reading `json:"strict"`
	// ReferencePassed is what the C++ reference would have answered.
	ReferencePassed bool                `json:"reference_passed"`
	Retransmits     int                 `json:"retransmits"`
	Attempts        []AttemptReport     `json:"attempts"`
	Intervals       []backoff.Interval  `json:"intervals"`
	BackoffMS       []int32             `json:"backoff_ms"`
	Signatures      []backoff.Signature `json:"signatures,omitempty"`
	Recovery        *backoff.Recovery   `json:"recovery,omitempty"`
	Reconnects      *backoff.Reconnects `json:"reconnects,omitempty"`
}

// AttemptReport is one attempt of a peer.
type AttemptReport struct {
	Time        time.Time `json:"time"`
	SrcPort     uint16    `json:"src_port"`
	Seq         uint32    `json:"seq"`
	Retransmits int       `json:"retransmits"`
	// Ending is the attempt's fate (docs/spec.md §7); its Fate is
	// FateUnknown when the capture could not show it.
	Ending backoff.Ending `json:"-"`
}

type attemptJSON struct {
	Time        text.Time       `json:"time"`
	SrcPort     uint16          `json:"src_port"`
	Seq         uint32          `json:"seq"`
	Retransmits int             `json:"retransmits"`
	Fate        backoff.Fate    `json:"fate"`
	AcceptedMS  *float64        `json:"accepted_ms,omitempty"`
	DurationMS  *float64        `json:"duration_ms,omitempty"`
	ClientSent  backoff.Payload `json:"client_sent,omitempty"`
	ServerSent  backoff.Payload `json:"server_sent,omitempty"`
}

// MarshalJSON writes the time in UTC with nanoseconds, and the fate's
// times in milliseconds where the fate has them.
func (a AttemptReport) MarshalJSON() ([]byte, error) {
	e := a.Ending
	j := attemptJSON{Time: text.Time(a.Time), SrcPort: a.SrcPort, Seq: a.Seq, Retransmits: a.Retransmits,
		Fate: e.ReportFate(), ClientSent: e.ClientSent, ServerSent: e.ServerSent}
	if e.Fate.Accepted() {
		v := backoff.Millis(e.Accepted)
		j.AcceptedMS = &v
	}
	if e.Fate.Ended() {
		v := backoff.Millis(e.Duration)
		j.DurationMS = &v
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes; times in milliseconds come
// back to the nanosecond.
func (a *AttemptReport) UnmarshalJSON(b []byte) error {
	var j attemptJSON
	err := json.Unmarshal(b, &j)
	*a = AttemptReport{Time: time.Time(j.Time), SrcPort: j.SrcPort, Seq: j.Seq, Retransmits: j.Retransmits,
		Ending: backoff.Ending{Fate: j.Fate, ClientSent: j.ClientSent, ServerSent: j.ServerSent}}
	if j.AcceptedMS != nil {
		a.Ending.Accepted = fromMS(*j.AcceptedMS)
	}
	if j.DurationMS != nil {
		a.Ending.Duration = fromMS(*j.DurationMS)
	}
	return err
}

// fromMS is the duration of v milliseconds, to the nearest nanosecond.
func fromMS(v float64) time.Duration { return time.Duration(math.Round(v * 1e6)) }

// Summary counts the peers by verdict.
type Summary struct {
	Peers  int `json:"peers"`
	Passed int `json:"passed"`
	Failed int `json:"failed"`
	TooFew int `json:"too_few"`
	// PassedAll is true when there is at least one peer and every peer
	// passed: the condition for exit status 0.
	PassedAll bool `json:"passed_all"`
	// FitsCapMS is a cap below the policy's, in whole ms, under which every
	// failing peer would pass (0 when there is none): the clients likely
	// ran with it. Only NewAudit looks for one (see capfit.go); a session's
	// report is judged against the cap its Start asked for.
	FitsCapMS int64 `json:"fits_cap_ms,omitempty"`
}

// NewPeerReport verifies one chain against p.
func NewPeerReport(p backoff.Policy, c attempt.Chain) PeerReport {
	return PeerReportOf(c, backoff.Verify(p, c.Times()))
}

// PeerReportOf is the report of a chain already verified: res is VerifyRun's
// result over c's times.
func PeerReportOf(c attempt.Chain, res backoff.Result) PeerReport {
	pr := PeerReport{
		Peer:            c.Peer,
		Passed:          res.Reference.Passed,
		Verdict:         res.Reference.Verdict,
		Reason:          res.Reason(),
		Strict:          res.Strict,
		ReferencePassed: res.ReferencePassed,
		Retransmits:     c.Retransmits(),
		Attempts:        make([]AttemptReport, len(c.Attempts)),
		Intervals:       res.Intervals,
		BackoffMS:       res.BackoffMS,
		Signatures:      backoff.Signatures(res),
		Recovery:        res.Recovery,
		Reconnects:      res.Reconnects,
	}
	if pr.Intervals == nil {
		pr.Intervals = []backoff.Interval{}
		pr.BackoffMS = []int32{}
	}
	for i, a := range c.Attempts {
		pr.Attempts[i] = AttemptReport{Time: a.Time, SrcPort: a.Src.Port(), Seq: a.Seq, Retransmits: a.Retransmits, Ending: a.Ending}
		pr.Attempts[i].Ending.Fate = a.Ending.ReportFate()
	}
	return pr
}

// NewReport verifies every chain against p. Attempts and retransmits in
// capture are counted from the chains; the other members are kept as given.
// Peers are ordered failing first (failed, then too few attempts, then
// passed), by address within each group.
func NewReport(port uint16, p backoff.Policy, chains []attempt.Chain, capture attempt.CaptureInfo) Report {
	peers := make([]PeerReport, len(chains))
	for i, c := range chains {
		peers[i] = NewPeerReport(p, c)
	}
	return NewReportOf(port, p, peers, capture)
}

// NewReportOf is the report of peers already verified against p: it orders
// them as NewReport does, counts their attempts and retransmits into
// capture, and sums them up.
func NewReportOf(port uint16, p backoff.Policy, peers []PeerReport, capture attempt.CaptureInfo) Report {
	r := Report{Port: port, Policy: p, Capture: capture, Peers: peers}
	if r.Peers == nil {
		r.Peers = []PeerReport{}
	}
	if r.Capture.Skipped == nil {
		r.Capture.Skipped = map[string]uint64{}
	}
	if r.Capture.Files == nil {
		r.Capture.Files = []attempt.FileInfo{}
	}
	r.Capture.Attempts, r.Capture.Retransmits = 0, 0
	for _, pr := range r.Peers {
		r.Capture.Attempts += len(pr.Attempts)
		r.Capture.Retransmits += pr.Retransmits
	}
	slices.SortStableFunc(r.Peers, func(x, y PeerReport) int { return peerOrder(x.Verdict, x.Peer, y.Verdict, y.Peer) })
	r.Summary = summarize(r.Peers)
	return r
}

// peerOrder is the order of a report's peers: failing first (failed, then
// too few attempts, then passed), by address within each group.
func peerOrder(v1 backoff.Verdict, a1 netip.Addr, v2 backoff.Verdict, a2 netip.Addr) int {
	return cmp.Or(cmp.Compare(verdictRank(v1), verdictRank(v2)), a1.Compare(a2))
}

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

func (cs chainSlice) Len() int                                       { return len(cs) }
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

// WriteBatches writes to w what format appends for each of n items, in
// order. Formatting is most of the cost of a large report, and each
// item's is its own, so batches of batch items are formatted on every
// core, each goroutine with its own state (made by state), while this
// goroutine writes the finished ones in order; at most two batches a core
// wait, which bounds the memory whatever n. The first error of format or
// of w stops the writing and is returned.
func WriteBatches[S any](w io.Writer, n, batch int, state func() S, format func(b []byte, s S, i int) ([]byte, error)) error {
	batches := (n + batch - 1) / batch
	workers := max(1, min(runtime.GOMAXPROCS(0), batches))
	type result struct {
		b   []byte
		err error
	}
	done := make([]chan result, batches)
	for i := range done {
		done[i] = make(chan result, 1)
	}
	todo := make(chan int)
	slots := make(chan struct{}, 2*workers) // batches formatted and not yet written
	// Written batches' buffers go back to the workers: a batch of the
	// 2 M-packet capture's JSON is half a megabyte, grown by append.
	free := make(chan []byte, 2*workers+1)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(stop)
	wg.Go(func() {
		defer close(todo)
		for k := range batches {
			select {
			case slots <- struct{}{}:
			case <-stop:
				return
			}
			select {
			case todo <- k:
			case <-stop:
				return
			}
		}
	})
	for range workers {
		wg.Go(func() {
			s := state()
			for k := range todo {
				var r result
				select {
				case r.b = <-free:
				default:
				}
				for i := k * batch; i < min(n, (k+1)*batch) && r.err == nil; i++ {
					r.b, r.err = format(r.b, s, i)
				}
				done[k] <- r
			}
		})
	}
	for k := range batches {
		r := <-done[k]
		if r.err != nil {
			return r.err
		}
		if _, err := w.Write(r.b); err != nil {
			return err
		}
		select {
		case free <- r.b[:0]:
		default:
		}
		<-slots
	}
	return nil
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

func maxJitter(ivs []backoff.Interval) float64 {
	m := 0.0
	for _, iv := range ivs {
		m = max(m, math.Abs(iv.JitterPct))
	}
	return m
}

func verdictRank(v backoff.Verdict) int {
	switch v {
	case backoff.Failed:
		return 0
	case backoff.TooFew:
		return 1
	case backoff.Passed:
		return 3
	}
	return 2 // any other failing verdict
}

func summarize(peers []PeerReport) Summary {
	var s Summary
	for _, p := range peers {
		s.count(p.Passed, p.Verdict)
	}
	return s
}

// count adds a peer of the reference reading passed and verdict v.
func (s *Summary) count(passed bool, v backoff.Verdict) {
	s.Peers++
	switch {
	case passed:
		s.Passed++
	case v == backoff.TooFew:
		s.TooFew++
	default:
		s.Failed++
	}
	s.PassedAll = s.Passed == s.Peers
}

// Only keeps the peers whose address is in peers (IPv4-mapped addresses
// unmapped) and recounts the summary; the capture members are unchanged.
// With no addresses it returns r as is.
func (r Report) Only(peers ...netip.Addr) Report {
	if len(peers) == 0 {
		return r
	}
	keep := make(map[netip.Addr]bool, len(peers))
	for _, a := range peers {
		keep[a.Unmap()] = true
	}
	out := r
	out.Peers = make([]PeerReport, 0, len(peers))
	for _, p := range r.Peers {
		if keep[p.Peer] {
			out.Peers = append(out.Peers, p)
		}
	}
	out.Summary = summarize(out.Peers)
	return out
}

// WriteText writes the report for a person: a capture header, then per
// peer a header line and the reference-style interval table, then a
// summary line.
//
// A session's report (Session set) starts with the session's heading and
// ends with its sections; a report read with a record file gives each
// session its section, with the kernel verdict of its chain, before the
// summary.
func (r Report) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	var b []byte
	peers := func(ps []PeerReport) {
		for _, p := range ps {
			b = append(b[:0], '\n')
			bw.Write(appendPeerText(b, p))
		}
	}
	switch {
	case r.Session != nil:
		writeSessionHeading(bw, r.Session)
		if r.Live != nil {
			fmt.Fprintf(bw, "kernel verdict, from SYN timestamps (%s):\n", r.Live.Timestamps)
			c := r.Capture
			fmt.Fprintf(bw, "port %d: %d SYNs captured on %s, %d attempts, %d retransmits\n",
				r.Port, c.SYNs, r.Live.Iface, c.Attempts, c.Retransmits)
			fmt.Fprintf(bw, "policy: %v%s\n", r.Policy, modeText(r.Policy, r.Mode))
		} else {
			writeTextHeader(bw, r.Port, r.Policy, r.Mode, r.ModeInferred, r.Capture)
		}
		peers(r.Peers)
	case r.Record != nil:
		writeCaptureLine(bw, r.Port, r.Capture)
		r.writeRecordText(bw, peers)
	default:
		writeTextHeader(bw, r.Port, r.Policy, r.Mode, r.ModeInferred, r.Capture)
		peers(r.Peers)
	}
	bw.WriteByte('\n')
	fmt.Fprintln(bw, r.Summary.String())
	if line := r.Summary.CapLine(); line != "" {
		fmt.Fprintln(bw, line)
	}
	if s := r.Session; s != nil {
		if s.Dropped > 0 {
			fmt.Fprintf(bw, "%d more attempts than the session's maximum of %d were counted, not kept: the verdict is %s\n",
				s.Dropped, s.MaxAttempts, backoff.Overflow)
		}
		if s.OutsideDropped > 0 {
			fmt.Fprintf(bw, "%d older attempts outside any session were counted, not kept: the cross-check does not list them\n",
				s.OutsideDropped)
		}
	}
	for _, f := range r.Foreign {
		fmt.Fprintf(bw, "foreign peer %s: %d attempts, not in the verdict\n", f.Addr, f.Attempts)
	}
	if r.CrossCheck != nil {
		writeServerText(bw, r.Server)
		if err := r.CrossCheck.WriteText(bw); err != nil {
			return err
		}
	}
	if r.Live != nil {
		fmt.Fprintln(bw, r.Live.StatsLine())
	}
	if r.HerdReading != nil {
		bw.WriteByte('\n')
		if err := r.HerdReading.WriteText(bw); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// writeRecordText writes, for a capture read with a record file, where the
// policy came from, what the record holds, and each session: its heading,
// its chain's kernel verdict (written by peers), the server's verdict and
// the cross-check.
func (r Report) writeRecordText(bw *bufio.Writer, peers func([]PeerReport)) {
	rec := r.Record
	switch {
	case rec.Policy == PolicyFromRecord && rec.ControlPort != 0:
		fmt.Fprintln(bw, "policy: each session's own, from the max_reconnect_backoff_ms of its Start call")
	case rec.Policy == PolicyFromRecord:
		fmt.Fprintln(bw, "policy: each session's own, from its Start line in the record")
	case rec.ControlPort != 0:
		fmt.Fprintf(bw, "policy: %v, from the command line; it overrides each session's Start call\n", r.Policy)
	default:
		fmt.Fprintf(bw, "policy: %v, from the command line; it overrides each session's Start line\n", r.Policy)
	}
	if rec.ControlPort != 0 {
		fmt.Fprintf(bw, "server's control port %d (its Start and Stop calls; the server's list is Stop's backoff_ms): %s judged",
			rec.ControlPort, text.Plural(len(r.Sessions), "session"))
	} else {
		fmt.Fprintf(bw, "server record %s: %s judged", rec.Path, text.Plural(len(r.Sessions), "session"))
	}
	for i, o := range rec.Outside {
		if i == 0 {
			bw.WriteString("; outside the capture, not judged:")
		}
		fmt.Fprintf(bw, " session %d (%s – %s)", o.Number, o.Start, cmp.Or(o.End, "open"))
	}
	bw.WriteString("\n")
	for _, s := range r.Sessions {
		writeSessionHeading(bw, &s.Session)
		fmt.Fprintf(bw, "kernel verdict, from SYN timestamps (policy %v):", s.Policy)
		var ps []PeerReport
		if s.peer >= 0 && s.peer < len(r.Peers) {
			ps = r.Peers[s.peer : s.peer+1]
		} else {
			bw.WriteString(" no attempt of its chain is in the capture")
		}
		bw.WriteString("\n")
		peers(ps)
		writeServerText(bw, s.Server)
		s.CrossCheck.WriteText(bw)
	}
}

func writeTextHeader(w *bufio.Writer, port uint16, p backoff.Policy, m backoff.RetryMode, inferred bool, c attempt.CaptureInfo) {
	writeCaptureLine(w, port, c)
	text := modeText(p, m)
	if inferred && text != "" {
		text += " (inferred from the fates)"
	}
	fmt.Fprintf(w, "policy: %v%s\n", p, text)
}

// modeText is what a report's policy line adds for a retry mode other than
// the interop test's.
func modeText(p backoff.Policy, m backoff.RetryMode) string {
	switch {
	case m.Is(backoff.ModeClose):
		return ""
	case m.Hangs():
		return fmt.Sprintf("; retry mode %v, connect timeout %v", m, p.MinConnectTimeout)
	}
	return fmt.Sprintf("; retry mode %v", m)
}

func writeCaptureLine(w *bufio.Writer, port uint16, c attempt.CaptureInfo) {
	fmt.Fprintf(w, "port %d: %d packets in %s, %s, %s, %s\n",
		port, c.Packets, text.Plural(len(c.Files), "file"), text.Plural(int(c.SYNs), "SYN"),
		text.Plural(c.Attempts, "attempt"), text.Plural(c.Retransmits, "retransmit"))
	if c.SYNOnly {
		w.WriteString(synOnlyNote + "\n")
	}
}

// synOnlyNote is what a text report says, once, of a capture of SYNs
// only (docs/spec.md §7).
const synOnlyNote = "the capture holds only SYNs: fates unknown"

// String is the summary line.
func (s Summary) String() string {
	verdict := "FAIL"
	if s.PassedAll {
		verdict = "PASS"
	}
	return fmt.Sprintf("%s: %s: %d passed, %d failed, %d too few attempts",
		verdict, text.Plural(s.Peers, "peer"), s.Passed, s.Failed, s.TooFew)
}

// appendPeerText appends a peer's header line, first attempt and interval
// table.
func appendPeerText(b []byte, p PeerReport) []byte {
	b = appendPeerHeader(b, p.header())
	b = append(b, '\n')
	if len(p.Attempts) > 0 {
		b = append(b, "  first attempt "...)
		b = p.Attempts[0].Time.UTC().AppendFormat(b, text.TimeLayout)
		b = append(b, " from port "...)
		b = strconv.AppendUint(b, uint64(p.Attempts[0].SrcPort), 10)
		b = append(b, '\n')
	}
	if len(p.Intervals) > 0 {
		b = append(b, intervalHead...)
		for _, iv := range p.Intervals {
			b = appendIntervalRow(b, iv)
		}
	}
	if rc := p.Recovery; rc != nil {
		verdict := "outside it"
		if rc.OK {
			verdict = "ok"
		}
		b = fmt.Appendf(b, "  recovery: attempt %d came %.0f ms after the port's return; the backoff owed %.0f ms then (window %.0f–%.0f ms): %s\n",
			rc.Attempt+1, rc.AfterMS, rc.OwedMS, rc.MinMS, rc.MaxMS, verdict)
	}
	if rc := p.Reconnects; rc != nil {
		loop := "it kept backing off"
		if rc.TightLoop {
			loop = "a tight loop: the client reset its backoff after each success"
		}
		b = fmt.Appendf(b, "  reconnects: %.2f a second, median interval %.0f ms: %s\n", rc.PerSecond, rc.MedianMS, loop)
	}
	for _, sg := range p.Signatures {
		b = fmt.Appendf(b, "  signature: %s (seen in %s): %s\n", sg.Name, sg.Seen, sg.Detail)
	}
	return appendFatesText(b, p.Attempts)
}

// fateHead heads the table of the attempts' fates.
var fateHead = fmt.Sprintf("  %3s %6s  %-19s %12s %16s %12s  %-16s  %s\n",
	"#", "port", "fate", "accepted ms", "after accept ms", "ended ms", "client sent", "server sent")

// appendFatesText appends the attempts' fates (docs/spec.md §7): the
// fate, the time from the SYN to the SYN-ACK, from the SYN-ACK to the end
// (how long a server that closed first held the connection), and from the
// SYN to the end (when a client that closed first gave up), and the first
// bytes each side sent. When every attempt ended alike (one fate, the same
// first bytes), one line says so with the range of each time; else a
// table, one row an attempt, "-" where the fate has none. Nothing when no
// fate is known.
func appendFatesText(b []byte, as []AttemptReport) []byte {
	known, alike := false, true
	for i := range as {
		e, f := &as[i].Ending, &as[0].Ending
		known = known || e.ReportFate() != backoff.FateUnknown
		alike = alike && e.ReportFate() == f.ReportFate() && e.ClientSent == f.ClientSent && e.ServerSent == f.ServerSent
	}
	switch {
	case !known:
		return b
	case alike && len(as) > 1:
		return appendFatesAlike(b, as)
	}
	b = append(b, fateHead...)
	var num [64]byte
	for i := range as {
		e := &as[i].Ending
		b = append(b, "  "...)
		b = appendPadded(b, strconv.AppendInt(num[:0], int64(i+1), 10), 3)
		b = append(b, ' ')
		b = appendPadded(b, strconv.AppendUint(num[:0], uint64(as[i].SrcPort), 10), 6)
		b = append(b, "  "...)
		b = appendLeft(b, string(e.ReportFate()), 19)
		b = append(b, ' ')
		accepted, ended := e.Fate.Accepted(), e.Fate.Ended()
		b = appendPadded(b, msText(num[:0], e.Accepted, accepted), 12)
		b = append(b, ' ')
		b = appendPadded(b, msText(num[:0], e.Duration-e.Accepted, accepted && ended), 16)
		b = append(b, ' ')
		b = appendPadded(b, msText(num[:0], e.Duration, ended), 12)
		b = append(b, "  "...)
		b = appendLeft(b, sentText(e.ClientSent), 16)
		b = append(b, "  "...)
		b = append(b, sentText(e.ServerSent)...)
		b = append(b, '\n')
	}
	return b
}

// appendFatesAlike is appendFatesText's line for attempts that all ended
// alike: the fate, the range of each time it has, and the first bytes.
func appendFatesAlike(b []byte, as []AttemptReport) []byte {
	e := &as[0].Ending
	b = fmt.Appendf(b, "  fates: all %d %s", len(as), e.ReportFate())
	accepted, ended := e.Fate.Accepted(), e.Fate.Ended()
	if accepted {
		b = appendMSRange(b, ", accepted after ", as, func(e *backoff.Ending) time.Duration { return e.Accepted })
	}
	if accepted && ended {
		b = appendMSRange(b, ", held ", as, func(e *backoff.Ending) time.Duration { return e.Duration - e.Accepted })
	}
	if ended {
		b = appendMSRange(b, ", ended at ", as, func(e *backoff.Ending) time.Duration { return e.Duration })
	}
	client, server := string(e.ClientSent), string(e.ServerSent)
	if client == "" {
		client = "nothing"
	}
	if server == "" {
		server = "nothing"
	}
	return fmt.Appendf(b, "; client sent %s, server sent %s\n", client, server)
}

// appendMSRange appends label and the range of what over the
// attempts, in milliseconds ("0.020–0.029 ms", or one value when all are
// equal).
func appendMSRange(b []byte, label string, as []AttemptReport, what func(*backoff.Ending) time.Duration) []byte {
	lo, hi := what(&as[0].Ending), what(&as[0].Ending)
	for i := range as {
		d := what(&as[i].Ending)
		lo, hi = min(lo, d), max(hi, d)
	}
	b = msText(append(b, label...), lo, true)
	if hi != lo {
		b = msText(append(b, "–"...), hi, true)
	}
	return append(b, " ms"...)
}

// sentText names a side's first bytes, "-" for none.
func sentText(p backoff.Payload) string {
	if p == "" {
		return "-"
	}
	return string(p)
}

// appendLeft appends s left-aligned in width bytes: the names of fates
// and first bytes are ASCII.
func appendLeft(b []byte, s string, width int) []byte {
	b = append(b, s...)
	for n := len(s); n < width; n++ {
		b = append(b, ' ')
	}
	return b
}

// msText is d in milliseconds with three decimals (whole microseconds,
// rounded half to even), or "-" when not ok. It formats integers, where
// strconv.AppendFloat took four times as long: a report's tables have
// three times a row.
func msText(b []byte, d time.Duration, ok bool) []byte {
	switch {
	case !ok:
		return append(b, '-')
	case d == math.MinInt64:
		return strconv.AppendFloat(b, backoff.Millis(d), 'f', 3, 64)
	case d < 0:
		b = append(b, '-')
		d = -d
	}
	us, r := int64(d)/1000, int64(d)%1000
	if r > 500 || r == 500 && us%2 == 1 {
		us++
	}
	b = strconv.AppendInt(b, us/1000, 10)
	return append(b, '.', byte('0'+us/100%10), byte('0'+us/10%10), byte('0'+us%10))
}

// intervalHead heads the interval table.
var intervalHead = fmt.Sprintf("  %3s %13s %12s %17s %9s  %s\n", "k", "measured ms", "expected ms", "window ms", "jitter", "verdict")

// appendIntervalRow appends an interval's row of the table, as
//
//	fmt.Sprintf("  %3d %13.3f %12.1f %17s %+8.2f%%  %s\n", k, measured, expected, window, jitter, verdict)
//
// would, window being fmt.Sprintf("%.1f–%.1f", min, max), at a tenth of
// the cost: failing peers have thousands of rows.
func appendIntervalRow(b []byte, iv backoff.Interval) []byte {
	var num [64]byte
	b = append(b, "  "...)
	b = appendPadded(b, strconv.AppendInt(num[:0], int64(iv.K), 10), 3)
	b = append(b, ' ')
	b = appendPadded(b, strconv.AppendFloat(num[:0], iv.MeasuredMS, 'f', 3, 64), 13)
	b = append(b, ' ')
	b = appendPadded(b, strconv.AppendFloat(num[:0], iv.ExpectedMS, 'f', 1, 64), 12)
	b = append(b, ' ')
	window := strconv.AppendFloat(num[:0], iv.MinMS, 'f', 1, 64)
	window = append(window, "–"...)
	window = strconv.AppendFloat(window, iv.MaxMS, 'f', 1, 64)
	b = appendPadded(b, window, 17)
	b = append(b, ' ')
	jitter := strconv.AppendFloat(num[:1], iv.JitterPct, 'f', 2, 64)
	if c := jitter[1]; c == '-' || c == '+' {
		jitter = jitter[1:] // %+ adds a sign only where there is none
	} else {
		jitter[0] = '+'
	}
	b = appendPadded(b, jitter, 8)
	b = append(b, "%  "...)
	b = append(b, iv.Outcome...)
	if iv.Term != "" {
		b = append(b, " ("...)
		b = append(b, iv.Term...)
		b = append(b, ')')
	}
	return append(AppendStrictNote(b, iv), '\n')
}

// AppendStrictNote appends what the strict reading (docs/spec.md §3.7)
// says of interval iv where it differs from the reference's verdict:
// ", strict: fails" or ", strict: ok".
func AppendStrictNote(b []byte, iv backoff.Interval) []byte {
	switch {
	case iv.OK && !iv.StrictOK:
		b = append(b, ", strict: fails"...)
	case !iv.OK && iv.StrictOK:
		b = append(b, ", strict: ok"...)
	}
	return b
}

// appendPadded appends s right-aligned in width characters (runes, as
// fmt counts them).
func appendPadded(b, s []byte, width int) []byte {
	for n := utf8.RuneCount(s); n < width; n++ {
		b = append(b, ' ')
	}
	return append(b, s...)
}

func (p PeerReport) header() peerHeader {
	return peerHeader{peer: p.Peer, attempts: len(p.Attempts), retrans: p.Retransmits, verdict: p.Verdict,
		reason: p.Reason, strict: p.Strict, passed: p.Passed, refPassed: p.ReferencePassed}
}

// peerHeader is what a peer's first line says.
type peerHeader struct {
	peer              netip.Addr
	attempts, retrans int
	verdict           backoff.Verdict
	reason            string
	strict            backoff.Reading
	passed, refPassed bool
}

func (p auditPeer) header(reason string) peerHeader {
	return peerHeader{peer: p.addr, attempts: p.attempts, retrans: p.retrans, verdict: p.verdict,
		reason: reason, strict: p.strict, passed: p.passed, refPassed: p.refPassed}
}

// appendPeerHeader appends a peer's first line, without its newline. It
// appends rather than prints: a report may have 10 000 of them.
func appendPeerHeader(b []byte, h peerHeader) []byte {
	b = append(b, "peer "...)
	b = h.peer.AppendTo(b)
	b = append(b, ": "...)
	b = text.AppendPlural(b, h.attempts, "attempt")
	b = append(b, ", "...)
	b = text.AppendPlural(b, h.retrans, "retransmit")
	b = append(b, ", "...)
	b = append(b, h.verdict...)
	if h.reason != "" && h.verdict != backoff.TooFew {
		b = append(b, ": "...)
		b = append(b, h.reason...)
	}
	if h.verdict != backoff.TooFew {
		b = append(b, "; strict: "...)
		b = append(b, h.strict.Verdict...)
		if h.strict.FirstFailure > 0 {
			b = append(b, " at interval "...)
			b = strconv.AppendInt(b, int64(h.strict.FirstFailure), 10)
		}
	}
	if h.refPassed != h.passed {
		b = append(b, "; the C++ reference would say passed"...)
	}
	return b
}

// appendPeerJSON appends json.Marshal(p), byte for byte (TestAppendPeerJSON
// holds it to that), without reflection: encoding/json took 0.3 s for the
// 10 000 peers of the 2 M-packet bench capture, most of it reflecting over
// intervals and compacting what AttemptReport.MarshalJSON returns.
//
// windows, when not nil, holds the text of the policy's windows.
func appendPeerJSON(b []byte, p *PeerReport, windows *windowText) ([]byte, error) {
	b = append(b, `{"peer":`...)
	b = appendJSONAddr(b, p.Peer)
	b = append(b, `,"passed":`...)
	b = strconv.AppendBool(b, p.Passed)
	b = append(b, `,"verdict":`...)
	b = appendJSONString(b, string(p.Verdict))
	b = append(b, `,"reason":`...)
	b = appendJSONString(b, p.Reason)
	b = append(b, `,"strict":{"passed":`...)
	b = strconv.AppendBool(b, p.Strict.Passed)
	b = append(b, `,"verdict":`...)
	b = appendJSONString(b, string(p.Strict.Verdict))
	if p.Strict.FirstFailure != 0 {
		b = append(b, `,"first_failure":`...)
		b = strconv.AppendInt(b, int64(p.Strict.FirstFailure), 10)
	}
	b = append(b, `},"reference_passed":`...)
	b = strconv.AppendBool(b, p.ReferencePassed)
	b = append(b, `,"retransmits":`...)
	b = strconv.AppendInt(b, int64(p.Retransmits), 10)
	b = append(b, `,"attempts":`...)
	b, _ = appendJSONList(b, p.Attempts, func(b []byte, a *AttemptReport) ([]byte, error) {
		b = append(b, `{"time":"`...)
		b = appendTime(b, a.Time)
		b = append(b, `","src_port":`...)
		b = strconv.AppendUint(b, uint64(a.SrcPort), 10)
		b = append(b, `,"seq":`...)
		b = strconv.AppendUint(b, uint64(a.Seq), 10)
		b = append(b, `,"retransmits":`...)
		b = strconv.AppendInt(b, int64(a.Retransmits), 10)
		return appendEndingJSON(b, &a.Ending), nil
	})
	b = append(b, `,"intervals":`...)
	b, err := appendJSONList(b, p.Intervals, func(b []byte, iv *backoff.Interval) ([]byte, error) {
		return appendIntervalJSON(b, iv, windows)
	})
	if err != nil {
		return b, err
	}
	b = append(b, `,"backoff_ms":`...)
	b, _ = appendJSONList(b, p.BackoffMS, func(b []byte, v *int32) ([]byte, error) {
		return strconv.AppendInt(b, int64(*v), 10), nil
	})
	// The members a chain seldom has, in the struct's order: encoding/json
	// is fast enough for them.
	for _, m := range []struct {
		name string
		v    any
		set  bool
	}{
		{"signatures", p.Signatures, len(p.Signatures) > 0},
		{"recovery", p.Recovery, p.Recovery != nil},
		{"reconnects", p.Reconnects, p.Reconnects != nil},
	} {
		if !m.set {
			continue
		}
		v, err := json.Marshal(m.v)
		if err != nil {
			return b, err
		}
		b = append(b, `,"`...)
		b = append(b, m.name...)
		b = append(b, `":`...)
		b = append(b, v...)
	}
	return append(b, '}'), nil
}

// appendEndingJSON appends an attempt's fate members, as
// AttemptReport.MarshalJSON writes them, and the attempt's closing brace.
func appendEndingJSON(b []byte, e *backoff.Ending) []byte {
	b = append(b, `,"fate":`...)
	b = appendNameJSON(b, string(e.ReportFate()))
	if e.Fate.Accepted() {
		b = append(b, `,"accepted_ms":`...)
		b = AppendMS(b, e.Accepted)
	}
	if e.Fate.Ended() {
		b = append(b, `,"duration_ms":`...)
		b = AppendMS(b, e.Duration)
	}
	if e.ClientSent != "" {
		b = append(b, `,"client_sent":`...)
		b = appendNameJSON(b, string(e.ClientSent))
	}
	if e.ServerSent != "" {
		b = append(b, `,"server_sent":`...)
		b = appendNameJSON(b, string(e.ServerSent))
	}
	return append(b, '}')
}

// appendNameJSON is appendJSONString for a fate's or a payload's name: the
// names this package gives are plain ASCII, quoted as they are, which was
// a fifth of what the fates added to the 2 M-packet bench capture's JSON
// report; any other (an Ending read back from a record) is escaped.
func appendNameJSON(b []byte, s string) []byte {
	switch backoff.Fate(s) {
	case backoff.FateUnknown, backoff.FateRefused, backoff.FateUnanswered, backoff.FateClosed, backoff.FateAbandoned, backoff.FateOpen:
	default:
		if p := backoff.Payload(s); p == backoff.PayloadNone || !p.Known() {
			return appendJSONString(b, s)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// AppendMS appends d in milliseconds as encoding/json writes
// float64(d)/1e6, keeping every nanosecond of a whole number of them: the
// one way a report, JSON or HTML, writes a time in ms.
func AppendMS(b []byte, d time.Duration) []byte {
	if ns := int64(d); ns > -1e15 && ns < 1e15 {
		return appendWholeNS(b, ns)
	}
	b, _ = appendJSONFloat(b, backoff.Millis(d)) // finite: no error
	return b
}

// appendJSONList appends list as encoding/json writes a slice (null when
// nil), each element by item.
func appendJSONList[T any](b []byte, list []T, item func([]byte, *T) ([]byte, error)) ([]byte, error) {
	if list == nil {
		return append(b, "null"...), nil
	}
	b = append(b, '[')
	for i := range list {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = item(b, &list[i]); err != nil {
			return b, err
		}
	}
	return append(b, ']'), nil
}

func appendIntervalJSON(b []byte, iv *backoff.Interval, windows *windowText) ([]byte, error) {
	b = append(b, `{"k":`...)
	b = strconv.AppendInt(b, int64(iv.K), 10)
	b = append(b, `,"measured_ms":`...)
	var err1, err2 error
	if ns := int64(iv.Measured); ns != 0 && ns > -1e15 && ns < 1e15 && iv.MeasuredMS == backoff.Millis(iv.Measured) {
		b = appendWholeNS(b, ns)
	} else {
		b, err1 = appendJSONFloat(b, iv.MeasuredMS)
	}
	b = append(b, `,"backoff_ms":`...)
	b = strconv.AppendInt(b, int64(iv.BackoffMS), 10)
	if w := windows.text(iv); w != nil {
		b = append(b, w...)
	} else {
		b, err2 = appendWindowJSON(b, iv)
	}
	b = append(b, `,"ok":`...)
	b = strconv.AppendBool(b, iv.OK)
	b = append(b, `,"outcome":`...)
	b = appendJSONString(b, string(iv.Outcome))
	b = append(b, `,"jitter_pct":`...)
	b, err5 := appendJSONFloat(b, iv.JitterPct)
	b = append(b, `,"strict_ok":`...)
	b = strconv.AppendBool(b, iv.StrictOK)
	if iv.Term != "" {
		b = append(b, `,"term":`...)
		b = appendJSONString(b, string(iv.Term))
	}
	return append(b, '}'), cmp.Or(err1, err2, err5)
}

// appendWindowJSON appends an interval's expected value and window:
// `,"expected_ms":E,"min_ms":MIN,"max_ms":MAX`.
func appendWindowJSON(b []byte, iv *backoff.Interval) ([]byte, error) {
	b = append(b, `,"expected_ms":`...)
	b, err1 := appendJSONFloat(b, iv.ExpectedMS)
	b = append(b, `,"min_ms":`...)
	b, err2 := appendJSONFloat(b, iv.MinMS)
	b = append(b, `,"max_ms":`...)
	b, err3 := appendJSONFloat(b, iv.MaxMS)
	return b, cmp.Or(err1, err2, err3)
}

// windowText holds the JSON of the expected value and window of a policy's
// first windowTextK intervals, which depend on k alone: formatting floats
// is most of the cost of a report's JSON.
type windowText struct {
	iv []backoff.Interval // p.Check(k, 0), from k = 1
	b  [][]byte
}

const windowTextK = 64

func newWindowText(p backoff.Policy) *windowText {
	w := &windowText{}
	for k := 1; k <= windowTextK; k++ {
		iv := p.Check(k, 0)
		b, err := appendWindowJSON(nil, &iv)
		if err != nil {
			break
		}
		w.iv, w.b = append(w.iv, iv), append(w.b, b)
	}
	return w
}

// text is the JSON of iv's window, or nil when it is not one held.
func (w *windowText) text(iv *backoff.Interval) []byte {
	if w == nil || iv.K < 1 || iv.K > len(w.iv) {
		return nil
	}
	h := &w.iv[iv.K-1]
	if h.ExpectedMS != iv.ExpectedMS || h.MinMS != iv.MinMS || h.MaxMS != iv.MaxMS {
		return nil
	}
	return w.b[iv.K-1]
}

// appendWholeNS appends ns nanoseconds as milliseconds, as appendJSONFloat
// appends float64(ns)/1e6: for |ns| < 1e15 the float is nearer to the
// exact decimal than half the 1e-6 step between decimals of six places, so
// its shortest form is that decimal, trailing zeros trimmed.
func appendWholeNS(b []byte, ns int64) []byte {
	if ns < 0 {
		b = append(b, '-')
		ns = -ns
	}
	if whole := ns / 1e6; whole < 10 {
		b = append(b, byte('0'+whole))
	} else {
		b = strconv.AppendInt(b, whole, 10)
	}
	frac := ns % 1e6
	if frac == 0 {
		return b
	}
	// Two halves of three digits, each digit from its half: no chain of
	// six divisions, each waiting for the last (a report writes two of
	// these an attempt).
	hi, lo := frac/1000, frac%1000
	d := [7]byte{'.', byte('0' + hi/100), byte('0' + hi/10%10), byte('0' + hi%10),
		byte('0' + lo/100), byte('0' + lo/10%10), byte('0' + lo%10)}
	n := 7
	for d[n-1] == '0' {
		n--
	}
	return append(b, d[:n]...)
}

// appendTime appends t.UTC().AppendFormat(b, TimeLayout), twice as fast:
// a report has a time per attempt.
func appendTime(b []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.AppendFormat(b, text.TimeLayout)
	}
	hour, minute, second := t.Clock()
	b = appendDigits(b, year, 4)
	b = append(b, '-')
	b = appendDigits(b, int(month), 2)
	b = append(b, '-')
	b = appendDigits(b, day, 2)
	b = append(b, 'T')
	b = appendDigits(b, hour, 2)
	b = append(b, ':')
	b = appendDigits(b, minute, 2)
	b = append(b, ':')
	b = appendDigits(b, second, 2)
	b = append(b, '.')
	b = appendDigits(b, t.Nanosecond(), 9)
	return append(b, 'Z')
}

// appendDigits appends the n last decimal digits of v ≥ 0, zeros first.
func appendDigits(b []byte, v, n int) []byte {
	start := len(b)
	for range n {
		b = append(b, '0')
	}
	for i := len(b) - 1; i >= start && v > 0; i-- {
		b[i] = byte('0' + v%10)
		v /= 10
	}
	return b
}

// appendJSONFloat appends f as encoding/json writes a float64.
func appendJSONFloat(b []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		_, err := json.Marshal(f) // its error, word for word
		return b, err
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e15 && (f != 0 || !math.Signbit(f)) {
		// A whole number (windows and expected backoffs often are) has
		// no shorter form than its digits: skip the float formatting.
		return strconv.AppendInt(b, int64(f), 10), nil
	}
	abs, format := math.Abs(f), byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' { // e-07 → e-7, as encoding/json does
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

// appendJSONString appends s quoted. Strings of printable ASCII but the
// characters encoding/json escapes (", \, <, >, &), or of valid UTF-8 apart
// from U+2028 and U+2029, go as they are; encoding/json quotes any other.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c < 0x20 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
				return appendQuoted(b, s)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
			return appendQuoted(b, s)
		}
		i += size
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendJSONAddr appends a quoted as encoding/json writes it (from
// MarshalText: "" for the zero Addr).
func appendJSONAddr(b []byte, a netip.Addr) []byte {
	start := len(b)
	b = append(b, '"')
	b = a.AppendTo(b)
	for _, c := range b[start+1:] {
		if c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return appendJSONString(b[:start], string(b[start+1:])) // a zone with odd bytes
		}
	}
	return append(b, '"')
}

func appendQuoted(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always encodes
	return append(b, q...)
}
