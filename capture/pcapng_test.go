package capture

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/backoff-audit/audit/attempt"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// ngSYN is an Ethernet frame holding a SYN from 10.0.0.1:1000 with seq.
func ngSYN(seq uint32) []byte {
	return ethFrame(0x0800, ipv4Packet("10.0.0.1", "10.0.0.2", 6, synSeg(1000, 8081, seq)))
}

// ngSYNAt is the SYN of ngSYN(seq) as read at timestamp ts µs.
func ngSYNAt(ts int, seq uint32) gotSYN {
	return gotSYN{Time: fmt.Sprintf("1970-01-01T00:00:00.%06dZ", ts), Src: "10.0.0.1:1000", Dst: "10.0.0.2:8081", Seq: seq}
}

// withIDBs appends n copies of one Ethernet IDB to w, and returns the
// offset of the first and the size of each.
func withIDBs(w *ngWriter, n int) (first, size int) {
	one := (&ngWriter{o: w.o}).idb(1, 0, -1, 0).buf
	first = len(w.buf)
	w.buf = append(w.buf, bytes.Repeat(one, n)...)
	return first, len(one)
}

// TestPcapngInterfacesBeyondBound: a section with more IDBs than the reader
// keeps reports those IDBs once, with their real number, and counts a
// packet on one of them as such, not as naming a missing interface.
func TestPcapngInterfacesBeyondBound(t *testing.T) {
	le := binary.LittleEndian
	warnBeyond := func(shb, n, first int) string {
		return fmt.Sprintf("x: section header block at offset %d: %d interface description blocks beyond the first 65536 (from offset %d on) ignored; packets on them skipped",
			shb, n, first)
	}
	type file struct {
		data     []byte
		warnings []string
	}
	tests := []struct {
		name        string
		build       func() file
		want        []gotSYN
		wantPackets uint64
		wantSkipped map[string]uint64
	}{
		{
			name: "100000 interfaces",
			build: func() file {
				w := &ngWriter{o: le}
				w.shb(1, 0)
				first, size := withIDBs(w, 100000)
				w.epb(0, 1, ngSYN(1)).epb(65535, 2, ngSYN(2)).epb(65536, 3, ngSYN(3)).epb(99999, 4, ngSYN(4)).
					epb(100000, 5, ngSYN(5)).epb(165536, 6, ngSYN(6))
				return file{w.buf, []string{warnBeyond(0, 34464, first+65536*size)}}
			},
			want:        []gotSYN{ngSYNAt(1, 1), ngSYNAt(2, 2)},
			wantPackets: 6,
			wantSkipped: map[string]uint64{SkipTooManyIfaces: 2, SkipNoInterface: 2},
		},
		{
			// 200000 − 65536 = 134464 and 200000 mod 65536 = 3392 differ.
			name: "200000 interfaces",
			build: func() file {
				w := &ngWriter{o: le}
				w.shb(1, 0)
				first, size := withIDBs(w, 200000)
				w.epb(199999, 1, ngSYN(1)).epb(3392, 2, ngSYN(2)).epb(200000, 3, ngSYN(3))
				return file{w.buf, []string{warnBeyond(0, 134464, first+65536*size)}}
			},
			want:        []gotSYN{ngSYNAt(2, 2)},
			wantPackets: 3,
			wantSkipped: map[string]uint64{SkipTooManyIfaces: 1, SkipNoInterface: 1},
		},
		{
			name: "the count is per section",
			build: func() file {
				w := &ngWriter{o: le}
				w.shb(1, 0)
				first, size := withIDBs(w, 65537)
				w.epb(65536, 1, ngSYN(1))
				w.shb(1, 0).idb(1, 0, -1, 0).epb(1, 2, ngSYN(2)).epb(0, 3, ngSYN(3))
				return file{w.buf, []string{warnBeyond(0, 1, first+65536*size)}}
			},
			want:        []gotSYN{ngSYNAt(3, 3)},
			wantPackets: 3,
			wantSkipped: map[string]uint64{SkipTooManyIfaces: 1, SkipNoInterface: 1},
		},
		{
			name: "second section over the bound",
			build: func() file {
				w := &ngWriter{o: le}
				w.shb(1, 0).idb(1, 0, -1, 0).epb(0, 1, ngSYN(1))
				second := len(w.buf)
				w.shb(1, 0)
				first, size := withIDBs(w, 65538)
				w.epb(65537, 2, ngSYN(2)).epb(65535, 3, ngSYN(3))
				return file{w.buf, []string{warnBeyond(second, 2, first+65536*size)}}
			},
			want:        []gotSYN{ngSYNAt(1, 1), ngSYNAt(3, 3)},
			wantPackets: 3,
			wantSkipped: map[string]uint64{SkipTooManyIfaces: 1},
		},
		{
			name: "an oversized IDB beyond the bound counts too",
			build: func() file {
				w := &ngWriter{o: le}
				w.shb(1, 0)
				first, size := withIDBs(w, 65536)
				over := len(w.buf)
				w.block(ngIDB, make([]byte, maxBlock)).epb(65536, 1, ngSYN(1))
				return file{w.buf, []string{
					fmt.Sprintf("x: interface description block at offset %d: larger than any interface description; skipped", over),
					warnBeyond(0, 1, first+65536*size),
				}}
			},
			wantPackets: 1,
			wantSkipped: map[string]uint64{SkipBadBlock: 1, SkipTooManyIfaces: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := tt.build()
			got, st, err := readBytes("x", f.data, Options{Port: 8081})
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("SYNs (-want +got):\n%s", diff)
			}
			want := attempt.FileInfo{Path: "x", Format: "pcapng", Packets: tt.wantPackets, SYNs: uint64(len(tt.want)),
				Skipped: tt.wantSkipped, Warnings: f.warnings}
			if diff := cmp.Diff(want, st, cmpopts.IgnoreFields(attempt.FileInfo{}, "Bytes", "First")); diff != "" {
				t.Errorf("FileInfo (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPcapngTrailingLengthMismatch: a block whose trailing length differs
// from its leading one gets one warning naming its offset and both
// lengths, is skipped and counted as corrupt, and the next block is read.
func TestPcapngTrailingLengthMismatch(t *testing.T) {
	type file struct {
		data     []byte
		warnings []string
	}
	for _, o := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		ab := o.(binary.AppendByteOrder)
		// spoil sets the trailing length of the block at off in w.
		spoil := func(w *ngWriter, off int, trail uint32) {
			n := int(o.Uint32(w.buf[off+4:]))
			o.PutUint32(w.buf[off+n-4:], trail)
		}
		tests := []struct {
			name        string
			build       func() file
			want        []gotSYN
			wantPackets uint64
			wantSkipped map[string]uint64
		}{
			{
				name: "enhanced packet block",
				build: func() file {
					w := &ngWriter{o: ab}
					w.shb(1, 0).idb(1, 0, -1, 0).epb(0, 1, ngSYN(1))
					bad := len(w.buf)
					w.epb(0, 2, ngSYN(2)).epb(0, 3, ngSYN(3))
					n := o.Uint32(w.buf[bad+4:])
					spoil(w, bad, n+8)
					return file{w.buf, []string{fmt.Sprintf("x: enhanced packet block at offset %d: trailing length %d differs from leading length %d; skipped", bad, n+8, n)}}
				},
				want:        []gotSYN{ngSYNAt(1, 1), ngSYNAt(3, 3)},
				wantPackets: 3,
				wantSkipped: map[string]uint64{SkipBadBlock: 1},
			},
			{
				name: "enhanced packet block, trailing length beyond any block",
				build: func() file {
					w := &ngWriter{o: ab}
					w.shb(1, 0).idb(1, 0, -1, 0)
					bad := len(w.buf)
					w.epb(0, 2, ngSYN(2)).epb(0, 3, ngSYN(3))
					n := o.Uint32(w.buf[bad+4:])
					spoil(w, bad, 0x30303030)
					return file{w.buf, []string{fmt.Sprintf("x: enhanced packet block at offset %d: trailing length %d differs from leading length %d; skipped", bad, 0x30303030, n)}}
				},
				want:        []gotSYN{ngSYNAt(3, 3)},
				wantPackets: 2,
				wantSkipped: map[string]uint64{SkipBadBlock: 1},
			},
			{
				name: "packet block",
				build: func() file {
					w := &ngWriter{o: ab}
					w.shb(1, 0).idb(1, 0, -1, 0)
					bad := len(w.buf)
					w.opb(0, 2, ngSYN(2)).epb(0, 3, ngSYN(3))
					n := o.Uint32(w.buf[bad+4:])
					spoil(w, bad, 12)
					return file{w.buf, []string{fmt.Sprintf("x: packet block at offset %d: trailing length 12 differs from leading length %d; skipped", bad, n)}}
				},
				want:        []gotSYN{ngSYNAt(3, 3)},
				wantPackets: 2,
				wantSkipped: map[string]uint64{SkipBadBlock: 1},
			},
			{
				name: "interface description block keeps its number",
				build: func() file {
					w := &ngWriter{o: ab}
					w.shb(1, 0)
					bad := len(w.buf)
					w.idb(1, 0, -1, 0).idb(1, 0, -1, 0).epb(0, 1, ngSYN(1)).epb(1, 2, ngSYN(2))
					n := o.Uint32(w.buf[bad+4:])
					spoil(w, bad, n-4)
					return file{w.buf, []string{fmt.Sprintf("x: interface description block at offset %d: trailing length %d differs from leading length %d; skipped", bad, n-4, n)}}
				},
				want:        []gotSYN{ngSYNAt(2, 2)},
				wantPackets: 2,
				wantSkipped: map[string]uint64{SkipBadBlock: 2}, // the IDB and the packet on it
			},
			{
				name: "section header block is read",
				build: func() file {
					w := &ngWriter{o: ab}
					w.shb(1, 0).idb(1, 0, -1, 0).epb(0, 1, ngSYN(1))
					n := o.Uint32(w.buf[4:])
					spoil(w, 0, 0)
					return file{w.buf, []string{fmt.Sprintf("x: section header block at offset 0: trailing length 0 differs from leading length %d; read by the leading length", n)}}
				},
				want:        []gotSYN{ngSYNAt(1, 1)},
				wantPackets: 1,
				wantSkipped: map[string]uint64{},
			},
			{
				name: "block of unknown type",
				build: func() file {
					w := &ngWriter{o: ab}
					w.shb(1, 0).idb(1, 0, -1, 0)
					bad := len(w.buf)
					w.block(0x0bad, []byte("something")).epb(0, 1, ngSYN(1))
					spoil(w, bad, 1)
					return file{w.buf, []string{fmt.Sprintf("x: block at offset %d: trailing length 1 differs from leading length 24; skipped", bad)}}
				},
				want:        []gotSYN{ngSYNAt(1, 1)},
				wantPackets: 1,
				wantSkipped: map[string]uint64{},
			},
			{
				name: "in a skipped section",
				build: func() file {
					w := &ngWriter{o: ab}
					w.shb(2, 0).idb(1, 0, -1, 0)
					bad := len(w.buf)
					w.epb(0, 1, ngSYN(1))
					n := o.Uint32(w.buf[bad+4:])
					spoil(w, bad, n+4)
					return file{w.buf, []string{
						"x: section header block at offset 0: version 2.0 unknown; section skipped",
						fmt.Sprintf("x: enhanced packet block at offset %d: trailing length %d differs from leading length %d; skipped", bad, n+4, n),
					}}
				},
				wantSkipped: map[string]uint64{SkipSectionVersion: 2},
			},
		}
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%v/%s", o, tt.name), func(t *testing.T) {
				f := tt.build()
				got, st, err := readBytes("x", slices.Clone(f.data), Options{Port: 8081})
				if err != nil {
					t.Fatalf("read: %v", err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("SYNs (-want +got):\n%s", diff)
				}
				want := attempt.FileInfo{Path: "x", Format: "pcapng", Packets: tt.wantPackets, SYNs: uint64(len(tt.want)),
					Skipped: tt.wantSkipped, Warnings: f.warnings}
				if diff := cmp.Diff(want, st, cmpopts.IgnoreFields(attempt.FileInfo{}, "Bytes", "First")); diff != "" {
					t.Errorf("FileInfo (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// A timestamp outside years 1970–2262 (if_tsresol 2^0, timestamps 2^63
// and 2^64−1, or an if_tsoffset that takes it before 1970) is no time: the
// packet is counted, skipped, and a warning names its block's offset.
func TestPcapngTimestampOutOfRange(t *testing.T) {
	le := binary.LittleEndian
	tests := []struct {
		name     string
		tsresol  int
		tsoffset int64
		ts       uint64
		want     []gotSYN // the SYN, when it is kept
	}{
		{name: "2^63 seconds", tsresol: 0x80, ts: 1 << 63},
		{name: "2^64-1 seconds", tsresol: 0x80, ts: 1<<64 - 1},
		{name: "2^64-1 microseconds", tsresol: -1, ts: 1<<64 - 1},
		{name: "in 2263", tsresol: 0x80, ts: maxUnixSec + 1},
		{name: "before 1970 by the offset", tsresol: 0x80, tsoffset: -10, ts: 5},
		{name: "an offset past 2262", tsresol: 0x80, tsoffset: 1 << 62, ts: 5},
		{name: "the last second of 2262", tsresol: 0x80, ts: maxUnixSec,
			want: []gotSYN{{Time: time.Unix(maxUnixSec, 0).UTC().Format(time.RFC3339Nano), Src: "10.0.0.1:1000", Dst: "10.0.0.2:8081", Seq: 1}}},
		{name: "1970", tsresol: 0x80, tsoffset: -5, ts: 5,
			want: []gotSYN{{Time: "1970-01-01T00:00:00Z", Src: "10.0.0.1:1000", Dst: "10.0.0.2:8081", Seq: 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &ngWriter{o: le}
			w.shb(1, 0).idb(1, 0, tt.tsresol, tt.tsoffset)
			off := len(w.buf)
			w.epb(0, tt.ts, ngSYN(1))
			got, st, err := readBytes("x", w.buf, Options{Port: 8081})
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			want := attempt.FileInfo{Path: "x", Format: "pcapng", Packets: 1, SYNs: uint64(len(tt.want)), Skipped: map[string]uint64{}}
			if tt.want == nil {
				want.Skipped[SkipBadTime] = 1
				units := map[int]uint64{0x80: 1, -1: 1e6}[tt.tsresol]
				want.Warnings = []string{fmt.Sprintf("x: enhanced packet block at offset %d: timestamp %d (%d units a second, offset %d s) is outside 1970–2262; packet skipped",
					off, tt.ts, units, tt.tsoffset)}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("SYNs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(want, st, cmpopts.IgnoreFields(attempt.FileInfo{}, "Bytes", "First")); diff != "" {
				t.Errorf("file info (-want +got):\n%s", diff)
			}
		})
	}
}
