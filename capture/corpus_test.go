package capture

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/backoff-audit/audit/attempt"
)

// corpusDir finds the capture corpus: a folder of real and hostile
// captures with an INDEX.tsv of what tshark reads in each (the format of
// docs/corpus-table.md), named by $AUDIT_CORPUS. Without one the corpus
// tests skip, loudly.
func corpusDir(t testing.TB) string {
	t.Helper()
	dir, err := corpusPath()
	if err != nil {
		t.Skipf("SKIPPED, NOT RUN: capture corpus not found (%v); set AUDIT_CORPUS=DIR to run the corpus tests", err)
	}
	return dir
}

// corpusPath is the corpus folder, or why it is not there.
func corpusPath() (string, error) {
	dir := os.Getenv("AUDIT_CORPUS")
	if dir == "" {
		return "", errors.New("AUDIT_CORPUS is not set")
	}
	if _, err := os.Stat(filepath.Join(dir, "INDEX.tsv")); err != nil {
		return dir, err
	}
	return dir, nil
}

// corpusData calls fn with every corpus file of at most maxSize bytes, for
// fuzz seeds; nothing when the corpus is absent.
func corpusData(maxSize int64, fn func(name string, data []byte)) {
	dir, err := corpusPath()
	if err != nil {
		return
	}
	for _, sub := range []string{".", "hostile", "synthetic"} {
		ents, _ := os.ReadDir(filepath.Join(dir, sub))
		for _, e := range ents {
			if fi, err := e.Info(); err != nil || !fi.Mode().IsRegular() || fi.Size() > maxSize ||
				strings.HasSuffix(e.Name(), ".tsv") || strings.HasSuffix(e.Name(), ".txt") {
				continue
			}
			if data, err := os.ReadFile(filepath.Join(dir, sub, e.Name())); err == nil {
				fn(filepath.Join(sub, e.Name()), data)
			}
		}
	}
}

// corpusEntry is one row of INDEX.tsv.
type corpusEntry struct {
	file             string
	tsharkV4, tshark int64 // tshark's SYN counts: IPv4, IPv6
	readerMessage    string
}

func readIndex(t testing.TB, dir string) []corpusEntry {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "INDEX.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var col map[string]int
	var out []corpusEntry
	for sc.Scan() {
		fields := strings.Split(sc.Text(), "\t")
		if col == nil {
			col = map[string]int{}
			for i, name := range fields {
				col[name] = i
			}
			for _, name := range []string{"file", "tshark_syn_v4", "tshark_syn_v6", "reader_message"} {
				if _, ok := col[name]; !ok {
					t.Fatalf("INDEX.tsv has no column %q", name)
				}
			}
			continue
		}
		get := func(name string) string {
			if i := col[name]; i < len(fields) {
				return fields[i]
			}
			return ""
		}
		v4, err4 := strconv.ParseInt(get("tshark_syn_v4"), 10, 64)
		v6, err6 := strconv.ParseInt(get("tshark_syn_v6"), 10, 64)
		if err4 != nil || err6 != nil {
			t.Fatalf("INDEX.tsv row %q: bad tshark counts", get("file"))
		}
		out = append(out, corpusEntry{file: get("file"), tsharkV4: v4, tshark: v6, readerMessage: get("reader_message")})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// corpusFiles lists every capture under dir: top level, hostile/, synthetic/.
func corpusFiles(t testing.TB, dir string) []string {
	t.Helper()
	var files []string
	for _, sub := range []string{".", "hostile", "synthetic"} {
		ents, err := os.ReadDir(filepath.Join(dir, sub))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			name := e.Name()
			if e.IsDir() || name == "INDEX.tsv" || strings.HasSuffix(name, ".txt") {
				continue
			}
			files = append(files, filepath.ToSlash(filepath.Join(sub, name)))
		}
	}
	return files
}

type corpusResult struct {
	st     attempt.FileInfo
	err    error
	v4, v6 int64
	panic  any
}

// readWithTimeout reads one file in a goroutine so a hang fails the test
// for that file instead of stalling the suite.
func readWithTimeout(t *testing.T, path string, timeout time.Duration) corpusResult {
	t.Helper()
	done := make(chan corpusResult, 1)
	go func() {
		var r corpusResult
		defer func() {
			if p := recover(); p != nil {
				r.panic = p
			}
			done <- r
		}()
		r.st, r.err = ReadFile(path, Options{}, func(s attempt.SYN) {
			if s.Src.Addr().Is4() {
				r.v4++
			} else {
				r.v6++
			}
		})
	}()
	select {
	case r := <-done:
		return r
	case <-time.After(timeout):
		t.Fatalf("%s: no result after %v (hang?)", path, timeout)
		return corpusResult{}
	}
}

// corpusDiffs explains every file where our SYN counts (port 0) differ
// from tshark's. want is ours; why says where the difference comes from.
var corpusDiffs = map[string]struct {
	v4, v6 int64
	why    string
}{
	// A SYN whose pcapng timestamp is outside 1970–2262 (here a negative
	// value read unsigned) is skipped with a warning: no time, no interval.
	"pcpp-pcapng-example.pcapng": {1, 0, "a SYN's timestamp outside 1970–2262 skipped"},
	// Link types we do not decode (skipped as "link type N"): the auditor
	// captures on the server's own interface (Ethernet, cooked, loopback).
	"libpcap-arcnet-rfc1201-arp-icmp-http.pcap": {0, 0, "link type 129 (ARCNET) not decoded"},
	"libpcap-http_PPI.pcap":                     {0, 0, "link type 192 (PPI, 802.11 radio) not decoded"},
	"tcpdump-ipoib.pcap":                        {0, 0, "link type 242 (IP over InfiniBand) not decoded"},
	"zeek-dns-inverse-query.pcap":               {0, 0, "link type 10 (FDDI) not decoded"},
	"zeek-nflog-http.pcap":                      {0, 0, "link type 239 (NFLOG) not decoded"},
	// Tunnels we deliberately do not open (skipped as "tunnel ..."); a
	// client's SYN reaches the server's interface undecorated.
	"libpcap-AH-IPcomp-IPv6.pcap":                    {0, 0, "IPv6 in IPv6 behind AH: tshark counts the inner SYN; ours skips the tunnel"},
	"zeek-cisco-fabric-path.pcap":                    {8, 8, "every SYN appears twice, once inside Cisco FabricPath (ethertype 0x8903); we count the plain copy"},
	"zeek-mixed-vlan-mpls.pcap":                      {2, 0, "one SYN is inside MPLS"},
	"zeek-pbb.pcap":                                  {0, 0, "the SYN is inside 802.1ah provider backbone bridging"},
	"zeek-pppoe-over-qinq.pcap":                      {0, 0, "the SYN is inside PPPoE (over QinQ, which we do walk)"},
	"zeek-tunnels_vxlan-inner-tcp-bad-checksum.pcap": {0, 0, "the SYN is inside VXLAN"},
	// Damage: tshark stops at the first bad pcapng block; block lengths let
	// us step over it and read the valid SYN after it.
	"hostile/pcapng-blocklen-not-mult4.pcapng":    {2, 0, "the misaligned block is skipped and counted; the EPB after it is read"},
	"hostile/pcapng-epb-caplen-4GiB.pcapng":       {2, 0, "the EPB whose caplen exceeds its block is skipped and counted; the EPB after it is read"},
	"hostile/pcapng-epb-missing-interface.pcapng": {2, 0, "the EPB naming interface 7 is skipped and counted; the EPB after it is read"},
	// A header that contradicts the IP header is not a SYN: tshark counts
	// the segment whose data offset (60 bytes) exceeds the 20 bytes the IP
	// total length leaves for it.
	"hostile/tcp-data-offset-lt5.pcap": {2, 0, "data offset 15 beyond the IP payload is skipped, as are offsets 0 and 4"},
}

// corpusDamage pins how each damaged file ends: an error naming the
// problem and offset, or a truncation warning.
var corpusDamage = map[string]struct {
	errHas    string // substring of the error; "" for no error
	truncated bool
}{
	"hostile/pcap-incl-len-300MiB.pcap":         {errHas: "record at offset 114: incl_len 314572800"},
	"hostile/pcap-random-after-header.pcap":     {errHas: "record at offset 24: incl_len 3600967479"},
	"hostile/pcapng-blocklen-0.pcapng":          {errHas: "block at offset 172: total length 0"},
	"hostile/zero-bytes.pcap":                   {errHas: "file has 0 bytes"},
	"hostile/pcap-truncated-mid-record.pcap":    {truncated: true},
	"hostile/pcapng-truncated-mid-block.pcapng": {truncated: true},
	"hostile/pcapng-blocklen-ffffffff.pcapng":   {truncated: true},
}

func TestCorpus(t *testing.T) {
	dir := corpusDir(t)
	index := map[string]corpusEntry{}
	for _, e := range readIndex(t, dir) {
		index[e.file] = e
	}
	files := corpusFiles(t, dir)
	if len(files) == 0 {
		t.Fatalf("no captures under %s", dir)
	}
	for _, name := range files {
		t.Run(name, func(t *testing.T) {
			r := readWithTimeout(t, filepath.Join(dir, name), 30*time.Second)
			if r.panic != nil {
				t.Fatalf("panic: %v", r.panic)
			}
			if r.err != nil && !strings.Contains(r.err.Error(), name) {
				t.Errorf("error does not name the file: %v", r.err)
			}
			dmg := corpusDamage[name]
			switch {
			case dmg.errHas == "" && r.err != nil:
				t.Errorf("unexpected error: %v", r.err)
			case dmg.errHas != "" && (r.err == nil || !strings.Contains(r.err.Error(), dmg.errHas)):
				t.Errorf("error = %v, want one containing %q", r.err, dmg.errHas)
			}
			if r.st.Truncated != dmg.truncated {
				t.Errorf("Truncated = %v, want %v", r.st.Truncated, dmg.truncated)
			}
			for _, w := range r.st.Warnings {
				if !strings.Contains(w, name) || !strings.Contains(w, "offset") && !strings.Contains(w, "dropped") {
					t.Errorf("warning does not name the file and an offset: %q", w)
				}
			}
			if r.st.SYNs != uint64(r.v4+r.v6) {
				t.Errorf("FileInfo.SYNs = %d, fn saw %d", r.st.SYNs, r.v4+r.v6)
			}
			e, ok := index[name]
			if !ok {
				t.Fatalf("%s is not in INDEX.tsv", name)
			}
			wantV4, wantV6 := e.tsharkV4, e.tshark
			if d, ok := corpusDiffs[name]; ok {
				if d.v4 == e.tsharkV4 && d.v6 == e.tshark {
					t.Errorf("corpusDiffs lists %s but we now agree with tshark: drop the entry", name)
				}
				wantV4, wantV6 = d.v4, d.v6
			}
			t.Logf("format=%q packets=%d syn v4=%d v6=%d (tshark %d/%d) truncated=%v err=%v skipped=%v warnings=%q",
				r.st.Format, r.st.Packets, r.v4, r.v6, e.tsharkV4, e.tshark, r.st.Truncated, r.err, r.st.Skipped, r.st.Warnings)
			if r.v4 != wantV4 || r.v6 != wantV6 {
				t.Errorf("SYNs v4/v6 = %d/%d, want %d/%d (tshark %d/%d)", r.v4, r.v6, wantV4, wantV6, e.tsharkV4, e.tshark)
			}
		})
	}
}
