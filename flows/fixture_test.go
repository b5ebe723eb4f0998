package flows_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	"github.com/backoff-audit/audit/flows"
	"github.com/backoff-audit/audit/h2"
	"github.com/backoff-audit/audit/internal/testutil"
	"github.com/backoff-audit/audit/pb"
)

var update = flag.Bool("update", false, "rewrite the golden reports of testdata/h2; TestMaxAgeGolden records max-age.pcap anew first (as root, with tcpdump)")

// maxAgeCapture is a grpc-go client calling a grpc-go server with
// MaxConnectionAge 2 s every 100 ms for 5 s, captured on lo
// (testdata/README.md, "HTTP/2 captures"); from the repository's root,
// as `audit h2` names it in its golden reports.
var maxAgeCapture = filepath.Join("testdata", "h2", "max-age.pcap")

// TestMaxAgeGolden reads the committed capture and compares `audit h2`'s
// text and JSON reports with the golden files. With -update it records the
// capture anew first.
func TestMaxAgeGolden(t *testing.T) {
	t.Chdir("..")
	if *update {
		recordMaxAge(t, maxAgeCapture)
	}
	rep, err := flows.Audit([]string{maxAgeCapture}, flows.AuditOptions{Format: "text"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Connections.Len() < 3 {
		t.Fatalf("%d connections, want one per 2 s of the 5 s run", rep.Connections.Len())
	}
	var text, js bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, filepath.Join("testdata", "h2", "max-age.txt"), text.Bytes(), *update)
	testutil.Golden(t, filepath.Join("testdata", "h2", "max-age.json"), js.Bytes(), *update)
	found := false
	for _, f := range rep.Findings {
		found = found || f.Kind == h2.FindingMaxAge
	}
	if !found {
		t.Errorf("no %s finding in %s", h2.FindingMaxAge, text.String())
	}
}

type reconnectService struct {
	pb.UnimplementedReconnectServiceServer
}

func (reconnectService) Start(context.Context, *pb.ReconnectParams) (*pb.Empty, error) {
	return &pb.Empty{}, nil
}

func (reconnectService) Stop(context.Context, *pb.Empty) (*pb.ReconnectInfo, error) {
	return &pb.ReconnectInfo{Passed: true, BackoffMs: []int32{1000, 1600}}, nil
}

// recordMaxAge writes path: tcpdump on lo while a grpc-go client calls
// Start every 100 ms for 5 s, then Stop, on a server at 127.0.0.7:50051
// with MaxConnectionAge 2 s and a grace of 1 s.
func recordMaxAge(t *testing.T, path string) {
	if os.Geteuid() != 0 {
		t.Fatal("-update records on lo with tcpdump: run as root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The control port of the interop test, so that the golden reports
	// and `audit h2 --port` tests keep their port when it is recorded
	// anew, on an address of lo no other test uses, which the filter
	// keeps to.
	ln, err := net.Listen("tcp", "127.0.0.7:50051")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	dump := exec.CommandContext(ctx, "tcpdump", "-i", "lo", "-U", "--immediate-mode", "-s", "0", "--time-stamp-precision", "nano",
		"-w", path, "host 127.0.0.7 and tcp port "+strconv.Itoa(port))
	var stderr bytes.Buffer
	dump.Stderr = &stderr
	if err := dump.Start(); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(stderr.String(), "listening on") {
		if ctx.Err() != nil {
			t.Fatalf("tcpdump did not start: %s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	s := grpc.NewServer(grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionAge: 2 * time.Second, MaxConnectionAgeGrace: time.Second}))
	pb.RegisterReconnectServiceServer(s, reconnectService{})
	var wg sync.WaitGroup
	wg.Go(func() { s.Serve(ln) })
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	c := pb.NewReconnectServiceClient(cc)
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if _, err := c.Start(ctx, &pb.ReconnectParams{MaxReconnectBackoffMs: 1000}, grpc.WaitForReady(true)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Stop(ctx, &pb.Empty{}, grpc.WaitForReady(true)); err != nil {
		t.Fatal(err)
	}
	cc.Close()
	s.GracefulStop()
	wg.Wait()
	time.Sleep(200 * time.Millisecond)
	dump.Process.Signal(syscall.SIGINT)
	if err := dump.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("tcpdump: %v: %s", err, stderr.String())
		}
	}
}

// TestAuditInterrupted: Done closed before the read: no connection, so
// ErrNoConnection, and the report's warnings say that the first file's
// read was interrupted and the second not read.
func TestAuditInterrupted(t *testing.T) {
	t.Chdir("..")
	// A second file, not the first named again (that is read once).
	b, err := os.ReadFile(maxAgeCapture)
	if err != nil {
		t.Fatal(err)
	}
	second := filepath.Join(t.TempDir(), "second.pcap")
	if err := os.WriteFile(second, b, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	close(done)
	rep, err := flows.Audit([]string{maxAgeCapture, second}, flows.AuditOptions{Format: "text", Done: done})
	if !errors.Is(err, flows.ErrNoConnection) {
		t.Fatalf("Audit: %v; want ErrNoConnection", err)
	}
	want := []string{
		maxAgeCapture + ": read interrupted at offset 0: what follows was not read",
		maxAgeCapture + ": read interrupted: 1 later file not read: " + second,
	}
	if rep.Connections.Len() != 0 || strings.Join(rep.Warnings, "\n") != strings.Join(want, "\n") {
		t.Errorf("%d connections, warnings %q; want none and %q", rep.Connections.Len(), rep.Warnings, want)
	}
}
