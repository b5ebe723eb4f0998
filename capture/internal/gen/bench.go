package main

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/gopacket/gopacket"
)

type benchConfig struct {
	packets int
	peers   int
	seed    uint64
}

type benchStats struct {
	packets, bytes, peers, attempts, retrySYNs int
}

var (
	benchServer4 = netip.AddrPortFrom(netip.MustParseAddr("10.0.0.1"), retryPort)
	benchServer6 = netip.AddrPortFrom(netip.MustParseAddr("fd00::1"), retryPort)
)

// writeBench writes a capture like a busy server's: cfg.peers clients
// reconnecting to the retry port (mixed IPv4/IPv6, spec-like jitter, some
// C-core style first jitter, a few broken clients, occasional SYN
// retransmissions) inside background traffic (data, ACKs, SYN-ACKs, SYNs to
// other ports, UDP) that fills the capture up to cfg.packets packets. The
// packets are merged in time order from one lazy source per client, so
// memory stays proportional to the clients, not the packets.
func writeBench(path string, cfg benchConfig) (benchStats, error) {
	if cfg.packets <= 0 || cfg.peers < 0 {
		return benchStats{}, fmt.Errorf("bench: packets %d, peers %d: need packets > 0, peers ≥ 0", cfg.packets, cfg.peers)
	}
	r := rand.New(rand.NewPCG(cfg.seed, 0xbe9c4))
	h := &sourceHeap{}
	var st benchStats
	end := epoch
	chainPackets := 0
	for i := range cfg.peers {
		c := benchChain(r, i)
		if e := c.start.Add(sum(c.gaps)); e.After(end) {
			end = e
		}
		st.attempts += len(c.gaps) + 1
		chainPackets += 5 * (len(c.gaps) + 1)
		h.push(&chainSource{c: c, r: rand.New(rand.NewPCG(cfg.seed, uint64(i)+1)), port: uint16(32768 + r.IntN(28000))})
	}
	st.peers = cfg.peers
	if bg := cfg.packets - chainPackets; bg > 0 {
		span := end.Sub(epoch) + time.Second
		h.push(&backgroundSource{r: rand.New(rand.NewPCG(cfg.seed, 0)), left: bg, t: epoch, mean: float64(span) / float64(bg)})
	}
	heap.Init(h)

	w, err := createPcap(path)
	if err != nil {
		return st, err
	}
	defer w.f.Close()
	st.bytes = 24
	b := newBuilder()
	for h.Len() > 0 && st.packets < cfg.packets {
		top := h.items[0]
		p := top.pending
		if !top.src.next(&top.pending) {
			heap.Pop(h)
		} else {
			heap.Fix(h, 0)
		}
		data, err := b.frame(linkEthernet, p)
		if err != nil {
			return st, err
		}
		if err := w.WritePacket(gopacket.CaptureInfo{Timestamp: p.ts, CaptureLength: len(data), Length: len(data)}, data); err != nil {
			return st, fmt.Errorf("write %s: %w", path, err)
		}
		st.packets++
		st.bytes += 16 + len(data)
		if !p.udp && p.flags == fSYN && p.dst.Port() == retryPort {
			st.retrySYNs++
		}
	}
	return st, w.Close()
}

func sum(ds []time.Duration) time.Duration {
	var t time.Duration
	for _, d := range ds {
		t += d
	}
	return t
}

// benchChain draws client i's chain: 2–13 attempts starting in the first
// minute. 90 % follow the spec, 30 % of those with a jittered first backoff
// (C-core since 2024); the rest are broken clients that retry without
// backoff or with a too-short one.
func benchChain(r *rand.Rand, i int) chain {
	client, server := peerAddr(i)
	n := 2 + r.IntN(12)
	c := chain{client: client, server: server, start: epoch.Add(time.Duration(r.Int64N(int64(time.Minute))))}
	switch k := r.IntN(100); {
	case k < 5: // zero backoff after the first (grpc-go with MaxDelay 0)
		c.gaps = []time.Duration{time.Second + sendDelay(r)}
		for len(c.gaps) < n-1 {
			c.gaps = append(c.gaps, sendDelay(r))
		}
	case k < 10: // constant 1 s backoff
		for len(c.gaps) < n-1 {
			c.gaps = append(c.gaps, time.Second+sendDelay(r))
		}
	default:
		c.gaps = specBackoff.gaps(r, n)
		if k < 37 && len(c.gaps) > 0 {
			c.gaps[0] = time.Duration(float64(time.Second)*(0.8+0.4*r.Float64())) + sendDelay(r)
		}
	}
	// One attempt in a hundred has its SYN retransmitted after 1 s; only
	// attempts followed by a gap over 2 s, so a chain's packets stay in time
	// order.
	for a := range c.gaps {
		if c.gaps[a] > 2*time.Second && r.IntN(100) == 0 {
			c.retransmit = map[int][]time.Duration{a: {time.Second}}
			break
		}
	}
	return c
}

// source yields packets in time order.
type source interface {
	// next stores the next packet in p and reports whether there was one.
	next(p *packet) bool
}

type chainSource struct {
	c       chain
	r       *rand.Rand
	port    uint16
	attempt int
	t       time.Time
	queue   []packet
}

func (s *chainSource) next(p *packet) bool {
	// A broken client may start its next attempt before the last one's
	// packets are over: generate attempts until the next one starts after
	// the earliest queued packet, and keep the queue in time order.
	for s.attempt <= len(s.c.gaps) {
		t := s.c.start
		if s.attempt > 0 {
			t = s.t.Add(s.c.gaps[s.attempt-1])
		}
		if len(s.queue) > 0 && t.After(s.queue[0].ts) {
			break
		}
		s.t = t
		s.port += uint16(1 + s.r.IntN(8)) // from below 60768: no wrap in 13 attempts
		s.queue = append(s.queue, attempt(s.r, netip.AddrPortFrom(s.c.client, s.port), s.c.server, s.t, s.c.retransmit[s.attempt])...)
		sortPackets(s.queue)
		s.attempt++
	}
	if len(s.queue) == 0 {
		return false
	}
	*p = s.queue[0]
	s.queue = s.queue[1:]
	return true
}

// backgroundSource is a Poisson stream of unrelated traffic.
type backgroundSource struct {
	r    *rand.Rand
	left int
	t    time.Time
	mean float64 // ns between packets
}

var payload = func() []byte {
	r := rand.New(rand.NewPCG(7, 7))
	b := make([]byte, 1448)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}()

var otherPorts = []uint16{443, 80, 8080, controlPort, 22}

func (s *backgroundSource) next(p *packet) bool {
	if s.left == 0 {
		return false
	}
	s.left--
	r := s.r
	s.t = s.t.Add(time.Duration(r.ExpFloat64() * s.mean))
	v6 := r.IntN(2) == 0
	client, server := hostAddr(v6, r.IntN(5000)), hostAddr(v6, 5000+r.IntN(20))
	cport := uint16(32768 + r.IntN(28000))
	sport := otherPorts[r.IntN(len(otherPorts))]
	*p = packet{ts: s.t, src: netip.AddrPortFrom(client, cport), dst: netip.AddrPortFrom(server, sport), seq: r.Uint32(), ack: r.Uint32()}
	switch k := r.IntN(100); {
	case k < 45:
		p.flags = fPSH | fACK
		if r.IntN(2) == 0 { // requests and acks of small messages, and full segments
			p.payload = payload[:1+r.IntN(200)]
		} else {
			p.payload = payload[:1+r.IntN(len(payload))]
		}
	case k < 70:
		p.flags = fACK
	case k < 78: // SYNs to other ports: not attempts on the retry port
		p.flags, p.ack = fSYN, 0
	case k < 85: // SYN-ACKs, from the retry port too: never attempts
		p.flags = fSYN | fACK
		if r.IntN(2) == 0 {
			p.src = netip.AddrPortFrom(server, retryPort)
		}
		p.src, p.dst = p.dst, p.src
		p.reply = true
	case k < 88:
		p.flags = []int{fRST, fFIN | fACK}[r.IntN(2)]
	default:
		p.udp = true
		p.dst = netip.AddrPortFrom(server, []uint16{53, 443, 123}[r.IntN(3)])
		p.payload = payload[:40+r.IntN(1160)]
	}
	if !p.udp && p.flags != fSYN && p.flags != fSYN|fACK && r.IntN(2) == 0 {
		p.src, p.dst, p.reply = p.dst, p.src, true
	}
	return true
}

// hostAddr returns background host h's IPv4 or IPv6 address.
func hostAddr(v6 bool, h int) netip.Addr {
	if v6 {
		return netip.AddrFrom16([16]byte{0: 0xfd, 1: 0x09, 14: byte(h >> 8), 15: byte(h)})
	}
	return netip.AddrFrom4([4]byte{10, 9, byte(h >> 8), byte(h)})
}

// sourceHeap merges sources by the time of their pending packet.
type sourceHeap struct{ items []*heapItem }

type heapItem struct {
	src     source
	pending packet
}

// push adds src with its first packet, if it has one.
func (h *sourceHeap) push(src source) {
	it := &heapItem{src: src}
	if src.next(&it.pending) {
		h.items = append(h.items, it)
	}
}

func (h *sourceHeap) Len() int           { return len(h.items) }
func (h *sourceHeap) Less(i, j int) bool { return h.items[i].pending.ts.Before(h.items[j].pending.ts) }
func (h *sourceHeap) Swap(i, j int)      { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *sourceHeap) Push(x any)         { h.items = append(h.items, x.(*heapItem)) }
func (h *sourceHeap) Pop() any {
	it := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return it
}
