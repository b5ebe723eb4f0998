package attempt

import (
	"net/netip"
	"testing"
	"time"

	"github.com/backoff-audit/audit/attempt/internal/rec"

	"github.com/backoff-audit/audit/backoff"
	"github.com/google/go-cmp/cmp"
)

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
	tr.AddSegment(&Segment{Time: t0.Add(time.Millisecond), Src: srv, Dst: cli(40000), Seq: 99, Ack: 11, Flags: rec.FlagSYN | rec.FlagACK})
	tr.Add(SYN{Time: t0.Add(time.Second), Src: cli(40001), Dst: srv, Seq: 20})
	tr.Retransmit(SYN{Time: t0.Add(2 * time.Second), Src: cli(40001), Dst: srv, Seq: 20})
	tr.AddSegment(&Segment{Time: t0.Add(2001 * time.Millisecond), Src: srv, Dst: cli(40001), Ack: 21, Flags: rec.FlagRST | rec.FlagACK})
	tr.AddSegment(&Segment{Time: t0.Add(3 * time.Millisecond), Src: srv, Dst: cli(40000), Seq: 100, Ack: 11, Flags: rec.FlagACK, Sent: backoff.PayloadH2Settings})
	tests := []struct {
		name  string
		a     Attempt
		want  Attempt
		found bool
	}{
		{"accepted, the server's SETTINGS", Attempt{Src: cli(40000), Dst: srv, Seq: 10},
			Attempt{Time: t0, Src: cli(40000), Dst: srv, Seq: 10, Ending: backoff.Ending{Fate: backoff.FateOpen, Accepted: time.Millisecond, ServerSent: backoff.PayloadH2Settings, Ready: true, ReadyAfter: 3 * time.Millisecond}}, true},
		{"retransmitted, then refused", Attempt{Src: cli(40001), Dst: srv, Seq: 20},
			Attempt{Time: t0.Add(time.Second), Src: cli(40001), Dst: srv, Seq: 20, Retransmits: 1, Ending: backoff.Ending{Fate: backoff.FateRefused, Duration: 1001 * time.Millisecond, RST: true}}, true},
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
