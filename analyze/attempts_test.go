package analyze

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// netipOpt lets cmp compare netip values by ==.
var netipOpt = cmpopts.EquateComparable(netip.Addr{}, netip.AddrPort{})

var trackStart = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

func trackAt(ms int) time.Time { return trackStart.Add(time.Duration(ms) * time.Millisecond) }

func trackSYN(ms int, src string, seq uint32) SYN {
	return SYN{Time: trackAt(ms), Src: netip.MustParseAddrPort(src), Dst: netip.MustParseAddrPort("127.0.0.1:50052"), Seq: seq}
}

func TestTrackerAdd(t *testing.T) {
	tests := []struct {
		name  string
		syns  []SYN
		isNew []bool
		want  []Chain
	}{
		{
			name:  "retransmission is counted, not a new attempt",
			syns:  []SYN{trackSYN(0, "127.0.0.1:40000", 7), trackSYN(1000, "127.0.0.1:40000", 7), trackSYN(3000, "127.0.0.1:40000", 7)},
			isNew: []bool{true, false, false},
			want: []Chain{{Peer: netip.MustParseAddr("127.0.0.1"), Attempts: []Attempt{
				{Time: trackAt(0), Src: netip.MustParseAddrPort("127.0.0.1:40000"), Dst: netip.MustParseAddrPort("127.0.0.1:50052"), Seq: 7, Retransmits: 2},
			}}},
		},
		{
			name:  "same port with a new ISN is a new attempt",
			syns:  []SYN{trackSYN(0, "127.0.0.1:40000", 7), trackSYN(1000, "127.0.0.1:40000", 8)},
			isNew: []bool{true, true},
			want: []Chain{{Peer: netip.MustParseAddr("127.0.0.1"), Attempts: []Attempt{
				{Time: trackAt(0), Src: netip.MustParseAddrPort("127.0.0.1:40000"), Dst: netip.MustParseAddrPort("127.0.0.1:50052"), Seq: 7},
				{Time: trackAt(1000), Src: netip.MustParseAddrPort("127.0.0.1:40000"), Dst: netip.MustParseAddrPort("127.0.0.1:50052"), Seq: 8},
			}}},
		},
		{
			name:  "IPv4-mapped source is the IPv4 peer",
			syns:  []SYN{trackSYN(0, "[::ffff:10.0.0.1]:40000", 1), trackSYN(1000, "10.0.0.1:40001", 2)},
			isNew: []bool{true, true},
			want: []Chain{{Peer: netip.MustParseAddr("10.0.0.1"), Attempts: []Attempt{
				{Time: trackAt(0), Src: netip.MustParseAddrPort("[::ffff:10.0.0.1]:40000"), Dst: netip.MustParseAddrPort("127.0.0.1:50052"), Seq: 1},
				{Time: trackAt(1000), Src: netip.MustParseAddrPort("10.0.0.1:40001"), Dst: netip.MustParseAddrPort("127.0.0.1:50052"), Seq: 2},
			}}},
		},
		{
			name:  "mapped and unmapped spelling of one tuple is one attempt",
			syns:  []SYN{trackSYN(0, "10.0.0.1:40000", 1), trackSYN(1000, "[::ffff:10.0.0.1]:40000", 1)},
			isNew: []bool{true, false},
			want: []Chain{{Peer: netip.MustParseAddr("10.0.0.1"), Attempts: []Attempt{
				{Time: trackAt(0), Src: netip.MustParseAddrPort("10.0.0.1:40000"), Dst: netip.MustParseAddrPort("127.0.0.1:50052"), Seq: 1, Retransmits: 1},
			}}},
		},
		{
			name:  "::1 and 127.0.0.1 are distinct peers",
			syns:  []SYN{trackSYN(0, "[::1]:40000", 1), trackSYN(5, "127.0.0.1:40001", 1), trackSYN(1000, "[::1]:40002", 2)},
			isNew: []bool{true, true, true},
			want: []Chain{
				{Peer: netip.MustParseAddr("127.0.0.1"), Attempts: []Attempt{
					{Time: trackAt(5), Src: netip.MustParseAddrPort("127.0.0.1:40001"), Dst: netip.MustParseAddrPort("127.0.0.1:50052"), Seq: 1},
				}},
				{Peer: netip.MustParseAddr("::1"), Attempts: []Attempt{
					{Time: trackAt(0), Src: netip.MustParseAddrPort("[::1]:40000"), Dst: netip.MustParseAddrPort("127.0.0.1:50052"), Seq: 1},
					{Time: trackAt(1000), Src: netip.MustParseAddrPort("[::1]:40002"), Dst: netip.MustParseAddrPort("127.0.0.1:50052"), Seq: 2},
				}},
			},
		},
		{
			name: "out-of-order input is sorted by time",
			// The second file of a rotated set read first.
			syns:  []SYN{trackSYN(2600, "127.0.0.1:40002", 3), trackSYN(0, "127.0.0.1:40000", 1), trackSYN(1000, "127.0.0.1:40001", 2)},
			isNew: []bool{true, true, true},
			want: []Chain{{Peer: netip.MustParseAddr("127.0.0.1"), Attempts: []Attempt{
				{Time: trackAt(0), Src: netip.MustParseAddrPort("127.0.0.1:40000"), Dst: netip.MustParseAddrPort("127.0.0.1:50052"), Seq: 1},
				{Time: trackAt(1000), Src: netip.MustParseAddrPort("127.0.0.1:40001"), Dst: netip.MustParseAddrPort("127.0.0.1:50052"), Seq: 2},
				{Time: trackAt(2600), Src: netip.MustParseAddrPort("127.0.0.1:40002"), Dst: netip.MustParseAddrPort("127.0.0.1:50052"), Seq: 3},
			}}},
		},
		{
			name:  "retransmission seen before its original keeps the earliest time",
			syns:  []SYN{trackSYN(1000, "127.0.0.1:40000", 7), trackSYN(0, "127.0.0.1:40000", 7)},
			isNew: []bool{true, false},
			want: []Chain{{Peer: netip.MustParseAddr("127.0.0.1"), Attempts: []Attempt{
				{Time: trackAt(0), Src: netip.MustParseAddrPort("127.0.0.1:40000"), Dst: netip.MustParseAddrPort("127.0.0.1:50052"), Seq: 7, Retransmits: 1},
			}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := NewTracker()
			var gotNew []bool
			for _, s := range tt.syns {
				_, isNew := tr.Add(s)
				gotNew = append(gotNew, isNew)
			}
			if diff := cmp.Diff(tt.isNew, gotNew); diff != "" {
				t.Errorf("Add isNew (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, tr.Peers(), netipOpt); diff != "" {
				t.Errorf("Peers (-want +got):\n%s", diff)
			}
			wantRetrans := 0
			for _, c := range tt.want {
				wantRetrans += c.Retransmits()
			}
			if got, want := tr.SYNs(), len(tt.syns); got != want {
				t.Errorf("SYNs() = %d, want %d", got, want)
			}
			if got := tr.Retransmits(); got != wantRetrans {
				t.Errorf("Retransmits() = %d, want %d", got, wantRetrans)
			}
			if got, want := tr.Attempts(), len(tt.syns)-wantRetrans; got != want {
				t.Errorf("Attempts() = %d, want %d", got, want)
			}
		})
	}
}

func TestTrackerAddReturnsAttempt(t *testing.T) {
	tr := NewTracker()
	tr.Add(trackSYN(0, "127.0.0.1:40000", 7))
	got, isNew := tr.Add(trackSYN(1000, "127.0.0.1:40000", 7))
	want := Attempt{Time: trackAt(0), Src: netip.MustParseAddrPort("127.0.0.1:40000"), Dst: netip.MustParseAddrPort("127.0.0.1:50052"), Seq: 7, Retransmits: 1}
	if isNew {
		t.Error("second SYN of a tuple: isNew = true, want false")
	}
	if diff := cmp.Diff(want, got, netipOpt); diff != "" {
		t.Errorf("Add (-want +got):\n%s", diff)
	}
}

func TestPeersIsACopy(t *testing.T) {
	tr := NewTracker()
	tr.Add(trackSYN(0, "127.0.0.1:40000", 7))
	before := tr.Peers()
	tr.Add(trackSYN(1000, "127.0.0.1:40000", 7))
	tr.Add(trackSYN(1000, "127.0.0.1:40001", 8))
	if got := before[0].Attempts[0].Retransmits; got != 0 {
		t.Errorf("earlier Peers() changed by later Add: retransmits = %d, want 0", got)
	}
	if got := len(before[0].Attempts); got != 1 {
		t.Errorf("earlier Peers() changed by later Add: %d attempts, want 1", got)
	}
}

func TestPortTracker(t *testing.T) {
	to := func(port uint16, src string, seq uint32) SYN {
		s := trackSYN(0, src, seq)
		s.Dst = netip.AddrPortFrom(s.Dst.Addr(), port)
		return s
	}
	tests := []struct {
		name    string
		syns    []SYN
		want    uint16
		wantErr string
	}{
		{name: "empty", wantErr: "no TCP SYN in the capture: nothing to audit"},
		{name: "one port", syns: []SYN{to(50052, "127.0.0.1:1", 1), to(50052, "127.0.0.1:2", 2)}, want: 50052},
		{
			name: "two ports listed by count",
			syns: []SYN{to(50051, "127.0.0.1:1", 1), to(50052, "127.0.0.1:2", 2), to(50052, "127.0.0.1:3", 3), to(443, "127.0.0.1:4", 4)},
			wantErr: "the capture holds SYNs to 3 ports, choose the retry port with --port: " +
				"50052 (2 SYNs), 443 (1 SYN), 50051 (1 SYN)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pt := NewPortTracker()
			for _, s := range tt.syns {
				pt.Add(s)
			}
			got, err := pt.OnlyPort()
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if got != tt.want || gotErr != tt.wantErr {
				t.Errorf("OnlyPort() = %d, %q; want %d, %q", got, gotErr, tt.want, tt.wantErr)
			}
		})
	}
	pt := NewPortTracker()
	pt.Add(to(50052, "127.0.0.1:1", 1))
	if got := pt.Tracker(50052).SYNs(); got != 1 {
		t.Errorf("Tracker(50052).SYNs() = %d, want 1", got)
	}
	if got := pt.Tracker(9).SYNs(); got != 0 {
		t.Errorf("Tracker(9).SYNs() = %d, want 0", got)
	}
}

// BenchmarkTrackerAdd feeds 10 000 peers' chains of 13 attempts, one SYN in
// a hundred retransmitted, and builds the chains.
func BenchmarkTrackerAdd(b *testing.B) {
	const peers, attempts = 10000, 13
	syns := make([]SYN, 0, peers*attempts*101/100)
	dst := netip.MustParseAddrPort("10.0.0.1:50052")
	for a := range attempts {
		for p := range peers {
			src := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(p >> 8), byte(p)}), uint16(40000+a))
			s := SYN{Time: trackStart.Add(time.Duration(a)*time.Second + time.Duration(p)), Src: src, Dst: dst, Seq: uint32(p*attempts + a)}
			syns = append(syns, s)
			if (p+a)%100 == 0 {
				s.Time = s.Time.Add(time.Second)
				syns = append(syns, s)
			}
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		tr := NewTracker()
		for _, s := range syns {
			tr.Add(s)
		}
		if got := len(tr.Peers()); got != peers {
			b.Fatalf("%d peers, want %d", got, peers)
		}
	}
	b.ReportMetric(float64(len(syns)), "SYNs/op")
}
