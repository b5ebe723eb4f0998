package flows_test

// Audit on hostile input: a connection past the decoder's budget, strings
// made to fool a terminal, bytes captured twice, different, a file named
// twice, a FIFO no writer ever opens.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/backoff-audit/audit/flows"
	"github.com/backoff-audit/audit/internal/testutil"
)

// frames returns the bytes write writes with a Framer.
func frames(write func(fr *http2.Framer)) []byte {
	var b bytes.Buffer
	write(http2.NewFramer(&b, nil))
	return b.Bytes()
}

// connCapture writes segs as a capture file and returns its path.
func connCapture(t *testing.T, segs []testutil.Seg) string {
	return testutil.WriteFile(t, "conn.pcap", testutil.Pcap(segs))
}

// A connection with more events than the decoder keeps: 25 000 PING and
// ACK pairs, then the server's GOAWAY ENHANCE_YOUR_CALM too_many_pings.
// The GOAWAY and the keepalive finding stay, the PINGs are all counted,
// the verdict is a problem, and what was dropped is said.
func TestH2EventBudget(t *testing.T) {
	client := [][]byte{[]byte(http2.ClientPreface), frames(func(fr *http2.Framer) { fr.WriteSettings() })}
	server := [][]byte{frames(func(fr *http2.Framer) { fr.WriteSettings() })}
	const pings = 25000
	for i := range pings {
		var d [8]byte
		binary.BigEndian.PutUint64(d[:], uint64(i))
		client = append(client, frames(func(fr *http2.Framer) { fr.WritePing(false, d) }))
		server = append(server, frames(func(fr *http2.Framer) { fr.WritePing(true, d) }))
	}
	server = append(server, frames(func(fr *http2.Framer) { fr.WriteGoAway(0, http2.ErrCodeEnhanceYourCalm, []byte("too_many_pings")) }))
	capFile := connCapture(t, testutil.Conversation(client, server))

	out, problems := audit(t, []string{capFile}, flows.AuditOptions{Format: "text"})
	for _, want := range []string{
		"server GOAWAY ENHANCE_YOUR_CALM",
		fmt.Sprintf("client PINGs: %d, %d ACKed", pings, pings),
		"the server answered GOAWAY ENHANCE_YOUR_CALM too_many_pings after 25000",
		"not kept past the decoder's limits: 30002 events",
		"verdict: 1 problem",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	if problems != 1 {
		t.Errorf("%d problems, want 1 (too_many_pings)", problems)
	}
	if t.Failed() {
		t.Logf("report:\n%s", out)
	}
	out, problems = audit(t, []string{capFile}, flows.AuditOptions{Format: "json"})
	if problems != 1 || !strings.Contains(out, `"dropped": {`) || !strings.Contains(out, `"events": 30002`) {
		t.Errorf("JSON: %d problems, want 1 and the dropped events counted", problems)
	}
}

// A captured :path made of terminal escapes and a fake verdict line is
// printed quoted, escapes written out, never raw: the text holds no
// control character but its newlines, and one verdict line.
func TestH2QuotesCapturedStrings(t *testing.T) {
	const evil = "/x\x1b[2J\x1b]0;owned\a\r\nverdict: no problem found"
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", evil}, {":authority", "x"}, {"content-type", "application/grpc"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	client := [][]byte{[]byte(http2.ClientPreface), frames(func(fr *http2.Framer) {
		fr.WriteSettings()
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true})
	})}
	server := [][]byte{frames(func(fr *http2.Framer) {
		fr.WriteSettings()
		fr.WriteRSTStream(1, http2.ErrCodeRefusedStream)
		fr.WriteGoAway(0, http2.ErrCodeNo, []byte("bye\x1b[2J"))
	})}
	out, _ := audit(t, []string{connCapture(t, testutil.Conversation(client, server))}, flows.AuditOptions{Format: "text"})
	if i := strings.IndexFunc(out, func(r rune) bool { return r != '\n' && (r < 0x20 || r == 0x7f) }); i >= 0 {
		t.Errorf("the text holds control character %q at %d:\n%q", out[i], i, out)
	}
	for _, want := range []string{`RPCs: "/x\x1b[2J\x1b]0;owned\a\r\nverdict: no problem found" ×1`, `(/x\x1b[2J`} {
		if !strings.Contains(out, want) {
			t.Errorf("the text lacks %s:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "\nverdict: "); n != 1 {
		t.Errorf("%d verdict lines; want 1:\n%s", n, out)
	}
}

// A client's first segment captured twice with different bytes (other
// bytes first, the real preface after) is shown as a damaged connection,
// with the reason, and is a problem: never "0 connections".
func TestH2RetransmitDiffers(t *testing.T) {
	client := [][]byte{[]byte(http2.ClientPreface), frames(func(fr *http2.Framer) { fr.WriteSettings() })}
	server := [][]byte{frames(func(fr *http2.Framer) { fr.WriteSettings() })}
	segs := testutil.Conversation(client, server)
	// segs[3] is the preface at the client's ISN+1: other bytes first.
	other := segs[3]
	other.Data = bytes.Repeat([]byte("x"), len(other.Data))
	segs = append(segs[:3], append([]testutil.Seg{other}, segs[3:]...)...)
	out, problems := audit(t, []string{connCapture(t, segs)}, flows.AuditOptions{Format: "text"})
	for _, want := range []string{"1 connection in", "1 damaged",
		"damaged: the client's bytes at offset 0 were captured twice, different (first xxxx", "which the server read is unknown"} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	if problems == 0 {
		t.Error("no problem; want one (a damaged connection)")
	}
}

// A capture file named twice, by the same path or a link to it, is read
// once with a warning: the connections are those of the file named once.
func TestH2SameFileTwice(t *testing.T) {
	capFile, link := testutil.CopyAndLink(t, filepath.Join("..", "testdata", "too-soon.pcap"))
	opt := flows.AuditOptions{Format: "json"}
	once, err := flows.Audit([]string{capFile}, opt)
	if err != nil || once.Connections.Len() == 0 {
		t.Fatalf("the file once: %v, %d connections; want some", err, once.Connections.Len())
	}
	for _, second := range []string{capFile, link} {
		t.Run(filepath.Base(second), func(t *testing.T) {
			twice, err := flows.Audit([]string{capFile, second}, opt)
			want := capFile + ": named again as " + second + ", the same file: read once"
			if err != nil || twice.Connections.Len() != once.Connections.Len() || !strings.Contains(strings.Join(twice.Warnings, "\n"), want) {
				t.Errorf("%v, %d connections, warnings %q; want %d as from the file once, and %q", err, twice.Connections.Len(), twice.Warnings, once.Connections.Len(), want)
			}
		})
	}
}

// Done stops an open that waits: a FIFO no writer has opened reads
// nothing, with the warning of a read interrupted at offset 0, and nothing
// is judged.
func TestH2InterruptedFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	// Time for Audit to reach the open, which has no writer to wait for.
	time.AfterFunc(200*time.Millisecond, func() { close(done) })
	rep, err := flows.Audit([]string{fifo}, flows.AuditOptions{Format: "text", Done: done})
	want := fifo + ": read interrupted at offset 0: what follows was not read"
	if !errors.Is(err, flows.ErrNoConnection) || rep == nil || !strings.Contains(strings.Join(rep.Warnings, "\n"), want) {
		t.Errorf("Audit: %v, report %+v; want ErrNoConnection and %q", err, rep, want)
	}
}
