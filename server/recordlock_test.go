package server

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A record file is locked while a server appends to it: a second opening,
// by the same path or a link to it, fails naming the file and the holder's
// pid; once the first is closed it opens again. A device is never locked.
func TestRecordLock(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "run.jsonl")
	link := filepath.Join(dir, "link.jsonl")
	if err := os.Symlink("run.jsonl", link); err != nil {
		t.Fatal(err)
	}
	first, err := OpenRecord(rec, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{rec, link} {
		_, err := OpenRecord(path, slog.Default())
		want := fmt.Sprintf("record file %s is locked by process %d", path, os.Getpid())
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("a second OpenRecord(%s): %v; want %q", path, err, want)
		}
	}
	first.Close()
	again, err := OpenRecord(link, slog.Default())
	if err != nil {
		t.Fatalf("OpenRecord after the first closed: %v", err)
	}
	again.Close()
	for range 2 {
		f, err := OpenRecord(os.DevNull, slog.Default())
		if err != nil {
			t.Fatalf("OpenRecord(%s): %v; a device is not locked", os.DevNull, err)
		}
		defer f.Close()
	}
}
