package session

import (
	"bufio"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/internal/text"
)

// The cross-check of a server known only by its answer: a ReconnectService
// that is not `audit server` keeps no record file, but its Stop returns the
// session's list as ReconnectInfo.backoff_ms, and a capture of its
// plaintext control port holds that answer (docs/spec.md §5.6). The list
// has intervals in whole ms and neither accept times nor addresses, so
// attempts cannot be paired by peer ip and port: the server's intervals
// are set against the kernel's chain of the session's verified peer, in
// order, interval by interval.

// ServerSideBackoff is CrossCheck.ServerSide when the server's list is its
// Stop's backoff_ms.
const ServerSideBackoff = "backoff_ms"

// IntervalPair is one interval as the kernel timed it and as the server's
// backoff_ms has it.
type IntervalPair struct {
	K int `json:"k"`
	// KernelMS is the kernel's measured interval (exact, in ms); 0 when
	// the kernel's chain has no such interval. ServerMS is the server's
	// backoff_ms entry; 0 when the server's list has none. ShiftMS is
	// ServerMS less the kernel's interval in whole ms rounded down, as the
	// verdicts read them, when both are there: the app delays' part.
	KernelMS float64 `json:"kernel_ms"`
	ServerMS int32   `json:"server_ms"`
	ShiftMS  float64 `json:"shift_ms"`
	KernelOK bool    `json:"kernel_ok"`
	ServerOK bool    `json:"server_ok"`
	// InKernel and InServer say which sides have the interval.
	InKernel bool `json:"in_kernel"`
	InServer bool `json:"in_server"`
}

// ChoosePeerFromKernel chooses, for a session whose server names no
// verified peer (its list has no addresses), the peer ChooseVerifiedPeer
// chooses among the addresses whose SYNs fall in the session, and writes
// it into s.End. A session without an End is left as it is.
func (s *Session) ChoosePeerFromKernel(kernel []attempt.Attempt) {
	if s.End == nil || s.End.VerifiedPeer.IsValid() {
		return
	}
	var in []attempt.Attempt
	for _, a := range kernel {
		if InSession(a.Time, s.Start, s.EndTime) {
			in = append(in, a)
		}
	}
	slices.SortFunc(in, attempt.Compare)
	var connected []netip.Addr
	for _, a := range in {
		if p := a.Src.Addr().Unmap(); !slices.Contains(connected, p) {
			connected = append(connected, p)
		}
	}
	end := *s.End
	end.VerifiedPeer, end.VerifiedReason = ChooseVerifiedPeer(s.Peer.Addr(), connected)
	if !end.VerifiedPeer.IsValid() {
		end.VerifiedPeer = netip.Addr{}
	}
	for _, p := range connected {
		if p != end.VerifiedPeer {
			n := 0
			for _, a := range in {
				if a.Src.Addr().Unmap() == p {
					n++
				}
			}
			end.Foreign = append(end.Foreign, PeerCount{Addr: p, Attempts: n})
		}
	}
	s.End = &end
}

// NewBackoffCrossCheck sets the server's backoff_ms of one session against
// the kernel's attempts. kernel may hold attempts of any address and any
// time around the session: those outside it, and those of other addresses,
// are explained, never judged. The verified peer's chain inside the
// session gives the kernel's intervals. The server lists only the
// attempts it accepted: where the kernel's fates show which those were
// (an accepted fate), backoff_ms[j] is set against the interval between
// the kernel's accepted attempts j and j+1, and compared when no attempt
// the server missed lies between them; without fates, interval k is set
// against backoff_ms[k-1]. Both are judged in the kernel's window (the
// same mode, the same fates); the attempts the server could not see are
// counted, never a disagreement.
func NewBackoffCrossCheck(in CrossInput, kernel []attempt.Attempt, backoffMS []int32) CrossCheck {
	c := CrossCheck{VerifiedPeer: in.VerifiedPeer, Tolerance: in.Policy.Tolerance, ServerSide: ServerSideBackoff,
		Pairs: []Pair{}, Disagreements: []Disagreement{}}
	inside := SessionAttempts(in, kernel)
	var chain []attempt.Attempt
	for _, a := range inside {
		if a.Src.Addr().Unmap() == in.VerifiedPeer {
			chain = append(chain, a)
		}
	}
	sorted := slices.Clone(kernel)
	slices.SortFunc(sorted, attempt.Compare)
	late := in.late(sorted)
	for i, a := range sorted {
		ap := attempt.UnmapPort(a.Src)
		l := Lone{Peer: ap.Addr(), SrcPort: ap.Port(), Time: a.Time}
		switch _, isLate := late[i]; {
		case isLate || !in.inSession(a.Time):
			l.Reason = ReasonOutside
			l.Detail = fmt.Sprintf("SYN %s the session (%s – %s)", beforeAfter(a.Time, in.Start),
				in.Start.UTC().Format(text.TimeLayout), endText(in.End))
		case ap.Addr() != in.VerifiedPeer:
			l.Reason = ReasonForeign
			l.Detail = fmt.Sprintf("%s is not the session's peer %s; backoff_ms names no address, so whether the server counted it is unknown",
				ap.Addr(), chainText(in.VerifiedPeer))
		default:
			continue
		}
		c.KernelOnly = append(c.KernelOnly, l)
	}
	kr := in.Kernel
	if kr == nil {
		ch := attempt.Chain{Attempts: chain}
		run := in.Run
		run.Endings = ch.Endings()
		v := backoff.VerifyRun(in.Policy, ch.Times(), run)
		kr = &v
	}

	// Which of the chain's attempts the server saw: the accepted ones,
	// where the fates say.
	seen := make([]bool, len(chain))
	fates := false
	for i, a := range chain {
		f := a.Ending.Fate
		fates = fates || f != "" && f != backoff.FateUnknown
		seen[i] = true
	}
	if fates {
		for i, a := range chain {
			if seen[i] = a.Ending.Fate.Accepted(); !seen[i] {
				if c.ServerMissed == nil {
					c.ServerMissed = map[string]int{}
				}
				c.ServerMissed[missedReason(in.Run, crossSide{ending: a.Ending})]++
			}
		}
	}
	c.ChainAttempts = len(chain)
	var accepted []int // the chain's attempts the server saw, by index
	for i, ok := range seen {
		if ok {
			accepted = append(accepted, i)
		}
	}
	c.ServerSaw = len(accepted)
	sr := in.Server
	if sr == nil {
		// The list judged as the kernel's chain is: with the fates of the
		// attempts it holds, where the kernel saw them all.
		run := backoff.Run{Mode: in.Run.Mode}
		if fates && len(accepted) == len(backoffMS)+1 {
			for _, i := range accepted {
				run.Endings = append(run.Endings, chain[i].Ending)
			}
		}
		v := run.VerifyBackoff(in.Policy, backoffMS)
		sr = &v
	}
	c.KernelPassed, c.ServerPassed = kr.Reference.Passed, sr.Reference.Passed
	for j := 0; j+1 < len(accepted) || j < len(backoffMS); j++ {
		p := IntervalPair{K: j + 1, InServer: j < len(backoffMS)}
		var kiv backoff.Interval
		if j+1 < len(accepted) {
			a, b := accepted[j], accepted[j+1]
			// The kernel's interval between the two, when the server
			// missed no attempt between them.
			if b == a+1 && b <= len(kr.Intervals) {
				kiv = kr.Intervals[a]
				p.K, p.InKernel = kiv.K, true
				p.KernelMS, p.KernelOK = kiv.MeasuredMS, kiv.OK
			}
		}
		if p.InServer {
			p.ServerMS = backoffMS[j]
			siv := sr.Intervals[j]
			p.ServerOK = siv.OK
			if p.InKernel {
				siv = kiv.With(time.Duration(p.ServerMS) * time.Millisecond)
				siv.K = j + 1
				p.ServerOK = siv.OK
			}
			if p.InKernel {
				p.ShiftMS = float64(p.ServerMS) - float64(kiv.BackoffMS)
				if kiv.OK != siv.OK {
					c.Disagreements = append(c.Disagreements, c.shifted(kiv, siv, p.ShiftMS))
				}
			}
		}
		c.Intervals = append(c.Intervals, p)
	}
	c.Delay = DelayStats{}
	c.Agree = c.ServerSaw == c.ChainAttempts && len(backoffMS) == max(0, len(accepted)-1) &&
		len(c.Disagreements) == 0 && c.KernelPassed == c.ServerPassed
	return c
}

// shifted diagnoses an interval whose verdict the server's timestamps
// changed: its backoff_ms entry is the kernel's interval plus the app
// delay of its second attempt minus that of its first; the answer does not
// say which of the two moved it.
func (c CrossCheck) shifted(kiv, siv backoff.Interval, shift float64) Disagreement {
	k := kiv.K
	return Disagreement{
		K: k, ServerK: siv.K, KernelOK: kiv.OK, ServerOK: siv.OK,
		KernelMS: kiv.BackoffMS, ServerMS: siv.BackoffMS, ShiftMS: shift, ToleranceMS: backoff.Millis(c.Tolerance),
		Cause: fmt.Sprintf("the server's backoff_ms %d is %+.0f ms from the kernel's %d ms (%.3f ms measured): the app delays of attempts %d and %d "+
			"moved it (which one, backoff_ms cannot say): kernel %d ms is %s, server %d ms is %s (window %.0f–%.0f ms, of which %.0f ms on each side is tolerance)",
			siv.BackoffMS, shift, kiv.WholeMS(), kiv.MeasuredMS, k, k+1, kiv.WholeMS(), kiv.Outcome, siv.BackoffMS, siv.Outcome,
			kiv.MinMS, kiv.MaxMS, backoff.Millis(c.Tolerance)),
	}
}

// writeBackoffText writes a cross-check against backoff_ms for a person:
// each interval on both sides, the attempts outside the comparison, one
// line per disagreement, or one line saying the two agree.
func (c CrossCheck) writeBackoffText(bw *bufio.Writer) {
	nk, ns := 0, 0
	for _, p := range c.Intervals {
		if p.InKernel {
			nk++
		}
		if p.InServer {
			ns++
		}
	}
	fmt.Fprintf(bw, "cross-check, kernel intervals of %s against the server's backoff_ms (its Stop answer; it names no address): kernel %s, server %s; shift is server less kernel in whole ms\n",
		chainText(c.VerifiedPeer), text.Plural(nk, "interval"), text.Plural(ns, "interval"))
	if len(c.Intervals) > 0 {
		fmt.Fprintf(bw, "  %3s  %11s  %9s  %9s  %-6s  %s\n", "k", "kernel ms", "server ms", "shift ms", "kernel", "server")
	}
	okText := func(in, ok bool) string {
		switch {
		case !in:
			return "-"
		case ok:
			return "ok"
		}
		return "fails"
	}
	for _, p := range c.Intervals {
		kms, sms, shift := "-", "-", "-"
		if p.InKernel {
			kms = fmt.Sprintf("%.3f", p.KernelMS)
		}
		if p.InServer {
			sms = fmt.Sprint(p.ServerMS)
		}
		if p.InKernel && p.InServer {
			shift = fmt.Sprintf("%+.0f", p.ShiftMS)
		}
		fmt.Fprintf(bw, "  %3d  %11s  %9s  %9s  %-6s  %s\n", p.K, kms, sms, shift,
			okText(p.InKernel, p.KernelOK), okText(p.InServer, p.ServerOK))
	}
	writeLone(bw, "kernel only", c.KernelOnly)
	if c.ServerSaw > 0 && ns != c.ServerSaw-1 {
		fmt.Fprintf(bw, "the server's backoff_ms has %s where the %d attempts it could see make %d\n",
			text.Plural(ns, "interval"), c.ServerSaw, c.ServerSaw-1)
	}
	c.writeVerdictText(bw, "as many intervals, same verdict on every interval")
}
