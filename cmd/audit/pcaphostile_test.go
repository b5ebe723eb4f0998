package main

import (
	"encoding/binary"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// pcapngBlock is one pcapng block of typ around body (padded to 4 bytes).
func pcapngBlock(typ uint32, body []byte) []byte {
	le := binary.LittleEndian
	for len(body)%4 != 0 {
		body = append(body, 0)
	}
	b := le.AppendUint32(le.AppendUint32(nil, typ), uint32(12+len(body)))
	return le.AppendUint32(append(b, body...), uint32(12+len(body)))
}

// A pcapng timestamp outside years 1970–2262 is no time to judge: two SYNs
// at 2^63 and 2^64−1 seconds are skipped with a warning naming each
// block's offset; the JSON report stays valid, and the two SYNs of 2023,
// 1 s apart, pass.
func TestPcapTimestampOutOfRange(t *testing.T) {
	le := binary.LittleEndian
	shb := le.AppendUint32(nil, 0x1a2b3c4d)
	shb = le.AppendUint64(le.AppendUint32(shb, 1), ^uint64(0))
	// LINKTYPE_RAW, if_tsresol 0x80: one unit a second.
	idb := le.AppendUint32(le.AppendUint16(le.AppendUint16(nil, 101), 0), 0)
	idb = append(le.AppendUint16(le.AppendUint16(idb, 9), 1), 0x80, 0, 0, 0)
	idb = le.AppendUint32(idb, 0)
	file := append(pcapngBlock(0x0a0d0d0a, shb), pcapngBlock(1, idb)...)
	var offsets []int
	for i, ts := range []uint64{1_700_000_000, 1_700_000_001, 1 << 63, 1<<64 - 1} {
		syn := rawIPv4(capSeg{fromClient: true, flags: tcpSYN, seq: uint32(1000 * (i + 1))})
		binary.BigEndian.PutUint16(syn[20:], uint16(40000+i))
		epb := le.AppendUint32(le.AppendUint32(le.AppendUint32(nil, 0), uint32(ts>>32)), uint32(ts))
		epb = append(le.AppendUint32(le.AppendUint32(epb, uint32(len(syn))), uint32(len(syn))), syn...)
		offsets = append(offsets, len(file))
		file = append(file, pcapngBlock(6, epb)...)
	}
	path := writeFile(t, "far.pcapng", file)
	code, stdout, stderr := runAudit(t, "pcap", "--format", "json", path)
	for _, i := range []int{2, 3} {
		if want := "enhanced packet block at offset " + strconv.Itoa(offsets[i]) + ": timestamp"; !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	var rep struct {
		Capture struct{ Attempts int }
	}
	if !json.Valid([]byte(stdout)) || json.Unmarshal([]byte(stdout), &rep) != nil || rep.Capture.Attempts != 2 {
		t.Errorf("JSON report (valid %v) with %d attempts; want valid, with the 2 SYNs of 2023:\n%s", json.Valid([]byte(stdout)), rep.Capture.Attempts, stdout)
	}
	if code != exitOK {
		t.Errorf("exit %d, want %d: the two SYNs 1 s apart pass", code, exitOK)
	}
}
