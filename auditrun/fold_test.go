package auditrun

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/backoff-audit/audit/pb"
	"github.com/backoff-audit/audit/server"
	"github.com/backoff-audit/audit/session"
)

// TestOneFold: the server's own list of a session, `audit live --attach`
// following its record and `audit pcap --record` reading it keep the same
// accepts and the same verdict input, by one fold (session.Fold): a
// session with a start, accepts, one the server marked overflow, a torn
// line in the record, and an expire.
func TestOneFold(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	written := filepath.Join(dir, "record.jsonl")
	f, err := server.OpenRecord(written, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	cfg := serverConfig("127.0.0.1:0", "127.0.0.1:0")
	cfg.Record, cfg.MaxAttempts, cfg.SessionTimeout = f, 3, 500*time.Millisecond
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cc, err := grpc.NewClient(srv.ControlAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := pb.NewReconnectServiceClient(cc).Start(ctx, &pb.ReconnectParams{MaxReconnectBackoffMs: 1000}); err != nil {
		t.Fatal(err)
	}
	// Four connections: three kept, the fourth past MaxAttempts.
	for range 4 {
		c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(srv.RetryPort())))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, c) // the server closes it
		c.Close()
		time.Sleep(5 * time.Millisecond)
	}
	var own server.Session
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var ok bool
		if own, ok = srv.Session(1); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("session 1 did not expire")
		}
	}
	if err := errors.Join(srv.Close(), f.Close()); err != nil {
		t.Fatal(err)
	}
	if len(own.Accepts) != 3 || own.End.Dropped != 1 || own.End.Cause != session.CauseTimeout {
		t.Fatalf("the server kept %d accepts, dropped %d, ended by %s; want 3, 1, session timeout", len(own.Accepts), own.End.Dropped, own.End.Cause)
	}

	// The record as a reader meets it: a torn line (a writer cut short)
	// after the first accept, which the next line was appended onto.
	b, err := os.ReadFile(written)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	if len(lines) < 6 { // start, 4 accepts, expire
		t.Fatalf("record of %d lines:\n%s", len(lines), b)
	}
	torn := []byte(`{"event":"accept","time":"2026-`)
	rest := bytes.Join(append([][]byte{lines[1], torn}, lines[2:]...), nil)
	read := filepath.Join(dir, "torn.jsonl")

	// audit live --attach: the follower attached while the session ran,
	// its Start line written, the rest appended after.
	if err := os.WriteFile(read, lines[0], 0o644); err != nil {
		t.Fatal(err)
	}
	var attach session.Fold
	var attachWarn []string
	tctx, stop := context.WithCancel(ctx)
	tailed := make(chan error, 1)
	go func() {
		tailed <- tailRecord(tctx, read, func(e session.RecordEvent) { attach.Add(e) }, func(w string) { attachWarn = append(attachWarn, w) })
	}()
	time.Sleep(3 * recordPoll)
	af, err := os.OpenFile(read, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	af.Write(rest)
	af.Close()
	time.Sleep(3 * recordPoll)
	stop()
	if err := <-tailed; err != nil {
		t.Fatal(err)
	}

	// audit pcap --record.
	offline, warns, _, err := readRecordFor(read, nil, own.Started, own.Ended)
	if err != nil {
		t.Fatal(err)
	}
	sessions := session.Sessions(offline)
	if len(sessions) != 1 || attach.Cur == nil {
		t.Fatalf("pcap --record read %d sessions, live --attach %v; want 1 each", len(sessions), attach.Cur)
	}
	for _, w := range [][]string{attachWarn, warns} {
		if !strings.Contains(strings.Join(w, "\n"), "torn") {
			t.Errorf("warnings %q name no torn line", w)
		}
	}
	// The verdict's input: the list, the end (cause, dropped), the policy
	// and mode, the port's down and back.
	type input struct {
		Accepts    []session.Accept
		Cause      string
		Dropped    int
		Params     session.SessionParams
		Down, Back time.Time
	}
	want := input{own.Accepts, string(own.End.Cause), own.End.Dropped, own.Params, own.Down, own.Back}
	for name, s := range map[string]*session.Session{"live --attach": attach.Cur, "pcap --record": &sessions[0]} {
		if s.End == nil {
			t.Errorf("%s: the session did not end", name)
			continue
		}
		got := input{s.Accepts, string(s.End.Cause), s.End.Dropped, s.Params, s.Down, s.Back}
		if diff := cmp.Diff(want, got, netipEq, cmpopts.EquateEmpty(), cmpopts.EquateApproxTime(0)); diff != "" {
			t.Errorf("%s against the server's own (-server +%s):\n%s", name, name, diff)
		}
	}
}
