package attempt

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
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

// randomSYNs makes a capture's worth of SYNs from peers IPv4 and IPv6,
// some written IPv4-mapped, in no time order, with retransmissions (some
// seen before their original, some with a mapped spelling) and ties.
func randomSYNs(seed uint64, peers, attempts int) []SYN {
	rng := rand.New(rand.NewPCG(seed, 1))
	dst := netip.MustParseAddrPort("10.0.0.1:50052")
	var syns []SYN
	for p := range peers {
		var src netip.Addr
		switch p % 3 {
		case 0:
			src = netip.AddrFrom4([4]byte{10, 1, byte(p >> 8), byte(p)})
		case 1:
			src = netip.AddrFrom16([16]byte{0x20, 0x01, 0xd, 0xb8, 14: byte(p >> 8), 15: byte(p)})
		case 2: // mapped: the same peer as 10.2.x.y
			src = netip.AddrFrom16(netip.AddrFrom4([4]byte{10, 2, byte(p >> 8), byte(p)}).As16())
		}
		step := time.Second
		if p%5 == 0 {
			step = 0 // attempts at the same time: ties for the order to break
		}
		for a := range 1 + rng.IntN(attempts) {
			s := SYN{
				Time: trackStart.Add(time.Duration(a)*step + time.Duration(rng.IntN(3))*time.Millisecond),
				Src:  netip.AddrPortFrom(src, uint16(30000+rng.IntN(100))), Dst: dst, Seq: rng.Uint32(),
			}
			syns = append(syns, s)
			for range rng.IntN(3) / 2 {
				r := s
				r.Time = s.Time.Add(time.Duration(rng.IntN(4000)-1000) * time.Millisecond)
				if src.Is4() {
					r.Src = netip.AddrPortFrom(netip.AddrFrom16(src.As16()), s.Src.Port())
				}
				syns = append(syns, r)
			}
		}
	}
	rng.Shuffle(len(syns), func(i, j int) { syns[i], syns[j] = syns[j], syns[i] })
	return syns
}

// wantChains groups syns the obvious way: a map from tuple to attempt.
func wantChains(syns []SYN) []Chain {
	type key struct {
		src, dst netip.AddrPort
		seq      uint32
	}
	byKey := map[key]*Attempt{}
	var order []key
	for _, s := range syns {
		k := key{UnmapPort(s.Src), UnmapPort(s.Dst), s.Seq}
		if a := byKey[k]; a != nil {
			a.Retransmits++
			if s.Time.Before(a.Time) {
				a.Time = s.Time
			}
			continue
		}
		byKey[k] = &Attempt{Time: s.Time, Src: s.Src, Dst: s.Dst, Seq: s.Seq}
		order = append(order, k)
	}
	byPeer := map[netip.Addr][]Attempt{}
	for _, k := range order {
		byPeer[k.src.Addr()] = append(byPeer[k.src.Addr()], *byKey[k])
	}
	var chains []Chain
	for peer, as := range byPeer {
		slices.SortFunc(as, Compare)
		chains = append(chains, Chain{Peer: peer, Attempts: as})
	}
	slices.SortFunc(chains, func(a, b Chain) int { return a.Peer.Compare(b.Peer) })
	return chains
}

// feeds are the ways SYNs reach a Tracker: Add one at a time (live), push
// as PortTracker does (grouped when read), or both in turns.
var feeds = []struct {
	name string
	feed func(tr *Tracker, syns []SYN)
}{
	{"Add", func(tr *Tracker, syns []SYN) {
		for _, s := range syns {
			tr.Add(s)
		}
	}},
	{"push", func(tr *Tracker, syns []SYN) {
		for _, s := range syns {
			tr.push(s)
		}
	}},
	{"push in batches", func(tr *Tracker, syns []SYN) {
		tr.pushBatch = 100
		for _, s := range syns {
			tr.push(s)
		}
	}},
	{"push, every hash alike", func(tr *Tracker, syns []SYN) {
		for _, s := range syns {
			tr.push(s)
		}
		// One run of every tuple's SYNs: settle must tell them apart
		// by their tuples.
		tr.collide = true
	}},
	{"mixed", func(tr *Tracker, syns []SYN) {
		for i, s := range syns {
			if i/97%3 == 1 {
				tr.Add(s) // settles the pushed SYNs first
			} else {
				tr.push(s)
			}
			if i%500 == 499 {
				tr.Attempts() // settles
			}
		}
	}},
}

func TestTrackerRandom(t *testing.T) {
	for seed := range uint64(5) {
		for _, f := range feeds {
			t.Run(fmt.Sprint(f.name, seed), func(t *testing.T) { testTrackerRandom(t, seed, f.feed) })
		}
	}
}

func testTrackerRandom(t *testing.T, seed uint64, feed func(*Tracker, []SYN)) {
	{
		syns := randomSYNs(seed, 300, 12)
		tr := NewTracker()
		feed(tr, syns)
		want := wantChains(syns)
		if diff := cmp.Diff(want, tr.Peers(), netipOpt); diff != "" {
			t.Fatalf("seed %d: Peers (-want +got):\n%s", seed, diff)
		}
		cs := tr.Chains()
		if cs.Len() != len(want) {
			t.Fatalf("seed %d: Chains().Len() = %d, want %d", seed, cs.Len(), len(want))
		}
		var buf []Attempt
		var times []time.Time
		for i, w := range want {
			got := cs.Chain(i, buf)
			if diff := cmp.Diff(w, got, netipOpt); diff != "" {
				t.Fatalf("seed %d: Chain(%d) (-want +got):\n%s", seed, i, diff)
			}
			buf = got.Attempts
			var peer netip.Addr
			var retrans int
			peer, times, retrans = cs.Times(i, times)
			if peer != w.Peer || retrans != w.Retransmits() || !slices.EqualFunc(times, w.Times(), time.Time.Equal) {
				t.Fatalf("seed %d: times(%d) = %v, %v, %d; want %v, %v, %d", seed, i, peer, times, retrans, w.Peer, w.Times(), w.Retransmits())
			}
		}
		if got, want := tr.SYNs(), len(syns); got != want {
			t.Errorf("seed %d: SYNs() = %d, want %d", seed, got, want)
		}
		wantRetrans := 0
		for _, c := range want {
			wantRetrans += c.Retransmits()
		}
		if got := tr.Retransmits(); got != wantRetrans {
			t.Errorf("seed %d: Retransmits() = %d, want %d", seed, got, wantRetrans)
		}
		if got := tr.Attempts(); got != len(syns)-wantRetrans {
			t.Errorf("seed %d: Attempts() = %d, want %d", seed, got, len(syns)-wantRetrans)
		}
		// Add after it all still finds every attempt.
		for _, s := range syns[:50] {
			if _, isNew := tr.Add(s); isNew {
				t.Fatalf("seed %d: Add of a SYN seen before opened an attempt", seed)
			}
		}
	}
}

// SYNs added after Chains join the chains Chains and Peers return next.
func TestTrackerAddAfterChains(t *testing.T) {
	syns := randomSYNs(9, 200, 10)
	tr := NewTracker()
	half := len(syns) / 2
	for _, s := range syns[:half] {
		tr.push(s)
	}
	if diff := cmp.Diff(wantChains(syns[:half]), tr.Peers(), netipOpt); diff != "" {
		t.Fatalf("first half (-want +got):\n%s", diff)
	}
	for _, s := range syns[half:] {
		tr.Add(s)
	}
	if diff := cmp.Diff(wantChains(syns), tr.Peers(), netipOpt); diff != "" {
		t.Fatalf("all (-want +got):\n%s", diff)
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
			wantErr: "Port: the capture holds SYNs to 3 ports, choose the retry port: " +
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
	b.Run("Peers", func(b *testing.B) {
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
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(syns)), "ns/SYN")
	})
	// What audit pcap does: SYNs pushed through a PortTracker, then one
	// chain at a time in a reused buffer.
	b.Run("PortTracker", func(b *testing.B) {
		b.ReportAllocs()
		var buf []Attempt
		for b.Loop() {
			pt := NewPortTracker()
			for _, s := range syns {
				pt.Add(s)
			}
			tr := pt.Tracker(dst.Port())
			cs := tr.Chains()
			n := 0
			for i := range cs.Len() {
				c := cs.Chain(i, buf)
				n += len(c.Attempts)
				buf = c.Attempts
			}
			if n != tr.Attempts() || cs.Len() != peers {
				b.Fatalf("%d peers, %d attempts; want %d, %d", cs.Len(), n, peers, tr.Attempts())
			}
		}
		b.ReportMetric(float64(len(syns)), "SYNs/op")
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(syns)), "ns/SYN")
	})
	// Add, then one chain at a time in a reused buffer.
	b.Run("Chains", func(b *testing.B) {
		b.ReportAllocs()
		var buf []Attempt
		for b.Loop() {
			tr := NewTracker()
			for _, s := range syns {
				tr.Add(s)
			}
			cs := tr.Chains()
			n := 0
			for i := range cs.Len() {
				c := cs.Chain(i, buf)
				n += len(c.Attempts)
				buf = c.Attempts
			}
			if n != tr.Attempts() || cs.Len() != peers {
				b.Fatalf("%d peers, %d attempts; want %d, %d", cs.Len(), n, peers, tr.Attempts())
			}
		}
		b.ReportMetric(float64(len(syns)), "SYNs/op")
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(syns)), "ns/SYN")
	})
}

// The incremental grouping a live auditor does: Retransmit counts a SYN
// only against an attempt held, AddAttempt carries retransmits over, List
// gives the attempts in the order they were opened.
func TestTrackerIncremental(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	dst := netip.MustParseAddrPort("127.0.0.1:50052")
	syn := func(port uint16, seq uint32, at time.Duration) SYN {
		return SYN{Time: t0.Add(at), Src: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port), Dst: dst, Seq: seq}
	}
	tr := NewTracker()
	if tr.Retransmit(syn(40000, 1, 0)) {
		t.Fatal("Retransmit on an empty tracker counted a SYN")
	}
	tr.AddAttempt(Attempt{Time: t0, Src: syn(40000, 1, 0).Src, Dst: dst, Seq: 1, Retransmits: 2})
	tr.Add(syn(40001, 7, time.Second))
	if !tr.Retransmit(syn(40000, 1, 3*time.Second)) {
		t.Error("a SYN with a held attempt's tuple and ISN is not a retransmission")
	}
	// Mapped and plain IPv4 are one attempt.
	mapped := syn(40001, 7, 2*time.Second)
	mapped.Src = netip.AddrPortFrom(netip.AddrFrom16(mapped.Src.Addr().As16()), mapped.Src.Port())
	if !tr.Retransmit(mapped) {
		t.Error("an IPv4-mapped SYN is not a retransmission of its IPv4 attempt")
	}
	if tr.Retransmit(syn(40000, 2, 4*time.Second)) {
		t.Error("another ISN counted as a retransmission")
	}
	got := tr.List()
	want := []Attempt{
		{Time: t0, Src: syn(40000, 1, 0).Src, Dst: dst, Seq: 1, Retransmits: 3},
		{Time: t0.Add(time.Second), Src: syn(40001, 7, 0).Src, Dst: dst, Seq: 7, Retransmits: 1},
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateComparable(netip.AddrPort{})); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	if tr.SYNs() != 6 || tr.Retransmits() != 4 {
		t.Errorf("SYNs %d, retransmits %d; want 6 and 4", tr.SYNs(), tr.Retransmits())
	}
}
