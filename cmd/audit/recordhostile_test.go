package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/backoff-audit/audit/internal/testutil"
)

// runningServer runs `audit server` with args in process until the test
// ends, and waits for it to print its ports.
func runningServer(t *testing.T, args ...string) *testutil.SyncBuffer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	var out, errOut testutil.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"server", "--control_port=0", "--retry_port=0"}, args...), &out, &errOut)
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != exitOK {
			t.Errorf("the first server exited %d: %s", code, errOut.String())
		}
	})
	for !strings.Contains(out.String(), "retry port") {
		select {
		case code := <-done:
			t.Fatalf("the server exited %d: %s", code, errOut.String())
		case <-ctx.Done():
			t.Fatal("the server printed no ports")
		case <-time.After(5 * time.Millisecond):
		}
	}
	return &errOut
}

// Two servers cannot share one record: the second fails at start, naming
// the file and the first's pid, and the record holds the first's events
// only.
func TestRecordSharedByTwoServers(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "run.jsonl")
	runningServer(t, "--record", rec)
	code, stdout, stderr := runAudit(t, "server", "--control_port=0", "--retry_port=0", "--record", rec)
	want := fmt.Sprintf("record file %s is locked by process %d", rec, os.Getpid())
	if code != exitUsage || !strings.Contains(stderr, want) || stdout != "" {
		t.Errorf("a second server on the record: exit %d, stdout %q, stderr %q; want %d, no ports, and %q", code, stdout, stderr, exitUsage, want)
	}
}

// A server restarted on a record whose last line a killed server tore
// ends that line with a newline before appending, and logs it: its own
// lines start lines of their own.
func TestRecordTornLineEnded(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "run.jsonl")
	b, err := os.ReadFile("../../testdata/real-grpc-go.record.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	torn := append(b, `{"event":"accept","time":"2026-11-29T19:50:2`...)
	if err := os.WriteFile(rec, torn, 0o644); err != nil {
		t.Fatal(err)
	}
	log := runningServer(t, "--record", rec)
	if got, _ := os.ReadFile(rec); string(got) != string(torn)+"\n" {
		t.Errorf("the record ends %q; want the torn line ended with a newline", got[max(0, len(got)-60):])
	}
	if want := fmt.Sprintf("ended it with a newline before appending; readers skip the torn line\" record=%s offset=%d", rec, len(torn)); !strings.Contains(log.String(), want) {
		t.Errorf("the log lacks %q:\n%s", want, log.String())
	}
}

// recordWithRetryPort copies the real grpc-go run's record into dir with
// its start line naming the retry port, as servers write it now.
func recordWithRetryPort(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile("../../testdata/real-grpc-go.record.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.Replace(b, []byte(`"peer":"127.0.0.1:49130","params"`), []byte(`"peer":"127.0.0.1:49130","retry_port":40431,"params"`), 1)
	return writeFileIn(t, dir, "run.jsonl", b)
}

func writeFileIn(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// With --record and no --port, the retry port is the one the record's
// start lines name: another program's SYNs to another port in the
// capture do not make it ambiguous.
func TestPcapRecordRetryPort(t *testing.T) {
	rec := recordWithRetryPort(t, t.TempDir())
	// Another program's SYNs, to port 50051.
	foreign := writeTCPCapture(t, []capSeg{{fromClient: true, flags: tcpSYN, seq: 1}, {fromClient: true, flags: tcpSYN, seq: 2}})
	code, stdout, stderr := runAudit(t, "pcap", "--record", rec, fixture("real-grpc-go.pcap"), foreign)
	if code != exitOK || !strings.HasPrefix(stdout, "port 40431:") {
		t.Errorf("exit %d, stdout beginning %.40q; want %d and port 40431\n%s", code, stdout, exitOK, stderr)
	}
}

// A record a server was restarted on after its last line was torn reads:
// the torn line is skipped with a warning naming its offset, whether a
// newline ended it or the next run's line was appended onto it, and the
// sessions around it are judged.
func TestPcapRecordTornMiddle(t *testing.T) {
	dir := t.TempDir()
	whole, err := os.ReadFile(recordWithRetryPort(t, dir))
	if err != nil {
		t.Fatal(err)
	}
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
			rec := writeFileIn(t, dir, "torn.jsonl", tt.file)
			code, stdout, stderr := runAudit(t, "pcap", "--record", rec, fixture("real-grpc-go.pcap"))
			if code != exitOK || !strings.Contains(stderr, tt.warn) || !strings.Contains(stdout, "=== session 1:") {
				t.Errorf("exit %d, stderr %q; want %d, session 1 judged, and %q\n%s", code, stderr, exitOK, tt.warn, stdout)
			}
		})
	}
}

// An endless stream of valid record lines (accepts outside any session,
// outside the capture's span) through a FIFO: what is kept stays bounded,
// and one SIGINT ends the read, with a warning, as it does for captures.
func TestPcapRecordEndless(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "record.fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, auditBin, "pcap", "--record", fifo, fixture("real-grpc-go.pcap"))
	cmd.WaitDelay = 5 * time.Second
	stderr := &testutil.SyncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// The writer: 32 MiB of accept lines of 2020, then SIGINT while it
	// goes on writing.
	const enough = 32 << 20
	written := make(chan struct{})
	go func() {
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		defer w.Close()
		line := []byte(`{"event":"accept","time":"2020-01-02T15:04:05.000000000Z","session":0,"peer":"127.0.0.1:40114"}` + "\n")
		block := bytes.Repeat(line, 64<<10/len(line))
		signal := written
		for n := 0; ; n += len(block) {
			if n >= enough && signal != nil {
				close(signal)
				signal = nil
			}
			if _, err := w.Write(block); err != nil {
				return // the reader is gone
			}
		}
	}()
	select {
	case <-written:
	case err := <-exited:
		t.Fatalf("audit exited (%v) before the writer wrote %d bytes; stderr:\n%s", err, enough, stderr)
	case <-ctx.Done():
		t.Fatal("the writer did not write 32 MiB in a minute")
	}
	// Bounded: far below what keeping 32 MiB of events would take. The
	// peak of the process's own memory (VmHWM; a wait's rusage would count
	// the test process, whose memory the child shares until its exec).
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	var peak int
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			fmt.Sscan(v, &peak)
		}
	}
	t.Logf("peak RSS %d KiB after 32 MiB of record lines", peak)
	if peak == 0 || peak > 100<<10 {
		t.Errorf("peak RSS %d KiB; want under 100 MiB", peak)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := exitAfterSignal(t, exited, stderr); code != exitUsage {
		t.Errorf("exit %d, want %d: the record held no session", code, exitUsage)
	}
	for _, want := range []string{"read interrupted", "what follows was not read", "the record holds no session"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}

// A record that is a symbolic link is followed: the link stays a link,
// the file it names is appended to and locked (a second server on the
// file itself is refused).
func TestRecordThroughSymlink(t *testing.T) {
	dir := t.TempDir()
	target := writeFileIn(t, dir, "real.jsonl", []byte(`{"event":"accept","time":"2026-`))
	link := filepath.Join(dir, "run.jsonl")
	if err := os.Symlink("real.jsonl", link); err != nil {
		t.Fatal(err)
	}
	runningServer(t, "--record", link)
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("%s is no longer a symbolic link: %v", link, err)
	}
	if b, _ := os.ReadFile(target); !bytes.HasSuffix(b, []byte("\n")) {
		t.Errorf("the link's file ends %q; want its torn line ended, as the record written", b)
	}
	if code, _, stderr := runAudit(t, "server", "--control_port=0", "--retry_port=0", "--record", target); code != exitUsage || !strings.Contains(stderr, "is locked by process") {
		t.Errorf("a second server on the link's file: exit %d, %q; want it refused", code, stderr)
	}
}

// The strings of a record (a stop's cause, verdict and reason) are quoted
// in the text report and in the last stderr line: terminal escapes and a
// line break in them are written out, never sent to the terminal.
func TestRecordStringsQuoted(t *testing.T) {
	b, err := os.ReadFile("../../testdata/real-grpc-go.record.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	evil := `\u001b[2J\u001b]0;owned\u0007\r\nPASS: every session passed`
	b = bytes.Replace(b, []byte(`"cause":"stop","verdict":"passed","passed":true,"reason":""`),
		[]byte(`"cause":"stop\u001b[31m","verdict":"failed\r","passed":false,"reason":"`+evil+`"`), 1)
	rec := writeFileIn(t, t.TempDir(), "evil.jsonl", b)
	code, stdout, stderr := runAudit(t, "pcap", "--record", rec, fixture("real-grpc-go.pcap"))
	if code != exitFail {
		t.Errorf("exit %d, want %d (the server's verdict failed)", code, exitFail)
	}
	for name, out := range map[string]string{"stdout": stdout, "stderr": stderr} {
		if i := strings.IndexFunc(out, func(r rune) bool { return r != '\n' && (r < 0x20 || r == 0x7f) }); i >= 0 {
			t.Errorf("%s holds control character %q at %d:\n%q", name, out[i], i, out)
		}
	}
	for _, want := range []string{`ended by "stop\x1b[31m"`, `passed=false ("failed\r")`, `"\x1b[2J\x1b]0;owned\a\r\nPASS: every session passed"`} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %s:\n%s", want, stdout)
		}
	}
	if !strings.Contains(lastLine(stderr), `"\x1b[2J\x1b]0;owned\a\r\nPASS: every session passed"`) {
		t.Errorf("the last stderr line does not quote the reason: %q", lastLine(stderr))
	}
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}
