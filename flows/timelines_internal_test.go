package flows

import (
	"math/rand/v2"
	"testing"
)

// TestPermuteBlocks moves values kept in blocks, across block boundaries,
// by random permutations, and finds each where it was sent.
func TestPermuteBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 2, blockLen - 1, blockLen, 2*blockLen + 7} {
		var l blocks[int]
		for i := range n {
			l.add(i)
		}
		to := make([]int32, n)
		for i, j := range rng.Perm(n) {
			to[i] = int32(j)
		}
		permute(to, func(i, j int) { *l.at(i), *l.at(j) = *l.at(j), *l.at(i) })
		if l.len() != n {
			t.Fatalf("n %d: len %d", n, l.len())
		}
		for i := range n {
			if got := *l.at(int(to[i])); got != i {
				t.Fatalf("n %d: at %d holds %d, want %d", n, to[i], got, i)
			}
		}
	}
}
