package capture_test

import (
	"bytes"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/capture"
)

// A client's SYN to port 8081, serialized with gopacket.
func synFrame() []byte {
	eth := &layers.Ethernet{SrcMAC: make([]byte, 6), DstMAC: make([]byte, 6), EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: []byte{127, 0, 0, 1}, DstIP: []byte{127, 0, 0, 1}}
	tcp := &layers.TCP{SrcPort: 40000, DstPort: 8081, Seq: 1234, SYN: true, Window: 65535}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, eth, ip, tcp); err != nil {
		log.Fatal(err)
	}
	return buf.Bytes()
}

func ExampleReadFile() {
	dir, err := os.MkdirTemp("", "capture-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "retry.pcap")

	var file bytes.Buffer
	w := pcapgo.NewWriter(&file)
	if err := w.WriteFileHeader(65535, layers.LinkTypeEthernet); err != nil {
		log.Fatal(err)
	}
	frame := synFrame()
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for i, at := range []time.Duration{0, time.Second, 3 * time.Second} { // a kernel retransmitting one SYN
		ci := gopacket.CaptureInfo{Timestamp: t0.Add(at), CaptureLength: len(frame), Length: len(frame)}
		if err := w.WritePacket(ci, frame); err != nil {
			log.Fatal(i, err)
		}
	}
	if err := os.WriteFile(path, file.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}

	st, err := capture.ReadFile(path, capture.Options{Port: 8081}, func(s attempt.SYN) {
		fmt.Println(s.Time.Format(time.TimeOnly), s.Src, "->", s.Dst, "seq", s.Seq)
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %d packets, %d SYNs\n", st.Format, st.Packets, st.SYNs)
	// Output:
	// 03:04:05 127.0.0.1:40000 -> 127.0.0.1:8081 seq 1234
	// 03:04:06 127.0.0.1:40000 -> 127.0.0.1:8081 seq 1234
	// 03:04:08 127.0.0.1:40000 -> 127.0.0.1:8081 seq 1234
	// pcap: 3 packets, 3 SYNs
}
