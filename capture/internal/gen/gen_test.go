package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// committed is where `go run ./capture/internal/gen -out testdata` writes.
var committed = filepath.Join("..", "..", "..", "testdata")

// TestFixturesAreReproducible regenerates every fixture and requires the
// committed file to be byte-for-byte the same: a fixture is only ever
// changed by changing the generator. The files compared are the ones the
// generator wrote into an empty folder, so a fixture that writes several
// files (rotated.pcap) has each of them checked.
func TestFixturesAreReproducible(t *testing.T) {
	dir := t.TempDir()
	if err := writeFixtures(dir); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) < len(fixtures) {
		t.Errorf("generator wrote %d files for %d fixtures", len(entries), len(fixtures))
	}
	for _, e := range entries {
		name := e.Name()
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join(committed, name))
		if err != nil {
			t.Errorf("%v (regenerate with: go run ./capture/internal/gen -out testdata)", err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("testdata/%s differs from the generator's output (%d bytes, committed %d): regenerate with go run ./capture/internal/gen -out testdata",
				name, len(got), len(want))
		}
	}
}

// TestBenchCapture decodes a small benchmark capture with gopacket and checks
// the generator's own count of retry-port SYNs, the packet count and time
// order.
func TestBenchCapture(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bench.pcap")
	cfg := benchConfig{packets: 20000, peers: 200, seed: 3}
	st, err := writeBench(path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var packets, syns, v6syns int
	var last int64
	for packets <= cfg.packets {
		data, ci, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("packet %d: %v", packets+1, err)
		}
		packets++
		if ns := ci.Timestamp.UnixNano(); ns < last {
			t.Fatalf("packet %d at %v goes back in time", packets, ci.Timestamp)
		} else {
			last = ns
		}
		p := gopacket.NewPacket(data, layers.LinkTypeEthernet, gopacket.DecodeOptions{Lazy: true, NoCopy: true})
		tcp, ok := p.Layer(layers.LayerTypeTCP).(*layers.TCP)
		if !ok || !tcp.SYN || tcp.ACK || tcp.DstPort != retryPort {
			continue
		}
		syns++
		if p.Layer(layers.LayerTypeIPv6) != nil {
			v6syns++
		}
	}
	if packets != cfg.packets || st.packets != cfg.packets {
		t.Errorf("read %d packets, generator says %d, asked for %d", packets, st.packets, cfg.packets)
	}
	if syns != st.retrySYNs {
		t.Errorf("decoded %d SYNs to port %d, generator says %d", syns, retryPort, st.retrySYNs)
	}
	if syns < st.attempts {
		t.Errorf("%d SYNs for %d attempts", syns, st.attempts)
	}
	if v6syns == 0 || v6syns == syns {
		t.Errorf("%d of %d SYNs over IPv6, want a mix", v6syns, syns)
	}
}

func BenchmarkWriteBench(b *testing.B) {
	path := filepath.Join(b.TempDir(), "bench.pcap")
	for b.Loop() {
		if _, err := writeBench(path, benchConfig{packets: 100000, peers: 1000, seed: 1}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(100000, "packets/op")
}
