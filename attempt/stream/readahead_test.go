package stream

import (
	"bytes"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/backoff-audit/audit/internal/spill"
)

// TestReadAhead reads pieces of a spill through readAhead, in runs that
// interleave (as a report reads the flushes' chains), in more runs than
// there are windows, and at random, and finds each piece's bytes, with
// few reads of the spill for the runs.
func TestReadAhead(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	data := make([]byte, 3<<20)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	sp := spill.New(t.TempDir(), 1<<20) // a part in memory, the rest in the file
	defer sp.Close()
	sp.Append(data)
	const piece = 500
	type read struct{ off, n, run int64 }
	var runs []read
	// 20 runs through their own 100 KB of the spill, in step.
	for k := int64(0); k < 200; k++ {
		for r := int64(0); r < 20; r++ {
			runs = append(runs, read{r*150_000 + k*piece, piece, r})
		}
	}
	// 3 000 runs of 1 000 bytes, two pieces each, in step: runs k and
	// k+1024 share a window.
	var many []read
	for k := range int64(2) {
		for r := range int64(3000) {
			many = append(many, read{r*1000 + k*piece, piece, r})
		}
	}
	var random []read
	for range 2000 {
		n := int64(1 + rng.IntN(3000))
		random = append(random, read{rng.Int64N(int64(len(data)) - n), n, rng.Int64N(8)})
	}
	for _, tt := range []struct {
		name  string
		reads []read
		most  int // spill reads
	}{{"runs", runs, 20 * (200*piece/windowLen + 2)}, {"many", many, 2 * 3000}, {"random", random, len(random)}} {
		var reads atomic.Int64
		ra := readAhead{n: 1024, reads: &reads}
		for _, r := range tt.reads {
			buf, err := ra.read(sp, r.off, int(r.n), int(r.run))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf, data[r.off:r.off+r.n]) {
				t.Fatalf("%s: the %d bytes at %d differ", tt.name, r.n, r.off)
			}
		}
		if reads.Load() > int64(tt.most) {
			t.Errorf("%s: %d reads of the spill for %d pieces, want at most %d", tt.name, reads.Load(), len(tt.reads), tt.most)
		}
		t.Logf("%s: %d reads of the spill for %d pieces", tt.name, reads.Load(), len(tt.reads))
	}
}
