package report

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
)

// fitTracker holds one peer per list of gaps (in ms, fractions allowed),
// 10.8.0.1, 10.8.0.2, …; a list with no gaps is a single attempt.
func fitTracker(peers ...[]float64) *attempt.Tracker {
	tr := attempt.NewTracker()
	dst := netip.MustParseAddrPort("127.0.0.1:50052")
	for i, gaps := range peers {
		src := netip.AddrFrom4([4]byte{10, 8, byte((i + 1) >> 8), byte(i + 1)})
		ts := trackStart
		for k, g := range append([]float64{0}, gaps...) {
			ts = ts.Add(msd(g))
			tr.Add(attempt.SYN{Time: ts, Src: netip.AddrPortFrom(src, uint16(40000+k)), Dst: dst, Seq: uint32(i*1000 + k)})
		}
	}
	return tr
}

func TestFitCap(t *testing.T) {
	// The committed real capture, testdata/real-grpc-go.pcap: grpc-go with
	// MaxDelay 2 s. The default cap fails interval 4.
	grpcGo := []float64{1000.994, 1721.653, 2053.211, 1941.031}
	capped2s := []float64{1000, 1600, 1900, 2100, 2000, 1800}
	capped5s := []float64{1000, 1600, 2560, 4096, 4500, 5800, 4100, 5200}
	passing := []float64{1000, 1600, 2560}
	tests := []struct {
		name   string
		policy func(*backoff.Policy)
		peers  [][]float64
		want   int64 // ms
	}{
		{name: "real grpc-go run with a 2 s cap", peers: [][]float64{grpcGo}, want: 2000},
		{name: "two peers at a 2 s cap, passing and too-few peers beside them",
			peers: [][]float64{grpcGo, capped2s, passing, {}}, want: 2000},
		{name: "a 5 s cap, jittered", peers: [][]float64{capped5s}, want: 5000},
		{name: "a steady 1 s fits a 1 s cap", peers: [][]float64{{1000, 1000, 1000}}, want: 1000},
		{name: "no whole second fits: tenths", peers: [][]float64{{1000, 1500, 1450, 1550, 1500}}, want: 1500},
		{name: "nor tenths: whole ms", peers: [][]float64{{1000, 1600, 1316, 2212, 1765}}, want: 1765},
		{name: "the policy's own lower cap", policy: func(p *backoff.Policy) { p.MaxDelay = 10 * time.Second },
			peers: [][]float64{capped2s}, want: 2000},
		{name: "no failing peer", peers: [][]float64{passing, {}}},
		{name: "no peer"},
		{name: "a late interval fits no lower cap", peers: [][]float64{{1000, 1600, 5000}}},
		{name: "a failing interval 1 fits no cap: E1 is never capped", peers: [][]float64{{500, 500, 500}}},
		{name: "zero backoff fits no cap, though 125 ms would pass it", peers: [][]float64{{1000, 0, 0, 0}}},
		{name: "one failing peer that fits none spoils the rest", peers: [][]float64{grpcGo, {1000, 1600, 5000}}},
		{name: "peers at 2 s and 5 s fit no one cap", peers: [][]float64{capped2s, capped5s}},
		// The plateau (1300, 1300) fits 1000–1750 ms, but each of those
		// caps makes interval 2 (2000 ms) late.
		{name: "a cap that fails an earlier interval is not suggested", peers: [][]float64{{1000, 2000, 2500, 1300, 1300}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := backoff.DefaultPolicy()
			if tt.policy != nil {
				tt.policy(&p)
			}
			tr := fitTracker(tt.peers...)
			a := NewAudit(50052, p, backoff.Run{}, tr.Chains(), attempt.CaptureInfo{})
			if got := a.Summary.FitsCapMS; got != tt.want {
				t.Fatalf("FitsCapMS = %d, want %d", got, tt.want)
			}
			if tt.want == 0 {
				return
			}
			// The cap is confirmed: every failing peer passes under it.
			q := p
			q.MaxDelay = time.Duration(tt.want) * time.Millisecond
			for _, c := range tr.Peers() {
				if r := backoff.Verify(p, c.Times()); r.Reference.Verdict == backoff.Failed && !backoff.Verify(q, c.Times()).Passed() {
					t.Errorf("peer %s fails under the cap it is said to fit: %s", c.Peer, backoff.Verify(q, c.Times()).Reason())
				}
			}
		})
	}
}

// TestFitCapReported: the cap is a line after the summary in text, and
// summary.fits_cap_ms in JSON, absent when there is none; Only looks again
// among the peers it keeps.
func TestFitCapReported(t *testing.T) {
	const line = "every failing peer fits a cap of 1.5s; the run's cap may be --max_backoff 1.5s\n"
	tr := fitTracker([]float64{1000, 1500, 1450, 1550, 1500}, []float64{1000, 1600, 2560})
	full := NewAudit(50052, backoff.DefaultPolicy(), backoff.Run{}, tr.Chains(), attempt.CaptureInfo{})
	tests := []struct {
		name string
		a    *Audit
		want int64
	}{
		{name: "every peer", a: full, want: 1500},
		{name: "only the failing peer", a: full.Only(netip.MustParseAddr("10.8.0.1")), want: 1500},
		{name: "only the passing peer", a: full.Only(netip.MustParseAddr("10.8.0.2"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.a.Summary.FitsCapMS; got != tt.want {
				t.Errorf("FitsCapMS = %d, want %d", got, tt.want)
			}
			var text, tables bytes.Buffer
			if err := tt.a.WriteText(&text, false); err != nil {
				t.Fatal(err)
			}
			if err := tt.a.WriteText(&tables, true); err != nil {
				t.Fatal(err)
			}
			for name, out := range map[string]string{"WriteText": text.String(), "WriteText with tables": tables.String()} {
				summary := tt.a.Summary.String() + "\n"
				if tt.want > 0 {
					summary += line
				}
				if !strings.HasSuffix(out, summary) {
					t.Errorf("%s does not end with %q:\n%s", name, summary, out)
				}
			}
			var js bytes.Buffer
			if err := tt.a.WriteJSON(&js); err != nil {
				t.Fatal(err)
			}
			var doc struct {
				Summary map[string]any `json:"summary"`
			}
			if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
				t.Fatal(err)
			}
			got, ok := doc.Summary["fits_cap_ms"]
			switch {
			case tt.want == 0 && ok:
				t.Errorf("summary.fits_cap_ms = %v, want it absent", got)
			case tt.want > 0 && got != float64(tt.want):
				t.Errorf("summary.fits_cap_ms = %v, want %d", got, tt.want)
			}
		})
	}
}

// BenchmarkFitCap: 10 000 failing peers, all at a 2 s cap, every one
// verified again under the candidate.
func BenchmarkFitCap(b *testing.B) {
	peers := make([][]float64, 10000)
	for i := range peers {
		peers[i] = []float64{1000, 1600, 2053, 1941 + float64(i%50), 2000, 1900, 2100, 2000}
	}
	cs := fitTracker(peers...).Chains()
	for b.Loop() {
		if a := NewAudit(50052, backoff.DefaultPolicy(), backoff.Run{}, cs, attempt.CaptureInfo{}); a.Summary.FitsCapMS != 2000 {
			b.Fatalf("FitsCapMS = %d", a.Summary.FitsCapMS)
		}
	}
}
