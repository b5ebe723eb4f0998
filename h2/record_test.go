package h2_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/backoff-audit/audit/h2"
)

// chunk is what one Write (client to server) or one Read (server to client)
// of a recorded connection carried.
type chunk struct {
	Dir h2.Direction
	T   time.Time
	B   []byte
}

// recorder records the byte streams of the connections a client dials
// through it, both directions interleaved in the order they happened: a
// Write is stamped before it is written, a Read after it returns, so an
// answer is never stamped before what it answers.
type recorder struct {
	mu    sync.Mutex
	conns []*recConn
}

// recConn is one recorded connection.
type recConn struct {
	net.Conn
	rec            *recorder
	client, server netip.AddrPort
	start, end     time.Time
	chunks         []chunk
	closed         chan struct{}
	closeOnce      sync.Once
}

// dial dials addr and records the connection.
func (r *recorder) dial(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	rc := &recConn{
		Conn:   c,
		rec:    r,
		client: c.LocalAddr().(*net.TCPAddr).AddrPort(),
		server: c.RemoteAddr().(*net.TCPAddr).AddrPort(),
		start:  time.Now(),
		closed: make(chan struct{}),
	}
	r.mu.Lock()
	r.conns = append(r.conns, rc)
	r.mu.Unlock()
	return rc, nil
}

func (c *recConn) add(dir h2.Direction, p []byte) {
	c.rec.mu.Lock()
	defer c.rec.mu.Unlock()
	c.chunks = append(c.chunks, chunk{Dir: dir, T: time.Now(), B: append([]byte(nil), p...)})
}

func (c *recConn) Write(p []byte) (int, error) {
	c.add(h2.ClientToServer, p)
	return c.Conn.Write(p)
}

func (c *recConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.add(h2.ServerToClient, p[:n])
	}
	if err != nil {
		c.finish()
	}
	return n, err
}

func (c *recConn) Close() error {
	c.finish()
	return c.Conn.Close()
}

// finish marks the end of the connection: its first EOF or Close.
func (c *recConn) finish() {
	c.closeOnce.Do(func() {
		c.rec.mu.Lock()
		c.end = time.Now()
		c.rec.mu.Unlock()
		close(c.closed)
	})
}

// recording is a finished recording: connections in the order they were
// dialed.
type recording []recordedConn

type recordedConn struct {
	Client, Server netip.AddrPort
	Start, End     time.Time
	Chunks         []chunk
}

// take waits (bounded by ctx) until every connection has ended and
// returns them.
func (r *recorder) take(tb testing.TB, ctx context.Context) recording {
	tb.Helper()
	rec, err := r.wait(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	return rec
}

func (r *recorder) wait(ctx context.Context) (recording, error) {
	r.mu.Lock()
	conns := append([]*recConn(nil), r.conns...)
	r.mu.Unlock()
	for _, c := range conns {
		select {
		case <-c.closed:
		case <-ctx.Done():
			return nil, fmt.Errorf("connection %s → %s did not end: %w", c.client, c.server, ctx.Err())
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out recording
	for _, c := range conns {
		out = append(out, recordedConn{Client: c.client, Server: c.server, Start: c.start, End: c.end, Chunks: append([]chunk(nil), c.chunks...)})
	}
	return out, nil
}

// decode feeds every connection to h2 as recorded.
func (rec recording) decode() []*h2.Report {
	return rec.decodeSplit(nil)
}

// decodeSplit feeds every connection to h2, each chunk cut at random
// points when rng is set (as TCP segments would cut it).
func (rec recording) decodeSplit(rng *rand.Rand) []*h2.Report {
	var out []*h2.Report
	for _, rc := range rec {
		c := h2.NewConn(rc.Client, rc.Server, h2.Options{Start: rc.Start})
		for _, ch := range rc.Chunks {
			b := ch.B
			for rng != nil && len(b) > 1 {
				n := 1 + rng.IntN(len(b))
				c.Feed(ch.Dir, ch.T, b[:n])
				b = b[n:]
			}
			c.Feed(ch.Dir, ch.T, b)
		}
		c.End(rc.End)
		out = append(out, c.Report())
	}
	return out
}

// The fixture format (testdata/README.md, "HTTP/2 recordings"): JSON lines,
// one object each, with "conn" the connection's index and one of
//
//	{"conn":0,"client":"127.0.0.1:40000","server":"127.0.0.1:50051","start":T}
//	{"conn":0,"t":T,"dir":"client_to_server","data":BASE64}
//	{"conn":0,"end":T}
//
// in the order recorded: a connection's first line opens it, its data lines
// follow in wire order, its end line closes it. T is RFC 3339 with
// nanoseconds.
type fixtureLine struct {
	Conn   int             `json:"conn"`
	Client *netip.AddrPort `json:"client,omitempty"`
	Server *netip.AddrPort `json:"server,omitempty"`
	Start  *time.Time      `json:"start,omitempty"`
	T      *time.Time      `json:"t,omitempty"`
	Dir    *h2.Direction   `json:"dir,omitempty"`
	Data   []byte          `json:"data,omitempty"`
	End    *time.Time      `json:"end,omitempty"`
}

func (rec recording) write(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for i, rc := range rec {
		if err := enc.Encode(fixtureLine{Conn: i, Client: &rc.Client, Server: &rc.Server, Start: &rc.Start}); err != nil {
			return err
		}
		for _, ch := range rc.Chunks {
			if err := enc.Encode(fixtureLine{Conn: i, T: &ch.T, Dir: &ch.Dir, Data: ch.B}); err != nil {
				return err
			}
		}
		if err := enc.Encode(fixtureLine{Conn: i, End: &rc.End}); err != nil {
			return err
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Close()
}

func readRecording(path string) (recording, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var rec recording
	dec := json.NewDecoder(f)
	for n := 1; ; n++ {
		var l fixtureLine
		if err := dec.Decode(&l); err == io.EOF {
			return rec, nil
		} else if err != nil {
			return nil, fmt.Errorf("read %s: line %d: %w", path, n, err)
		}
		switch {
		case l.Client != nil && l.Server != nil && l.Start != nil && l.Conn == len(rec):
			rec = append(rec, recordedConn{Client: *l.Client, Server: *l.Server, Start: *l.Start})
		case l.Conn < 0 || l.Conn >= len(rec):
			return nil, fmt.Errorf("read %s: line %d: connection %d not opened", path, n, l.Conn)
		case l.T != nil && l.Dir != nil:
			rec[l.Conn].Chunks = append(rec[l.Conn].Chunks, chunk{Dir: *l.Dir, T: *l.T, B: l.Data})
		case l.End != nil:
			rec[l.Conn].End = *l.End
		default:
			return nil, fmt.Errorf("read %s: line %d: neither an open, a data nor an end line", path, n)
		}
	}
}
