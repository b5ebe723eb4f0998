package main

import (
	"bufio"
	"fmt"
	"os"

	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// pcapOut is a nanosecond pcap file of Ethernet frames being written.
type pcapOut struct {
	*pcapgo.Writer
	path string
	f    *os.File
	bw   *bufio.Writer
}

// createPcap creates path and writes its file header.
func createPcap(path string) (*pcapOut, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	o := &pcapOut{path: path, f: f, bw: bufio.NewWriterSize(f, 4<<20)}
	o.Writer = pcapgo.NewWriterNanos(o.bw)
	if err := o.WriteFileHeader(snaplen, layers.LinkTypeEthernet); err != nil {
		f.Close()
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	return o, nil
}

// Close flushes what is buffered and closes the file; both errors name it.
func (o *pcapOut) Close() error {
	if err := o.bw.Flush(); err != nil {
		o.f.Close()
		return fmt.Errorf("write %s: %w", o.path, err)
	}
	return o.f.Close()
}
