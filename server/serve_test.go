package server

// Serve, as `audit server` runs it: the record file it locks, ends and
// follows, and what it writes there.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/internal/testutil"
	"github.com/backoff-audit/audit/pb"
	"github.com/backoff-audit/audit/session"
)

// served is a Serve running on loopback ports.
type served struct {
	control, retry string // the printed addresses
	log            *testutil.SyncBuffer
	stop           func() // ends Serve and waits for it; idempotent
}

// serve runs Serve with cfg on loopback ports and the record file until
// the test ends or stop is called, and waits for it to print its ports.
func serve(t *testing.T, cfg Config, record string) *served {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	s := &served{log: &testutil.SyncBuffer{}}
	cfg.ControlAddr, cfg.RetryAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Logger = slog.New(slog.NewTextHandler(s.log, nil))
	var out testutil.SyncBuffer
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, &out, cfg, record, "") }()
	var err error
	stopped := false
	s.stop = func() {
		if !stopped {
			stopped = true
			cancel()
			if err = <-done; err != nil {
				t.Errorf("Serve: %v\n%s", err, s.log)
			}
		}
	}
	t.Cleanup(s.stop)
	for {
		if _, err := fmt.Sscanf(out.String(), "control port %s\nretry port %s\n", &s.control, &s.retry); err == nil {
			return s
		}
		select {
		case err := <-done:
			stopped = true
			t.Fatalf("Serve returned %v before printing its ports\n%s", err, s.log)
		case <-ctx.Done():
			t.Fatal("Serve printed no ports")
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Two servers cannot share one record: the second Serve fails at start,
// naming the file and the first's pid, printing no port.
func TestServeRecordShared(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "run.jsonl")
	serve(t, Config{}, rec)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	var out bytes.Buffer
	err := Serve(ctx, &out, Config{ControlAddr: "127.0.0.1:0", RetryAddr: "127.0.0.1:0", Logger: slog.Default()}, rec, "")
	want := fmt.Sprintf("record file %s is locked by process %d", rec, os.Getpid())
	if err == nil || !strings.Contains(err.Error(), want) || out.Len() != 0 {
		t.Errorf("a second Serve on the record: %v, printed %q; want no port, and %q", err, &out, want)
	}
}

// A server restarted on a record whose last line a killed server tore
// ends that line with a newline before appending, and logs it: its own
// lines start lines of their own.
func TestServeTornLineEnded(t *testing.T) {
	b, err := os.ReadFile("../testdata/real-grpc-go.record.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	torn := append(b, `{"event":"accept","time":"2026-11-29T19:50:2`...)
	rec := testutil.WriteFile(t, "run.jsonl", torn)
	s := serve(t, Config{}, rec)
	if got, _ := os.ReadFile(rec); string(got) != string(torn)+"\n" {
		t.Errorf("the record ends %q; want the torn line ended with a newline", got[max(0, len(got)-60):])
	}
	if want := fmt.Sprintf("ended it with a newline before appending; readers skip the torn line\" record=%s offset=%d", rec, len(torn)); !strings.Contains(s.log.String(), want) {
		t.Errorf("the log lacks %q:\n%s", want, s.log)
	}
}

// A record that is a symbolic link is followed: the link stays a link,
// the file it names is appended to and locked (a second server on the
// file itself is refused).
func TestServeRecordThroughSymlink(t *testing.T) {
	target := testutil.WriteFile(t, "real.jsonl", []byte(`{"event":"accept","time":"2026-`))
	link := filepath.Join(filepath.Dir(target), "run.jsonl")
	if err := os.Symlink("real.jsonl", link); err != nil {
		t.Fatal(err)
	}
	serve(t, Config{}, link)
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("%s is no longer a symbolic link: %v", link, err)
	}
	if b, _ := os.ReadFile(target); !bytes.HasSuffix(b, []byte("\n")) {
		t.Errorf("the link's file ends %q; want its torn line ended, as the record written", b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := Serve(ctx, &bytes.Buffer{}, Config{ControlAddr: "127.0.0.1:0", RetryAddr: "127.0.0.1:0", Logger: slog.Default()}, target, ""); err == nil || !strings.Contains(err.Error(), "is locked by process") {
		t.Errorf("a second server on the link's file: %v; want it refused", err)
	}
}

// In refuse mode, during the session the retry port refuses, Stop answers
// passed=false, and the record's start line names the mode and the
// MIN_CONNECT_TIMEOUT; its last line is the refuse session's end.
func TestServeRefuseModeRecord(t *testing.T) {
	record := filepath.Join(t.TempDir(), "run.jsonl")
	s := serve(t, Config{Mode: mode(t, "refuse"), MinConnectTimeout: 4 * time.Second}, record)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cc, err := grpc.NewClient(s.control, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	rpc := pb.NewReconnectServiceClient(cc)
	if _, err := rpc.Start(ctx, &pb.ReconnectParams{}); err != nil {
		t.Fatal(err)
	}
	var d net.Dialer
	if c, err := d.DialContext(ctx, "tcp", s.retry); !errors.Is(err, syscall.ECONNREFUSED) {
		if c != nil {
			c.Close()
		}
		t.Errorf("retry port during the session: %v, want connection refused", err)
	}
	info, err := rpc.Stop(ctx, &pb.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	if info.Passed {
		t.Error("Stop answered passed in refuse mode")
	}
	s.stop()
	b, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	events, err := session.ReadRecord(bytes.NewReader(b))
	if err != nil || len(events) < 2 {
		t.Fatalf("record: %d events, %v\n%s", len(events), err, b)
	}
	p := events[0].Params
	if !p.Mode.Is(backoff.ModeRefuse) || p.Policy.MinConnectTimeout != 4*time.Second {
		t.Errorf("start line params %+v; want refuse mode and a 4 s MIN_CONNECT_TIMEOUT", p)
	}
	if end := events[len(events)-1].End; end == nil || end.Passed || !strings.HasPrefix(end.Reason, "refuse mode:") {
		t.Errorf("record ends with %+v; want the refuse session's end", events[len(events)-1])
	}
}
