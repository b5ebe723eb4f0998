// Package rec holds the pointer-free records that attempt's Tracker and
// the stream package's Stream both keep: a time in two words, an address
// in two words, what an attempt's segments showed of its fate
// (docs/spec.md §7.2), and the radix sort both order hashes with. Neither
// holds a pointer, so that millions of them cost the collector nothing.
package rec

import (
	"encoding/binary"
	"math"
	"net/netip"
	"time"
)

// Stamp is a time as a capture gives it: Unix seconds and nanoseconds.
type Stamp struct {
	Sec  int64
	Nsec int32
}

// Before reports whether s is before t.
func (s Stamp) Before(t Stamp) bool { return s.Sec < t.Sec || s.Sec == t.Sec && s.Nsec < t.Nsec }

// Compare is -1, 0 or 1 as s is before, at or after u.
func (s Stamp) Compare(u Stamp) int {
	switch {
	case s.Before(u):
		return -1
	case u.Before(s):
		return 1
	}
	return 0
}

// Nanos is s in Unix nanoseconds, clamped to the years 1678–2262 that an
// int64 holds: a fate's times beyond them (a capture file's hostile
// timestamps) come out wrong, but never wrap around.
func (s Stamp) Nanos() int64 {
	const maxSec = math.MaxInt64/int64(time.Second) - 1
	switch {
	case s.Sec > maxSec:
		return math.MaxInt64
	case s.Sec < -maxSec:
		return math.MinInt64
	}
	return s.Sec*1e9 + int64(s.Nsec)
}

// Addr128 is an address as As16 spells it (IPv4 mapped), in two words,
// compared and hashed a word at a time.
type Addr128 struct{ Hi, Lo uint64 }

// Words is the Addr128 of an address in As16 form.
func Words(b *[16]byte) Addr128 {
	return Addr128{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

// WordsOfBytes is the Addr128 of a 4- or 16-byte address, as WordsOf
// gives that of the netip.Addr.
func WordsOfBytes(b []byte) Addr128 {
	switch len(b) {
	case 4:
		return Addr128{0, 0xffff<<32 | uint64(binary.BigEndian.Uint32(b))}
	case 16:
		return Addr128{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
	}
	return Addr128{}
}

// WordsOf is Words(a.As16()) without As16's copy: its result was copied
// aside whole and read back a word at a time, a store forwarding stall,
// where AppendBinary's bytes are read as they were written.
func WordsOf(a netip.Addr) Addr128 {
	var buf [16]byte
	b, _ := a.AppendBinary(buf[:0])
	switch {
	case len(b) == 4:
		return Addr128{0, 0xffff<<32 | uint64(binary.BigEndian.Uint32(b))}
	case len(b) >= 16: // a zone follows; a segment has none
		return Addr128{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:16])}
	}
	return Addr128{} // the zero Addr
}

// Bytes is a in As16 form.
func (a Addr128) Bytes() (b [16]byte) {
	binary.BigEndian.PutUint64(b[:8], a.Hi)
	binary.BigEndian.PutUint64(b[8:], a.Lo)
	return b
}

// SortHigh32 sorts keys by their top 32 bits, keeping the order of keys
// whose top bits are equal; tmp is as long as keys, and the result is one
// of the two. A radix sort, 11 bits a pass: a capture's hashes are many,
// and slices.Sort's comparisons cost more than the passes.
func SortHigh32(keys, tmp []uint64) []uint64 {
	const bits = 11
	for shift := 32; shift < 64; shift += bits {
		var count [1 << bits]int
		for _, k := range keys {
			count[k>>shift&(1<<bits-1)]++
		}
		sum := 0
		for d, c := range count {
			count[d] = sum
			sum += c
		}
		for _, k := range keys {
			d := k >> shift & (1<<bits - 1)
			tmp[count[d]] = k
			count[d]++
		}
		keys, tmp = tmp, keys
	}
	return keys
}
