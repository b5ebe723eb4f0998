package capture

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/backoff-audit/audit/attempt"
	"github.com/google/go-cmp/cmp"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// TestLiveFileTwoCaptures: the retry port's capture (headers) and the
// control port's (whole packets) write one pcapng file, each on its own
// interface, their packets handed over out of time order across the two
// as two readers may. The file keeps each interface's snap length and
// order, and reads back whole: every SYN to the nanosecond, the control
// port's data uncut.
func TestLiveFileTwoCaptures(t *testing.T) {
	const retry, ctl = 8081, 8080
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	frame := func(sport, dport uint16, flags byte, data int) []byte {
		return ethFrame(0x0800, ipv4Packet("127.0.0.1", "127.0.0.1", 6,
			append(tcpHeader(sport, dport, 1000, flags, 5), make([]byte, data)...)))
	}
	type pkt struct {
		iface int
		ts    time.Time
		data  []byte
	}
	// In the order the two readers handed them over: by time within each
	// interface, not across them.
	pkts := []pkt{
		{0, at(0), frame(40001, retry, flagSYN, 0)},
		{0, at(10), frame(40002, retry, flagSYN, 0)},
		{1, at(2), frame(50000, ctl, flagSYN, 0)},
		{1, at(5), frame(50000, ctl, flagACK, 3000)},
		{0, at(20), frame(40003, retry, flagSYN, 0)},
		{1, at(15), frame(50000, ctl, flagACK, 40000)},
	}
	var buf bytes.Buffer
	f := NewLiveFile(&buf)
	for i, cfg := range []LiveConfig{{Iface: "lo", Port: retry}, {Iface: "lo", Port: ctl, Whole: true}} {
		id, err := f.addInterface(ngInterface(cfg, layers.LinkTypeEthernet, FateFilter(cfg.Port)))
		if err != nil || id != i {
			t.Fatalf("interface %d: id %d, %v", i, id, err)
		}
	}
	// What each capture keeps of a packet.
	snaps := []int{liveSnapLen, WholeSnapLen}
	for _, p := range pkts {
		data := p.data[:min(len(p.data), snaps[p.iface])]
		ci := gopacket.CaptureInfo{Timestamp: p.ts, CaptureLength: len(data), Length: len(p.data), InterfaceIndex: p.iface}
		if err := f.write(ci, data); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.flush(); err != nil {
		t.Fatal(err)
	}

	// Block by block: each interface's snap length, the packets in the
	// order written, each with its interface and captured length.
	r, err := pcapgo.NewNgReader(bytes.NewReader(buf.Bytes()), pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for {
		data, ci, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, cmpKey(ci.InterfaceIndex, ci.Timestamp, len(data), ci.Length))
	}
	for _, p := range pkts {
		want = append(want, cmpKey(p.iface, p.ts, min(len(p.data), snaps[p.iface]), len(p.data)))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("blocks (-written +read):\n%s", diff)
	}
	for i := range snaps {
		// One snap length for all: libpcap refuses a file of two.
		if ifc, err := r.Interface(i); err != nil || ifc.SnapLength != WholeSnapLen {
			t.Errorf("interface %d: snap length %d, %v; want %d", i, ifc.SnapLength, err, WholeSnapLen)
		}
	}

	// What audit pcap reads: every SYN, to the nanosecond, and the
	// control port's bytes uncut.
	path := filepath.Join(t.TempDir(), "two.pcapng")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var syns []time.Time
	var ctlBytes []int
	st, err := ReadFile(path, Options{PayloadPorts: []uint16{ctl}, Payloads: func(v *attempt.SegmentView) {
		if len(v.Payload) > 0 {
			ctlBytes = append(ctlBytes, len(v.Payload))
		}
	}}, func(s attempt.SYN) { syns = append(syns, s.Time) })
	if err != nil {
		t.Fatal(err)
	}
	if st.Format != "pcapng" || st.Packets != uint64(len(pkts)) || st.Truncated || len(st.Skipped) != 0 {
		t.Errorf("read back: %+v; want pcapng, %d packets, complete", st, len(pkts))
	}
	slices.SortFunc(syns, time.Time.Compare)
	if diff := cmp.Diff([]time.Time{at(0), at(2), at(10), at(20)}, syns); diff != "" {
		t.Errorf("SYN times (-written +read):\n%s", diff)
	}
	if diff := cmp.Diff([]int{3000, 40000}, ctlBytes); diff != "" {
		t.Errorf("control port data (-written +read):\n%s", diff)
	}

	// tcpdump reads it too, where it is installed.
	tcpdump, err := exec.LookPath("tcpdump")
	if err != nil {
		t.Logf("tcpdump not installed: the file's reading by libpcap is not checked")
		return
	}
	out, err := exec.Command(tcpdump, "-nn", "-r", path).CombinedOutput()
	if lines := bytes.Count(out, []byte(" IP ")); err != nil || lines != len(pkts) {
		t.Errorf("tcpdump -r: %v, %d packets; want %d\n%s", err, lines, len(pkts), out)
	}
}

// cmpKey is a packet as the comparison shows it.
func cmpKey(iface int, ts time.Time, caplen, length int) string {
	return fmt.Sprintf("interface %d %s %d/%d bytes", iface, ts.UTC().Format(time.RFC3339Nano), caplen, length)
}

// A capture writes one file: Write (its own pcap) or File (shared pcapng).
func TestOpenLiveWriteAndFile(t *testing.T) {
	_, err := OpenLive(LiveConfig{Iface: "lo", Port: 9, Write: io.Discard, File: NewLiveFile(io.Discard)})
	if err == nil || !strings.Contains(err.Error(), "both Write and File") {
		t.Errorf("OpenLive with Write and File: %v; want an error naming both", err)
	}
}
