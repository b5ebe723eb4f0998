package session

import (
	"cmp"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"time"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/internal/text"
)

// The cross-check (docs/spec.md §5, "Pairing"): the kernel's SYN timestamps and
// the server's accept timestamps describe the same attempts. An attempt is
// the same on both sides when peer ip and peer port match; the accept time
// minus the SYN time is that attempt's app delay, which the server's list
// carries into its intervals and the kernel's does not. The cross-check
// pairs the two lists, explains every attempt only one side saw, and
// diagnoses every interval whose verdict the app delays changed.

// Accept is one connection the server accepted on the retry port, as its
// record file or its in-process observer reports it.
type Accept struct {
	Peer netip.AddrPort
	Time time.Time
}

// Reasons an attempt was seen by one side only.
const (
	// ReasonCaptureDrop: the server accepted a connection whose SYN the
	// capture does not hold; libpcap dropped it, or the capture was not
	// running yet.
	ReasonCaptureDrop = "capture drop"
	// ReasonNotCaptured: the server accepted a connection whose SYN the
	// capture file does not hold. A file carries no drop counts, so this
	// is all an offline reading can say.
	ReasonNotCaptured = "not in the capture"
	// ReasonRefused: the kernel saw the SYN inside the session, but the
	// server never accepted the connection (reset, accept queue full, the
	// client gave up before the handshake completed).
	ReasonRefused = "refused"
	// ReasonForeign: a SYN from an address that is not the session's peer,
	// which the server's list does not hold at all.
	ReasonForeign = "foreign peer"
	// ReasonOutside: a SYN before the session's Start or after its Stop;
	// the server's list of the session cannot hold it.
	ReasonOutside = "outside the session"
)

// CrossInput describes the session that is cross-checked.
type CrossInput struct {
	// Policy is what the session is verified against.
	Policy backoff.Policy
	// VerifiedPeer is the address whose attempts both verdicts judge; other
	// addresses are foreign. The zero Addr means none was judged.
	VerifiedPeer netip.Addr
	// Start and End bound the session on the server's clock. A zero End
	// is a session still open.
	Start, End time.Time
	// CaptureStart is when the capture began; zero if it ran all along.
	CaptureStart time.Time
	// CaptureEnd is when the capture stopped before the session ended (a
	// capture error); zero if it outlived the session. CaptureEndCause
	// says why it stopped.
	CaptureEnd      time.Time
	CaptureEndCause string
	// Lost counts the packets the capture is known to have missed (kernel
	// and interface drops).
	Lost uint64
	// Offline is set when the capture is a file: a SYN it lacks is "not in
	// the capture", since a file keeps no drop counts.
	Offline bool
	// Run is what the session's chains are judged in (the retry mode,
	// the session's end, the port's return); its Endings are ignored: each
	// side's chain is judged with the fates of the kernel's attempts.
	Run backoff.Run
	// Kernel and Server, when set, are the readings of the verified peer's
	// chain inside the session that the caller already has: the model over
	// the SYN times of SessionAttempts, and over the server's accept times
	// (its own verdict, when it kept every attempt). NewCrossCheck judges
	// what is not given, so that each chain is judged once per reading.
	Kernel, Server *backoff.Result
	// Late holds connections the server accepted just after the session
	// ended (record session 0): a SYN sent inside the session whose accept
	// came after Stop is in neither side's list of the session.
	Late []Accept
}

// inSession reports whether t falls between Start and End.
func (in CrossInput) inSession(t time.Time) bool { return InSession(t, in.Start, in.End) }

// late maps the index (into kernel) of each attempt inside the session
// that one of in.Late accepted to that accept's time: per ip and port, the
// latest such attempt at or before the accept.
func (in CrossInput) late(kernel []attempt.Attempt) map[int]time.Time {
	out := map[int]time.Time{}
	for _, la := range in.Late {
		ap, best := attempt.UnmapPort(la.Peer), -1
		for i, a := range kernel {
			if _, taken := out[i]; !taken && attempt.UnmapPort(a.Src) == ap && in.inSession(a.Time) && !a.Time.After(la.Time) &&
				(best < 0 || a.Time.After(kernel[best].Time)) {
				best = i
			}
		}
		if best >= 0 {
			out[best] = la.Time
		}
	}
	return out
}

// uncaptured explains an accept whose SYN the capture lacks.
func (in CrossInput) uncaptured(ap netip.AddrPort, t time.Time) Lone {
	l := Lone{Peer: ap.Addr(), SrcPort: ap.Port(), Time: t, Reason: ReasonCaptureDrop}
	if in.Offline {
		l.Reason = ReasonNotCaptured
	}
	switch {
	case !in.CaptureStart.IsZero() && t.Before(in.CaptureStart):
		l.Detail = "accepted before the capture started at " + in.CaptureStart.UTC().Format(text.TimeLayout)
	case !in.CaptureEnd.IsZero() && !t.Before(in.CaptureEnd):
		l.Detail = "accepted after the capture stopped at " + in.CaptureEnd.UTC().Format(text.TimeLayout)
		if in.CaptureEndCause != "" {
			l.Detail += " (" + in.CaptureEndCause + ")"
		}
	case in.Offline:
		l.Detail = "no SYN from this ip and port is in the capture"
	case in.Lost > 0:
		l.Detail = fmt.Sprintf("libpcap reports %d packets dropped", in.Lost)
	default:
		l.Detail = "no SYN from this ip and port was captured, and libpcap reports no drops"
	}
	return l
}

// SessionAttempts returns the attempts, of every address, that the
// session's kernel verdict judges: those whose SYN falls in the session,
// except one the server accepted only after the session ended (in.Late).
func SessionAttempts(in CrossInput, kernel []attempt.Attempt) []attempt.Attempt {
	late := in.late(kernel)
	var out []attempt.Attempt
	for i, a := range kernel {
		if _, ok := late[i]; !ok && in.inSession(a.Time) {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, attempt.Compare)
	return out
}

// Pair is one attempt both sides saw.
type Pair struct {
	Peer       netip.Addr
	SrcPort    uint16
	KernelTime time.Time
	AcceptTime time.Time
	// Delay is AcceptTime − KernelTime: the time from the SYN crossing the
	// interface to the server taking its accept timestamp.
	Delay time.Duration
	// Foreign marks a pair from an address other than the chain's.
	Foreign bool
}

// Lone is one attempt only one side saw.
type Lone struct {
	Peer    netip.Addr
	SrcPort uint16
	Time    time.Time
	// Reason is one of the Reason constants; Detail says what it rests on.
	Reason string
	Detail string
}

// DelayStats is the distribution of the app delays of all pairs, in µs.
type DelayStats struct {
	Count    int     `json:"count"`
	MinUS    float64 `json:"min"`
	MedianUS float64 `json:"median"`
	P99US    float64 `json:"p99"`
	MaxUS    float64 `json:"max"`
}

// Disagreement is one interval of the chain whose verdict differs between
// kernel and server timestamps.
type Disagreement struct {
	// K is the interval's number in the kernel's chain; ServerK in the
	// server's (they differ once one side missed an attempt).
	K        int  `json:"k"`
	ServerK  int  `json:"server_k"`
	KernelOK bool `json:"kernel_ok"`
	ServerOK bool `json:"server_ok"`
	// KernelMS and ServerMS are the interval in whole ms as each side
	// measured it (0 when that side has no such interval).
	KernelMS int32 `json:"kernel_ms"`
	ServerMS int32 `json:"server_ms"`
	// Attempt is the number (from 1, in the kernel's chain) of the attempt
	// whose app delay moved the interval most, SrcPort its source port.
	Attempt int    `json:"attempt"`
	SrcPort uint16 `json:"src_port"`
	// ShiftMS is ServerMS−KernelMS as measured (not rounded).
	ShiftMS     float64 `json:"shift_ms"`
	ToleranceMS float64 `json:"tolerance_ms"`
	Cause       string  `json:"cause"`
}

// CrossCheck is the comparison of one session's two lists.
type CrossCheck struct {
	// Agree is true when every attempt of the chain inside the session
	// was paired and both sides reach the same verdict on every interval.
	Agree        bool
	VerifiedPeer netip.Addr
	// KernelPassed and ServerPassed are the reference readings over the
	// chain as each side timed it.
	KernelPassed  bool
	ServerPassed  bool
	Pairs         []Pair
	KernelOnly    []Lone
	ServerOnly    []Lone
	Delay         DelayStats
	Disagreements []Disagreement
	Tolerance     time.Duration
	// ChainAttempts counts the verified peer's attempts inside the
	// session, ServerSaw those the server's list holds; ServerMissed says
	// why it lacks the others, by reason (its port was down, the kernel
	// refused them, ...). They are not disagreements: a server cannot
	// list what it never accepted.
	ChainAttempts, ServerSaw int
	ServerMissed             map[string]int
	// ServerSide is "" when the server's list is its accepts (a record
	// file, the in-process server), ServerSideBackoff when it is only its
	// Stop's backoff_ms: Pairs, ServerOnly and Delay are then empty, and
	// Intervals sets each interval of one side against the other's.
	ServerSide string
	Intervals  []IntervalPair
}

// NewCrossCheck pairs the kernel's attempts with the server's accepts of
// one session. kernel may hold attempts of any address and any time around
// the session (those outside it are explained, not judged); server is the
// session's list, every address. Both sides' clocks must be the same host
// clock (libpcap's host timestamps and the server's time.Now are), so an
// accept never precedes its SYN.
func NewCrossCheck(in CrossInput, kernel []attempt.Attempt, server []Accept) CrossCheck {
	c := CrossCheck{VerifiedPeer: in.VerifiedPeer, Tolerance: in.Policy.Tolerance}
	ks, ss := crossSides(in, kernel, server)
	c.pair(in, ks, ss)
	c.explainKernelOnly(in, ks, ss)
	c.explainServerOnly(in, ss)
	c.Delay = delayStats(c.Pairs)
	lonely := c.diagnose(in, ks, ss)
	c.Agree = !lonely && len(c.Disagreements) == 0 && c.KernelPassed == c.ServerPassed
	if c.Pairs == nil {
		c.Pairs = []Pair{}
	}
	if c.Disagreements == nil {
		c.Disagreements = []Disagreement{}
	}
	return c
}

// crossSide is one attempt as one side saw it.
type crossSide struct {
	t    time.Time
	ap   netip.AddrPort
	pair int // index into CrossCheck.Pairs, -1 when alone
	// ending is, for a SYN, its attempt's fate.
	ending backoff.Ending
	// late is, for a SYN, when the server accepted it after the session
	// ended (in.Late); zero otherwise.
	late time.Time
}

// crossSides returns both lists in time order. Accepts after the session
// ended claim their SYNs first: those are in neither list of the session.
func crossSides(in CrossInput, kernel []attempt.Attempt, server []Accept) (ks, ss []crossSide) {
	lateAt := in.late(kernel)
	ks = make([]crossSide, len(kernel))
	for i, a := range kernel {
		ks[i] = crossSide{t: a.Time, ap: attempt.UnmapPort(a.Src), pair: -1, late: lateAt[i], ending: a.Ending}
	}
	ss = make([]crossSide, len(server))
	for i, a := range server {
		ss[i] = crossSide{t: a.Time, ap: attempt.UnmapPort(a.Peer), pair: -1}
	}
	byTime := func(a, b crossSide) int { return cmp.Or(a.t.Compare(b.t), a.ap.Compare(b.ap)) }
	slices.SortFunc(ks, byTime)
	slices.SortFunc(ss, byTime)
	return ks, ss
}

// pair pairs the two lists. Per peer ip and port, each accept takes the
// latest unpaired SYN at or before it: a source port the client reuses
// later pairs again, and a SYN that got no accept stays alone rather than
// stealing the next one.
func (c *CrossCheck) pair(in CrossInput, ks, ss []crossSide) {
	kernelBy := map[netip.AddrPort][]int{}
	for i, k := range ks {
		kernelBy[k.ap] = append(kernelBy[k.ap], i)
	}
	next := map[netip.AddrPort]int{}
	for si := range ss {
		s := &ss[si]
		idx := kernelBy[s.ap]
		j := next[s.ap]
		for j+1 < len(idx) && !ks[idx[j+1]].t.After(s.t) {
			j++
		}
		if j < len(idx) && !ks[idx[j]].t.After(s.t) && ks[idx[j]].late.IsZero() {
			k := &ks[idx[j]]
			k.pair, s.pair = len(c.Pairs), len(c.Pairs)
			c.Pairs = append(c.Pairs, Pair{
				Peer: s.ap.Addr(), SrcPort: s.ap.Port(),
				KernelTime: k.t, AcceptTime: s.t, Delay: s.t.Sub(k.t),
				Foreign: s.ap.Addr() != in.VerifiedPeer,
			})
			j++
		}
		next[s.ap] = j
	}
}

// explainKernelOnly says why each SYN without an accept has none.
func (c *CrossCheck) explainKernelOnly(in CrossInput, ks, ss []crossSide) {
	serverAddrs := map[netip.Addr]bool{}
	for _, s := range ss {
		serverAddrs[s.ap.Addr()] = true
	}
	for _, k := range ks {
		if k.pair >= 0 {
			continue
		}
		l := Lone{Peer: k.ap.Addr(), SrcPort: k.ap.Port(), Time: k.t}
		switch {
		case !k.late.IsZero():
			l.Reason = ReasonOutside
			l.Detail = fmt.Sprintf("SYN inside the session, but the server accepted it at %s, after the session ended (%s): in neither list",
				k.late.UTC().Format(text.TimeLayout), endText(in.End))
		case !in.inSession(k.t):
			l.Reason = ReasonOutside
			l.Detail = fmt.Sprintf("SYN %s the session (%s – %s)", beforeAfter(k.t, in.Start),
				in.Start.UTC().Format(text.TimeLayout), endText(in.End))
		case k.ap.Addr() != in.VerifiedPeer && !serverAddrs[k.ap.Addr()]:
			l.Reason = ReasonForeign
			l.Detail = fmt.Sprintf("%s is not the session's peer %s, and the server recorded nothing from it", k.ap.Addr(), chainText(in.VerifiedPeer))
		default:
			l.Reason = ReasonRefused
			l.Detail = "the kernel saw the SYN inside the session; the server recorded no accept from this ip and port"
		}
		c.KernelOnly = append(c.KernelOnly, l)
	}
}

// explainServerOnly says why each accept without a SYN has none.
func (c *CrossCheck) explainServerOnly(in CrossInput, ss []crossSide) {
	for _, s := range ss {
		if s.pair < 0 {
			c.ServerOnly = append(c.ServerOnly, in.uncaptured(s.ap, s.t))
		}
	}
}

// diagnose judges the chain as each side timed it, with the same model
// (the mode and the kernel's fates), and explains every interval whose
// verdict differs between two attempts both sides saw. The attempts of the
// chain the server's list lacks are counted with their reason, never a
// disagreement. It reports whether the server lacks any.
func (c *CrossCheck) diagnose(in CrossInput, ks, ss []crossSide) (lonely bool) {
	var kc, sc []crossSide
	for _, k := range ks {
		if k.ap.Addr() == in.VerifiedPeer && in.inSession(k.t) && k.late.IsZero() {
			kc = append(kc, k)
		}
	}
	for _, s := range ss {
		if s.ap.Addr() == in.VerifiedPeer {
			sc = append(sc, s)
		}
	}
	kTimes, kEnds := make([]time.Time, len(kc)), make([]backoff.Ending, len(kc))
	byPair := map[int]backoff.Ending{}
	for i, k := range kc {
		kTimes[i], kEnds[i] = k.t, k.ending
		if k.pair >= 0 {
			byPair[k.pair] = k.ending
		}
	}
	sTimes, sEnds := make([]time.Time, len(sc)), make([]backoff.Ending, len(sc))
	sIndex := map[int]int{} // pair index → position in sc
	for i, s := range sc {
		sTimes[i] = s.t
		if s.pair >= 0 {
			sIndex[s.pair], sEnds[i] = i, byPair[s.pair]
		}
	}
	kr, sr := in.Kernel, in.Server
	if kr == nil {
		run := in.Run
		run.Endings = kEnds
		v := backoff.VerifyRun(in.Policy, kTimes, run)
		kr = &v
	}
	if sr == nil {
		run := in.Run
		run.Endings = sEnds
		v := backoff.VerifyRun(in.Policy, sTimes, run).ServerList(in.Run.Mode)
		sr = &v
	}
	c.KernelPassed, c.ServerPassed = kr.Reference.Passed, sr.Reference.Passed
	c.ChainAttempts = len(kc)
	for _, k := range kc {
		if k.pair >= 0 {
			c.ServerSaw++
			continue
		}
		lonely = true
		if c.ServerMissed == nil {
			c.ServerMissed = map[string]int{}
		}
		c.ServerMissed[missedReason(in.Run, k)]++
	}
	for k := 1; k < len(kc) && k <= len(kr.Intervals); k++ {
		a, b := kc[k-1], kc[k]
		if a.pair < 0 || b.pair < 0 {
			continue
		}
		sa, sb := sIndex[a.pair], sIndex[b.pair]
		if sb != sa+1 {
			continue // the server's interval spans an attempt the kernel lacks
		}
		kiv := kr.Intervals[k-1]
		siv := kiv.With(sTimes[sb].Sub(sTimes[sa]))
		siv.K = sb
		if kiv.OK == siv.OK {
			continue
		}
		c.Disagreements = append(c.Disagreements, c.moved(kiv, siv, k, c.Pairs[a.pair], c.Pairs[b.pair]))
	}
	return lonely
}

// missedReason says why the server's list lacks attempt k of the chain:
// its fate, and what the retry mode did at that moment.
func missedReason(run backoff.Run, k crossSide) string {
	switch f := k.ending.Fate; {
	case f == backoff.FateRefused && (run.Mode.Is(backoff.ModeRefuse) || run.Mode.Is(backoff.ModeRestart) || run.Mode.Is(backoff.ModeOutage)):
		return "refused while its port was down"
	case f == backoff.FateRefused:
		return "refused"
	case f == backoff.FateUnanswered:
		return "unanswered"
	case f.Accepted():
		return "accepted by the kernel, never recorded by the server"
	case run.Mode.Is(backoff.ModeRefuse) || run.Mode.Is(backoff.ModeRestart) || run.Mode.Is(backoff.ModeOutage):
		return "made while its port may have been down"
	}
	return "never recorded by the server"
}

// moved diagnoses interval k, between attempts k and k+1 of the kernel's
// chain (pairs a and b): the server's interval is the kernel's plus b's
// app delay minus a's, so the larger of the two moved it.
func (c CrossCheck) moved(kiv, siv backoff.Interval, k int, a, b Pair) Disagreement {
	d := Disagreement{
		K: k, ServerK: siv.K, KernelOK: kiv.OK, ServerOK: siv.OK,
		KernelMS: kiv.BackoffMS, ServerMS: siv.BackoffMS,
		ShiftMS:     backoff.Millis(siv.Measured - kiv.Measured),
		ToleranceMS: backoff.Millis(c.Tolerance),
	}
	who, p, verb := k+1, b, "lengthened"
	if a.Delay.Abs() > b.Delay.Abs() {
		who, p, verb = k, a, "shortened"
	}
	d.Attempt, d.SrcPort = who, p.SrcPort
	d.Cause = fmt.Sprintf("attempt %d (port %d) was accepted %.3f ms after its SYN, which %s interval %d by %.3f ms: "+
		"kernel %d ms is %s, server %d ms is %s (window %.0f–%.0f ms, of which %.0f ms on each side is tolerance)",
		who, p.SrcPort, backoff.Millis(p.Delay), verb, k, math.Abs(d.ShiftMS),
		kiv.WholeMS(), kiv.Outcome, siv.WholeMS(), siv.Outcome, kiv.MinMS, kiv.MaxMS, d.ToleranceMS)
	return d
}

func delayStats(pairs []Pair) DelayStats {
	if len(pairs) == 0 {
		return DelayStats{}
	}
	ds := make([]time.Duration, len(pairs))
	for i, p := range pairs {
		ds[i] = p.Delay
	}
	slices.Sort(ds)
	// Nearest rank: the smallest delay with at least q of all at or below it.
	rank := func(q float64) time.Duration {
		return ds[max(int(math.Ceil(q*float64(len(ds))))-1, 0)]
	}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	return DelayStats{
		Count:    len(ds),
		MinUS:    us(ds[0]),
		MedianUS: us(rank(0.5)),
		P99US:    us(rank(0.99)),
		MaxUS:    us(ds[len(ds)-1]),
	}
}

func beforeAfter(t, start time.Time) string {
	if t.Before(start) {
		return "before"
	}
	return "after"
}

func endText(end time.Time) string {
	if end.IsZero() {
		return "open"
	}
	return end.UTC().Format(text.TimeLayout)
}

func chainText(a netip.Addr) string {
	if !a.IsValid() {
		return "(none)"
	}
	return a.String()
}

// JSON: times as RFC 3339 with nine fraction digits in UTC, durations in µs.
