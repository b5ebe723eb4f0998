package capture

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/gopacket/gopacket/layers"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/internal/infile"
)

// Options for reading.
type Options struct {
	// Port keeps SYNs to this destination port; 0 keeps SYNs to any port
	// (used to find candidate ports).
	Port uint16
	// Progress, when set, is called now and then with the bytes of the file
	// read so far and the file's size (-1 when unknown). For a compressed
	// file both count compressed bytes.
	Progress func(done, total int64)
	// Segments, when set, is called with the segments the attempts' fates
	// are read from (docs/spec.md §7.2): those to or from the port (with
	// Port 0, any port a SYN went to before them) with SYN-ACK, RST or FIN
	// set, or that carry bytes. The view is valid only during the call.
	Segments func(*attempt.SegmentView)
	// Payloads, when set, is called with every TCP segment to or from one
	// of PayloadPorts (from any port when PayloadPorts is empty), SYNs and
	// pure ACKs included, with its Payload: what TCP reassembly (package
	// flows) reads. It does not change what fn and Segments get. The view
	// is valid only during the call.
	Payloads     func(*attempt.SegmentView)
	PayloadPorts []uint16
	// Done, when closed, stops the read where it is, as if the file ended
	// there but without calling it truncated: what was read is kept, and
	// a warning gives the offset (Ctrl-C on an endless input).
	Done <-chan struct{}
	// Stdin is what the path "-" reads: os.Stdin when nil.
	Stdin io.Reader
	// otherTCP, when set, is called once, when the read first sees a
	// TCP segment other than a SYN (FileInfo.OtherTCP), at the latest by
	// the end of the chunk it is in.
	otherTCP func()
}

// Stdin is the path that names standard input.
const Stdin = "-"

// Record problems counted in attempt.FileInfo.Skipped.
const (
	SkipBadBlock       = "pcapng corrupt block"
	SkipNoInterface    = "pcapng packet names a missing interface"
	SkipNoTimestamp    = "pcapng simple packet block has no timestamp"
	SkipOversize       = "packet larger than 262144 bytes"
	SkipSectionVersion = "pcapng section of unknown version"
	SkipBadTSResol     = "pcapng interface with unusable if_tsresol"
	SkipTooManyIfaces  = "pcapng packet on an interface beyond 65536 per section"
	SkipBadTime        = "pcapng timestamp outside 1970–2262"
)

// maxRecord caps the bytes of one packet record the reader will hold. It is
// libpcap's MAXIMUM_SNAPLEN (and Wireshark's limit for these link types):
// no tool writes a longer Ethernet or IP frame, so a longer length is
// corruption. It bounds memory whatever a length field says; a header's
// snap length does not (files in the wild declare 0 and 2^31).
const maxRecord = 262144

// maxWarnings keeps a file full of damage from growing the report without
// bound; the counts in Skipped stay exact.
const maxWarnings = 100

// ReadFile streams one capture and calls fn for every TCP SYN-without-ACK
// (ECE/CWR allowed) to opt.Port. The format is detected from the content:
// pcap (either byte order, micro- or nanosecond), pcapng, either of them
// gzip-compressed. The path "-" (Stdin) reads standard input, named so in
// messages.
//
// A file that ends inside a record is analysed up to there: Truncated is
// set, a warning gives the offset, and err is nil. A damaged pcapng block
// is skipped and counted, since block lengths let the reader find the next
// one; damage a pcap file gives no way past stops the read with an error
// naming the file and the byte offset. fn sees what came before it.
func ReadFile(path string, opt Options, fn func(attempt.SYN)) (attempt.FileInfo, error) {
	if path == Stdin {
		var in io.Reader = os.Stdin
		if opt.Stdin != nil {
			in = opt.Stdin
		}
		st, err := readStream("standard input", stoppable(in, opt.Done), -1, opt, fn)
		st.Path = Stdin
		return st, err
	}
	// Opening a FIFO waits for a writer, and reading a pipe for its
	// bytes: Done stops either at once, before the first byte as after.
	f, err := infile.Open(path, opt.Done)
	if errors.Is(err, infile.ErrInterrupted) {
		return readStream(path, interrupted{}, -1, opt, fn)
	}
	if err != nil {
		return attempt.FileInfo{Path: path, Skipped: map[string]uint64{}}, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		return readStream(path, f, fi.Size(), opt, fn)
	}
	return readStream(path, stoppable(f, opt.Done), -1, opt, fn)
}

// stoppable is r, read so that done stops a Read that waits.
func stoppable(r io.Reader, done <-chan struct{}) io.Reader {
	if done == nil {
		return r
	}
	return infile.NewReader(r, done)
}

// interrupted is the stream of a file whose opening Done stopped.
type interrupted struct{}

func (interrupted) Read([]byte) (int, error) { return 0, infile.ErrInterrupted }

// countingReader counts bytes for Options.Progress; the count is read
// from the parsing goroutine while a reading goroutine adds to it.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// asyncMin is the size from which reading overlaps parsing (asyncSource).
const asyncMin = 2 * chunkSize

// readStream is ReadFile's core, on any reader; name appears in messages.
// size is the stream's length when known, else -1.
func readStream(name string, r io.Reader, size int64, opt Options, fn func(attempt.SYN)) (attempt.FileInfo, error) {
	return readSource(name, r, size, opt, fn, defaultSource)
}

// defaultSource reads small input in the caller's goroutine and overlaps
// reading with parsing for the rest.
func defaultSource(r io.Reader, size int64, gz bool, done <-chan struct{}) source {
	if size >= 0 && size < asyncMin && !gz || size >= 0 && size < asyncMin/8 {
		return &syncSource{r: r, size: int(min(max(size+1, 4096), chunkSize)), done: done}
	}
	return newAsyncSource(r, chunkSize, size < 0, done)
}

// readSource is readStream with the choice of chunk source, so tests can
// compare sources and force tiny chunks.
func readSource(name string, r io.Reader, size int64, opt Options, fn func(attempt.SYN),
	newSource func(r io.Reader, size int64, gz bool, done <-chan struct{}) source) (attempt.FileInfo, error) {
	st := attempt.FileInfo{Path: name, Skipped: map[string]uint64{}}
	cr := &countingReader{r: r}
	br := bufio.NewReaderSize(cr, 512) // to peek at the magic; large reads bypass it
	var src io.Reader = br
	head, _ := br.Peek(4)
	gz := len(head) >= 2 && head[0] == 0x1f && head[1] == 0x8b
	if gz {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return st, fmt.Errorf("read %s: gzip header: %w", name, err)
		}
		defer zr.Close()
		src = zr
	}
	b := newBuffer(newSource(src, size, gz, opt.Done))
	defer b.close()
	if opt.Progress != nil {
		b.progress = func() { opt.Progress(cr.n.Load(), size) }
	}
	rd := &reader{name: name, b: b, st: &st, port: opt.Port, fn: fn, dec: NewDecoder(), segFn: opt.Segments, otherTCP: opt.otherTCP}
	if rd.segFn != nil {
		rd.dec.ports = new(portSet)
		if rd.port != 0 {
			rd.dec.watch(rd.port)
		}
	}
	if opt.Payloads != nil {
		rd.pay = opt.Payloads
		rd.pdec = NewDecoder()
		rd.pdec.anyTCP = true
		if len(opt.PayloadPorts) > 0 {
			rd.payPorts = new(portSet)
			for _, p := range opt.PayloadPorts {
				rd.payPorts.add(p)
			}
		}
	}
	err := rd.run()
	st.OtherTCP = rd.dec.other
	b.close()
	if gz {
		st.Format += " gzip"
	}
	st.Bytes = b.off
	if opt.Progress != nil {
		opt.Progress(cr.n.Load(), size)
	}
	return st, err
}

// reader holds one read's state.
type reader struct {
	name string
	b    *buffer
	st   *attempt.FileInfo
	port uint16
	fn   func(attempt.SYN)
	dec  *Decoder
	// segFn receives the segments of Options.Segments, in view.
	segFn func(*attempt.SegmentView)
	view  attempt.SegmentView
	// pay receives the segments of Options.Payloads, of the ports of
	// payPorts (nil: any), decoded by pdec into pview.
	pay      func(*attempt.SegmentView)
	payPorts *portSet
	pdec     *Decoder
	pview    attempt.SegmentView
	// otherTCP is Options.otherTCP, until it is called.
	otherTCP func()
}

// sawOther calls otherTCP once the decoder has counted a segment other
// than a SYN.
func (rd *reader) sawOther() {
	if rd.otherTCP != nil && rd.dec.other > 0 {
		rd.otherTCP()
		rd.otherTCP = nil
	}
}

const (
	magicMicro   = 0xa1b2c3d4
	magicNano    = 0xa1b23c4d
	magicSection = 0x0a0d0d0a // pcapng Section Header Block type, a palindrome
)

func (rd *reader) run() error {
	if !rd.b.fill(4) {
		if rd.b.err == errInterrupted {
			return rd.truncated("capture header", 4)
		}
		if err := rd.streamErr(); err != nil {
			return err
		}
		return fmt.Errorf("read %s: file has %d bytes, too short for a capture header", rd.name, rd.b.avail())
	}
	h := rd.b.bytes()
	le, be := binary.LittleEndian.Uint32(h), binary.BigEndian.Uint32(h)
	switch {
	case le == magicSection:
		rd.st.Format = "pcapng"
		return rd.pcapng()
	case le == magicMicro:
		return rd.pcap(littleEndian, false)
	case be == magicMicro:
		return rd.pcap(bigEndian, false)
	case le == magicNano:
		return rd.pcap(littleEndian, true)
	case be == magicNano:
		return rd.pcap(bigEndian, true)
	}
	return fmt.Errorf("read %s: unknown file format (magic % x): not pcap, pcapng or gzip", rd.name, h[:4])
}

// streamErr turns a failure of the underlying reader (not its clean end)
// into an error; a gzip stream cut short is a truncation, not a failure.
func (rd *reader) streamErr() error {
	err := rd.b.err
	if err == nil || err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return nil
	}
	return fmt.Errorf("read %s: at offset %d: %w", rd.name, rd.b.off+int64(rd.b.avail()), err)
}

// truncated records that the stream ended inside a record or block.
func (rd *reader) truncated(what string, need int64) error {
	return rd.truncatedAt(what, rd.b.off, need, int64(rd.b.avail()))
}

// truncatedAt is truncated for a record starting at off of which have
// bytes were there.
func (rd *reader) truncatedAt(what string, off, need, have int64) error {
	if rd.b.err == errInterrupted {
		rd.warnf("read interrupted at offset %d: what follows was not read", off)
		return nil
	}
	if err := rd.streamErr(); err != nil {
		return err
	}
	rd.st.Truncated = true
	rd.warnf("%s at offset %d: file ends inside it (need %d bytes, have %d)", what, off, need, have)
	return nil
}

func (rd *reader) errorf(format string, args ...any) error {
	return fmt.Errorf("read %s: %s", rd.name, fmt.Sprintf(format, args...))
}

func (rd *reader) warnf(format string, args ...any) {
	if len(rd.st.Warnings) == maxWarnings {
		rd.st.Warnings = append(rd.st.Warnings, rd.name+": further warnings dropped")
	}
	if len(rd.st.Warnings) > maxWarnings {
		return
	}
	rd.st.Warnings = append(rd.st.Warnings, rd.name+": "+fmt.Sprintf(format, args...))
}

// frame decodes one packet and hands a SYN to fn, or a segment to segFn.
func (rd *reader) frame(lt layers.LinkType, data []byte, sec, nsec int64) {
	rd.st.Packets++
	ip, tcp, skip := rd.dec.find(lt, data)
	if len(tcp) == 0 {
		if skip != "" {
			rd.st.Skipped[skip]++
		}
		return
	}
	if tcp[13]&(tcpSYN|tcpACK) != tcpSYN {
		rd.segment(ip, tcp, sec, nsec)
		return
	}
	dport := binary.BigEndian.Uint16(tcp[2:])
	if rd.port != 0 && dport != rd.port {
		return
	}
	syn := synOf(ip, tcp)
	syn.Time = time.Unix(sec, nsec).UTC()
	rd.st.SYNs++
	if rd.segFn != nil && rd.port == 0 {
		rd.dec.watch(dport)
	}
	rd.sawOther()
	rd.fn(syn)
}

// payload hands a TCP segment of a payload port to pay.
func (rd *reader) payload(lt layers.LinkType, data []byte, sec, nsec int64) {
	ip, tcp := rd.pdec.anySegment(lt, data)
	if len(tcp) == 0 {
		return
	}
	if p := rd.payPorts; p != nil && !p.has(binary.BigEndian.Uint16(tcp)) && !p.has(binary.BigEndian.Uint16(tcp[2:])) {
		return
	}
	sec, nsec = normalNsec(sec, nsec)
	rd.pdec.viewOf(&rd.pview, ip, tcp, sec, int32(nsec))
	rd.pay(&rd.pview)
}

// normalNsec normalises nanoseconds as time.Unix does: a pcap
// microsecond field may pass a second.
func normalNsec(sec, nsec int64) (int64, int64) {
	if uint64(nsec) >= 1e9 {
		sec, nsec = sec+nsec/1e9, nsec%1e9
		if nsec < 0 {
			sec, nsec = sec-1, nsec+1e9
		}
	}
	return sec, nsec
}

// segment hands a segment find returned to segFn.
func (rd *reader) segment(ip, tcp []byte, sec, nsec int64) {
	sec, nsec = normalNsec(sec, nsec)
	rd.dec.viewOf(&rd.view, ip, tcp, sec, int32(nsec))
	rd.segFn(&rd.view)
}
