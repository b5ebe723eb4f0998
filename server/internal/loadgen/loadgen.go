// Package loadgen drives a retry port with the connections a crowd of
// reconnecting clients makes: connect over loopback, wait for the server to
// close, close. It is bounded by count and by the caller's context, and it
// refuses any address that is not loopback, so a test or a benchmark can
// never load another machine.
package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Config is one run.
type Config struct {
	// Target is the retry port, e.g. 127.0.0.1:40112 or [::1]:40112.
	Target netip.AddrPort
	// Sources are the local addresses to dial from; worker w uses
	// Sources[w%len(Sources)]. Spreading a large run over several
	// 127.0.0.x addresses gives each its own ephemeral ports. Default: the
	// kernel's choice (127.0.0.1 for an IPv4 target).
	Sources []netip.Addr
	// Conns is how many connections the run makes in all.
	Conns int
	// Workers is how many connections are in flight at once. Default 1.
	Workers int
	// Latencies asks for each connection's time from the start of its dial
	// to the server's close seen by the client, in Result.Latencies.
	Latencies bool
	// ReadTimeout bounds the wait for the server's close of one connection.
	// Default 10 s.
	ReadTimeout time.Duration
}

// loopbackOnly refuses a target or source that is not loopback.
func (cfg Config) loopbackOnly() error {
	if !cfg.Target.IsValid() || !cfg.Target.Addr().Unmap().IsLoopback() {
		return fmt.Errorf("loadgen: target %v is not a loopback address", cfg.Target)
	}
	for _, s := range cfg.Sources {
		if !s.Unmap().IsLoopback() {
			return fmt.Errorf("loadgen: source %v is not a loopback address", s)
		}
	}
	return nil
}

// Result is what a run did.
type Result struct {
	// Conns connected and saw the server close them.
	Conns int
	// Errors is the number of connections that failed; Err is the first.
	Errors int
	Err    error
	// Elapsed is the wall time of the whole run.
	Elapsed time.Duration
	// Latencies holds, when asked for, one value per completed connection
	// in no particular order.
	Latencies []time.Duration
}

// Run makes cfg.Conns connections and returns when all are done or ctx
// ends. Its error is about the configuration; connection failures are
// counted in the Result.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if err := cfg.loopbackOnly(); err != nil {
		return Result{}, err
	}
	if cfg.Conns < 0 {
		return Result{}, fmt.Errorf("loadgen: %d connections", cfg.Conns)
	}
	workers := max(cfg.Workers, 1)
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = 10 * time.Second
	}
	var (
		next   atomic.Int64 // connections handed out
		done   atomic.Int64
		failed atomic.Int64
		errMu  sync.Mutex
		first  error
		wg     sync.WaitGroup
	)
	lat := make([][]time.Duration, workers)
	start := time.Now()
	for w := range workers {
		d := net.Dialer{}
		if len(cfg.Sources) > 0 {
			d.LocalAddr = &net.TCPAddr{IP: cfg.Sources[w%len(cfg.Sources)].AsSlice()}
		}
		if cfg.Latencies {
			lat[w] = make([]time.Duration, 0, cfg.Conns/workers+1)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 512)
			target := cfg.Target.String()
			for ctx.Err() == nil && next.Add(1) <= int64(cfg.Conns) {
				t0 := time.Now()
				err := once(ctx, &d, target, buf, cfg.ReadTimeout)
				if err != nil {
					failed.Add(1)
					errMu.Lock()
					if first == nil {
						first = err
					}
					errMu.Unlock()
					continue
				}
				done.Add(1)
				if cfg.Latencies {
					lat[w] = append(lat[w], time.Since(t0))
				}
			}
		}()
	}
	wg.Wait()
	r := Result{Conns: int(done.Load()), Errors: int(failed.Load()), Err: first, Elapsed: time.Since(start)}
	if cfg.Latencies {
		r.Latencies = make([]time.Duration, 0, r.Conns)
		for _, l := range lat {
			r.Latencies = append(r.Latencies, l...)
		}
	}
	return r, nil
}

// once makes one connection and waits for the server's close: EOF, or a
// reset when the server closed with our bytes unread.
func once(ctx context.Context, d *net.Dialer, target string, buf []byte, timeout time.Duration) error {
	c, err := d.DialContext(ctx, "tcp", target)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(timeout))
	for {
		n, err := c.Read(buf)
		switch {
		case errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET):
			return nil
		case err != nil:
			return fmt.Errorf("wait for the server's close of %v: %w", c.LocalAddr(), err)
		case n > 0:
			return fmt.Errorf("%v: the retry port sent %d bytes", c.LocalAddr(), n)
		}
	}
}

// Percentile returns the p-th percentile (0 < p ≤ 100) of ds, which it
// sorts in place; 0 when ds is empty. It is the nearest-rank percentile:
// p99 of 1000 values is the 990th smallest.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	rank := int(math.Ceil(float64(len(ds)) * p / 100))
	return ds[min(max(rank, 1), len(ds))-1]
}

// Open makes cfg.Conns connections, with cfg.Workers dialling at once, and
// returns them open and unread: the server's accept queue then holds
// whatever it has not accepted yet. The caller closes them. On error the
// connections made so far are closed.
func Open(ctx context.Context, cfg Config) ([]net.Conn, error) {
	if err := cfg.loopbackOnly(); err != nil {
		return nil, err
	}
	workers := max(cfg.Workers, 1)
	conns := make([]net.Conn, cfg.Conns)
	var (
		next  atomic.Int64
		errMu sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	for w := range workers {
		d := net.Dialer{}
		if len(cfg.Sources) > 0 {
			d.LocalAddr = &net.TCPAddr{IP: cfg.Sources[w%len(cfg.Sources)].AsSlice()}
		}
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= len(conns) {
					return
				}
				c, err := d.DialContext(ctx, "tcp", cfg.Target.String())
				if err != nil {
					errMu.Lock()
					if first == nil {
						first = err
					}
					errMu.Unlock()
					return
				}
				conns[i] = c
			}
		})
	}
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		first = ctx.Err()
	}
	if first != nil {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
		return nil, fmt.Errorf("loadgen: open %d connections to %v: %w", cfg.Conns, cfg.Target, first)
	}
	return conns, nil
}
