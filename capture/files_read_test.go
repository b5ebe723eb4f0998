package capture

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/backoff-audit/audit/attempt"
	"github.com/google/go-cmp/cmp"
)

// TestReadFiles: the files are read in the order given, each file's
// statistics kept as ReadFile returns them, packets and skips summed, SYNs
// grouped by port; the first file that cannot be read stops the read with
// ReadFile's error.
func TestReadFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, recs ...pcapRecord) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pcapFile(binary.LittleEndian, false, 1, recs...), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	syn := func(sec uint32, dport uint16, seq uint32) pcapRecord {
		return pcapRecord{sec: sec, data: ethFrame(0x0800, ipv4Packet("10.0.0.1", "10.0.0.2", 6, synSeg(1000+uint16(seq), dport, seq)))}
	}
	truncIP := pcapRecord{sec: 9, data: ethFrame(0x0800, []byte{0x45, 0})} // a truncated IPv4 header
	a := write("a.pcap", syn(1, 8081, 1), truncIP, syn(3, 8081, 3))
	b := write("b.pcap", syn(2, 8081, 2), syn(4, 9090, 4), truncIP)
	skip := func(path string) map[string]uint64 {
		st, err := ReadFile(path, Options{}, func(attempt.SYN) {})
		if err != nil {
			t.Fatal(err)
		}
		return st.Skipped
	}
	aSkip := skip(a)
	if len(aSkip) != 1 {
		t.Fatalf("the truncated frame gives skips %v, want one reason", aSkip)
	}
	twice := map[string]uint64{}
	for k, n := range aSkip {
		twice[k] = 2 * n
	}

	tests := []struct {
		name        string
		paths       []string
		port        uint16
		wantErr     string
		wantPaths   []string
		wantPackets uint64
		wantSkipped map[string]uint64
		wantSYNs    map[uint16]int // per port
	}{
		{name: "one file", paths: []string{a}, wantPaths: []string{a}, wantPackets: 3, wantSkipped: aSkip,
			wantSYNs: map[uint16]int{8081: 2}},
		{name: "two files, any order", paths: []string{b, a}, wantPaths: []string{b, a}, wantPackets: 6, wantSkipped: twice,
			wantSYNs: map[uint16]int{8081: 3, 9090: 1}},
		{name: "one port", paths: []string{a, b}, port: 9090, wantPaths: []string{a, b}, wantPackets: 6, wantSkipped: twice,
			wantSYNs: map[uint16]int{9090: 1}},
		{name: "a missing file stops the read", paths: []string{a, filepath.Join(dir, "no-such.pcap")}, wantErr: "no-such.pcap"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pt, info, err := ReadFiles(tt.paths, Options{Port: tt.port}, nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || pt != nil {
					t.Fatalf("ReadFiles = %v, %v; want no tracker and an error naming %s", pt, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var paths []string
			for _, f := range info.Files {
				paths = append(paths, f.Path)
				if f.Format != "pcap" || f.Packets != 3 {
					t.Errorf("file %s: format %q, %d packets; want pcap, 3", f.Path, f.Format, f.Packets)
				}
			}
			if diff := cmp.Diff(tt.wantPaths, paths); diff != "" {
				t.Errorf("files (-want +got):\n%s", diff)
			}
			if info.Packets != tt.wantPackets {
				t.Errorf("packets = %d, want %d", info.Packets, tt.wantPackets)
			}
			if diff := cmp.Diff(tt.wantSkipped, info.Skipped); diff != "" {
				t.Errorf("skipped (-want +got):\n%s", diff)
			}
			got := map[uint16]int{}
			for _, pc := range pt.Ports() {
				got[pc.Port] = pc.SYNs
			}
			if diff := cmp.Diff(tt.wantSYNs, got); diff != "" {
				t.Errorf("SYNs per port (-want +got):\n%s", diff)
			}
		})
	}
}

// TestProgressPrinter: a read shows progress only after a second, at most
// five times a second, and clears its line when done.
func TestProgressPrinter(t *testing.T) {
	type call struct {
		at          time.Duration // since the file's start
		done, total int64
	}
	const mb = 1 << 20
	tests := []struct {
		name  string
		calls []call
		want  string
	}{
		{name: "a short read shows nothing", calls: []call{{500 * time.Millisecond, mb, 4 * mb}, {900 * time.Millisecond, 4 * mb, 4 * mb}}},
		{name: "a long read", calls: []call{
			{500 * time.Millisecond, mb, 4 * mb},
			{1100 * time.Millisecond, 2 * mb, 4 * mb},
			{1200 * time.Millisecond, 2*mb + 1, 4 * mb}, // too soon after the last
			{1400 * time.Millisecond, 3 * mb, 4 * mb},
			{1500 * time.Millisecond, 4 * mb, 4 * mb},
		}, want: "\r\033[Kreading x.pcap:  50% of 4 MB, 1 MB/s\r\033[Kreading x.pcap:  75% of 4 MB, 2 MB/s\r\033[K"},
		{name: "size unknown", calls: []call{{1100 * time.Millisecond, 3 * mb, -1}},
			want: "\r\033[Kreading x.pcap: 3 MB, 2 MB/s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			start := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
			now := start
			progress := progressPrinter(&buf, func() time.Time { return now })("x.pcap")
			for _, c := range tt.calls {
				now = start.Add(c.at)
				progress(c.done, c.total)
			}
			if got := buf.String(); got != tt.want {
				t.Errorf("printed %q, want %q", got, tt.want)
			}
		})
	}
	// Anything but a terminal gets no progress at all.
	if cb := ProgressTo(&bytes.Buffer{})("x.pcap"); cb != nil {
		t.Error("progress callbacks for a buffer, want none")
	}
	if cb := ProgressTo(nil)("x.pcap"); cb != nil {
		t.Error("progress callbacks for no writer, want none")
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "progress"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if cb := ProgressTo(f)("x.pcap"); cb != nil {
		t.Error("progress callbacks for a regular file, want none")
	}
}
