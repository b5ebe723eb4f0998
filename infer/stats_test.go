package infer

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestMedianInterval holds the selection to what a sort gives, on lengths
// odd and even, with ties.
func TestMedianInterval(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for n := 1; n <= 200; n++ {
		v := make([]float64, n)
		for i := range v {
			v[i] = float64(r.IntN(max(n/3, 1)))
		}
		sorted := slices.Sorted(slices.Values(v))
		wantMid := sorted[n/2]
		if n%2 == 0 {
			wantMid = (sorted[n/2-1] + sorted[n/2]) / 2
		}
		l, h := medianRanks(n)
		mid, lo, hi := medianInterval(v)
		if mid != wantMid || lo != sorted[l-1] || hi != sorted[h-1] {
			t.Fatalf("n=%d: got %v [%v, %v], want %v [%v, %v]", n, mid, lo, hi, wantMid, sorted[l-1], sorted[h-1])
		}
	}
}
