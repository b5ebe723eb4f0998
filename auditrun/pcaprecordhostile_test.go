package auditrun

// AuditFiles with a hostile record: another program's SYNs beside the
// retry port's, torn lines, an endless FIFO, strings made to fool a
// terminal.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/internal/testutil"
)

// recordWithRetryPort is the real grpc-go run's record with its start
// line naming the retry port, as servers write it now.
func recordWithRetryPort(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(fixture("real-grpc-go.record.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Replace(b, []byte(`"peer":"127.0.0.1:49130","params"`), []byte(`"peer":"127.0.0.1:49130","retry_port":40431,"params"`), 1)
}

// With a record and no Port, the retry port is the one the record's start
// lines name: another program's SYNs to another port in the capture do
// not make it ambiguous.
func TestPcapRecordRetryPort(t *testing.T) {
	rec := testutil.WriteFile(t, "run.jsonl", recordWithRetryPort(t))
	// Another program's SYNs, to port 50051.
	foreign := testutil.WriteFile(t, "foreign.pcap", testutil.Pcap([]testutil.Seg{
		{FromClient: true, Flags: testutil.SYN, Seq: 1}, {FromClient: true, Flags: testutil.SYN, Seq: 2}}))
	r := auditFiles(t, FilesConfig{Record: rec}, fixture("real-grpc-go.pcap"), foreign)
	if r.verdict() != runPassed || !strings.HasPrefix(r.stdout, "port 40431:") {
		t.Errorf("%s (%v), report beginning %.40q; want %s and port 40431\n%s", r.verdict(), r.err, r.stdout, runPassed, r.stderr)
	}
}

// A record a server was restarted on after its last line was torn reads:
// the torn line is skipped with a warning naming its offset, whether a
// newline ended it or the next run's line was appended onto it, and the
// sessions around it are judged.
func TestPcapRecordTornMiddle(t *testing.T) {
	whole := recordWithRetryPort(t)
	torn := []byte(`{"event":"accept","time":"2026-11-29T19:`)
	for _, tt := range []struct {
		name string
		file []byte
		warn string
	}{
		{name: "ended by a newline", file: append(append(append([]byte{}, torn...), '\n'), whole...),
			warn: fmt.Sprintf("record line 1 at offset 0: torn line (%d bytes, cut short by a writer that stopped) skipped", len(torn))},
		{name: "the next run appended onto it", file: append(append([]byte{}, torn...), whole...),
			warn: fmt.Sprintf("record line 1 at offset 0: torn line (%d bytes, cut short by a writer that stopped) skipped; the line appended onto it is read", len(torn))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := auditFiles(t, FilesConfig{Record: testutil.WriteFile(t, "torn.jsonl", tt.file)}, fixture("real-grpc-go.pcap"))
			if r.verdict() != runPassed || !strings.Contains(r.stderr, tt.warn) || !strings.Contains(r.stdout, "=== session 1:") {
				t.Errorf("%s (%v), warnings %q; want %s, session 1 judged, and %q\n%s", r.verdict(), r.err, r.stderr, runPassed, tt.warn, r.stdout)
			}
		})
	}
}

// An endless stream of valid record lines (accepts outside any session,
// outside the capture's span) through a FIFO: what is kept stays bounded,
// and ending the context (Ctrl-C) ends the read, with a warning, as it
// does for captures. Not parallel: the heap measured is this process's.
func TestPcapRecordEndless(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "record.fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The writer: 32 MiB of accept lines of 2020, then the interrupt
	// while it goes on writing.
	const enough = 32 << 20
	stopHeap := heapPeak()
	go func() {
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		defer w.Close()
		line := []byte(`{"event":"accept","time":"2020-01-02T15:04:05.000000000Z","session":0,"peer":"127.0.0.1:40114"}` + "\n")
		block := bytes.Repeat(line, 64<<10/len(line))
		for n := 0; ; n += len(block) {
			if n >= enough {
				cancel()
			}
			if _, err := w.Write(block); err != nil {
				return // the reader is gone
			}
		}
	}()
	var out, errOut bytes.Buffer
	_, err := AuditFiles(ctx, []string{fixture("real-grpc-go.pcap")}, FilesConfig{Policy: backoff.DefaultPolicy(), Record: fifo}, &out, &errOut)
	// Bounded: far below what keeping 32 MiB of events would take.
	peak := stopHeap()
	t.Logf("heap peak %d KiB after 32 MiB of record lines", peak>>10)
	if peak > 100<<20 {
		t.Errorf("heap peak %d KiB; want under 100 MiB", peak>>10)
	}
	if ctx.Err() != context.Canceled {
		t.Fatalf("the read ended (%v) before the writer wrote %d bytes; warnings:\n%s", err, enough, &errOut)
	}
	if err == nil || !strings.Contains(err.Error(), "the record holds no session") {
		t.Errorf("error %v; want nothing judged: the record held no session", err)
	}
	for _, want := range []string{"read interrupted", "what follows was not read"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("warnings lack %q:\n%s", want, &errOut)
		}
	}
}

// The strings of a record (a stop's cause, verdict and reason) are quoted
// in the text report and in the first failure (the last line `audit pcap`
// prints): terminal escapes and a line break in them are written out,
// never sent to the terminal.
func TestPcapRecordStringsQuoted(t *testing.T) {
	b, err := os.ReadFile(fixture("real-grpc-go.record.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	evil := `\u001b[2J\u001b]0;owned\u0007\r\nPASS: every session passed`
	b = bytes.Replace(b, []byte(`"cause":"stop","verdict":"passed","passed":true,"reason":""`),
		[]byte(`"cause":"stop\u001b[31m","verdict":"failed\r","passed":false,"reason":"`+evil+`"`), 1)
	r := auditFiles(t, FilesConfig{Record: testutil.WriteFile(t, "evil.jsonl", b)}, fixture("real-grpc-go.pcap"))
	if r.verdict() != runFailed {
		t.Errorf("%s (%v), want %s (the server's verdict failed)", r.verdict(), r.err, runFailed)
	}
	for name, out := range map[string]string{"report": r.stdout, "warnings": r.stderr, "first failure": r.FirstFailure} {
		if i := strings.IndexFunc(out, func(r rune) bool { return r != '\n' && (r < 0x20 || r == 0x7f) }); i >= 0 {
			t.Errorf("%s holds control character %q at %d:\n%q", name, out[i], i, out)
		}
	}
	const reason = `"\x1b[2J\x1b]0;owned\a\r\nPASS: every session passed"`
	for _, want := range []string{`ended by "stop\x1b[31m"`, `passed=false ("failed\r")`, reason} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the report lacks %s:\n%s", want, r.stdout)
		}
	}
	if !strings.Contains(r.FirstFailure, reason) {
		t.Errorf("the first failure does not quote the reason: %q", r.FirstFailure)
	}
}
