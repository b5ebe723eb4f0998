package auditrun

import (
	"encoding/binary"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/internal/testutil"
)

// TestPcapVerdicts: what AuditFiles judges of each committed capture and
// configuration, as `audit pcap` exits by it (0 passed, 1 failed, 2
// nothing judged or an error), and the line of the report or the error
// that says why.
func TestPcapVerdicts(t *testing.T) {
	garbage := testutil.WriteFile(t, "garbage.pcap", []byte("this is not a capture file"))
	policy := func(change func(*backoff.Policy)) FilesConfig {
		p := backoff.DefaultPolicy()
		change(&p)
		return FilesConfig{Policy: p, PolicySet: true}
	}
	tests := []struct {
		name    string
		cfg     FilesConfig
		files   []string
		verdict string
		stdout  string // in the report, when not ""
		why     string // in the error or Outcome.Nothing, when not ""
	}{
		{name: "port auto-detected", files: []string{"ipv4-ether.pcap"}, verdict: runPassed, stdout: "port 50052:"},
		{name: "explicit port", cfg: FilesConfig{Port: 50052, PortSet: true}, files: []string{"two-ports.pcap"}, verdict: runPassed, stdout: "PASS: 1 peer"},
		{name: "ambiguous ports are listed", files: []string{"two-ports.pcap"}, verdict: runError,
			why: "Port: the capture holds SYNs to 2 ports, choose the retry port: 50052 (6 SYNs), 50051 (1 SYN)"},
		{name: "port with no SYNs", cfg: FilesConfig{Port: 443, PortSet: true}, files: []string{"ipv4-ether.pcap"}, verdict: runNothing,
			why: "nothing judged: no connection attempt to port 443"},
		{name: "too soon fails", files: []string{"too-soon.pcap"}, verdict: runFailed, stdout: "interval 3: 1500 ms is early"},
		{name: "too late fails", files: []string{"too-late.pcap"}, verdict: runFailed, stdout: "interval 2: 2200 ms is late"},
		{name: "zero backoff fails", files: []string{"zero-backoff.pcap"}, verdict: runFailed, stdout: "interval 2: 0 ms is early"},
		{name: "uncapped client passes the default cap", files: []string{"no-cap.pcap"}, verdict: runPassed},
		{name: "uncapped client fails a 2s cap", cfg: capped(2 * time.Second), files: []string{"no-cap.pcap"}, verdict: runFailed, stdout: "interval 3:"},
		{name: "retransmissions are not attempts", files: []string{"retransmit.pcap"}, verdict: runPassed, stdout: "8 attempts, 3 retransmits, passed"},
		{name: "too few attempts fails", cfg: FilesConfig{Peers: []string{"127.0.0.4"}}, files: []string{"mixed.pcapng"}, verdict: runFailed, stdout: "too few attempts"},
		{name: "peer filter keeps the passing peer", cfg: FilesConfig{Peers: []string{"127.0.0.2"}}, files: []string{"mixed.pcapng"}, verdict: runPassed, stdout: "PASS: 1 peer"},
		{name: "peer filter matching nothing", cfg: FilesConfig{Peers: []string{"10.9.9.9"}}, files: []string{"mixed.pcapng"}, verdict: runNothing,
			why: "nothing judged: no connection attempt to port 50052 from [10.9.9.9]"},
		{name: "bad peer", cfg: FilesConfig{Peers: []string{"localhost"}}, files: []string{"mixed.pcapng"}, verdict: runError, why: `Peers "localhost": not an IP address`},
		{name: "jitter out of range", cfg: policy(func(p *backoff.Policy) { p.Jitter = 1 }), files: []string{"ipv4-ether.pcap"}, verdict: runError,
			why: "policy: jitter 1: must be in [0, 1)"},
		{name: "multiplier below 1", cfg: policy(func(p *backoff.Policy) { p.Multiplier = 0.5 }), files: []string{"ipv4-ether.pcap"}, verdict: runError,
			why: "multiplier 0.5: must be at least 1"},
		{name: "every bad policy field is named", cfg: policy(func(p *backoff.Policy) { p.BaseDelay, p.MaxDelay, p.Tolerance = 0, -time.Second, -time.Millisecond }),
			files: []string{"ipv4-ether.pcap"}, verdict: runError,
			why: "policy: initial backoff 0s: must be positive; max backoff -1s: must be positive; tolerance -1ms: must not be negative"},
		{name: "missing file named", files: []string{"ipv4-ether.pcap", "no/such.pcap"}, verdict: runError, why: "no/such.pcap"},
		{name: "not a capture named", files: []string{garbage}, verdict: runError, why: garbage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var files []string
			for _, f := range tt.files {
				if !filepath.IsAbs(f) {
					f = fixture(f)
				}
				files = append(files, f)
			}
			r := auditFiles(t, tt.cfg, files...)
			why := r.Nothing
			if r.err != nil {
				why = r.err.Error()
			}
			if r.verdict() != tt.verdict || !strings.Contains(r.stdout, tt.stdout) || !strings.Contains(why, tt.why) {
				t.Errorf("%s (%q), report:\n%s\nwant %s (%q) and a report with %q", r.verdict(), why, r.stdout, tt.verdict, tt.why, tt.stdout)
			}
		})
	}
}

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
		syn := testutil.Seg{FromClient: true, Flags: testutil.SYN, Seq: uint32(1000 * (i + 1))}.IPv4()
		binary.BigEndian.PutUint16(syn[20:], uint16(40000+i))
		epb := le.AppendUint32(le.AppendUint32(le.AppendUint32(nil, 0), uint32(ts>>32)), uint32(ts))
		epb = append(le.AppendUint32(le.AppendUint32(epb, uint32(len(syn))), uint32(len(syn))), syn...)
		offsets = append(offsets, len(file))
		file = append(file, pcapngBlock(6, epb)...)
	}
	r := auditFiles(t, FilesConfig{JSON: true}, testutil.WriteFile(t, "far.pcapng", file))
	for _, i := range []int{2, 3} {
		if want := "enhanced packet block at offset " + strconv.Itoa(offsets[i]) + ": timestamp"; !strings.Contains(r.stderr, want) {
			t.Errorf("warnings lack %q:\n%s", want, r.stderr)
		}
	}
	var rep struct {
		Capture struct{ Attempts int }
	}
	if !json.Valid([]byte(r.stdout)) || json.Unmarshal([]byte(r.stdout), &rep) != nil || rep.Capture.Attempts != 2 {
		t.Errorf("JSON report (valid %v) with %d attempts; want valid, with the 2 SYNs of 2023:\n%s", json.Valid([]byte(r.stdout)), rep.Capture.Attempts, r.stdout)
	}
	if r.verdict() != runPassed {
		t.Errorf("%s (%v), want %s: the two SYNs 1 s apart pass", r.verdict(), r.err, runPassed)
	}
}

// A capture file named twice, by the same path or a link to it, is read
// once with a warning: the report is the one of the file named once, and
// no SYN becomes its own retransmission.
func TestPcapSameFileTwice(t *testing.T) {
	capFile, link := testutil.CopyAndLink(t, fixture("too-soon.pcap"))
	once := auditFiles(t, FilesConfig{}, capFile)
	for _, second := range []string{capFile, link} {
		t.Run(filepath.Base(second), func(t *testing.T) {
			r := auditFiles(t, FilesConfig{}, capFile, second)
			want := capFile + ": named again as " + second + ", the same file: read once"
			if r.verdict() != runFailed || r.stdout != once.stdout || !strings.Contains(r.stderr, want) {
				t.Errorf("%s, warnings %q; want %s, %q, and the report of the file named once:\n%s", r.verdict(), r.stderr, runFailed, want, r.stdout)
			}
		})
	}
}
