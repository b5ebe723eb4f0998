package main

import (
	"cmp"
	"container/heap"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"time"

	"github.com/gopacket/gopacket"
)

// peersConfig is a capture of many clients that follow the spec, as a
// fleet reconnecting after an outage shows them: nothing but the retry
// port's connections, in waves.
type peersConfig struct {
	peers int
	// waves splits the peers into that many waves, wave w starting at
	// w·every; a wave's peers make their first attempt within spread of
	// its start, and each retries for retry.
	waves                int
	every, spread, retry time.Duration
	// synOnly writes only the SYNs, as a capture made with a SYN filter;
	// otherwise every attempt is the interop test's five segments
	// (attempt).
	synOnly bool
	seed    uint64
}

// synEvent is one attempt's SYN, before its packets are made.
type synEvent struct {
	at    int64 // Unix ns
	peer  uint32
	k     uint16 // the attempt's number in its chain
	sport uint16
}

// writePeers writes cfg's capture to path (pcap, ns, Ethernet), in time
// order. Every peer follows the spec's policy with the default cap
// (specBackoff): the first gap 1 s, each later one E·U(0.8, 1.2), each
// plus a client's send delay, until retry has passed since its first
// attempt. Its memory is 16 bytes an attempt (the SYNs, sorted by time),
// not a packet.
func writePeers(path string, cfg peersConfig) (benchStats, error) {
	var st benchStats
	if cfg.peers <= 0 || cfg.waves <= 0 || cfg.waves > cfg.peers || cfg.every < 0 || cfg.spread <= 0 || cfg.retry < 0 {
		return st, fmt.Errorf("peers: %d peers in %d waves every %v, spread %v, retry %v: need peers ≥ waves ≥ 1, a positive spread, no negative time",
			cfg.peers, cfg.waves, cfg.every, cfg.spread, cfg.retry)
	}
	if cfg.peers > 1<<24 {
		return st, fmt.Errorf("peers: %d peers: at most %d have addresses of their own", cfg.peers, 1<<24)
	}
	var syns []synEvent
	for i := range cfg.peers {
		r := rand.New(rand.NewPCG(cfg.seed, uint64(i)+1))
		w := i * cfg.waves / cfg.peers
		t := epoch.Add(time.Duration(w)*cfg.every + time.Duration(r.Int64N(int64(cfg.spread)))).UnixNano()
		end := t + int64(cfg.retry)
		port := uint16(32768 + r.IntN(20000))
		e := float64(specBackoff.base)
		for k := 0; ; k++ {
			syns = append(syns, synEvent{at: t, peer: uint32(i), k: uint16(k), sport: port})
			g := e
			if k > 0 {
				e = min(e*specBackoff.multiplier, float64(specBackoff.maxDelay))
				g = e * (1 - specBackoff.jitter + 2*specBackoff.jitter*r.Float64())
			}
			t += int64(g) + int64(sendDelay(r))
			port += uint16(1 + r.IntN(8))
			if t >= end {
				break
			}
		}
	}
	slices.SortFunc(syns, func(a, b synEvent) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.peer, b.peer)) })
	st.peers, st.attempts, st.retrySYNs = cfg.peers, len(syns), len(syns)

	w, err := createPcap(path)
	if err != nil {
		return st, err
	}
	defer w.f.Close()
	st.bytes = 24
	b := newBuilder()
	write := func(p packet) error {
		data, err := b.frame(linkEthernet, p)
		if err != nil {
			return err
		}
		if err := w.WritePacket(gopacket.CaptureInfo{Timestamp: p.ts, CaptureLength: len(data), Length: len(data)}, data); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		st.packets++
		st.bytes += 16 + len(data)
		return nil
	}
	// later holds the packets after each SYN, written once the SYNs catch
	// up with them: a few hundred microseconds' worth.
	later := &packetHeap{}
	for _, s := range syns {
		for later.Len() > 0 && later.ps[0].ts.UnixNano() <= s.at {
			if err := write(heap.Pop(later).(packet)); err != nil {
				return st, err
			}
		}
		client, server := peerAddr(int(s.peer))
		r := rand.New(rand.NewPCG(cfg.seed, uint64(s.peer)<<16|uint64(s.k)))
		ps := attempt(r, netip.AddrPortFrom(client, s.sport), server, time.Unix(0, s.at).UTC(), nil)
		if err := write(ps[0]); err != nil {
			return st, err
		}
		if !cfg.synOnly {
			for _, p := range ps[1:] {
				heap.Push(later, p)
			}
		}
	}
	for later.Len() > 0 {
		if err := write(heap.Pop(later).(packet)); err != nil {
			return st, err
		}
	}
	return st, w.Close()
}

// peerAddr is peer i's address and the server it connects to: even peers
// IPv4, odd ones IPv6, as in the benchmark capture.
func peerAddr(i int) (netip.Addr, netip.AddrPort) {
	if i%2 == 0 {
		return netip.AddrFrom4([4]byte{10, byte(100 + i>>16), byte(i >> 8), byte(i)}), benchServer4
	}
	var a [16]byte
	copy(a[:], netip.MustParseAddr("fd00:1::").AsSlice())
	a[12], a[13], a[14], a[15] = byte(i>>24), byte(i>>16), byte(i>>8), byte(i)
	return netip.AddrFrom16(a), benchServer6
}

// packetHeap orders packets by time, then by the order pushed.
type packetHeap struct {
	ps []packet
	n  []uint64
	c  uint64
}

func (h *packetHeap) Len() int { return len(h.ps) }
func (h *packetHeap) Less(i, j int) bool {
	if c := h.ps[i].ts.Compare(h.ps[j].ts); c != 0 {
		return c < 0
	}
	return h.n[i] < h.n[j]
}
func (h *packetHeap) Swap(i, j int) {
	h.ps[i], h.ps[j] = h.ps[j], h.ps[i]
	h.n[i], h.n[j] = h.n[j], h.n[i]
}
func (h *packetHeap) Push(x any) {
	h.ps = append(h.ps, x.(packet))
	h.n = append(h.n, h.c)
	h.c++
}
func (h *packetHeap) Pop() any {
	p := h.ps[len(h.ps)-1]
	h.ps, h.n = h.ps[:len(h.ps)-1], h.n[:len(h.n)-1]
	return p
}
