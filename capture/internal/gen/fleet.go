package main

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"time"
)

// fleetSchedule is one policy of a generated fleet: the backoff its
// clients follow and its share of them.
type fleetSchedule struct {
	name  string
	b     backoff
	share float64
	// wild: each gap is drawn uniformly from 50 ms–5 s, no policy at all.
	wild bool
}

// fleetSchedules are the policies of a generated fleet (testdata/README.md,
// "Fleet capture"). The first five are what a fleet runs; the last two are
// a small group and clients that follow no policy.
var fleetSchedules = []fleetSchedule{
	{name: "grpc default", b: specBackoff, share: 0.45},
	{name: "300ms x1.6 +-20%", b: backoff{base: 300 * time.Millisecond, multiplier: 1.6, jitter: 0.2, maxDelay: 120 * time.Second}, share: 0.20},
	{name: "1s flat +-20%", b: backoff{base: time.Second, multiplier: 1.6, jitter: 0.2, maxDelay: time.Second}, share: 0.12},
	{name: "1s x2 no jitter", b: backoff{base: time.Second, multiplier: 2, jitter: 0, maxDelay: 120 * time.Second}, share: 0.12},
	{name: "10ms flat", b: backoff{base: 10 * time.Millisecond, multiplier: 1, jitter: 0, maxDelay: 10 * time.Millisecond}, share: 0.08},
	{name: "700ms x3 +-10%", b: backoff{base: 700 * time.Millisecond, multiplier: 3, jitter: 0.1, maxDelay: 120 * time.Second}, share: 0.01},
	{name: "wild", wild: true, share: 0.01},
}

// fleetServer is the retry port of a generated fleet.
var fleetServer = netip.AddrPortFrom(netip.MustParseAddr("10.0.0.1"), retryPort)

// fleetPeer is the address of client i of schedule s: 10.(100+s).i/256.i%256,
// so that a reader knows each chain's schedule from its peer alone.
func fleetPeer(s, i int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, byte(100 + s), byte(i >> 8), byte(i)})
}

// fleetScheduleOf is the index of the schedule of a fleet peer, or −1.
func fleetScheduleOf(a netip.Addr) int {
	b := a.As4()
	if !a.Is4() || b[0] != 10 || int(b[1]) < 100 || int(b[1]) >= 100+len(fleetSchedules) {
		return -1
	}
	return int(b[1]) - 100
}

// fleetCounts splits peers among the schedules by their shares, the
// rounding left to the first.
func fleetCounts(peers int) []int {
	n := make([]int, len(fleetSchedules))
	left := peers
	for s := len(fleetSchedules) - 1; s > 0; s-- {
		n[s] = min(int(float64(peers)*fleetSchedules[s].share+0.5), left)
		left -= n[s]
	}
	n[0] = left
	return n
}

// The shape of a generated fleet's chains.
const (
	fleetMinAttempts = 5  // attempts of a chain that fails throughout, at least
	fleetMaxAttempts = 14 // and at most
	fleetSuccess     = 20 // percent of chains that end in a connection that succeeds
	fleetFlap        = 10 // percent whose connection succeeds, drops, and backs off anew
)

// fleetStats is what writeFleet wrote.
type fleetStats struct {
	packets, attempts int
	peers             []int // by schedule
}

// writeFleet writes a capture of peers clients reconnecting with the
// schedules of fleetSchedules (pcap, ns, Ethernet): each attempt fails as
// the reference's retry port makes it (closed by the server), but in
// fleetSuccess % of the chains the last attempt succeeds (the client's
// HTTP/2 preface and the server's SETTINGS, open to the end), and in
// fleetFlap % one attempt succeeds, the server drops it 2–10 s later, and
// the client starts over from its initial backoff.
func writeFleet(path string, peers int, seed uint64) (fleetStats, error) {
	if peers < 0 {
		return fleetStats{}, fmt.Errorf("fleet: peers %d: need ≥ 0", peers)
	}
	st := fleetStats{peers: fleetCounts(peers)}
	var ps []packet
	for s, n := range st.peers {
		for i := range n {
			r := rand.New(rand.NewPCG(seed, uint64(s)<<32|uint64(i)))
			var as int
			ps, as = fleetChain(r, fleetSchedules[s], fleetPeer(s, i), ps)
			st.attempts += as
		}
	}
	sortPackets(ps)
	w, err := createPcap(path)
	if err != nil {
		return st, err
	}
	defer w.f.Close()
	if err := writeFrames(w, linkEthernet, ps); err != nil {
		return st, fmt.Errorf("write %s: %w", path, err)
	}
	st.packets = len(ps)
	return st, w.Close()
}

// fleetChain appends to ps the packets of one client's chain and returns
// them with its number of attempts.
func fleetChain(r *rand.Rand, s fleetSchedule, client netip.Addr, ps []packet) ([]packet, int) {
	n := fleetMinAttempts + r.IntN(fleetMaxAttempts-fleetMinAttempts+1)
	ends, flap := r.IntN(100) < fleetSuccess, -1
	if r.IntN(100) < fleetFlap && n >= 7 {
		flap = 2 + r.IntN(n-5) // a run of at least 3 attempts on each side
	}
	var gaps []time.Duration
	if s.wild {
		for range n - 1 {
			gaps = append(gaps, 50*time.Millisecond+time.Duration(r.Int64N(int64(5*time.Second))))
		}
	} else if flap < 0 {
		gaps = s.b.gaps(r, n)
	} else {
		// The gap after the attempt that succeeds is its connection's
		// life, 2–10 s; the attempt after it starts a new run.
		gaps = append(s.b.gaps(r, flap+1), 2*time.Second+time.Duration(r.Int64N(int64(8*time.Second))))
		gaps = append(gaps, s.b.gaps(r, n-flap-1)...)
	}
	port := uint16(32768 + r.IntN(20000))
	t := epoch.Add(time.Duration(r.Int64N(int64(time.Minute))))
	for i := range n {
		if i > 0 {
			t = t.Add(gaps[i-1])
		}
		port++
		src := netip.AddrPortFrom(client, port)
		switch {
		case i == flap:
			ps = append(ps, succeeded(r, src, fleetServer, t, t.Add(gaps[i]-time.Millisecond))...)
		case i == n-1 && ends:
			ps = append(ps, succeeded(r, src, fleetServer, t, time.Time{})...)
		default:
			ps = append(ps, attempt(r, src, fleetServer, t, nil)...)
		}
	}
	return ps, n
}

// h2Preface is the HTTP/2 client connection preface (RFC 9113 §3.4) and an
// empty SETTINGS frame; h2Settings is a server's empty SETTINGS frame.
var (
	h2Preface  = []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
	h2Settings = []byte("\x00\x00\x00\x04\x00\x00\x00\x00\x00")
)

// succeeded returns the packets of an attempt at t whose connection
// succeeds (docs/spec.md §7.1: the server's SETTINGS frame is what counts):
// handshake, the client's preface, the server's SETTINGS, and, when drop
// is not zero, the server's FIN then.
func succeeded(r *rand.Rand, client, server netip.AddrPort, t, drop time.Time) []packet {
	isn, sisn := r.Uint32(), r.Uint32()
	us := func(n int) time.Time { return t.Add(time.Duration(n+r.IntN(10)) * time.Microsecond) }
	ps := []packet{
		{ts: t, src: client, dst: server, flags: fSYN, seq: isn},
		{ts: us(20), src: server, dst: client, flags: fSYN | fACK, seq: sisn, ack: isn + 1, reply: true},
		{ts: us(40), src: client, dst: server, flags: fACK, seq: isn + 1, ack: sisn + 1},
		{ts: us(120), src: client, dst: server, flags: fPSH | fACK, seq: isn + 1, ack: sisn + 1, payload: h2Preface},
		{ts: us(200), src: server, dst: client, flags: fPSH | fACK, seq: sisn + 1, ack: isn + 1 + uint32(len(h2Preface)), payload: h2Settings, reply: true},
	}
	if !drop.IsZero() {
		ps = append(ps, packet{ts: drop, src: server, dst: client, flags: fFIN | fACK,
			seq: sisn + 1 + uint32(len(h2Settings)), ack: isn + 1 + uint32(len(h2Preface)), reply: true})
	}
	return ps
}
