//go:build linux

package capture

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/backoff-audit/audit/analyze"
)

// readPath reads a file as ReadFile does, with the given window, mapping
// it when it has at least mapMin bytes.
func readPath(path string, window int, mapMin int64) readResult {
	var r readResult
	st, err := readFile(path, Options{}, func(s analyze.SYN) { r.SYNs = append(r.SYNs, summarize(s)) }, window, mapMin)
	r.St = st
	if err != nil {
		r.Err = err.Error()
	}
	return r
}

// TestMappedReadMatches reads every fixture and corpus file mapped, in
// one-page windows so that records straddle windows everywhere, and
// requires exactly what reading it with read(2) gives.
func TestMappedReadMatches(t *testing.T) {
	paths, _ := filepath.Glob("../testdata/*.pcap*")
	if dir, err := corpusPath(); err == nil {
		for _, f := range corpusFiles(t, dir) {
			paths = append(paths, filepath.Join(dir, f))
		}
	} else {
		t.Logf("corpus not found (%v): fixtures only", err)
	}
	if len(paths) < 10 {
		t.Fatalf("only %d files to read", len(paths))
	}
	mapped := 0
	for _, path := range paths {
		before := mapsOpened.Load()
		got := readPath(path, 1, 1)
		if mapsOpened.Load() > before {
			mapped++
		}
		want := readPath(path, mapWindow, 1<<62)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: mapped read differs (-read +mapped):\n%s", path, diff)
		}
	}
	// Every file but the compressed and empty ones is mapped.
	gz := 0
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil && fi.Size() == 0 || strings.HasSuffix(p, ".gz") || isGzip(p) {
			gz++
		}
	}
	if mapped != len(paths)-gz {
		t.Errorf("%d of %d files were mapped, want %d", mapped, len(paths), len(paths)-gz)
	}
}

func isGzip(path string) bool {
	b, err := os.ReadFile(path)
	return err == nil && len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b
}

// TestMappedFileShrinks truncates a mapped file under the reader: the
// read ends with an error naming the file and offset, not with SIGBUS.
func TestMappedFileShrinks(t *testing.T) {
	frame := ethFrame(0x0800, ipv4Packet("10.0.0.1", "10.0.0.2", 6, synSeg(1, 2, 3)))
	recs := make([]pcapRecord, 2000)
	for i := range recs {
		recs[i] = pcapRecord{sec: uint32(i), data: frame}
	}
	path := filepath.Join(t.TempDir(), "shrinks.pcap")
	if err := os.WriteFile(path, pcapFile(binary.LittleEndian, false, 1, recs...), 0o644); err != nil {
		t.Fatal(err)
	}
	syns := 0
	st, err := readFile(path, Options{}, func(analyze.SYN) {
		if syns++; syns == 1 {
			if err := os.Truncate(path, 100); err != nil {
				t.Fatal(err)
			}
		}
	}, 4096, 1)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "shrank") {
		t.Fatalf("err = %v, want the file shrank, naming %s", err, path)
	}
	if syns == 0 || syns >= len(recs) || st.Packets == 0 {
		t.Fatalf("%d SYNs, %d packets before the fault; want some, not all %d", syns, st.Packets, len(recs))
	}
	t.Logf("%v after %d SYNs", err, syns)
}
