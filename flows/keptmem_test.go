package flows_test

import (
	"path/filepath"
	"runtime"
	"testing"

	"github.com/backoff-audit/audit/flows"
	"github.com/backoff-audit/audit/flows/internal/benchcap"
)

// TestAuditKeepsLittle: `audit h2` keeps of each connection, once it
// ended, its timeline's few words and digest, not its report. 20 000
// connections of one RPC each leave the report under 400 bytes a
// connection on the heap (a connection's report alone was about 600).
func TestAuditKeepsLittle(t *testing.T) {
	const conns = 20000
	path := filepath.Join(t.TempDir(), "h2.pcap")
	if _, err := benchcap.Write(path, benchcap.Config{Bytes: 1, Conns: conns, Concurrent: 64}); err != nil {
		t.Fatal(err)
	}
	before := heap()
	rep, err := flows.Audit([]string{path}, flows.AuditOptions{Format: "json"})
	if err != nil {
		t.Fatal(err)
	}
	if n := rep.Connections.Len(); n != conns {
		t.Fatalf("%d connections, want %d", n, conns)
	}
	per := (int64(heap()) - int64(before)) / conns
	runtime.KeepAlive(rep)
	if per > 400 {
		t.Errorf("the report holds %d bytes a connection on the heap, want at most 400", per)
	}
	t.Logf("%d bytes a connection", per)
}

func heap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
