//go:build linux

// Package synload sends crafted TCP SYNs over loopback at a target rate,
// bounded by count and by time: the load behind the capture figures of
// RELIABILITY.md ("Live faults and capture load"). Each SYN is a new
// connection attempt (its own source address and port, or its own initial
// sequence number), as a crowd of reconnecting clients would send, without
// the cost of real connects, so the sender outruns the capture under test.
//
// The destinations are fixed: 127.0.0.1 and ::1. Sources are 127.77.0.0/16
// for IPv4 and ::1 for IPv6. No configuration can aim it elsewhere. The
// port should be closed: the kernel then answers each SYN with an RST and
// keeps no state.
//
// It needs a raw socket: root, or CAP_NET_RAW.
package synload

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"syscall"
	"time"
)

// Families the load can use.
const (
	IPv4 = "4"
	IPv6 = "6"
	Both = "both" // alternately, one IPv4 SYN then one IPv6 SYN
)

// Limits that keep a run bounded whatever its caller asks for.
const (
	MaxCount    = 10_000_000
	MaxDuration = 5 * time.Minute
	MaxSources  = 65_000
	// maxBurst is the most SYNs sent back to back before the pacer looks at
	// the clock again. Go's sleeps on Linux last at least about 1 ms, so a
	// rate above 1 000/s is sent in bursts of rate/1000 or so.
	maxBurst = 256
)

var (
	// Dst4 and Dst6 are the only destinations.
	Dst4 = netip.MustParseAddr("127.0.0.1")
	Dst6 = netip.IPv6Loopback()
	// src4Base is the first IPv4 source; the others follow it.
	src4Base = netip.MustParseAddr("127.77.0.1")
)

// Config is one run.
type Config struct {
	// Port is the destination port.
	Port uint16
	// Rate is the target in SYNs per second, over both families.
	Rate int
	// Count is how many SYNs to send at most (≤ MaxCount).
	Count int
	// Duration bounds the run (≤ MaxDuration): it stops when Count SYNs
	// are sent or Duration has passed, whichever comes first.
	Duration time.Duration
	// Family is IPv4, IPv6 or Both (default Both).
	Family string
	// Sources is how many IPv4 source addresses (127.77.0.1 onwards) take
	// turns; default 250. More addresses mean fewer attempts per peer in a
	// report, and more distinct 4-tuples before a source port repeats.
	Sources int
}

// Result is what a run sent.
type Result struct {
	Sent uint64 `json:"sent"`
	V4   uint64 `json:"v4"`
	V6   uint64 `json:"v6"`
	// Errors counts sends that failed (ENOBUFS under overload); those SYNs
	// are not in Sent.
	Errors uint64 `json:"errors"`
	// FirstError is the first send error, if any.
	FirstError string        `json:"first_error,omitempty"`
	Elapsed    time.Duration `json:"elapsed_ns"`
	// Rate is the achieved rate, Sent over Elapsed.
	Rate float64 `json:"rate"`
	// First and Last are when the first and the last SYN were sent.
	First time.Time `json:"first"`
	Last  time.Time `json:"last"`
}

func (c *Config) check() error {
	if c.Family == "" {
		c.Family = Both
	}
	if c.Sources == 0 {
		c.Sources = 250
	}
	switch {
	case c.Port == 0:
		return errors.New("synload: port 0")
	case c.Rate <= 0:
		return fmt.Errorf("synload: rate %d: must be positive", c.Rate)
	case c.Count <= 0 || c.Count > MaxCount:
		return fmt.Errorf("synload: count %d: must be 1..%d", c.Count, MaxCount)
	case c.Duration <= 0 || c.Duration > MaxDuration:
		return fmt.Errorf("synload: duration %v: must be positive and at most %v", c.Duration, MaxDuration)
	case c.Family != IPv4 && c.Family != IPv6 && c.Family != Both:
		return fmt.Errorf("synload: family %q: must be 4, 6 or both", c.Family)
	case c.Sources < 1 || c.Sources > MaxSources:
		return fmt.Errorf("synload: sources %d: must be 1..%d", c.Sources, MaxSources)
	}
	return nil
}

// Run sends the load and returns what it sent. It ends when the count is
// sent, the duration has passed or ctx ends. A socket it cannot open is an
// error wrapping os.ErrPermission without the privilege; a failing send is
// counted in Result.Errors, not returned.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if err := cfg.check(); err != nil {
		return Result{}, err
	}
	s, err := newSender(cfg)
	if err != nil {
		return Result{}, err
	}
	defer s.close()

	var r Result
	start := time.Now()
	deadline := start.Add(cfg.Duration)
	for i := 0; i < cfg.Count; {
		now := time.Now()
		if !now.Before(deadline) || ctx.Err() != nil {
			break
		}
		// due is how many SYNs the rate allows by now, counting the first
		// at time zero.
		due := min(int(now.Sub(start).Seconds()*float64(cfg.Rate))+1, cfg.Count)
		if due <= i {
			next := start.Add(time.Duration(float64(i) / float64(cfg.Rate) * float64(time.Second)))
			time.Sleep(min(next.Sub(now), deadline.Sub(now)))
			continue
		}
		for end := min(due, i+maxBurst); i < end; i++ {
			v6 := s.isV6(i)
			if err := s.send(i); err != nil {
				r.Errors++
				if r.FirstError == "" {
					r.FirstError = err.Error()
				}
				continue
			}
			if r.Sent == 0 {
				r.First = time.Now()
			}
			r.Sent++
			if v6 {
				r.V6++
			} else {
				r.V4++
			}
		}
		r.Last = time.Now()
	}
	r.Elapsed = time.Since(start)
	if r.Elapsed > 0 {
		r.Rate = float64(r.Sent) / r.Elapsed.Seconds()
	}
	return r, nil
}

// sender owns the raw sockets and one packet buffer per family, rewritten
// in place for each SYN: nothing is allocated per packet.
type sender struct {
	cfg      Config
	fd4, fd6 int
	to4      syscall.SockaddrInet4
	to6      syscall.SockaddrInet6
	pkt4     []byte // IPv4 header + TCP header
	pkt6     []byte // IPv6 header + TCP header
}

func newSender(cfg Config) (*sender, error) {
	s := &sender{cfg: cfg, fd4: -1, fd6: -1, to4: syscall.SockaddrInet4{Addr: Dst4.As4()},
		to6: syscall.SockaddrInet6{Addr: Dst6.As16()}}
	if cfg.Family != IPv6 {
		// IPPROTO_RAW implies IP_HDRINCL: the source address is ours to set.
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC, syscall.IPPROTO_RAW)
		if err != nil {
			return nil, socketError("IPv4", err)
		}
		s.fd4 = fd
		s.pkt4 = make([]byte, ipv4HeaderLen+tcpHeaderLen)
	}
	if cfg.Family != IPv4 {
		// As for IPv4, IPPROTO_RAW implies a header of our own, and such a
		// socket receives nothing: an IPPROTO_TCP one would be handed a
		// copy of every TCP segment of the host.
		fd, err := syscall.Socket(syscall.AF_INET6, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC, syscall.IPPROTO_RAW)
		if err != nil {
			s.close()
			return nil, socketError("IPv6", err)
		}
		s.fd6 = fd
		s.pkt6 = make([]byte, ipv6HeaderLen+tcpHeaderLen)
	}
	return s, nil
}

func socketError(family string, err error) error {
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
		return fmt.Errorf("synload: open raw %s socket: %w (needs root or CAP_NET_RAW)", family, os.ErrPermission)
	}
	return fmt.Errorf("synload: open raw %s socket: %w", family, err)
}

func (s *sender) close() {
	for _, fd := range []int{s.fd4, s.fd6} {
		if fd >= 0 {
			syscall.Close(fd)
		}
	}
}

func (s *sender) isV6(i int) bool {
	switch s.cfg.Family {
	case IPv4:
		return false
	case IPv6:
		return true
	}
	return i%2 == 1
}

// send sends SYN number i of the run: number k of its family.
func (s *sender) send(i int) error {
	k := i
	if s.cfg.Family == Both {
		k = i / 2
	}
	if s.isV6(i) {
		src, sport, seq := Tuple6(k)
		PutIPv6SYN(s.pkt6, src, Dst6, sport, s.cfg.Port, seq)
		return syscall.Sendto(s.fd6, s.pkt6, 0, &s.to6)
	}
	src, sport, seq := Tuple4(k, s.cfg.Sources)
	PutIPv4SYN(s.pkt4, src, Dst4, sport, s.cfg.Port, seq)
	return syscall.Sendto(s.fd4, s.pkt4, 0, &s.to4)
}

// Tuple4 is the source address, source port and ISN of IPv4 SYN number i
// (counted among the IPv4 SYNs) with n source addresses: addresses take
// turns, and each address's ports run from 1024 up, so the 4-tuples are
// distinct for n·64 512 SYNs; the ISN differs for every i, so each SYN is
// a new attempt even after that.
func Tuple4(i, n int) (src netip.Addr, sport uint16, seq uint32) {
	b := src4Base.As4()
	off := uint32(binary.BigEndian.Uint32(b[:])) + uint32(i%n)
	binary.BigEndian.PutUint32(b[:], off)
	return netip.AddrFrom4(b), uint16(1024 + (i/n)%64512), isn(i)
}

// Tuple6 is the source, source port and ISN of IPv6 SYN number i (counted
// among the IPv6 SYNs). Its ISNs are those of IPv4 SYN number i: the two
// never share a 4-tuple.
func Tuple6(i int) (src netip.Addr, sport uint16, seq uint32) {
	return Dst6, uint16(1024 + i%64512), isn(i)
}

// isn scrambles i (splitmix32-like), so ISNs look like a kernel's and
// differ for every SYN of a run.
func isn(i int) uint32 {
	x := uint32(i) + 0x9e3779b9
	x = (x ^ x>>16) * 0x85ebca6b
	x = (x ^ x>>13) * 0xc2b2ae35
	return x ^ x>>16
}

const (
	ipv4HeaderLen = 20
	ipv6HeaderLen = 40
	tcpHeaderLen  = 24 // with one option: MSS
	// mss and window are what Linux offers on lo (MTU 65536).
	mss    = 65495
	window = 65495
)

// PutIPv4SYN writes an IPv4 header and a SYN into p (ipv4HeaderLen +
// tcpHeaderLen bytes), both checksums included.
func PutIPv4SYN(p []byte, src, dst netip.Addr, sport, dport uint16, seq uint32) {
	h := p[:ipv4HeaderLen]
	clear(h)
	h[0] = 0x45
	binary.BigEndian.PutUint16(h[2:], uint16(len(p)))
	h[6] = 0x40 // don't fragment
	h[8] = 64   // TTL
	h[9] = syscall.IPPROTO_TCP
	s, d := src.As4(), dst.As4()
	copy(h[12:16], s[:])
	copy(h[16:20], d[:])
	binary.BigEndian.PutUint16(h[10:], ^fold(sum(0, h)))
	seg := p[ipv4HeaderLen:]
	putSYN(seg, sport, dport, seq)
	binary.BigEndian.PutUint16(seg[16:], tcpChecksum(s[:], d[:], seg))
}

// PutIPv6SYN writes an IPv6 header and a SYN into p (ipv6HeaderLen +
// tcpHeaderLen bytes), the TCP checksum included.
func PutIPv6SYN(p []byte, src, dst netip.Addr, sport, dport uint16, seq uint32) {
	h := p[:ipv6HeaderLen]
	clear(h)
	h[0] = 0x60
	binary.BigEndian.PutUint16(h[4:], uint16(len(p)-ipv6HeaderLen))
	h[6] = syscall.IPPROTO_TCP
	h[7] = 64 // hop limit
	s, d := src.As16(), dst.As16()
	copy(h[8:24], s[:])
	copy(h[24:40], d[:])
	seg := p[ipv6HeaderLen:]
	putSYN(seg, sport, dport, seq)
	binary.BigEndian.PutUint16(seg[16:], tcpChecksum(s[:], d[:], seg))
}

// putSYN writes a SYN with an MSS option and a zero checksum into seg.
func putSYN(seg []byte, sport, dport uint16, seq uint32) {
	clear(seg[:tcpHeaderLen])
	binary.BigEndian.PutUint16(seg[0:], sport)
	binary.BigEndian.PutUint16(seg[2:], dport)
	binary.BigEndian.PutUint32(seg[4:], seq)
	seg[12] = tcpHeaderLen / 4 << 4
	seg[13] = 0x02 // SYN
	binary.BigEndian.PutUint16(seg[14:], window)
	seg[20], seg[21] = 2, 4 // MSS
	binary.BigEndian.PutUint16(seg[22:], mss)
}

// tcpChecksum is the TCP checksum of seg (its checksum field zero) over
// the pseudo-header of src and dst, 4 or 16 bytes each.
func tcpChecksum(src, dst, seg []byte) uint16 {
	var acc uint32
	acc = sum(acc, src)
	acc = sum(acc, dst)
	acc += syscall.IPPROTO_TCP + uint32(len(seg))
	acc = sum(acc, seg)
	return ^fold(acc)
}

func sum(acc uint32, b []byte) uint32 {
	for len(b) >= 2 {
		acc += uint32(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		acc += uint32(b[0]) << 8
	}
	return acc
}

func fold(acc uint32) uint16 {
	for acc > 0xffff {
		acc = acc>>16 + acc&0xffff
	}
	return uint16(acc)
}
