//go:build unix

package arena

import "syscall"

// alloc returns n bytes of zeroed memory the Go heap does not hold: the
// collector neither scans it nor counts it when it paces itself, so a
// capture's millions of records do not make the heap grow by as much
// again before the next collection.
func alloc(n int) []byte {
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		panic("arena: out of memory: " + err.Error())
	}
	if n >= hugeMin {
		// Large pages where the system gives them: a page fault and a
		// TLB entry for 2 MiB rather than 4 KiB, where records are read
		// at random.
		syscall.Madvise(b, madvHugePage)
	}
	return b
}

const (
	hugeMin      = 4 << 20
	madvHugePage = 14 // MADV_HUGEPAGE
)

// release returns b, from alloc, to the system.
func release(b []byte) { syscall.Munmap(b) }
