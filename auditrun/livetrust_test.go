package auditrun

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/backoff-audit/audit/pb"
)

// A failed run leaves the file the user named as it was: Write replaces
// it only once the capture is open.
func TestLiveWriteKeepsFileOnError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	precious := filepath.Join(dir, "precious.pcap")
	if err := os.WriteFile(precious, []byte("what the user had"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg := Config{Iface: "nonexist0", Write: precious, Server: serverConfig("127.0.0.1:0", "127.0.0.1:0")}
	if _, err := Run(ctx, cfg, io.Discard, io.Discard); err == nil {
		t.Fatal("Run judged; want an error: the interface does not exist")
	}
	if b, _ := os.ReadFile(precious); string(b) != "what the user had" {
		t.Errorf("write file after a failed start holds %q; want it untouched", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d files in the folder; want only the user's (no temporary file left)", len(ents))
	}
}

// A capture that fails (here Write on a full disk) ends the open session
// at once with cause "capture error", and the accepts after it are
// explained as after the capture stopped, not as drops.
func TestLiveCaptureErrorEndsSession(t *testing.T) {
	t.Parallel()
	requireCapture(t)
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("SKIPPED, NOT RUN: a full disk needs a small tmpfs: mount: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	r := startLive(t, Config{Write: filepath.Join(dir, "full.pcap")})

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cc, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", r.control), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if _, err := pb.NewReconnectServiceClient(cc).Start(ctx, &pb.ReconnectParams{MaxReconnectBackoffMs: liveMaxMS}); err != nil {
		t.Fatalf("Start: %v", err)
	}
	// 16 KiB hold about 90 SYNs on lo: connect until the capture fails.
	addr := fmt.Sprintf("127.0.0.1:%d", r.retry)
	var runErr error
	for i := 0; i < 5000 && runErr == nil; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
		}
		select {
		case res := <-r.done:
			r.done <- res
			runErr = res.err
		default:
		}
	}
	if runErr == nil {
		runErr = r.stop(t).err
	}
	if runErr == nil || !strings.Contains(runErr.Error(), "no space left on device") {
		t.Fatalf("Run = %v; want the write error", runErr)
	}
	reps, _ := r.reports(t, 1)
	rep := reps[0]
	if !strings.HasPrefix(rep.Session.Cause, "capture error") || !strings.Contains(rep.Session.Cause, "no space left") {
		t.Errorf("session cause %q; want the capture error", rep.Session.Cause)
	}
	if rep.CrossCheck == nil {
		t.Fatal("no cross-check")
	}
	for _, l := range rep.CrossCheck.ServerOnly {
		if !strings.Contains(l.Detail, "after the capture stopped") {
			t.Errorf("server only %d: %s (%s); want it explained by the capture's end", l.SrcPort, l.Reason, l.Detail)
			break
		}
	}
	if !strings.Contains(r.errOut.String(), "audit live: capture error") {
		t.Errorf("stderr does not say the capture failed when it did:\n%s", r.errOut)
	}
}
