package h2_test

import (
	"testing"
	"time"

	"github.com/backoff-audit/audit/h2"
)

// TestMemoryBounded runs 20 000 RPCs and a long DATA stream through one
// Conn: the decoding state held stays that of the open streams and one
// frame per direction, and the report keeps Limits.MaxStreams streams.
func TestMemoryBounded(t *testing.T) {
	const rpcs, keep = 20000, 100
	c := h2.NewConn(testClient, testServer, h2.Options{Start: testT0, Limits: h2.Limits{MaxStreams: keep}})
	newWire(t).start().feed(c)
	w := newWire(t)
	// One wire for every RPC, so that its HPACK encoders, like a real
	// peer's, carry their dynamic tables from one request to the next.
	payload := make([]byte, 4096)
	for i := range rpcs {
		id := uint32(2*i + 1)
		w.steps = w.steps[:0]
		w.request(id, otherMethod).data(h2.ClientToServer, id, true, msg(payload, false))
		w.response(id, "0", msg(payload, false))
		w.feed(c)
		if n := c.OpenStreams(); n != 0 {
			t.Fatalf("after RPC %d, %d streams open, want 0", i, n)
		}
	}
	// One stream of 4 MiB in frames of 16 KiB, fed in segments of 1448
	// bytes, as TCP over Ethernet carries them.
	id := uint32(2*rpcs + 1)
	w.steps = w.steps[:0]
	w.request(id, otherMethod)
	for range 256 {
		w.data(h2.ServerToClient, id, false, make([]byte, 16384))
	}
	client, server := w.streams()
	c.Feed(h2.ClientToServer, testT0, client)
	for len(server) > 0 {
		n := min(1448, len(server))
		c.Feed(h2.ServerToClient, testT0, server[:n])
		server = server[n:]
		if b := c.Buffered(); b > 4*(16384+9) {
			t.Fatalf("%d bytes buffered, want at most a frame's (and append's slack)", b)
		}
	}
	if n := c.OpenStreams(); n != 1 {
		t.Errorf("%d streams open, want the long one", n)
	}
	c.End(testT0.Add(time.Hour))
	r := c.Report()
	if len(r.Streams) != keep || r.Dropped.Streams != rpcs+1-keep {
		t.Errorf("%d streams kept, %d dropped; want %d and %d", len(r.Streams), r.Dropped.Streams, keep, rpcs+1-keep)
	}
	if len(r.Warnings) != 0 {
		t.Errorf("warnings %+v", r.Warnings)
	}
	if s := r.Streams[keep-1]; s.State != h2.StateClosed || s.RequestMessages != 1 || s.ResponseMessages != 1 || s.GRPCStatus != "OK" {
		t.Errorf("last stream kept %+v", s)
	}
}
