package spill

import (
	"bytes"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSpill appends pieces of every size across the memory bound and the
// file's buffer, and reads back every piece and ranges across them.
func TestSpill(t *testing.T) {
	tests := []struct {
		name   string
		memMax int64
		sizes  []int // of the pieces appended
	}{
		{"memory only", 1 << 30, []int{1, 10, 100, blockSize + 3, 7}},
		{"file only", 0, []int{5, blockSize - 5, 1, blockSize, 2*blockSize + 1, 3}},
		{"across the bound", 100, []int{60, 60, blockSize, 1, blockSize - 1, 17}},
		{"bound inside a block", blockSize + 10, []int{blockSize, 20, blockSize, 0, 9}},
		{"nothing", 10, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := New(dir, tt.memMax)
			defer s.Close()
			r := rand.New(rand.NewPCG(1, uint64(len(tt.sizes))))
			var want []byte
			var offs []int64
			for _, n := range tt.sizes {
				b := make([]byte, n)
				for i := range b {
					b[i] = byte(r.Uint32())
				}
				offs = append(offs, s.Append(b))
				want = append(want, b...)
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
			if s.Len() != int64(len(want)) {
				t.Fatalf("Len %d, want %d", s.Len(), len(want))
			}
			if entries, _ := os.ReadDir(dir); len(entries) > 0 {
				t.Errorf("the spill's file is in %s: %v; it should be unlinked", dir, entries)
			}
			var off int64
			for i, n := range tt.sizes {
				if offs[i] != off {
					t.Errorf("piece %d at %d, want %d", i, offs[i], off)
				}
				got := make([]byte, n)
				if _, err := s.ReadAt(got, off); err != nil {
					t.Fatalf("piece %d: %v", i, err)
				}
				if !bytes.Equal(got, want[off:off+int64(n)]) {
					t.Errorf("piece %d differs", i)
				}
				off += int64(n)
			}
			all := make([]byte, len(want))
			if _, err := s.ReadAt(all, 0); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(all, want) {
				t.Error("the whole spill differs")
			}
			if _, err := s.ReadAt(make([]byte, 2), s.Len()-1); err == nil {
				t.Error("a read past the end succeeded")
			}
		})
	}
}

// TestSpillNoDir: a spill whose file cannot be made says so, naming the
// folder, and keeps what it holds in memory.
func TestSpillNoDir(t *testing.T) {
	dir := t.TempDir() + "/missing"
	s := New(dir, 4)
	defer s.Close()
	s.Append([]byte("abcd"))
	s.Append(make([]byte, blockSize))
	err := s.Err()
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte(dir)) {
		t.Fatalf("Err() = %v, want an error naming %s", err, dir)
	}
	got := make([]byte, 4)
	if _, err := s.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("abcd", string(got)); diff != "" {
		t.Errorf("memory part (-want +got):\n%s", diff)
	}
	if _, err := s.ReadAt(got, 10); err == nil {
		t.Error("a read of lost bytes succeeded")
	}
}
