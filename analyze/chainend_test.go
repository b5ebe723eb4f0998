package analyze

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestChainEnd(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	last := Attempt{Time: t0}
	fast := DefaultPolicy()
	fast.MinConnectTimeout = 2 * time.Second
	tests := []struct {
		name string
		p    Policy
		n    int
		want time.Duration // after the last attempt
	}{
		// The connect deadline (20 s) outlasts every window up to the cap.
		{"one attempt, the spec's policy", DefaultPolicy(), 1, 20*time.Second + 100*time.Millisecond},
		{"at the cap, the window outlasts it", DefaultPolicy(), 12, 144*time.Second + 100*time.Millisecond},
		{"a million attempts: the cap's", DefaultPolicy(), 1_000_000, 144*time.Second + 100*time.Millisecond},
		// A 2 s connect timeout: 1000 ms × 1.2 is within it, 4096 ms × 1.2 not.
		{"short connect timeout, interval 1", fast, 1, 2*time.Second + 100*time.Millisecond},
		{"short connect timeout, interval 4", fast, 4, 4915200*time.Microsecond + 100*time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ChainEnd(tt.p, tt.n, last).Sub(t0); got != tt.want {
				t.Errorf("ChainEnd = last + %v, want + %v", got, tt.want)
			}
		})
	}
}

// TestChainEndIsTheTail: a chain over by ChainEnd, judged at any time
// after it, fails its hung last attempt as VerifyRun's tail does, and not
// an instant before.
func TestChainEndIsTheTail(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	p := DefaultPolicy()
	times := []time.Time{t0, t0.Add(time.Second), t0.Add(2600 * time.Millisecond)}
	run := Run{Endings: []Ending{{Fate: FateRefused}, {Fate: FateRefused}, {Fate: FateOpen}}}
	end := ChainEnd(p, len(times), Attempt{Time: times[2]})
	for _, tt := range []struct {
		at   time.Time
		tail bool
	}{{end, false}, {end.Add(time.Millisecond), true}} {
		run.End = tt.at
		if got := VerifyRun(p, times, run).Tail != ""; got != tt.tail {
			t.Errorf("judged at ChainEnd%+v: tail %v, want %v", tt.at.Sub(end), got, tt.tail)
		}
	}
}

func TestSucceeded(t *testing.T) {
	tests := []struct {
		e    Ending
		want bool
	}{
		{Ending{Fate: FateClosed, ServerSent: PayloadH2Settings}, true},
		{Ending{Fate: FateOpen, ServerSent: PayloadTLSServerHello}, true},
		{Ending{Fate: FateAbandoned, ServerSent: PayloadTLSServerHello}, true},
		{Ending{Fate: FateClosed}, false},
		{Ending{Fate: FateClosed, ServerSent: PayloadOther}, false},
		{Ending{Fate: FateRefused}, false},
		{Ending{Fate: FateUnanswered}, false},
		{Ending{}, false},
	}
	for _, tt := range tests {
		if got := tt.e.Succeeded(); got != tt.want {
			t.Errorf("%+v.Succeeded() = %v, want %v", tt.e, got, tt.want)
		}
	}
}

// TestFind: an attempt found again has its retransmits and the fate its
// segments show so far, whether they wait in the table of recent attempts
// or not; one the tracker does not hold is not found.
func TestFind(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	srv := netip.MustParseAddrPort("127.0.0.1:50052")
	cli := func(port uint16) netip.AddrPort { return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port) }
	tr := NewTracker()
	tr.SetFatesKnown(true)
	tr.Add(SYN{Time: t0, Src: cli(40000), Dst: srv, Seq: 10})
	tr.AddSegment(&Segment{Time: t0.Add(time.Millisecond), Src: srv, Dst: cli(40000), Seq: 99, Ack: 11, Flags: flagSYN | flagACK})
	tr.Add(SYN{Time: t0.Add(time.Second), Src: cli(40001), Dst: srv, Seq: 20})
	tr.Retransmit(SYN{Time: t0.Add(2 * time.Second), Src: cli(40001), Dst: srv, Seq: 20})
	tr.AddSegment(&Segment{Time: t0.Add(2001 * time.Millisecond), Src: srv, Dst: cli(40001), Ack: 21, Flags: flagRST | flagACK})
	tr.AddSegment(&Segment{Time: t0.Add(3 * time.Millisecond), Src: srv, Dst: cli(40000), Seq: 100, Ack: 11, Flags: flagACK, Sent: PayloadH2Settings})
	tests := []struct {
		name  string
		a     Attempt
		want  Attempt
		found bool
	}{
		{"accepted, the server's SETTINGS", Attempt{Src: cli(40000), Dst: srv, Seq: 10},
			Attempt{Time: t0, Src: cli(40000), Dst: srv, Seq: 10, Ending: Ending{Fate: FateOpen, Accepted: time.Millisecond, ServerSent: PayloadH2Settings}}, true},
		{"retransmitted, then refused", Attempt{Src: cli(40001), Dst: srv, Seq: 20},
			Attempt{Time: t0.Add(time.Second), Src: cli(40001), Dst: srv, Seq: 20, Retransmits: 1, Ending: Ending{Fate: FateRefused, Duration: 1001 * time.Millisecond}}, true},
		{"another ISN", Attempt{Src: cli(40001), Dst: srv, Seq: 21}, Attempt{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, found := tr.Find(tt.a)
			if found != tt.found {
				t.Fatalf("found %v, want %v", found, tt.found)
			}
			if diff := cmp.Diff(tt.want, got, netipOpt); diff != "" {
				t.Errorf("Find (-want +got):\n%s", diff)
			}
		})
	}
	// What List reads, every segment placed, is what Find read.
	for _, a := range tr.List() {
		got, _ := tr.Find(a)
		if diff := cmp.Diff(a, got, netipOpt); diff != "" {
			t.Errorf("Find after List (-List +Find):\n%s", diff)
		}
	}
}

// TestWaveJudge: a wave read as it goes is judged as NewHerd judges the
// same attempts.
func TestWaveJudge(t *testing.T) {
	p := DefaultPolicy()
	tests := []struct {
		name         string
		w            Wave
		listed       bool
		wantExpected bool
	}{
		{"first attempts together: a restart", Wave{K: 0, Peers: 12, Count: 12}, true, true},
		{"attempt 3 bunched beyond the jitter", Wave{K: 2, Peers: 40, Count: 30}, true, false},
		{"attempt 3 as spread as the jitter makes it", Wave{K: 2, Peers: 100, Count: 20}, false, true},
		{"too few peers", Wave{K: 2, Peers: 9, Count: 9}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := tt.w
			listed := w.Judge(p, RetryMode{})
			if listed != tt.listed || w.Expected != tt.wantExpected {
				t.Errorf("listed %v, expected %v (share %.2f, policy share %.2f); want %v, %v", listed, w.Expected, w.Share, w.PolicyShare, tt.listed, tt.wantExpected)
			}
		})
	}
}
