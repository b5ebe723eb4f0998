package h2_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/http2"

	"github.com/backoff-audit/audit/h2"
)

// TestRefusedAfterGoAway: the server says GOAWAY with last stream id 1
// while 1, 3 and 5 are open, answers 1, refuses 3, leaves 5; the client
// then opens 7 all the same.
func TestRefusedAfterGoAway(t *testing.T) {
	w := newWire(t).start()
	w.request(1, otherMethod).request(3, otherMethod).request(5, otherMethod)
	w.goAway(1, http2.ErrCodeNo, "max_age")
	w.response(1, "0")
	w.rst(h2.ServerToClient, 3, http2.ErrCodeRefusedStream)
	w.request(7, otherMethod)
	r := w.decode(h2.Limits{})
	if len(r.Warnings) != 0 {
		t.Errorf("warnings %+v", r.Warnings)
	}
	g := h2.GoAways(r)
	if len(g) != 1 || !cmp.Equal(g[0].GoAway.InFlight, []uint32{1, 3, 5}) || g[0].GoAway.Debug != "max_age" || g[0].Age != 8*time.Millisecond {
		t.Fatalf("GOAWAYs %+v: want one, streams 1, 3 and 5 in flight, at age 8 ms (its step: 5 to start, 3 requests)", g)
	}
	got := h2.RefusedAfterGoAway(r)
	var outcomes []string
	var problems []bool
	for _, f := range got {
		outcomes = append(outcomes, f.Text())
		problems = append(problems, f.Problem())
	}
	want := []string{
		"stream 3 (/pkg.Svc/Method) above the GOAWAY's last stream id 1: refused (REFUSED_STREAM), safe to retry",
		"stream 5 (/pkg.Svc/Method) above the GOAWAY's last stream id 1: unanswered",
		"stream 7 (/pkg.Svc/Method) above the GOAWAY's last stream id 1: opened by the client after the GOAWAY",
	}
	if d := cmp.Diff(want, outcomes); d != "" {
		t.Errorf("refusals (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]bool{false, false, true}, problems); d != "" {
		t.Errorf("problems (-want +got):\n%s", d)
	}
	if s := r.Streams[1]; s.State != h2.StateReset || s.Reset == nil || s.Reset.Code != "REFUSED_STREAM" || s.Reset.Dir != h2.ServerToClient {
		t.Errorf("stream 3 %+v: want reset REFUSED_STREAM by the server", s)
	}
	if s := r.Streams[0]; s.State != h2.StateOpen || s.GRPCStatus != "OK" || s.ResponseEnd.IsZero() {
		t.Errorf("stream 1 %+v: want answered OK, still open (the client never ended its side)", s)
	}
}

// TestKeepaliveText holds the keepalive diagnosis to its wording.
func TestKeepaliveText(t *testing.T) {
	w := newWire(t).start()
	for range 3 {
		w.ping(h2.ClientToServer, false, "ka")
		w.ping(h2.ServerToClient, true, "ka")
	}
	w.goAway(0, http2.ErrCodeEnhanceYourCalm, "too_many_pings")
	r := w.decode(h2.Limits{})
	// The steps are 1 ms apart; stretch the PINGs to 10 s.
	n := 0
	for i := range r.Events {
		if e := &r.Events[i]; e.Kind == h2.KindPing || e.Kind == h2.KindPingAck {
			e.Time = testT0.Add(time.Duration(n/2) * 10 * time.Second)
			n++
		} else if e.Kind == h2.KindGoAway {
			e.Time = testT0.Add(25 * time.Second)
		}
	}
	k, ok := h2.TooManyPings(r)
	if !ok {
		t.Fatal("no GOAWAY ENHANCE_YOUR_CALM found")
	}
	if got, want := k.Text(), "keepalive pings every 10 s; the server answered GOAWAY ENHANCE_YOUR_CALM too_many_pings after 3"; got != want {
		t.Errorf("text %q, want %q", got, want)
	}
	if c := h2.PingCadence(r, h2.ClientToServer); c.Count != 3 || c.Min != 10*time.Second || c.Median != 10*time.Second {
		t.Errorf("cadence %+v: want 3 PINGs 10 s apart", c)
	}
}

// TestKeepaliveBDPProbe replays what a grpc-go client and server exchange
// (testdata/h2/keepalive-too-many-pings.pcap): the client's BDP probe as
// the call's response arrives, then a keepalive PING every 10 s, and the
// server's GOAWAY at the third. The probe is not a keepalive PING: the
// server forgave it, and it says nothing of the client's rhythm.
func TestKeepaliveBDPProbe(t *testing.T) {
	bdp := string([]byte{2, 4, 16, 16, 9, 14, 7, 7}) // grpc-go's bdpPing
	w := newWire(t).start()
	w.ping(h2.ServerToClient, false, bdp) // the server's own probe, as the request arrives
	w.ping(h2.ClientToServer, true, bdp)
	w.ping(h2.ClientToServer, false, bdp)
	w.ping(h2.ServerToClient, true, bdp)
	for range 3 {
		w.ping(h2.ClientToServer, false, "")
		w.ping(h2.ServerToClient, true, "")
	}
	w.goAway(0, http2.ErrCodeEnhanceYourCalm, "too_many_pings")
	r := w.decode(h2.Limits{})
	// The steps are 1 ms apart; put the keepalive PINGs 10 s apart, the
	// probes at the start.
	n := 0
	for i := range r.Events {
		switch e := &r.Events[i]; {
		case (e.Kind == h2.KindPing || e.Kind == h2.KindPingAck) && e.Ping == "0000000000000000":
			n++
			e.Time = testT0.Add(time.Duration((n+1)/2) * 10 * time.Second)
		case e.Kind == h2.KindGoAway:
			e.Time = testT0.Add(30*time.Second + time.Millisecond)
		}
	}
	k, ok := h2.TooManyPings(r)
	if !ok {
		t.Fatal("no GOAWAY ENHANCE_YOUR_CALM found")
	}
	if got, want := k.Text(), "keepalive pings every 10 s; the server answered GOAWAY ENHANCE_YOUR_CALM too_many_pings after 3"; got != want {
		t.Errorf("text %q, want %q", got, want)
	}
	want := h2.Cadence{Dir: h2.ClientToServer, Count: 3, First: testT0.Add(10 * time.Second), Min: 10 * time.Second, Median: 10 * time.Second, Probes: 1, Acks: 4}
	if d := cmp.Diff(want, h2.PingCadence(r, h2.ClientToServer)); d != "" {
		t.Errorf("client cadence (-want +got):\n%s", d)
	}
	var texts []string
	for _, f := range h2.Diagnose([]*h2.Report{r}, h2.DiagnoseOptions{}) {
		if f.Kind == h2.FindingPingCadence {
			texts = append(texts, f.Text)
		}
	}
	// The server's lone probe is no rhythm: no finding for it.
	if d := cmp.Diff([]string{"client PINGs: 3, every 10 s (median), at least 10 s apart, besides 1 BDP probe"}, texts); d != "" {
		t.Errorf("cadence findings (-want +got):\n%s", d)
	}
}

// attempt is a stream of a hand-built report.
func attempt(id uint32, method string, prev int, start, end time.Duration, status string) h2.Stream {
	return h2.Stream{ID: id, Method: method, PreviousAttempts: prev, Start: testT0.Add(start), ResponseEnd: testT0.Add(end),
		End: testT0.Add(end), State: h2.StateClosed, GRPCStatus: status}
}

func TestRetryChains(t *testing.T) {
	ms := time.Millisecond
	a := &h2.Report{Client: testClient, Server: testServer, Streams: []h2.Stream{
		// Two RPCs of one method interleaved: each retry follows the
		// attempt that failed most recently before it.
		attempt(1, "/s/A", 0, 0, 10*ms, "UNAVAILABLE"),
		attempt(3, "/s/A", 0, 5*ms, 12*ms, "UNAVAILABLE"),
		attempt(5, "/s/A", 1, 20*ms, 30*ms, "UNAVAILABLE"),
		attempt(7, "/s/A", 1, 22*ms, 25*ms, "OK"),
		// A chain whose first attempts are not in the capture.
		attempt(9, "/s/B", 2, 40*ms, 45*ms, "OK"),
		// A first attempt that succeeded: no chain.
		attempt(11, "/s/C", 0, 50*ms, 51*ms, "OK"),
	}}
	// The RPC's third attempt went to another connection.
	b := &h2.Report{Client: netip.AddrPortFrom(testClient.Addr(), 40001), Server: testServer, Streams: []h2.Stream{
		attempt(1, "/s/A", 2, 60*ms, 70*ms, "UNAVAILABLE"),
	}}
	got := h2.RetryChains(h2.Digests([]*h2.Report{a, b}))
	type brief struct {
		Method  string
		Streams []uint32
		Delays  []time.Duration
		Missing bool
	}
	var gb []brief
	for _, c := range got {
		x := brief{Method: c.Method, Missing: c.Missing}
		for _, at := range c.Attempts {
			x.Streams = append(x.Streams, at.Stream)
			x.Delays = append(x.Delays, at.Delay)
		}
		gb = append(gb, x)
	}
	want := []brief{
		// 5 (at 20 ms) follows 3 (ended at 12 ms), the latest failure;
		// 7 (at 22 ms) then takes 1; the third attempt continues 5's chain.
		{Method: "/s/A", Streams: []uint32{1, 7}, Delays: []time.Duration{0, 12 * ms}},
		{Method: "/s/A", Streams: []uint32{3, 5, 1}, Delays: []time.Duration{0, 8 * ms, 30 * ms}},
		{Method: "/s/B", Streams: []uint32{9}, Delays: []time.Duration{0}, Missing: true},
	}
	if d := cmp.Diff(want, gb); d != "" {
		t.Errorf("chains (-want +got):\n%s", d)
	}
	if got, want := got[2].Text(), "/s/B from 127.0.0.1: 1 attempt (OK), the first 2 attempts not captured"; got != want {
		t.Errorf("text %q, want %q", got, want)
	}
}

func TestCheckRetries(t *testing.T) {
	ms := time.Millisecond
	p := h2.RetryPolicy{MaxAttempts: 4, InitialBackoff: 100 * ms, MaxBackoff: 300 * ms, BackoffMultiplier: 2}
	chain := func(delays ...time.Duration) h2.RetryChain {
		c := h2.RetryChain{Method: "/s/A", Attempts: []h2.Attempt{{Number: 1}}}
		for i, d := range delays {
			c.Attempts = append(c.Attempts, h2.Attempt{Number: i + 2, Delay: d})
		}
		return c
	}
	tests := []struct {
		name             string
		chain            h2.RetryChain
		backoffs         []time.Duration
		random, jittered []bool
		tooMany          []int
	}{{
		name:     "grpc-go's jitter: b·U(0.8, 1.2)",
		chain:    chain(110*ms, 170*ms, 330*ms),
		backoffs: []time.Duration{100 * ms, 200 * ms, 300 * ms},
		random:   []bool{false, true, false},
		jittered: []bool{true, true, true},
	}, {
		name:     "A6 as first published: U(0, b)",
		chain:    chain(10*ms, 50*ms, 299*ms),
		backoffs: []time.Duration{100 * ms, 200 * ms, 300 * ms},
		random:   []bool{true, true, true},
		jittered: []bool{false, false, true},
	}, {
		name:     "tolerance",
		chain:    chain(124*ms, 76*ms),
		backoffs: []time.Duration{100 * ms, 200 * ms},
		random:   []bool{false, true},
		jittered: []bool{true, false},
	}, {
		name:     "beyond maxAttempts, capped at 5 by the client",
		chain:    chain(100*ms, 200*ms, 300*ms, 300*ms, 300*ms),
		backoffs: []time.Duration{100 * ms, 200 * ms, 300 * ms, 300 * ms, 300 * ms},
		random:   []bool{true, true, true, true, true},
		jittered: []bool{true, true, true, true, true},
		tooMany:  []int{5, 6},
	}, {
		name: "pushback sets the delay and resets the backoff",
		chain: func() h2.RetryChain {
			c := chain(100*ms, 500*ms, 100*ms)
			c.Attempts[1].Pushback = "500"
			return c
		}(),
		backoffs: []time.Duration{100 * ms, 500 * ms, 100 * ms},
		random:   []bool{true, true, true},
		jittered: []bool{true, true, true},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chk := h2.CheckRetries(tt.chain, p, 5*ms)
			var b []time.Duration
			var r, j []bool
			for _, d := range chk.Delays {
				b, r, j = append(b, d.Backoff), append(r, d.InRandom), append(j, d.InJittered)
			}
			if d := cmp.Diff(tt.backoffs, b); d != "" {
				t.Errorf("backoffs (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tt.random, r); d != "" {
				t.Errorf("within [0, b] (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tt.jittered, j); d != "" {
				t.Errorf("within [0.8·b, 1.2·b] (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tt.tooMany, chk.TooMany); d != "" {
				t.Errorf("beyond maxAttempts (-want +got):\n%s", d)
			}
		})
	}
	chk := h2.CheckRetries(chain(110*ms, 170*ms), p, 5*ms)
	if got, want := chk.Text(), "delays 110 ms (b 100 ms), 170 ms (b 200 ms): within b·U(0.8, 1.2) (A6 as revised), outside U(0, b) (A6 as first published) before attempt 2"; got != want {
		t.Errorf("text %q\nwant %q", got, want)
	}
}

// TestDiagnoseDamaged: damage and TLS are findings of their own.
func TestDiagnoseDamaged(t *testing.T) {
	tls := h2.NewConn(testClient, testServer, h2.Options{})
	tls.Feed(h2.ClientToServer, testT0, []byte{0x16, 3, 1})
	cut := h2.NewConn(testClient, testServer, h2.Options{})
	cut.Gap(h2.ClientToServer, testT0, 10)
	var kinds []string
	for _, f := range h2.Diagnose([]*h2.Report{tls.Report(), cut.Report()}, h2.DiagnoseOptions{}) {
		kinds = append(kinds, f.Kind)
	}
	if d := cmp.Diff([]string{h2.FindingEncrypted, h2.FindingDamaged}, kinds); d != "" {
		t.Errorf("findings (-want +got):\n%s", d)
	}
}
