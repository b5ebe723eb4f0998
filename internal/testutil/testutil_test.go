package testutil

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestClosedPort(t *testing.T) {
	port := ClosedPort(t)
	if port == 0 {
		t.Fatal("ClosedPort returned 0")
	}
	if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
		c.Close()
		t.Errorf("connected to port %d; want refused", port)
	}
}

// WaitFor returns once cond holds, having asked no more than that.
func TestWaitFor(t *testing.T) {
	calls := 0
	WaitFor(t, "the third call", make(chan error, 1), func() bool { calls++; return calls == 3 })
	if calls != 3 {
		t.Errorf("cond called %d times; want 3", calls)
	}
}

// Under -race this also checks that writers and a reader may overlap.
func TestSyncBuffer(t *testing.T) {
	var b SyncBuffer
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				b.Write([]byte("ab"))
				b.WriteString("c")
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if got := b.String(); len(got) != 4*100*3 || strings.Count(got, "c") != 400 {
		t.Errorf("%d bytes, %d c's; want 1200 and 400", len(got), strings.Count(got, "c"))
	}
	bs := b.Bytes()
	bs[0] = 'x'
	if b.String()[0] == 'x' {
		t.Error("Bytes shares the buffer's memory")
	}
}

func TestGoldenUpdate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.golden")
	Golden(t, path, []byte("report\n"), true) // writes the file
	Golden(t, path, []byte("report\n"), false)
}
