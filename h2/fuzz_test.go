package h2_test

import (
	"encoding/json"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/backoff-audit/audit/h2"
)

// cutsOf encodes a recorded connection's chunks as FuzzConn's cuts.
func cutsOf(rc recordedConn) (client, server, cuts []byte) {
	for _, ch := range rc.Chunks {
		if ch.Dir == h2.ClientToServer {
			client = append(client, ch.B...)
		} else {
			server = append(server, ch.B...)
		}
		for n := len(ch.B); n > 0; n -= min(n, 126) {
			cuts = append(cuts, byte(min(n, 126)-1)<<1|byte(ch.Dir))
		}
	}
	return client, server, cuts
}

// FuzzConn feeds arbitrary bytes to a Conn in both directions, cut at
// arbitrary points: each byte of cuts feeds the next (b>>1)+1 bytes of
// direction b&1, or, when b>>1 is 127, says 3 bytes of it were lost.
// preface puts the HTTP/2 preface before the client's bytes, so that the
// fuzzer reaches the frames. Nothing may panic, every byte must be
// counted, and the report must marshal and diagnose.
func FuzzConn(f *testing.F) {
	for _, fx := range fixtures {
		rec, err := readRecording(fixturePath(fx.name))
		if err != nil {
			f.Fatal(err)
		}
		for _, rc := range rec {
			client, server, cuts := cutsOf(rc)
			f.Add(client, server, cuts, false)
		}
	}
	w := newWire(f).start()
	w.request(1, startMethod, "grpc-encoding", "gzip", "grpc-timeout", "1S").data(h2.ClientToServer, 1, true, msg(gzipped(f, []byte{8, 100}), true))
	w.response(1, "14", msg(nil, false)).goAway(1, http2.ErrCodeEnhanceYourCalm, "too_many_pings").rst(h2.ServerToClient, 3, http2.ErrCodeRefusedStream)
	client, server := w.streams()
	f.Add(client, server, []byte{}, false)
	f.Add(client[len(http2.ClientPreface):], server, []byte{0x11, 0x10, 0xfe, 0x21}, true)
	f.Add([]byte{}, []byte{}, []byte{}, true)

	f.Fuzz(func(t *testing.T, client, server, cuts []byte, preface bool) {
		if preface {
			client = append([]byte(http2.ClientPreface), client...)
		}
		c := h2.NewConn(testClient, testServer, h2.Options{Start: testT0})
		src := [2][]byte{client, server}
		var fed [2]int64
		tm := testT0
		for _, b := range cuts {
			dir := h2.Direction(b & 1)
			tm = tm.Add(time.Millisecond)
			if b>>1 == 127 {
				c.Gap(dir, tm, 3)
				fed[dir] += 3
				continue
			}
			n := min(int(b>>1)+1, len(src[dir]))
			c.Feed(dir, tm, src[dir][:n])
			src[dir] = src[dir][n:]
			fed[dir] += int64(n)
		}
		for dir, rest := range src {
			c.Feed(h2.Direction(dir), tm, rest)
			fed[dir] += int64(len(rest))
		}
		c.End(tm)
		r := c.Report()
		if r.ClientBytes != fed[0] || r.ServerBytes != fed[1] {
			t.Errorf("bytes counted %d, %d; fed %d, %d", r.ClientBytes, r.ServerBytes, fed[0], fed[1])
		}
		for _, s := range r.Streams {
			if s.State != h2.StateOpen && s.State != h2.StateClosed && s.State != h2.StateReset {
				t.Errorf("stream %d in state %q", s.ID, s.State)
			}
		}
		if _, err := json.Marshal(r); err != nil {
			t.Errorf("marshal: %v", err)
		}
		p := h2.RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond, BackoffMultiplier: 2}
		h2.Diagnose([]*h2.Report{r, r}, h2.DiagnoseOptions{Retry: &p})
	})
}
