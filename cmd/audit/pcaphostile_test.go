package main

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
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

// A capture file named twice, by the same path or a link to it, is read
// once with a warning: the report is the one of the file named once, and
// no SYN becomes its own retransmission.
func TestSameFileTwice(t *testing.T) {
	dir := t.TempDir()
	capFile := copyFile(t, fixture("too-soon.pcap"), dir)
	link := filepath.Join(dir, "link.pcap")
	if err := os.Symlink(filepath.Base(capFile), link); err != nil {
		t.Fatal(err)
	}
	_, once, _ := runAudit(t, "pcap", capFile)
	_, h2Once, _ := runAudit(t, "h2", "--format", "json", capFile)
	for _, second := range []string{capFile, link} {
		t.Run(filepath.Base(second), func(t *testing.T) {
			code, stdout, stderr := runAudit(t, "pcap", capFile, second)
			want := capFile + ": named again as " + second + ", the same file: read once"
			if code != exitFail || stdout != once || !strings.Contains(stderr, want) {
				t.Errorf("exit %d, stderr %q; want %d, %q, and the report of the file named once:\n%s", code, stderr, exitFail, want, stdout)
			}
			_, h2Twice, stderr := runAudit(t, "h2", "--format", "json", capFile, second)
			var a, b struct{ Connections []struct{ Ended string } }
			json.Unmarshal([]byte(h2Once), &a)
			json.Unmarshal([]byte(h2Twice), &b)
			if len(a.Connections) == 0 || len(b.Connections) != len(a.Connections) || !strings.Contains(stderr, want) {
				t.Errorf("audit h2: %d connections, stderr %q; want %d as from the file once, and the warning", len(b.Connections), stderr, len(a.Connections))
			}
		})
	}
}
