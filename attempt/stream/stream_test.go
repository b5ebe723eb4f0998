package stream

import (
	stdcmp "cmp"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/attempt/internal/rec"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/internal/spill"
)

// event is a SYN or a segment of a made-up capture.
type event struct {
	syn *attempt.SYN
	seg *attempt.Segment
}

// captureMix is what a made-up capture holds.
type captureMix struct {
	peers   int
	servers int     // server addresses of the port
	seg     bool    // segments: each attempt answered, as the retry port does in some mode
	retrans float64 // share of attempts with a retransmitted SYN
	late    float64 // share of retransmissions that come before the first SYN (files out of order)
	back    float64 // share of peers that come back after their chain is over
	long    float64 // share of peers in a tight loop (a long chain, ports reused)
	far     bool    // a few attempts centuries away
	noise   int     // segments of no attempt
	both    int     // segments between two ports both the retry port
	otherAt int     // with seg: the first segment comes after this many events (0: at once)
}

const streamPort = 50052

// madeUp returns the events of a capture of mix, in time order but for
// what the mix puts out of it.
func madeUp(r *rand.Rand, mix captureMix) []event {
	base := time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)
	servers := make([]netip.Addr, mix.servers)
	for i := range servers {
		servers[i] = netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})
		if i%3 == 1 {
			servers[i] = netip.AddrFrom16([16]byte{0: 0xfd, 14: byte(i >> 8), 15: byte(i)})
		}
	}
	type timed struct {
		at time.Time
		n  int
		e  event
	}
	var all []timed
	add := func(at time.Time, e event) { all = append(all, timed{at, len(all), e}) }
	p := backoff.DefaultPolicy()
	for i := range mix.peers {
		srv := servers[r.IntN(len(servers))]
		var src netip.Addr
		switch {
		case srv.Is6():
			src = netip.AddrFrom16([16]byte{0: 0xfd, 1: 1, 13: byte(i >> 16), 14: byte(i >> 8), 15: byte(i)})
		case i%5 == 0: // an IPv4 peer spelled as IPv4-mapped IPv6
			src = netip.AddrFrom16(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}).As16())
		default:
			src = netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)})
		}
		t := base.Add(time.Duration(r.Int64N(int64(3 * time.Minute))))
		n := 1 + r.IntN(12)
		long := r.Float64() < mix.long
		if long {
			n = 70 + r.IntN(100)
		}
		port := uint16(30000 + r.IntN(20000))
		e := 1000.0
		for k := 0; k < n; k++ {
			if long {
				port = uint16(40000 + r.IntN(8)) // reused
			} else {
				port++
			}
			syn := attempt.SYN{Time: t, Src: netip.AddrPortFrom(src, port), Dst: netip.AddrPortFrom(srv, streamPort), Seq: r.Uint32()}
			if mix.far && r.IntN(200) == 0 {
				syn.Time = syn.Time.AddDate(400, 0, 0)
			}
			add(syn.Time, event{syn: &syn})
			answer := r.IntN(4)
			if long && answer == 3 {
				// A port is reused only once its connection is over, as TCP
				// allows: a tight loop's connections are not held open.
				answer = r.IntN(3)
			}
			// A client retransmits a SYN nothing answered: as TCP does.
			if r.Float64() < mix.retrans {
				answer = 2
				re := syn
				re.Time = syn.Time.Add(time.Second)
				if r.Float64() < mix.late {
					re.Time = syn.Time.Add(-time.Second)
				}
				add(re.Time, event{syn: &re})
			}
			if mix.seg {
				isn := syn.Seq
				client, server := syn.Src, syn.Dst
				switch answer {
				case 0: // refused
					add(t.Add(time.Millisecond), event{seg: &attempt.Segment{Time: t.Add(time.Millisecond), Src: server, Dst: client, Ack: isn + 1, Flags: rec.FlagRST | rec.FlagACK}})
				case 1: // closed after a hello
					ts := []time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond}
					add(t.Add(ts[0]), event{seg: &attempt.Segment{Time: t.Add(ts[0]), Src: server, Dst: client, Seq: 77, Ack: isn + 1, Flags: rec.FlagSYN | rec.FlagACK}})
					add(t.Add(ts[1]), event{seg: &attempt.Segment{Time: t.Add(ts[1]), Src: client, Dst: server, Seq: isn + 1, Ack: 78, Flags: rec.FlagACK, Sent: backoff.PayloadTLSClientHello}})
					add(t.Add(ts[2]), event{seg: &attempt.Segment{Time: t.Add(ts[2]), Src: server, Dst: client, Seq: 78, Flags: rec.FlagRST | rec.FlagACK}})
				case 2: // unanswered
				case 3: // accepted, abandoned later
					add(t.Add(time.Millisecond), event{seg: &attempt.Segment{Time: t.Add(time.Millisecond), Src: server, Dst: client, Seq: 9, Ack: isn + 1, Flags: rec.FlagSYN | rec.FlagACK}})
					end := t.Add(time.Duration(1+r.IntN(30)) * time.Second)
					add(end, event{seg: &attempt.Segment{Time: end, Src: client, Dst: server, Seq: isn + 1, Flags: rec.FlagFIN | rec.FlagACK}})
				}
			}
			g := e
			if k > 0 {
				e = min(e*p.Multiplier, 120000)
				g = e * (0.8 + 0.4*r.Float64())
			}
			if long {
				g = float64(r.IntN(300))
			}
			if r.Float64() < mix.back/float64(n) {
				g += 10 * 60 * 1000 // back ten minutes after its chain was over
			}
			t = t.Add(time.Duration(g * float64(time.Millisecond)))
		}
	}
	last := base.Add(10 * time.Minute)
	for range mix.noise {
		at := base.Add(time.Duration(r.Int64N(int64(last.Sub(base)))))
		srv := servers[r.IntN(len(servers))]
		cl := netip.AddrFrom4([4]byte{10, 1, 0, byte(r.IntN(20))})
		if srv.Is6() {
			cl = netip.AddrFrom16([16]byte{0: 0xfd, 1: 1, 15: byte(r.IntN(20))})
		}
		add(at, event{seg: &attempt.Segment{Time: at, Src: netip.AddrPortFrom(cl, uint16(30000+r.IntN(100))), Dst: netip.AddrPortFrom(srv, streamPort),
			Seq: r.Uint32(), Ack: r.Uint32(), Flags: rec.FlagACK, Sent: backoff.PayloadOther}})
	}
	for range mix.both {
		at := base.Add(time.Duration(r.Int64N(int64(last.Sub(base)))))
		a := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 2, 0, byte(r.IntN(4))}), streamPort)
		syn := attempt.SYN{Time: at, Src: a, Dst: netip.AddrPortFrom(servers[0], streamPort), Seq: r.Uint32()}
		add(at, event{syn: &syn})
		rst := attempt.Segment{Time: at.Add(time.Millisecond), Src: syn.Dst, Dst: a, Ack: syn.Seq + 1, Flags: rec.FlagRST | rec.FlagACK}
		add(rst.Time, event{seg: &rst})
	}
	// In time order, but for the late retransmissions, which stay where
	// their SYN was: as files read out of order would give them.
	slices.SortStableFunc(all, func(x, y timed) int {
		return x.at.Compare(y.at)
	})
	out := make([]event, len(all))
	for i, e := range all {
		out[i] = e.e
	}
	if mix.otherAt > 0 && mix.seg {
		// No segment before event otherAt: as a capture whose first
		// answers come late.
		var kept []event
		for i, e := range out {
			if e.seg == nil || i >= mix.otherAt {
				kept = append(kept, e)
			}
		}
		out = kept
	}
	return out
}

func viewOf(s *attempt.Segment) *attempt.SegmentView {
	src, dst := s.Src.Addr().AsSlice(), s.Dst.Addr().AsSlice()
	return &attempt.SegmentView{Src: src, Dst: dst, SrcPort: s.Src.Port(), DstPort: s.Dst.Port(), Seq: s.Seq, Ack: s.Ack,
		Sec: s.Time.Unix(), Nsec: int32(s.Time.Nanosecond()), Flags: s.Flags, Sent: s.Sent}
}

// TestStreamChains feeds the same made-up captures to a PortTracker, as
// `audit pcap` without --port reads them, and to a Stream, and requires
// every peer's chain to come out the same: the chain the Stream handed
// over last for the peer is the Tracker's, attempt for attempt, fates and
// retransmissions included.
func TestStreamChains(t *testing.T) {
	tests := []struct {
		name string
		mix  captureMix
		// pend and spillMem make the Stream merge often and spill to its
		// file.
		pend     int
		spillMem int64
	}{
		{"syn only", captureMix{peers: 300, servers: 2, retrans: 0.05}, 50, 1 << 20},
		{"fates", captureMix{peers: 300, servers: 3, seg: true, retrans: 0.05}, 64, 4096},
		{"peers come back", captureMix{peers: 200, servers: 2, seg: true, back: 0.5}, 37, 0},
		{"peers come back, syn only", captureMix{peers: 200, servers: 2, back: 0.5, retrans: 0.1}, 20, 0},
		{"out of order", captureMix{peers: 200, servers: 2, seg: true, retrans: 0.3, late: 0.5}, 41, 0},
		{"tight loops", captureMix{peers: 40, servers: 2, seg: true, long: 0.5}, 100, 0},
		{"many servers", captureMix{peers: 200, servers: 5000, seg: true}, 64, 0},
		{"far times", captureMix{peers: 300, servers: 2, seg: true, far: true, retrans: 0.2, late: 0.3}, 64, 0},
		{"noise and both ports", captureMix{peers: 100, servers: 2, seg: true, noise: 200, both: 20}, 30, 0},
		{"fates known late", captureMix{peers: 300, servers: 2, seg: true, otherAt: 600}, 25, 0},
		{"one merge", captureMix{peers: 300, servers: 2, seg: true, back: 0.2, retrans: 0.1}, 1 << 20, 1 << 30},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			events := madeUp(rand.New(rand.NewPCG(uint64(i), 7)), tt.mix)
			pt := attempt.NewPortTracker()
			st := New(streamPort, backoff.DefaultPolicy(), t.TempDir())
			defer st.Close()
			st.pendMin = tt.pend
			st.pendMax = tt.pend
			st.sp = spill.New(t.TempDir(), tt.spillMem)
			dead := map[int]bool{}
			var overs int
			st.OnOver = func(from, to int, now time.Time) {
				for c := from; c < to; c++ {
					overs++
					// Readable now, and over by now: no attempt within
					// its chain's end.
					ch := st.Chain(c, nil)
					if len(ch.Attempts) == 0 {
						t.Errorf("chain %d handed over empty", c)
					}
				}
			}
			st.OnRevive = func(c int) {
				if dead[c] {
					t.Errorf("chain %d revived twice", c)
				}
				dead[c] = true
			}
			segs := false
			for _, e := range events {
				if e.syn != nil {
					pt.Add(*e.syn)
					st.Add(*e.syn)
					continue
				}
				segs = true
				pt.AddSegmentView(viewOf(e.seg))
				st.AddSegmentView(viewOf(e.seg))
			}
			pt.SetFatesKnown(segs)
			st.SetFatesKnown(segs)
			if err := st.Finish(); err != nil {
				t.Fatal(err)
			}
			tr := pt.Tracker(streamPort)
			want := map[netip.Addr]attempt.Chain{}
			cs := tr.Chains()
			for i := range cs.Len() {
				c := cs.Chain(i, nil)
				want[c.Peer] = c
			}
			got := map[netip.Addr]attempt.Chain{}
			for c := range st.Len() {
				if dead[c] {
					continue
				}
				ch := st.Chain(c, nil)
				if _, ok := got[ch.Peer]; ok {
					t.Errorf("peer %v handed over twice, both held", ch.Peer)
				}
				got[ch.Peer] = ch
				// Times and Endings are Chain's.
				_, times, retrans := st.Times(c, nil)
				if diff := cmp.Diff(ch.Times(), times); diff != "" {
					t.Errorf("chain %d: Times differ from attempt.Chain's (-attempt.Chain +Times):\n%s", c, diff)
				}
				if retrans != ch.Retransmits() {
					t.Errorf("chain %d: Times counts %d retransmits, attempt.Chain %d", c, retrans, ch.Retransmits())
				}
				var wantEnd []backoff.Ending
				if segs {
					wantEnd = ch.Endings()
				}
				if diff := cmp.Diff(wantEnd, st.Endings(c, nil)); diff != "" {
					t.Errorf("chain %d: Endings differ from attempt.Chain's (-attempt.Chain +Endings):\n%s", c, diff)
				}
				_, times2, retrans2, ends2 := st.TimesEndings(c, nil, nil)
				if diff := cmp.Diff(wantEnd, ends2); diff != "" || retrans2 != retrans || !slices.Equal(times, times2) {
					t.Errorf("chain %d: TimesEndings differ from Times and Endings (-Endings +TimesEndings):\n%s", c, diff)
				}
			}
			if diff := cmp.Diff(want, got, cmpopts.EquateComparable(netip.Addr{}, netip.AddrPort{})); diff != "" {
				t.Errorf("chains (-attempt.Tracker +Stream):\n%s", diff)
			}
			if st.SYNs() != tr.SYNs() {
				t.Errorf("Stream counts %d SYNs, attempt.Tracker %d", st.SYNs(), tr.SYNs())
			}
			if !st.Last().Equal(tr.Last()) {
				t.Errorf("Stream's last packet at %v, attempt.Tracker's at %v", st.Last(), tr.Last())
			}
			seen, held := st.PeersSeen()
			if seen != len(want) || held != 0 {
				t.Errorf("PeersSeen = %d, %d after Finish, want %d, 0", seen, held, len(want))
			}
			t.Logf("%d events, %d peers, %d chains handed over, %d of them revived", len(events), len(want), overs, len(dead))
		})
	}
}

// TestStreamHandsOverWhileReading: chains over by backoff.ChainEnd are
// handed over as the capture goes on, not at its end, and what a Stream
// holds is the peers still retrying.
func TestStreamHandsOverWhileReading(t *testing.T) {
	p := backoff.DefaultPolicy()
	st := New(streamPort, p, t.TempDir())
	defer st.Close()
	st.pendMin, st.pendMax = 100, 100
	base := time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)
	var handed []int // chains handed over, by the wave being read then
	wave := 0
	st.OnOver = func(from, to int, now time.Time) {
		for range to - from {
			handed = append(handed, wave)
		}
	}
	const waves, perWave = 5, 200
	maxHeld := 0
	for wave = range waves {
		for i := range perWave {
			src := netip.AddrFrom4([4]byte{10, byte(wave), byte(i >> 8), byte(i)})
			t0 := base.Add(time.Duration(wave)*10*time.Minute + time.Duration(i)*time.Millisecond)
			for k, at := range []float64{0, 1000, 2600, 5160} {
				st.Add(attempt.SYN{Time: t0.Add(time.Duration(at * float64(time.Millisecond))), Src: netip.AddrPortFrom(src, uint16(40000+k)),
					Dst: netip.AddrPortFrom(netip.MustParseAddr("10.0.0.1"), streamPort), Seq: uint32(k)})
			}
			_, held := st.PeersSeen()
			maxHeld = max(maxHeld, held)
		}
	}
	if err := st.Finish(); err != nil {
		t.Fatal(err)
	}
	if st.Len() != waves*perWave {
		t.Fatalf("%d chains handed over, want %d", st.Len(), waves*perWave)
	}
	// Each wave's chains are over before the next wave ends: handed over
	// while it is read.
	for w := range waves - 1 {
		if n := countIf(handed, func(v int) bool { return v == w+1 }); n < perWave/2 {
			t.Errorf("while wave %d was read, %d chains were handed over, want those of wave %d (%d)", w+1, n, w, perWave)
		}
	}
	if maxHeld > 2*perWave {
		t.Errorf("the Stream held %d peers at once; at most two waves' worth (%d) should be held", maxHeld, 2*perWave)
	}
}

func countIf[T any](s []T, f func(T) bool) int {
	n := 0
	for _, v := range s {
		if f(v) {
			n++
		}
	}
	return n
}

// TestStreamSpillLost: when the spill cannot keep a chain, Finish says so,
// naming where it tried.
func TestStreamSpillLost(t *testing.T) {
	dir := t.TempDir() + "/missing"
	st := New(streamPort, backoff.DefaultPolicy(), dir)
	defer st.Close()
	st.pendMin, st.pendMax = 5000, 5000
	st.sp = spill.New(dir, 0)
	base := time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)
	for i := range 30000 {
		st.Add(attempt.SYN{Time: base.Add(time.Duration(i) * 10 * time.Millisecond), Src: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), 40000),
			Dst: netip.AddrPortFrom(netip.MustParseAddr("10.0.0.1"), streamPort), Seq: 1})
	}
	err := st.Finish()
	if err == nil || !strings.Contains(err.Error(), dir) {
		t.Fatalf("Finish() = %v, want an error naming %s", err, dir)
	}
}

// TestStreamSpillRuns: each flush writes its chains to the spill in the
// order a report reads peers (IPv4 before IPv6, by address), and reading
// every chain in that order reads the spill a window at a time, not a
// chain at a time.
func TestStreamSpillRuns(t *testing.T) {
	events := madeUp(rand.New(rand.NewPCG(3, 7)), captureMix{peers: 3000, servers: 3, seg: true, retrans: 0.05})
	st := New(streamPort, backoff.DefaultPolicy(), t.TempDir())
	defer st.Close()
	st.sp = spill.New(t.TempDir(), 0) // every chain in the file
	for _, e := range events {
		if e.syn != nil {
			st.Add(*e.syn)
		} else {
			st.AddSegmentView(viewOf(e.seg))
		}
	}
	st.SetFatesKnown(true)
	if err := st.Finish(); err != nil {
		t.Fatal(err)
	}
	peer := make([]netip.Addr, st.Len())
	for c := range peer {
		peer[c] = st.Chain(c, nil).Peer
	}
	reportOrder := func(x, y int) int {
		a, b := peer[x], peer[y]
		if a.Is4() != b.Is4() {
			if a.Is4() {
				return -1
			}
			return 1
		}
		return a.Compare(b)
	}
	if len(st.runs) < 2 {
		t.Fatalf("%d runs for %d chains: the test wants several", len(st.runs), st.Len())
	}
	for r, from := range st.runs {
		to := st.Len()
		if r+1 < len(st.runs) {
			to = int(st.runs[r+1])
		}
		byOffset := make([]int, 0, to-int(from))
		for c := int(from); c < to; c++ {
			byOffset = append(byOffset, c)
		}
		slices.SortFunc(byOffset, func(x, y int) int { return stdcmp.Compare(st.ref(x).off, st.ref(y).off) })
		for k := 1; k < len(byOffset); k++ {
			if reportOrder(byOffset[k-1], byOffset[k]) > 0 {
				t.Fatalf("run %d: %v's chain is written before %v's", r, peer[byOffset[k-1]], peer[byOffset[k]])
			}
		}
	}
	order := make([]int, st.Len())
	for c := range order {
		order[c] = c
	}
	slices.SortStableFunc(order, reportOrder)
	st.reads.Store(0)
	chain := st.ChainReader() // cold windows
	for _, c := range order {
		if len(chain(c, nil).Attempts) == 0 {
			t.Fatalf("chain %d read back empty", c)
		}
	}
	most := int(st.sp.Len()/windowLen) + 2*len(st.runs)
	if st.reads.Load() > int64(most) {
		t.Errorf("%d reads of a %d-byte spill in %d runs for %d chains, want at most %d", st.reads.Load(), st.sp.Len(), len(st.runs), st.Len(), most)
	}
	t.Logf("%d chains in %d runs, %d bytes: %d reads in report order", st.Len(), len(st.runs), st.sp.Len(), st.reads.Load())
}
