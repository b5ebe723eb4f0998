package flows_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/backoff-audit/audit/flows"
	"github.com/backoff-audit/audit/internal/testutil"
)

// withoutSegment writes a copy of a classic pcap file of Ethernet and
// IPv4 without the n-th TCP segment that carries bytes.
func withoutSegment(t *testing.T, path string, n int) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := append([]byte(nil), b[:24]...)
	for i, off := 0, 24; off+16 <= len(b); {
		end := off + 16 + int(binary.LittleEndian.Uint32(b[off+8:]))
		ip := b[off+16+14 : end]
		ihl := int(ip[0]&0x0f) * 4
		data := int(binary.BigEndian.Uint16(ip[2:])) - ihl - int(ip[ihl+12]>>4)*4
		if data > 0 {
			i++
		}
		if data <= 0 || i != n {
			out = append(out, b[off:end]...)
		}
		off = end
	}
	return testutil.WriteFile(t, "lost.pcap", out)
}

// hugeBlockPcapng is a section header, an interface, then an enhanced
// packet block whose length says 4 GiB, inside which the file ends.
func hugeBlockPcapng() []byte {
	le := binary.LittleEndian
	ng := le.AppendUint32(nil, 0x0a0d0d0a)
	ng = le.AppendUint32(ng, 28)
	ng = le.AppendUint32(ng, 0x1a2b3c4d)
	ng = le.AppendUint16(le.AppendUint16(ng, 1), 0)
	ng = le.AppendUint64(ng, ^uint64(0))
	ng = le.AppendUint32(ng, 28)
	ng = le.AppendUint32(le.AppendUint32(ng, 1), 20)
	ng = le.AppendUint32(le.AppendUint16(le.AppendUint16(ng, 1), 0), 65535)
	ng = le.AppendUint32(ng, 20)
	return append(le.AppendUint32(le.AppendUint32(ng, 6), 0xfffffff0), make([]byte, 64)...)
}

// TestAuditInputs: what Audit makes of each input and option, as `audit
// h2` exits by it: an error naming the file or the field (exit 2), no
// connection to decode (ErrNoConnection) or none of the ports asked for
// (Nothing; exit 2 too), problems (exit 1), or a clean report (exit 0).
func TestAuditInputs(t *testing.T) {
	capture := filepath.Join("..", "testdata", "h2", "max-age.pcap")
	const retries = "../testdata/h2/retry-unavailable.pcap"
	whole, err := os.ReadFile(capture)
	if err != nil {
		t.Fatal(err)
	}
	short := grpcGoRetry
	short.InitialBackoff, short.MaxBackoff = 20*time.Millisecond, 50*time.Millisecond
	badRetry := grpcGoRetry
	badRetry.MaxAttempts = 1
	tests := []struct {
		name     string
		files    []string
		opt      flows.AuditOptions // Format "text" unless set
		err      string             // in Audit's error; none when ""
		noConn   bool               // the error is ErrNoConnection
		warn     string             // in a warning, when not ""
		nothing  string             // Nothing()
		problems bool
		text     string // in the text report, when not ""
	}{
		{name: "clean", files: []string{capture}, text: "verdict: no problem found"},
		{name: "by port", files: []string{capture}, opt: flows.AuditOptions{Ports: []uint{50051}}, text: "3 connections"},
		{name: "another port", files: []string{capture}, opt: flows.AuditOptions{Ports: []uint{9}},
			nothing: "no connection to port 9 in the capture", text: "verdict: nothing judged: no connection to port 9 in the capture"},
		{name: "header cut short", files: []string{testutil.WriteFile(t, "cut.pcap", whole[:10])}, noConn: true},
		{name: "header cut short, a port given", files: []string{testutil.WriteFile(t, "cut.pcap", whole[:10])}, opt: flows.AuditOptions{Ports: []uint{50051}},
			warn: "cut.pcap: pcap file header at offset 0: file ends inside it", nothing: "no connection to port 50051 in the capture"},
		{name: "block length of 4 GiB", files: []string{testutil.WriteFile(t, "huge.pcapng", hugeBlockPcapng())}, noConn: true,
			warn: "huge.pcapng: enhanced packet block at offset 48: 4294967280 bytes"},
		{name: "SYNs only", files: []string{"../testdata/real-grpc-go.pcap"}, noConn: true},
		{name: "a segment lost", files: []string{withoutSegment(t, capture, 8)}, problems: true, text: "damaged"},
		{name: "not a capture", files: []string{testutil.WriteFile(t, "garbage.pcap", []byte("this is not a capture file"))}, err: "garbage.pcap: unknown file format"},
		{name: "missing file", files: []string{filepath.Join(t.TempDir(), "none.pcap")}, err: "none.pcap: no such file"},
		{name: "port 0", files: []string{capture}, opt: flows.AuditOptions{Ports: []uint{0}}, err: "Ports 0: not a port (1–65535)"},
		{name: "bad format", files: []string{capture}, opt: flows.AuditOptions{Format: "xml"}, err: `Format "xml"`},
		{name: "bad retry policy", files: []string{capture}, opt: flows.AuditOptions{Retry: &badRetry}, err: "Retry.MaxAttempts 1: must be at least 2"},
		{name: "negative tolerance", files: []string{capture}, opt: flows.AuditOptions{Tolerance: -time.Millisecond}, err: "Tolerance -1ms: must not be negative"},
		// The tolerance widens every retry window: delays far outside a
		// short policy's windows are a problem with the default 5 ms, and
		// none with two seconds.
		{name: "short retry policy", files: []string{retries}, opt: flows.AuditOptions{Retry: &short}, problems: true},
		{name: "short retry policy, tolerance 2s", files: []string{retries}, opt: flows.AuditOptions{Retry: &short, Tolerance: 2 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opt := tt.opt
			if opt.Format == "" {
				opt.Format = "text"
			}
			rep, err := flows.Audit(tt.files, opt)
			switch {
			case tt.err != "":
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Errorf("Audit: %v; want an error with %q", err, tt.err)
				}
				return
			case tt.noConn != errors.Is(err, flows.ErrNoConnection), err != nil && !tt.noConn:
				t.Fatalf("Audit: %v; want ErrNoConnection: %v", err, tt.noConn)
			}
			if w := strings.Join(rep.Warnings, "\n"); !strings.Contains(w, tt.warn) {
				t.Errorf("warnings %q; want one with %q", w, tt.warn)
			}
			if got := rep.Nothing(); got != tt.nothing {
				t.Errorf("Nothing() = %q, want %q", got, tt.nothing)
			}
			if got := rep.Problems > 0; got != tt.problems {
				t.Errorf("%d problems; want some: %v", rep.Problems, tt.problems)
			}
			var out bytes.Buffer
			if err := rep.Write(&out, "text"); err != nil || !strings.Contains(out.String(), tt.text) {
				t.Errorf("text report (%v) lacks %q:\n%s", err, tt.text, &out)
			}
		})
	}
}
