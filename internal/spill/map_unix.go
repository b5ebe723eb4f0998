//go:build unix

package spill

import (
	"os"
	"syscall"
)

// mapFile maps the first n bytes of f read-only; nil when it cannot.
func mapFile(f *os.File, n int64) []byte {
	if n <= 0 || int64(int(n)) != n {
		return nil
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, int(n), syscall.PROT_READ, syscall.MAP_SHARED|mapPopulate)
	if err != nil {
		return nil
	}
	return b
}

func unmap(b []byte) { syscall.Munmap(b) }
