package watch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/metrics"
)

var (
	t0     = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	server = netip.MustParseAddrPort("127.0.0.1:50052")
)

// input is one made-up packet, or a Tick.
type input struct {
	at   time.Duration // from t0
	peer string        // client address
	// syn: a SYN from peer's port sport with ISN seq; refused: then an
	// RST answers it; settings: then the server accepts it and sends
	// HTTP/2 SETTINGS; tick: no packet, Tick(at).
	sport          uint16
	seq            uint32
	refused, retx  bool
	settings, tick bool
}

// chain is n attempts from peer, refused, at the offsets given, each a
// new source port.
func chain(peer string, sport uint16, offsets ...time.Duration) []input {
	var in []input
	for i, at := range offsets {
		in = append(in, input{at: at, peer: peer, sport: sport + uint16(i), seq: 1000 + uint32(i), refused: true})
	}
	return in
}

func ms(v ...float64) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, f := range v {
		out[i] = time.Duration(f * float64(time.Millisecond))
	}
	return out
}

func feed(w *Watch, in []input) {
	for _, x := range in {
		at := t0.Add(x.at)
		if x.tick {
			w.Tick(at)
			continue
		}
		src := netip.AddrPortFrom(netip.MustParseAddr(x.peer), x.sport)
		w.AddSYN(attempt.SYN{Time: at, Src: src, Dst: server, Seq: x.seq})
		switch {
		case x.refused:
			w.AddSegment(&attempt.Segment{Time: at.Add(50 * time.Microsecond), Src: server, Dst: src, Ack: x.seq + 1, Flags: 0x14})
		case x.settings:
			w.AddSegment(&attempt.Segment{Time: at.Add(50 * time.Microsecond), Src: server, Dst: src, Seq: 7, Ack: x.seq + 1, Flags: 0x12})
			w.AddSegment(&attempt.Segment{Time: at.Add(300 * time.Microsecond), Src: server, Dst: src, Seq: 8, Ack: x.seq + 1, Flags: 0x18, Sent: backoff.PayloadH2Settings})
		}
	}
}

// line is what a test holds an event to.
type line struct {
	Event, Peer, End, Verdict, Name string
	Attempts, K, Count              int
}

func linesOf(t *testing.T, out []byte) ([]line, Summary) {
	t.Helper()
	var got []line
	var sum Summary
	for _, l := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		var e Event
		if err := json.Unmarshal(l, &e); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		g := line{Event: e.Event, End: e.End}
		if e.Peer != nil {
			g.Peer = e.Peer.String()
		}
		switch {
		case e.Chain != nil:
			g.Verdict, g.Attempts = string(e.Chain.Verdict), len(e.Chain.Attempts)
		case e.Signature != nil:
			g.Name = e.Signature.Name
		case e.Wave != nil:
			g.K, g.Count = e.Wave.K, e.Wave.Count
		case e.Summary != nil:
			sum = *e.Summary
			continue
		}
		got = append(got, g)
	}
	return got, sum
}

func TestWatch(t *testing.T) {
	herd := func(n int) []input {
		var in []input
		for i := range n {
			in = append(in, chain(fmt.Sprintf("127.0.9.%d", i+1), 40000, ms(float64(i*3), 1000+float64(i*3))...)...)
		}
		return in
	}
	tests := []struct {
		name     string
		cfg      Config
		in       []input
		endAt    time.Duration
		want     []line
		wantSum  Counts
		wantText string // a line the text output holds
	}{
		{
			name:    "a chain that follows the spec, judged once its client stopped",
			in:      append(chain("127.0.0.1", 40000, ms(0, 1000, 2600, 5160)...), input{at: 30 * time.Second, tick: true}),
			endAt:   40 * time.Second,
			wantSum: Counts{Attempts: 4, Chains: 1, Passed: 1, Forgotten: 1},
		},
		{
			name:     "a chain that comes back too soon fails when it stops",
			in:       append(chain("127.0.0.1", 40000, ms(0, 1000, 2600, 4100)...), input{at: 30 * time.Second, tick: true}),
			endAt:    40 * time.Second,
			want:     []line{{Event: EventFailedChain, Peer: "127.0.0.1", End: "stopped retrying", Verdict: "failed", Attempts: 4}},
			wantSum:  Counts{Attempts: 4, Chains: 1, Failed: 1, Forgotten: 1},
			wantText: "peer 127.0.0.1: failed chain of 4 attempts from 2026-12-01T12:00:00.000000000Z (ended by stopped retrying): interval 3: 1500 ms is early (expected 2560 ms, window 1948–3172 ms); strict: failed",
		},
		{
			name: "a chain whose last SYN nobody answers is judged once its client stopped, not at the run's end",
			in: func() []input {
				in := chain("127.0.0.1", 40000, ms(0, 1000, 2600, 4100)...)
				for i := range in {
					in[i].refused = false
				}
				return append(in, input{at: 30 * time.Second, tick: true})
			}(),
			endAt:   40 * time.Second,
			want:    []line{{Event: EventFailedChain, Peer: "127.0.0.1", End: "stopped retrying", Verdict: "failed", Attempts: 4}},
			wantSum: Counts{Attempts: 4, Chains: 1, Failed: 1, Forgotten: 1},
		},
		{
			name:    "the run's end judges an open chain",
			in:      chain("::1", 40000, ms(0, 1000, 2000)...),
			endAt:   3 * time.Second,
			want:    []line{{Event: EventFailedChain, Peer: "::1", End: "run end", Verdict: "failed", Attempts: 3}},
			wantSum: Counts{Attempts: 3, Chains: 1, Failed: 1},
		},
		{
			name: "a success ends the chain; a connection alone is no chain",
			in: append(chain("127.0.0.1", 40000, ms(0, 1000)...),
				input{at: 2600 * time.Millisecond, peer: "127.0.0.1", sport: 40002, seq: 5, settings: true},
				input{at: 3 * time.Second, tick: true},
				input{at: 60 * time.Second, peer: "127.0.0.1", sport: 40003, seq: 6, settings: true}),
			endAt:   61 * time.Second,
			wantSum: Counts{Attempts: 4, Chains: 1, Passed: 1, Connections: 1},
		},
		{
			name: "a tight loop of successes",
			in: func() []input {
				var in []input
				for i := range 8 {
					in = append(in, input{at: time.Duration(i) * 5 * time.Millisecond, peer: "127.0.0.1", sport: uint16(40000 + i), seq: uint32(i + 1), settings: true})
				}
				return append(in, input{at: time.Second, tick: true})
			}(),
			endAt:   2 * time.Second,
			want:    []line{{Event: EventTightLoop, Peer: "127.0.0.1"}},
			wantSum: Counts{Attempts: 8, Connections: 8, TightLoops: 1},
		},
		{
			name:    "a herd of first attempts, then of second ones",
			in:      herd(12),
			endAt:   3 * time.Second,
			want:    []line{{Event: EventHerdWave, K: 0, Count: 12}, {Event: EventHerdWave, K: 1, Count: 12}},
			wantSum: Counts{Attempts: 24, Chains: 12, Passed: 12, Waves: 2},
		},
		{
			name:    "a chain over the cap is judged on what it kept, its later attempts counted",
			cfg:     Config{MaxChain: 3},
			in:      append(chain("127.0.0.1", 40000, ms(0, 10, 20, 30, 40)...), input{at: 30 * time.Second, tick: true}),
			endAt:   31 * time.Second,
			want:    []line{{Event: EventFailedChain, Peer: "127.0.0.1", End: "attempt cap", Verdict: "failed", Attempts: 3}},
			wantSum: Counts{Attempts: 5, Chains: 1, Failed: 1, Dropped: 2, Forgotten: 1},
		},
		{
			name:    "peers over the cap are counted",
			cfg:     Config{MaxPeers: 1},
			in:      append(chain("127.0.0.1", 40000, ms(0, 1000)...), chain("127.0.0.2", 40000, ms(0, 1000)...)...),
			endAt:   2 * time.Second,
			wantSum: Counts{Attempts: 4, Chains: 1, Passed: 1, Untracked: 2},
		},
		{
			name: "a retransmitted SYN is counted, never an attempt",
			in: []input{{at: 0, peer: "127.0.0.1", sport: 40000, seq: 1}, {at: time.Second, peer: "127.0.0.1", sport: 40000, seq: 1},
				{at: 3 * time.Second, peer: "127.0.0.1", sport: 40000, seq: 1}},
			endAt:   4 * time.Second,
			wantSum: Counts{Attempts: 1, Retransmits: 2, Chains: 1, TooFew: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.Policy, cfg.FatesKnown = backoff.DefaultPolicy(), true
			for _, asJSON := range []bool{true, false} {
				cfg.JSON = asJSON
				var out bytes.Buffer
				w := New(cfg, &out)
				feed(w, tt.in)
				sum, err := w.Close(t0.Add(tt.endAt))
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tt.wantSum, sum.Counts); diff != "" {
					t.Errorf("summary (-want +got):\n%s", diff)
				}
				if len(sum.Ports) != 1 || sum.Ports[0].Port != server.Port() {
					t.Fatalf("summary ports %+v; want %d alone", sum.Ports, server.Port())
				}
				if diff := cmp.Diff(sum.Counts, sum.Ports[0].Counts); diff != "" {
					t.Errorf("the port's counts against the whole (-whole +port):\n%s", diff)
				}
				if !asJSON {
					if tt.wantText != "" && !strings.Contains(out.String(), tt.wantText+"\n") {
						t.Errorf("text lacks %q:\n%s", tt.wantText, out.String())
					}
					continue
				}
				got, jsum := linesOf(t, out.Bytes())
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("lines (-want +got):\n%s\n%s", diff, out.String())
				}
				if diff := cmp.Diff(sum, jsum); diff != "" {
					t.Errorf("JSON summary (-returned +written):\n%s", diff)
				}
			}
		})
	}
}

// TestWatchBounded: a flood of attempts from many peers (their first
// waveKs attempts each a herd wave) keeps what a
// Watch holds bounded by the peers retrying and the caps, and a Tick past
// their windows frees it all.
func TestWatchBounded(t *testing.T) {
	const peers, perPeer = 300, 1000
	w := New(Config{Policy: backoff.DefaultPolicy(), FatesKnown: true, MaxChain: 64}, io.Discard)
	most := 0
	for i := range peers * perPeer {
		at := t0.Add(time.Duration(i) * 10 * time.Microsecond)
		src := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 1, byte(i % peers / 256), byte(i % peers)}), uint16(1024+i/peers))
		w.AddSYN(attempt.SYN{Time: at, Src: src, Dst: server, Seq: uint32(i)})
		w.AddSegment(&attempt.Segment{Time: at, Src: server, Dst: src, Ack: uint32(i) + 1, Flags: 0x14})
		if i%5000 == 0 {
			w.Tick(at)
			most = max(most, w.tr.Attempts())
			if n := w.tr.Attempts(); n > 2*w.held+compactMin {
				t.Fatalf("after %d SYNs the tracker holds %d attempts, %d held in chains", i+1, n, w.held)
			}
		}
	}
	if w.held > peers*64 || len(w.peers) != peers {
		t.Errorf("%d attempts held by %d peers; want at most %d by %d", w.held, len(w.peers), peers*64, peers)
	}
	end := t0.Add(10 * time.Minute)
	w.Tick(end)
	if w.held != 0 || len(w.peers) != 0 {
		t.Errorf("after every window: %d attempts held by %d peers; want none", w.held, len(w.peers))
	}
	sum, _ := w.Close(end)
	want := Counts{Attempts: peers * perPeer, Chains: peers, Failed: peers, Signatures: sum.Signatures,
		Dropped: peers * (perPeer - 64), Forgotten: peers, Waves: waveKs}
	if diff := cmp.Diff(want, sum.Counts); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
	t.Logf("the tracker held at most %d attempts, over %d compactions", most, sum.Compactions)
}

// TestWatchMetrics: the series a Watch keeps say what its summary says.
func TestWatchMetrics(t *testing.T) {
	m := metrics.New()
	w := New(Config{Policy: backoff.DefaultPolicy(), FatesKnown: true, Metrics: m}, io.Discard)
	w.Watch(server.Port())
	var in []input
	for i := range 8 {
		in = append(in, input{at: time.Duration(i) * 5 * time.Millisecond, peer: "127.0.0.2", sport: uint16(40000 + i), seq: uint32(i + 1), settings: true})
	}
	in = append(in, chain("127.0.0.1", 41000, ms(0, 1000, 2600, 4100)...)...)
	feed(w, append(in, input{at: time.Second, tick: true}))
	if _, err := w.Close(t0.Add(40 * time.Second)); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	got := map[string]bool{}
	for _, l := range strings.Split(rec.Body.String(), "\n") {
		if strings.HasPrefix(l, "audit_") && !strings.HasSuffix(l, " 0") {
			got[l] = true
		}
	}
	want := map[string]bool{
		`audit_attempts_total{port="50052"} 12`:                                      true,
		`audit_attempt_fates_total{fate="open at end",port="50052"} 8`:               true,
		`audit_attempt_fates_total{fate="refused",port="50052"} 4`:                   true,
		`audit_chains_total{end="stopped retrying",port="50052",verdict="failed"} 1`: true,
		`audit_intervals_total{port="50052",verdict="ok"} 2`:                         true,
		`audit_intervals_total{port="50052",verdict="early"} 1`:                      true,
		`audit_intervals_total{port="50052",verdict="reset"} 7`:                      true,
		`audit_peers_forgotten_total{port="50052"} 1`:                                true,
	}
	for l := range got {
		if strings.HasPrefix(l, "audit_chain_signatures_total") {
			delete(got, l) // backoff's to say
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("series (-want +got):\n%s", diff)
	}
}
