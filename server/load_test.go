package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backoff-audit/audit/pb"
	"github.com/backoff-audit/audit/server/internal/loadgen"
	"github.com/backoff-audit/audit/session"
)

// loadSources are the client addresses of the load runs: 127.0.0.1 stays
// free for the other tests that run at the same time, and each address has
// its own ephemeral ports.
func loadSources(n int) []netip.Addr {
	out := make([]netip.Addr, n)
	for i := range out {
		out[i] = netip.AddrFrom4([4]byte{127, 0, 1, byte(10 + i)})
	}
	return out
}

// latencyProbe measures accept-to-record: BeforeStamp runs right after
// accept, and the same goroutine then stamps, records (Record's line is
// written before OnEvent is called), calls OnEvent with the accept event
// and closes. Both hooks run under the server's accept lock, one connection
// at a time, so the probe needs no lock for the pair; the slice is read
// after the run.
type latencyProbe struct {
	accepted time.Time
	peer     netip.AddrPort
	lat      []time.Duration
	mismatch int // an accept event that was not for the last BeforeStamp
	accepts  atomic.Int64
	// reached receives when accepts reaches notifyAt (0: never).
	notifyAt atomic.Int64
	reached  chan struct{}
}

func (p *latencyProbe) beforeStamp(peer netip.AddrPort) {
	p.accepted, p.peer = time.Now(), peer
}

func (p *latencyProbe) onEvent(e session.RecordEvent) {
	if e.Event != session.EventAccept {
		return
	}
	if e.Peer != p.peer {
		p.mismatch++
	} else if len(p.lat) < cap(p.lat) {
		p.lat = append(p.lat, time.Since(p.accepted))
	}
	if n := p.accepts.Add(1); n == p.notifyAt.Load() {
		p.reached <- struct{}{}
	}
}

// loadRun is one load run against a fresh server with one session open.
type loadRun struct {
	res    loadgen.Result
	probe  *latencyProbe
	end    session.SessionEnd
	passed bool
}

// runLoad starts a server (Record to rec when set), opens a session, sends
// conns connections with workers in flight from sources, waits until every
// completed connection is recorded, and stops the session.
func runLoad(tb testing.TB, conns, workers int, sources []netip.Addr, rec io.Writer, maxAttempts int) loadRun {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	probe := &latencyProbe{lat: make([]time.Duration, 0, conns)}
	s, err := New(Config{
		RetryAddr:   "127.0.0.1:0",
		MaxAttempts: maxAttempts,
		Record:      rec,
		Logger:      slog.New(slog.DiscardHandler),
		BeforeStamp: probe.beforeStamp,
		OnEvent:     probe.onEvent,
	})
	if err != nil {
		tb.Fatal(err)
	}
	defer s.Close()
	rpc := controlClient(tb, s, netip.Addr{})
	if _, err := rpc.Start(ctx, &pb.ReconnectParams{}); err != nil {
		tb.Fatal(err)
	}
	target := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(s.RetryPort()))
	if b, ok := tb.(*testing.B); ok {
		b.ResetTimer()
	}
	res, err := loadgen.Run(ctx, loadgen.Config{Target: target, Sources: sources, Conns: conns, Workers: workers, Latencies: true})
	if err != nil {
		tb.Fatal(err)
	}
	// A connection's close is seen by the client just before the server
	// records it: wait for the last records.
	for probe.accepts.Load() < int64(res.Conns) && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	if b, ok := tb.(*testing.B); ok {
		b.StopTimer()
	}
	info, err := rpc.Stop(ctx, &pb.Empty{})
	if err != nil {
		tb.Fatal(err)
	}
	ss, ok := s.Session(1)
	if !ok {
		tb.Fatal("session 1 not kept")
	}
	if err := s.Close(); err != nil {
		tb.Fatal(err)
	}
	return loadRun{res: res, probe: probe, end: ss.End, passed: info.GetPassed()}
}

// TestLoadgenSmoke checks the benchmark's machinery on a small run: every
// connection is accepted, recorded and closed, and each accept-to-record
// pair is matched.
func TestLoadgenSmoke(t *testing.T) {
	const conns = 2000
	var rec countingWriter
	r := runLoad(t, conns, 4, loadSources(2), &rec, conns+1)
	if r.res.Conns != conns || r.res.Errors != 0 {
		t.Fatalf("loadgen: %d of %d connections, %d errors (first: %v)", r.res.Conns, conns, r.res.Errors, r.res.Err)
	}
	if r.end.Attempts != conns || r.end.Dropped != 0 || len(r.end.Foreign) != 2 {
		t.Errorf("session end %+v: want %d attempts from 2 foreign addresses", r.end, conns)
	}
	if got := rec.lines.Load(); got != conns+2 { // start, the accepts, stop
		t.Errorf("record has %d lines, want %d", got, conns+2)
	}
	if r.probe.mismatch != 0 || len(r.probe.lat) != conns || len(r.res.Latencies) != conns {
		t.Errorf("latencies: %d server (%d mismatched), %d client; want %d each", len(r.probe.lat), r.probe.mismatch, len(r.res.Latencies), conns)
	}
	t.Logf("%d conns in %v (%.0f/s), accept-to-record p99 %v, client connect-to-close p99 %v",
		conns, r.res.Elapsed, float64(conns)/r.res.Elapsed.Seconds(),
		loadgen.Percentile(r.probe.lat, 99), loadgen.Percentile(r.res.Latencies, 99))
}

// BenchmarkRetryLoad measures the connections per second that the
// retry port accepts, stamps, records (a record file on disk, or none) and
// closes under a loopback load generator in the same process, with the
// p50/p99 of accept-to-record (BeforeStamp to OnEvent on the accept loop)
// and of the client's connect-to-close. Reproduce with
//
//	go test -run '^$' -bench BenchmarkRetryLoad -benchtime 20000x ./server
func BenchmarkRetryLoad(b *testing.B) {
	for _, record := range []bool{false, true} {
		for _, workers := range []int{1, 4, 16, 64} {
			name := fmt.Sprintf("record=%v/workers=%d", record, workers)
			b.Run(name, func(b *testing.B) {
				var rec io.Writer
				if record {
					f, err := os.Create(filepath.Join(b.TempDir(), "record.jsonl"))
					if err != nil {
						b.Fatal(err)
					}
					defer f.Close()
					rec = f
				}
				r := runLoad(b, b.N, workers, loadSources(8), rec, b.N+1)
				if r.res.Errors != 0 {
					b.Fatalf("%d of %d connections failed (first: %v)", r.res.Errors, b.N, r.res.Err)
				}
				b.ReportMetric(float64(r.res.Conns)/r.res.Elapsed.Seconds(), "conns/s")
				b.ReportMetric(float64(loadgen.Percentile(r.probe.lat, 50).Microseconds()), "rec-p50-µs")
				b.ReportMetric(float64(loadgen.Percentile(r.probe.lat, 99).Microseconds()), "rec-p99-µs")
				b.ReportMetric(float64(loadgen.Percentile(r.res.Latencies, 50).Microseconds()), "client-p50-µs")
				b.ReportMetric(float64(loadgen.Percentile(r.res.Latencies, 99).Microseconds()), "client-p99-µs")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

// BenchmarkRetryDrain is the server's own rate, without a load generator
// competing for the two cores: drainBatch connections are opened while the
// accept loop is held in BeforeStamp, so they wait, handshake done, in the
// kernel's accept queue; the clock runs from the release until the last of
// them is recorded. The clients neither read nor close during the drain.
// Reproduce with
//
//	go test -run '^$' -bench BenchmarkRetryDrain -benchtime 20000x ./server
func BenchmarkRetryDrain(b *testing.B) {
	for _, record := range []bool{false, true} {
		b.Run(fmt.Sprintf("record=%v", record), func(b *testing.B) {
			var rec io.Writer
			if record {
				f, err := os.Create(filepath.Join(b.TempDir(), "record.jsonl"))
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				rec = f
			}
			d := drainRun(b, b.N, rec)
			b.ReportMetric(float64(b.N)/d.elapsed.Seconds(), "conns/s")
			b.ReportMetric(float64(loadgen.Percentile(d.lat, 50).Microseconds()), "rec-p50-µs")
			b.ReportMetric(float64(loadgen.Percentile(d.lat, 99).Microseconds()), "rec-p99-µs")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// drainBatch stays well below the accept queue's 4096 (somaxconn), so no
// SYN is dropped and retried a second later.
const drainBatch = 2000

type drain struct {
	elapsed time.Duration
	lat     []time.Duration
}

// drainRun sends n connections through the accept queue in batches and
// times only the drains.
func drainRun(b *testing.B, n int, rec io.Writer) drain {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	probe := &latencyProbe{lat: make([]time.Duration, 0, n+n/drainBatch+1), reached: make(chan struct{}, 1)}
	var (
		hold    atomic.Bool
		held    = make(chan struct{}, 1)
		release = make(chan struct{})
	)
	s, err := New(Config{
		RetryAddr:   "127.0.0.1:0",
		MaxAttempts: n + n/drainBatch + 2,
		Record:      rec,
		Logger:      slog.New(slog.DiscardHandler),
		BeforeStamp: func(p netip.AddrPort) {
			if hold.CompareAndSwap(true, false) {
				held <- struct{}{}
				<-release
			}
			probe.beforeStamp(p)
		},
		OnEvent: probe.onEvent,
	})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	rpc := controlClient(b, s, netip.Addr{})
	if _, err := rpc.Start(ctx, &pb.ReconnectParams{}); err != nil {
		b.Fatal(err)
	}
	target := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(s.RetryPort()))
	var d drain
	b.StopTimer()
	for left := n; left > 0; left -= drainBatch {
		batch := min(left, drainBatch)
		release = make(chan struct{})
		hold.Store(true)
		// One more connection than the batch: the first is the one held.
		conns, err := loadgen.Open(ctx, loadgen.Config{Target: target, Sources: loadSources(8), Conns: batch + 1, Workers: 8})
		if err != nil {
			b.Fatal(err)
		}
		select {
		case <-held:
		case <-ctx.Done():
			b.Fatal(ctx.Err())
		}
		probe.notifyAt.Store(probe.accepts.Load() + int64(batch) + 1)
		b.StartTimer()
		t0 := time.Now()
		close(release)
		select {
		case <-probe.reached:
		case <-ctx.Done():
			b.Fatal(ctx.Err())
		}
		d.elapsed += time.Since(t0)
		b.StopTimer()
		for _, c := range conns {
			c.Close()
		}
	}
	if _, err := rpc.Stop(ctx, &pb.Empty{}); err != nil {
		b.Fatal(err)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	d.lat = probe.lat
	return d
}

// countingWriter is a Record that keeps only its size.
type countingWriter struct {
	mu    sync.Mutex
	bytes int64
	lines atomic.Int64
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.bytes += int64(len(p))
	w.mu.Unlock()
	for _, c := range p {
		if c == '\n' {
			w.lines.Add(1)
		}
	}
	return len(p), nil
}
