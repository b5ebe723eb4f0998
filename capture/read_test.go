package capture

import (
	"bytes"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/backoff-audit/audit/attempt"
)

// gotSYN is a SYN as the tests compare it.
type gotSYN struct {
	Time     string
	Src, Dst string
	Seq      uint32
}

func summarize(s attempt.SYN) gotSYN {
	return gotSYN{Time: s.Time.UTC().Format(time.RFC3339Nano), Src: s.Src.String(), Dst: s.Dst.String(), Seq: s.Seq}
}

// readBytes runs ReadFile's core on an in-memory file.
func readBytes(name string, data []byte, opt Options) ([]gotSYN, attempt.FileInfo, error) {
	var got []gotSYN
	st, err := readStream(name, bytes.NewReader(data), int64(len(data)), opt, func(s attempt.SYN) {
		got = append(got, summarize(s))
	})
	return got, st, err
}

func TestReadFormats(t *testing.T) {
	le, be := binary.LittleEndian, binary.BigEndian
	eth4 := func(sport uint16, seq uint32) []byte {
		return ethFrame(0x0800, ipv4Packet("10.0.0.1", "10.0.0.2", 6, synSeg(sport, 8081, seq)))
	}
	raw6 := func(sport uint16, seq uint32) []byte {
		return ipv6Packet("2001:db8::1", "2001:db8::2", 6, synSeg(sport, 8081, seq))
	}
	ack4 := ethFrame(0x0800, ipv4Packet("10.0.0.2", "10.0.0.1", 6, tcpHeader(8081, 1000, 9, flagSYN|flagACK, 5)))
	other := func(seq uint32) []byte {
		return ethFrame(0x0800, ipv4Packet("10.0.0.1", "10.0.0.2", 6, synSeg(1000, 9999, seq)))
	}
	v4 := func(ts string, sport uint16, seq uint32) gotSYN {
		return gotSYN{Time: ts, Src: "10.0.0.1:" + strconv.Itoa(int(sport)), Dst: "10.0.0.2:8081", Seq: seq}
	}
	v6 := func(ts string, sport uint16, seq uint32) gotSYN {
		return gotSYN{Time: ts, Src: "[2001:db8::1]:" + strconv.Itoa(int(sport)), Dst: "[2001:db8::2]:8081", Seq: seq}
	}
	pcapRecs := []pcapRecord{
		{sec: 100, frac: 250000, data: eth4(1000, 1)},
		{sec: 100, frac: 250001, data: ack4},
		{sec: 101, frac: 999999, data: other(2)},
		{sec: 102, frac: 5, data: eth4(1000, 1)},
	}
	pcapWant := []gotSYN{v4("1970-01-01T00:01:40.25Z", 1000, 1), v4("1970-01-01T00:01:42.000005Z", 1000, 1)}
	nsRecs := []pcapRecord{{sec: 1700000000, frac: 123456789, data: eth4(1000, 1)}}
	nsWant := []gotSYN{v4("2023-11-14T22:13:20.123456789Z", 1000, 1)}

	// Two sections in opposite byte orders; the second has three
	// interfaces with decimal, binary and offset timestamps.
	ngLE := &ngWriter{o: le}
	ngLE.shb(1, 0).idb(1, 262144, -1, 0).
		epb(0, 1_000_000*5+7, eth4(1000, 1)).
		block(0x0bad, []byte("unknown block, skipped")).
		epb(0, 1_000_000*6, ack4)
	ngBE := &ngWriter{o: be}
	ngBE.shb(1, 0).
		idb(101, 0, 9, 0).            // raw, nanoseconds
		idb(1, 65535, 0x80|8, 0).     // Ethernet, 2^-8 s
		idb(1, 65535, 3, 1000000000). // milliseconds, +1e9 s offset
		epb(0, 2_000_000_000+1, raw6(2000, 2)).
		epb(1, 256*5+128, eth4(3000, 3)).
		epb(2, 1500, eth4(4000, 4)).
		opb(1, 256*7+64, eth4(5000, 5)).
		epb(1, 0, other(6))
	twoSections := append(ngLE.buf, ngBE.buf...)
	twoWant := []gotSYN{
		v4("1970-01-01T00:00:05.000007Z", 1000, 1),
		v6("1970-01-01T00:00:02.000000001Z", 2000, 2),
		v4("1970-01-01T00:00:05.5Z", 3000, 3),
		v4("2001-09-09T01:46:41.5Z", 4000, 4),
		v4("1970-01-01T00:00:07.25Z", 5000, 5),
	}

	spb := &ngWriter{o: le}
	spb.shb(1, 0).idb(1, 0, -1, 0).spb(eth4(1000, 1)).spb(ack4).epb(0, 1, eth4(1000, 2))

	// A section of an unknown major version is skipped whole; the next
	// section is read.
	v2 := &ngWriter{o: le}
	v2.shb(2, 0).idb(1, 0, -1, 0).epb(0, 1, eth4(1000, 1)).
		shb(1, 0).idb(1, 0, -1, 0).epb(0, 2, eth4(1000, 2))

	mixed := &ngWriter{o: le}
	mixed.shb(1, 0).idb(147, 0, -1, 0).idb(113, 0, 6, 0).
		epb(0, 1, make([]byte, 30)).
		epb(1, 3, sllFrame(0x0800, ipv4Packet("10.0.0.1", "10.0.0.2", 6, synSeg(1000, 8081, 1)))).
		epb(5, 4, eth4(1000, 1))

	tests := []struct {
		name        string
		file        []byte
		port        uint16
		wantFormat  string
		want        []gotSYN
		wantPackets uint64
		wantSkipped map[string]uint64
	}{
		{"pcap usec le", pcapFile(le, false, 1, pcapRecs...), 8081, "pcap", pcapWant, 4, nil},
		{"pcap usec be", pcapFile(be, false, 1, pcapRecs...), 8081, "pcap", pcapWant, 4, nil},
		{"pcap nsec le", pcapFile(le, true, 1, nsRecs...), 8081, "pcap (ns)", nsWant, 1, nil},
		{"pcap nsec be", pcapFile(be, true, 1, nsRecs...), 8081, "pcap (ns)", nsWant, 1, nil},
		{"pcap any port", pcapFile(le, false, 1, pcapRecs...), 0, "pcap",
			[]gotSYN{pcapWant[0], {Time: "1970-01-01T00:01:41.999999Z", Src: "10.0.0.1:1000", Dst: "10.0.0.2:9999", Seq: 2}, pcapWant[1]}, 4, nil},
		{"pcap gzip", gzipBytes(pcapFile(be, false, 1, pcapRecs...)), 8081, "pcap gzip", pcapWant, 4, nil},
		{"pcap usec field >= 1e6 carries", pcapFile(le, false, 101, pcapRecord{sec: 1, frac: 1500000, data: raw6(1, 1)}), 0, "pcap",
			[]gotSYN{v6("1970-01-01T00:00:02.5Z", 1, 1)}, 1, nil},
		{"pcap unknown link type", pcapFile(le, false, 147, pcapRecs...), 0, "pcap", nil, 4, map[string]uint64{"link type 147": 4}},
		{"pcap reserved link type bits", pcapFile(le, false, 0x00300000, pcapRecs...), 0, "pcap", nil, 4, map[string]uint64{"link type field 0x00300000": 4}},
		{"pcap fcs bits ignored", pcapFile(le, false, 0x30000001, pcapRecs...), 8081, "pcap", pcapWant, 4, nil},
		{"pcap empty", pcapFile(le, false, 1), 0, "pcap", nil, 0, nil},
		{"pcapng two sections", twoSections, 8081, "pcapng", twoWant, 7, nil},
		{"pcapng gzip", gzipBytes(twoSections), 8081, "pcapng gzip", twoWant, 7, nil},
		{"pcapng simple packet blocks", spb.buf, 0, "pcapng", []gotSYN{v4("1970-01-01T00:00:00.000001Z", 1000, 2)}, 1,
			map[string]uint64{SkipNoTimestamp: 1}},
		{"pcapng simple packet block to another port", spb.buf, 9999, "pcapng", nil, 1, nil},
		{"pcapng unknown version section", v2.buf, 0, "pcapng", []gotSYN{v4("1970-01-01T00:00:00.000002Z", 1000, 2)}, 1,
			map[string]uint64{SkipSectionVersion: 2}},
		{"pcapng link types and missing interface", mixed.buf, 0, "pcapng", []gotSYN{v4("1970-01-01T00:00:00.000003Z", 1000, 1)}, 3,
			map[string]uint64{"link type 147": 1, SkipNoInterface: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, st, err := readBytes("x", tt.file, Options{Port: tt.port})
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("SYNs (-want +got):\n%s", diff)
			}
			wantSt := attempt.FileInfo{Path: "x", Format: tt.wantFormat, Packets: tt.wantPackets, SYNs: uint64(len(tt.want)), Skipped: tt.wantSkipped}
			if wantSt.Skipped == nil {
				wantSt.Skipped = map[string]uint64{}
			}
			if diff := cmp.Diff(wantSt, st, cmpopts.IgnoreFields(attempt.FileInfo{}, "Bytes", "Warnings", "OtherTCP", "First")); diff != "" {
				t.Errorf("FileInfo (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReadTruncated cuts a file at every byte: the read never fails,
// reports truncation unless the cut falls between records, and delivers
// exactly the SYNs whose records are whole.
func TestReadTruncated(t *testing.T) {
	le := binary.LittleEndian
	var recs []pcapRecord
	for i := range 4 {
		recs = append(recs, pcapRecord{sec: uint32(i), data: ethFrame(0x0800, ipv4Packet("10.0.0.1", "10.0.0.2", 6, synSeg(1000, 80, uint32(i))))})
	}
	ng := &ngWriter{o: le}
	ng.shb(1, 0).idb(1, 0, -1, 0)
	for i, r := range recs {
		ng.epb(0, uint64(i), r.data)
	}
	for _, tc := range []struct {
		name string
		file []byte
	}{
		{"pcap", pcapFile(le, false, 1, recs...)},
		{"pcapng", ng.buf},
	} {
		t.Run(tc.name, func(t *testing.T) {
			full, _, err := readBytes("x", tc.file, Options{})
			if err != nil || len(full) != len(recs) {
				t.Fatalf("whole file: %d SYNs, err %v", len(full), err)
			}
			for cut := 4; cut < len(tc.file); cut++ {
				got, st, err := readBytes("x", tc.file[:cut], Options{})
				if err != nil {
					t.Fatalf("cut at %d: %v", cut, err)
				}
				if diff := cmp.Diff(full[:len(got)], got, cmpopts.EquateEmpty()); diff != "" {
					t.Fatalf("cut at %d: SYNs are not a prefix (-want +got):\n%s", cut, diff)
				}
				if st.Truncated != (len(st.Warnings) > 0) {
					t.Fatalf("cut at %d: Truncated = %v with warnings %q", cut, st.Truncated, st.Warnings)
				}
				for _, w := range st.Warnings {
					if !strings.HasPrefix(w, "x: ") || !strings.Contains(w, "offset") {
						t.Errorf("cut at %d: warning %q does not name the file and offset", cut, w)
					}
				}
			}
		})
	}
}

func TestReadGzipTruncated(t *testing.T) {
	le := binary.LittleEndian
	var recs []pcapRecord
	for i := range 50 {
		recs = append(recs, pcapRecord{sec: uint32(i), data: ethFrame(0x0800, ipv4Packet("10.0.0.1", "10.0.0.2", 6, synSeg(1000, 80, uint32(i))))})
	}
	z := gzipBytes(pcapFile(le, false, 1, recs...))
	got, st, err := readBytes("x.gz", z[:len(z)/2], Options{})
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if !st.Truncated || len(got) == 0 || len(got) >= len(recs) {
		t.Errorf("half a gzip file: Truncated=%v, %d of %d SYNs; want truncated with some SYNs", st.Truncated, len(got), len(recs))
	}
}

func TestReadErrors(t *testing.T) {
	le := binary.LittleEndian
	big := pcapFile(le, false, 1, pcapRecord{data: make([]byte, 60)})
	binary.LittleEndian.PutUint32(big[24+8:], maxRecord+1)
	tests := []struct {
		name, want string
		file       []byte
	}{
		{"empty", "file has 0 bytes", nil},
		{"unknown magic", "unknown file format (magic 7f 45 4c 46)", []byte("\x7fELF and more")},
		{"bad gzip", "read x: gzip header", []byte{0x1f, 0x8b, 0, 0}},
		{"record too large", "read x: record at offset 24: incl_len 262145 exceeds", big},
		{"pcapng byte-order magic", "byte-order magic 0x01020304", append([]byte{0x0a, 0x0d, 0x0d, 0x0a, 28, 0, 0, 0, 4, 3, 2, 1}, make([]byte, 16)...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := readBytes("x", tt.file, Options{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestReadFilePcapgo reads files gopacket's own writers produce.
func TestReadFilePcapgo(t *testing.T) {
	dir := t.TempDir()
	frame := ethFrame(0x86dd, ipv6Packet("::ffff:192.0.2.1", "2001:db8::2", 6, synSeg(5555, 443, 42)))
	ts := time.Date(2025, 3, 4, 5, 6, 7, 891011000, time.UTC)
	want := []gotSYN{{Time: "2025-03-04T05:06:07.891011Z", Src: "192.0.2.1:5555", Dst: "[2001:db8::2]:443", Seq: 42}}

	var pcapBuf, ngBuf bytes.Buffer
	w := pcapgo.NewWriter(&pcapBuf)
	if err := w.WriteFileHeader(65535, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	ci := gopacket.CaptureInfo{Timestamp: ts, CaptureLength: len(frame), Length: len(frame)}
	if err := w.WritePacket(ci, frame); err != nil {
		t.Fatal(err)
	}
	nw, err := pcapgo.NewNgWriter(&ngBuf, layers.LinkTypeEthernet)
	if err != nil {
		t.Fatal(err)
	}
	if err := nw.WritePacket(ci, frame); err != nil {
		t.Fatal(err)
	}
	if err := nw.Flush(); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"a.pcap": pcapBuf.Bytes(), "b.pcapng": ngBuf.Bytes(), "c.bin": gzipBytes(ngBuf.Bytes())} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		var got []gotSYN
		var calls int
		var last [2]int64
		st, err := ReadFile(path, Options{Port: 443, Progress: func(done, total int64) { calls++; last = [2]int64{done, total} }},
			func(s attempt.SYN) { got = append(got, summarize(s)) })
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: SYNs (-want +got):\n%s", name, diff)
		}
		if st.Path != path {
			t.Errorf("%s: Path = %q", name, st.Path)
		}
		if calls == 0 || last[0] != int64(len(data)) || last[1] != int64(len(data)) {
			t.Errorf("%s: Progress called %d times, last (%d, %d), want last (%d, %d)", name, calls, last[0], last[1], len(data), len(data))
		}
	}
}

func TestReadFileMissing(t *testing.T) {
	_, err := ReadFile(filepath.Join(t.TempDir(), "nope.pcap"), Options{}, func(attempt.SYN) {})
	if !os.IsNotExist(err) {
		t.Errorf("err = %v, want not-exist", err)
	}
}

// zeros is an endless stream of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestReadHugeBlockBoundedMemory steps over a 256 MiB unknown pcapng block
// in a stream of unknown size: the SYN after it is read, and what the read
// allocates does not grow with the block.
func TestReadHugeBlockBoundedMemory(t *testing.T) {
	const blockLen = 256 << 20
	le := binary.LittleEndian
	ng := &ngWriter{o: le}
	ng.shb(1, 0).idb(1, 0, -1, 0)
	head := le.AppendUint32(slices.Clone(ng.buf), 0x99)
	head = le.AppendUint32(head, blockLen)
	tail := le.AppendUint32(nil, blockLen)
	after := &ngWriter{o: le}
	after.epb(0, 1, ethFrame(0x0800, ipv4Packet("10.0.0.1", "10.0.0.2", 6, synSeg(1, 2, 3))))
	stream := io.MultiReader(bytes.NewReader(head), io.LimitReader(zeros{}, blockLen-12), bytes.NewReader(tail), bytes.NewReader(after.buf))

	var before, afterStats runtime.MemStats
	runtime.ReadMemStats(&before)
	var n int
	st, err := readStream("huge", stream, -1, Options{}, func(attempt.SYN) { n++ })
	runtime.ReadMemStats(&afterStats)
	if err != nil || n != 1 || st.Truncated {
		t.Fatalf("got %d SYNs, truncated %v, err %v; want 1, false, nil", n, st.Truncated, err)
	}
	if alloc := afterStats.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
		t.Errorf("reading past a %d MiB block allocated %d MiB", blockLen>>20, alloc>>20)
	}
}

// FileInfo.First is the time of a file's first packet record, in pcap
// and pcapng alike; CaptureInfo.Start the earliest of a set's.
func TestFirstPacket(t *testing.T) {
	for _, tt := range []struct {
		file string
		want time.Time
	}{
		{"rotated.pcap1", time.Date(2025, 3, 14, 15, 9, 31, 394459000, time.UTC)},
		{"rotated.pcap", time.Date(2025, 3, 14, 15, 9, 26, 535897000, time.UTC)},
		{"mixed.pcapng", time.Date(2025, 3, 14, 15, 9, 26, 535897000, time.UTC)},
	} {
		st, err := ReadFile(filepath.Join("..", "testdata", tt.file), Options{Port: 50052}, func(attempt.SYN) {})
		if err != nil {
			t.Fatal(err)
		}
		if !st.First.Equal(tt.want) {
			t.Errorf("%s: first packet at %v, want %v", tt.file, st.First, tt.want)
		}
	}
	_, info, err := ReadFiles([]string{"../testdata/rotated.pcap1", "../testdata/rotated.pcap"}, Options{Port: 50052}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2025, 3, 14, 15, 9, 26, 535897000, time.UTC); !info.Start().Equal(want) {
		t.Errorf("capture start %v, want %v", info.Start(), want)
	}
}
