package capture

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/backoff-audit/audit/attempt"
)

// writeSegments listens on lo and discards what one connection sends.
func writeSegments(tb testing.TB) (port uint16) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		b := make([]byte, 1<<16)
		for {
			if _, err := c.Read(b); err != nil {
				return
			}
		}
	}()
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}

// sendSegments connects to port and writes n pieces of size bytes, one
// segment each (no Nagle), pause apart.
func sendSegments(tb testing.TB, port uint16, n, size int, pause time.Duration) {
	tb.Helper()
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	c.(*net.TCPConn).SetNoDelay(true)
	b := make([]byte, size)
	for range n {
		if _, err := c.Write(b); err != nil {
			tb.Fatal(err)
		}
		time.Sleep(pause)
	}
}

func openWhole(tb testing.TB, port uint16, buffer int, seg func(*attempt.SegmentView)) *Live {
	tb.Helper()
	l, err := OpenLive(LiveConfig{Iface: "lo", Port: port, Whole: true, BufferSize: buffer, Segments: seg})
	if errors.Is(err, os.ErrPermission) {
		tb.Skipf("SKIPPED, NOT RUN: live capture needs root or CAP_NET_RAW+CAP_NET_ADMIN: %v", err)
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	return l
}

// TestLiveWhole: a capture of whole packets hands a segment's every
// byte, where the retry port's capture keeps its first bytes only.
func TestLiveWhole(t *testing.T) {
	t.Parallel()
	port := writeSegments(t)
	// Bytes, not segments: the kernel may merge or split the writes
	// (autocorking, a busy machine), never cut them on a capture of whole
	// packets.
	const sent = 3 * 10_000
	var whole, cut int
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l := openWhole(t, port, 0, func(v *attempt.SegmentView) {
		switch {
		case v.PayloadLen > len(v.Payload):
			cut++
		default:
			whole += v.PayloadLen
			if whole >= sent {
				cancel()
			}
		}
	})
	sendSegments(t, port, 3, 10_000, time.Millisecond)
	if err := l.Run(ctx, func(attempt.SYN) {}, nil); err != nil {
		t.Fatal(err)
	}
	if whole < sent || cut != 0 {
		t.Errorf("%d payload bytes whole, %d segments cut; want the %d sent whole, none cut", whole, cut, sent)
	}
	if _, err := OpenLive(LiveConfig{Iface: "lo", Port: port, Whole: true}); err == nil {
		t.Error("whole packets without Segments opened")
	}
}

// BenchmarkLiveRingCapacityWhole measures how many segments the kernel
// ring of a capture of whole packets (LiveConfig.Whole, the control
// port's) holds while the reader is away, against the retry port's short
// snap length: 20 000 segments of 100 bytes are written with the reader
// stalled, then it takes what the ring kept. Run it with -benchtime=1x.
func BenchmarkLiveRingCapacityWhole(b *testing.B) {
	for _, whole := range []bool{false, true} {
		b.Run(fmt.Sprintf("whole=%v", whole), func(b *testing.B) {
			var held int
			for range b.N {
				port := writeSegments(b)
				n := 0
				seg := func(*attempt.SegmentView) { n++ }
				l, err := OpenLive(LiveConfig{Iface: "lo", Port: port, Whole: whole, BufferSize: 8 << 20, Segments: seg})
				if errors.Is(err, os.ErrPermission) {
					b.Skipf("SKIPPED, NOT RUN: live capture needs root: %v", err)
				}
				if err != nil {
					b.Fatal(err)
				}
				sendSegments(b, port, 20_000, 100, 20*time.Microsecond)
				ctx, cancel := context.WithCancel(context.Background())
				cancel() // read what the ring holds, then stop
				l.Run(ctx, func(attempt.SYN) {}, nil)
				l.Close()
				held = n
			}
			b.ReportMetric(float64(held), "ring-segments")
		})
	}
}
