package html

import (
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/internal/text"
	"github.com/backoff-audit/audit/report"
	"github.com/backoff-audit/audit/session"
)

var (
	fixtureStart = time.Date(2025, 3, 14, 15, 9, 26, 535897000, time.UTC)
	retryPort    = netip.MustParseAddrPort("127.0.0.1:50052")
)

// addChain adds a chain to tr: attempts from src at start and after each
// gap, each from the next source port.
func addChain(tr *attempt.Tracker, src string, start time.Time, gaps ...time.Duration) []attempt.Attempt {
	a := netip.MustParseAddr(src)
	t := start
	var out []attempt.Attempt
	for i, g := range append([]time.Duration{0}, gaps...) {
		t = t.Add(g)
		s := attempt.SYN{Time: t, Src: netip.AddrPortFrom(a, uint16(41000+i)), Dst: retryPort, Seq: uint32(1000 + i)}
		tr.Add(s)
		out = append(out, attempt.Attempt{Time: s.Time, Src: s.Src, Dst: s.Dst, Seq: s.Seq})
	}
	return out
}

func msDur(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

// Peers of mixedReport.
const (
	mixedEarly     = "::1"       // interval 3 too soon
	mixedLate      = "10.0.0.3"  // interval 2 too late; the session's chain
	mixedJitter    = "127.0.0.1" // passes, first interval jittered
	mixedTooFew    = "10.0.0.9"  // one attempt
	mixedHerd      = 30          // passing peers 10.1.0.x that restart together without jitter
	mixedPeers     = 4 + mixedHerd
	mixedNotPassed = 3 // early, late, too few
)

// mixedReport is a report with a bit of everything: a peer failing early,
// one late, one passing with a jittered first interval (a signature), one
// with too few attempts, a herd of passing peers that reconnect together
// without jitter, and a session whose server list disagrees with the
// kernel's on interval 1.
func mixedReport() *report.SessionReport {
	tr := attempt.NewTracker()
	addChain(tr, mixedEarly, fixtureStart, msDur(1000.3), msDur(1702.5), msDur(1500.4), msDur(4301.2))
	late := addChain(tr, mixedLate, fixtureStart.Add(3*time.Second), msDur(1000.4), msDur(2200.1), msDur(2690.7))
	addChain(tr, mixedJitter, fixtureStart.Add(5*time.Second), msDur(1180.25), msDur(1700), msDur(2300), msDur(3900))
	addChain(tr, mixedTooFew, fixtureStart.Add(7*time.Second))
	for i := range mixedHerd {
		addChain(tr, netip.AddrFrom4([4]byte{10, 1, 0, byte(i + 1)}).String(), fixtureStart.Add(20*time.Second+time.Duration(i)*time.Millisecond),
			msDur(1000), msDur(1600), msDur(2560), msDur(4096))
	}
	a := report.NewAudit(retryPort.Port(), backoff.DefaultPolicy(), backoff.Run{}, report.Chains(tr.Peers()), attempt.CaptureInfo{
		Packets: 1234, SYNs: uint64(tr.SYNs()), Skipped: map[string]uint64{"not IP": 2},
		Files: []attempt.FileInfo{{Path: "mixed.pcap", Format: "pcap (ns)", Bytes: 99999, Packets: 1234, SYNs: uint64(tr.SYNs())}},
	})
	r := &report.SessionReport{Head: a.Head, Peers: a.Peers, Summary: a.Summary}

	// The server accepted attempt 2 of the late chain 350 ms after its
	// SYN: its interval 1 is 1350 ms, late, where the kernel's is ok.
	var accepts []session.Accept
	for i, a := range late {
		d := 200 * time.Microsecond
		if i == 1 {
			d = 350 * time.Millisecond
		}
		accepts = append(accepts, session.Accept{Peer: a.Src, Time: a.Time.Add(d)})
	}
	in := session.CrossInput{Policy: r.Policy, VerifiedPeer: netip.MustParseAddr(mixedLate),
		Start: late[0].Time.Add(-time.Second), End: late[len(late)-1].Time.Add(time.Second)}
	cc := session.NewCrossCheck(in, late, accepts)
	r.CrossCheck = &cc
	r.Session = report.SessionInfo{Number: 1, Start: in.Start.Format(text.TimeLayout), End: in.End.Format(text.TimeLayout),
		Cause: "stop", StartPeer: mixedLate + ":40000", VerifiedPeer: mixedLate}
	r.Server = &report.ServerVerdict{Passed: false, BackoffMS: []int32{1350, 2200, 2690}, Verdict: backoff.Failed, Reason: "interval 1: 1350 ms is late"}
	return r
}

// bigTracker holds n peers like the bench capture's (testdata/README.md,
// "Benchmark capture"): 90 % spec-like, 5 % with zero backoff, 5 % with a
// constant 1 s; 8 attempts each, starting over a minute; one attempt in a
// hundred retransmitted.
func bigTracker(n int) *attempt.Tracker { return mixTracker(n, 20) }

// mixTracker holds n peers of which two in every brokenEvery break the
// policy, one with zero backoff, one with a constant 1 s; the others are
// spec-like.
func mixTracker(n, brokenEvery int) *attempt.Tracker {
	r := rand.New(rand.NewPCG(1, uint64(n)))
	p := backoff.DefaultPolicy()
	tr := attempt.NewTracker()
	for i := range n {
		src := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		t := fixtureStart.Add(time.Duration(r.Int64N(int64(time.Minute))))
		for k := range 8 {
			if k > 0 {
				var gap time.Duration
				switch {
				case i%brokenEvery == 0: // zero backoff after the first (docs/spec.md §6.3)
					gap = time.Duration(200+r.IntN(300)) * time.Microsecond
					if k == 1 {
						gap = time.Second
					}
				case i%brokenEvery == 1:
					gap = time.Second
				default:
					e := p.Expected(k)
					if k > 1 {
						e *= 0.8 + 0.4*r.Float64()
					}
					gap = msDur(e)
				}
				t = t.Add(gap)
			}
			s := attempt.SYN{Time: t, Src: netip.AddrPortFrom(src, uint16(30000+k)), Dst: retryPort, Seq: uint32(i*8 + k)}
			tr.Add(s)
			if r.IntN(100) == 0 {
				s.Time = s.Time.Add(time.Second)
				tr.Add(s)
			}
		}
	}
	return tr
}

// bigAudit is the audit of bigTracker(n), as `audit pcap` makes it.
func bigAudit(n int) *report.Audit { return mixAudit(n, 20) }

// mixAudit is the audit of mixTracker(n, brokenEvery).
func mixAudit(n, brokenEvery int) *report.Audit {
	tr := mixTracker(n, brokenEvery)
	return report.NewAudit(retryPort.Port(), backoff.DefaultPolicy(), backoff.Run{}, tr.Chains(),
		attempt.CaptureInfo{Packets: uint64(tr.SYNs()), SYNs: uint64(tr.SYNs())})
}
