package capture

import (
	"bufio"
	"fmt"
	"io"
	"runtime"
	"sync"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// LiveFile is a capture file that several live captures write into
// (LiveConfig.File), each as an interface of its own: pcapng, whose
// Interface Description Blocks give each its snap length, so the retry
// port's packets stay header-only beside the control port's whole ones.
// Blocks are written as the captures' readers, each on its own goroutine,
// hand them over: each interface's packets are in their capture's order,
// and the two interfaces interleave in the order they were read, which is
// time order up to the readers' scheduling lag. pcapng asks no more, and
// the readers (ReadFile, flows) need no more: attempts are sorted by time,
// and a connection's segments are all on one interface. A merge by
// timestamp would have to hold packets back for as long as the other
// capture might lag, a buffer bounded by guesswork.
//
// LiveConfig.Write, one capture alone, is a classic pcap file, as ever.
type LiveFile struct {
	mu  sync.Mutex // guards all: Run writes, Close flushes, from each capture
	bw  *bufio.Writer
	pc  *pcapgo.Writer   // LiveConfig.Write
	ng  *pcapgo.NgWriter // LiveConfig.File, once it has an interface
	wer error
	// dirty is set when bw holds packets; since is the timestamp of the
	// first of them.
	dirty bool
	since time.Time
}

// NewLiveFile returns a pcapng file on w for the captures given it as
// LiveConfig.File. Its section header is written with the first
// capture's interface, by OpenLive.
func NewLiveFile(w io.Writer) *LiveFile {
	return &LiveFile{bw: bufio.NewWriterSize(w, writeBuffer)}
}

// newPcapFile writes the header of a classic pcap file, nanosecond
// timestamps, on w (LiveConfig.Write).
func newPcapFile(w io.Writer, snaplen int, lt layers.LinkType) (*LiveFile, error) {
	f := &LiveFile{bw: bufio.NewWriterSize(w, writeBuffer)}
	f.pc = pcapgo.NewWriterNanos(f.bw)
	err := f.pc.WriteFileHeader(uint32(snaplen), lt)
	if err == nil {
		err = f.bw.Flush()
	}
	if err != nil {
		return nil, fmt.Errorf("write capture file header: %w", err)
	}
	return f, nil
}

// liveSection describes the program in the section header.
var liveSection = pcapgo.NgWriterOptions{SectionInfo: pcapgo.NgSectionInfo{
	Hardware: runtime.GOARCH, OS: runtime.GOOS, Application: "audit live"}}

// addInterface describes one capture, and returns its interface number.
// The first also writes the section header; both are flushed at once, so
// the file is valid from then on.
func (f *LiveFile) addInterface(ifc pcapgo.NgInterface) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.wer != nil {
		return 0, f.wer
	}
	var id int
	var err error
	if f.ng == nil {
		// bw is a bufio.Writer larger than NgWriter's own: NgWriter
		// writes into it directly.
		f.ng, err = pcapgo.NewNgWriterInterface(f.bw, ifc, liveSection)
	} else {
		id, err = f.ng.AddInterface(ifc)
	}
	if err == nil {
		err = f.bw.Flush()
	}
	if err != nil {
		f.wer = fmt.Errorf("write capture file interface %d: %w", id, err)
		return 0, f.wer
	}
	return id, nil
}

// write appends a packet (of interface ci.InterfaceIndex, in pcapng),
// flushing the file when the last flush is flushEvery old by the
// packets' clock.
func (f *LiveFile) write(ci gopacket.CaptureInfo, data []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.wer != nil {
		return f.wer
	}
	if f.pc != nil {
		f.wer = f.pc.WritePacket(ci, data)
	} else {
		f.wer = f.ng.WritePacket(ci, data)
	}
	if f.wer != nil {
		f.wer = fmt.Errorf("write capture file: %w", f.wer)
		return f.wer
	}
	switch {
	case !f.dirty:
		f.dirty, f.since = true, ci.Timestamp
	case ci.Timestamp.Sub(f.since) >= flushEvery:
		return f.flushLocked()
	}
	return nil
}

// flush writes what the file's buffer holds.
func (f *LiveFile) flush() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.flushLocked()
}

func (f *LiveFile) flushLocked() error {
	if !f.dirty || f.wer != nil {
		return f.wer
	}
	f.dirty = false
	if f.wer = f.bw.Flush(); f.wer != nil {
		f.wer = fmt.Errorf("write capture file: %w", f.wer)
	}
	return f.wer
}
