package h2_test

import (
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/backoff-audit/audit/h2"
)

// TestNextConnsAsScan holds NextConns.After to a scan of every connection
// (the earliest start at or after the time, the lowest index among equal
// starts), on random connections of few clients, servers and starts, so
// that ties are many.
func TestNextConnsAsScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	at0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for round := range 50 {
		ds := make([]h2.Digest, 1+rng.IntN(60))
		for i := range ds {
			client := netip.AddrFrom4([4]byte{10, 0, 0, byte(rng.IntN(3))})
			ds[i] = h2.Digest{Client: netip.AddrPortFrom(client, uint16(40000+i)),
				Server: netip.AddrPortFrom(netip.MustParseAddr("10.1.0.1"), uint16(50051+rng.IntN(2))),
				Start:  at0.Add(time.Duration(rng.IntN(8)) * time.Second)}
		}
		next := h2.NewNextConns(ds)
		for i := range ds {
			for s := -1; s <= 8; s++ {
				at := at0.Add(time.Duration(s) * time.Second)
				want := -1
				for j, d := range ds {
					if j == i || d.Client.Addr() != ds[i].Client.Addr() || d.Server != ds[i].Server || d.Start.Before(at) {
						continue
					}
					if want < 0 || d.Start.Before(ds[want].Start) {
						want = j
					}
				}
				if got := next.After(i, at); got != want {
					t.Fatalf("round %d: After(%d, +%ds) = %d, want %d", round, i, s, got, want)
				}
			}
		}
	}
}
