package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/backoff-audit/audit/pb"
)

// The control port keeps at most MaxControlConns connections: more are
// closed as soon as accepted, and a freed place is taken again.
func TestControlConnBound(t *testing.T) {
	h := start(t, Config{MaxControlConns: 10})
	var conns []net.Conn
	for range 40 {
		c, err := net.Dial("tcp", h.s.ControlAddr())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	// Those beyond the bound are closed by the server: their reads end.
	closed := 0
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(time.Second))
		if _, err := c.Read(make([]byte, 1)); errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
			closed++
		}
	}
	if open := h.s.control.openConns(); open != 10 || closed != 30 {
		t.Fatalf("%d control connections open, %d closed by the server; want 10 and 30", open, closed)
	}
	// While it is full a client is turned away; once places free up, a
	// Start is served.
	for _, c := range conns[:5] {
		c.Close()
	}
	h.waitFor("freed places", func() bool { return h.s.control.openConns() <= 5 })
	h.startSession(0)
	h.stop()
}

// A control connection that never finishes its HTTP/2 handshake is
// closed after the handshake timeout.
func TestControlHandshakeTimeout(t *testing.T) {
	h := start(t, Config{controlHandshake: 200 * time.Millisecond})
	c, err := net.Dial("tcp", h.s.ControlAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(testTimeout))
	if _, err := io.Copy(io.Discard, c); err != nil {
		t.Fatalf("an idle control connection: %v; want the server to close it", err)
	}
	h.waitFor("the connection to be forgotten", func() bool { return h.s.control.openConns() == 0 })
}

// lowFDEnv makes the test binary a server with few descriptors
// (lowDescriptorServer) instead of running the tests; its value says what
// takes them.
const lowFDEnv = "AUDIT_TEST_LOW_FD_SERVER"

func TestMain(m *testing.M) {
	if what := os.Getenv(lowFDEnv); what != "" {
		if err := lowDescriptorServer(what); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// lowDescriptorServer serves, for TestRetryPortOutOfDescriptors, with
// ulimit -n 300 until its standard input ends; with what "exhaust" it first
// opens files until no descriptor is left but one, for the control
// connection of the Start. It prints the control address and retry port.
func lowDescriptorServer(what string) error {
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: 300, Max: 300}); err != nil {
		return err
	}
	s, err := New(Config{RetryAddr: "127.0.0.1:0", Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	if err != nil {
		return err
	}
	defer s.Close()
	if what == "exhaust" {
		var files []*os.File
		for {
			f, err := os.Open(os.DevNull)
			if err != nil {
				break
			}
			files = append(files, f)
		}
		files[len(files)-1].Close()
		defer func() {
			for _, f := range files {
				f.Close()
			}
		}()
	}
	fmt.Printf("%s %d\n", s.ControlAddr(), s.RetryPort())
	_, err = io.Copy(io.Discard, os.Stdin)
	return err
}

// A server out of descriptors, because idle control connections hold
// them or because the process has none left, still takes each retry
// connection at once: 5 connections 50 ms apart (each waiting for the
// server's close before the next) give four intervals of 50 ms or more,
// not one interval and three of 0 stamped when descriptors came back.
func TestRetryPortOutOfDescriptors(t *testing.T) {
	for _, tt := range []struct {
		name string
		env  string
		idle int // raw TCP connections opened to the control port after Start
	}{
		{name: "400 idle control connections, ulimit -n 300", env: "idle", idle: 400},
		{name: "no descriptor left", env: "exhaust"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0])
			cmd.Env = append(os.Environ(), lowFDEnv+"="+tt.env)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				stdin.Close()
				cmd.Wait()
				if t.Failed() {
					t.Logf("server's stderr:\n%s", stderr.String())
				}
			}()
			var control string
			var retry int
			if _, err := fmt.Fscan(bufio.NewReader(stdout), &control, &retry); err != nil {
				t.Fatalf("the helper printed no addresses: %v\n%s", err, stderr.String())
			}
			cc, err := grpc.NewClient(control, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			rpc := pb.NewReconnectServiceClient(cc)
			if _, err := rpc.Start(ctx, &pb.ReconnectParams{}); err != nil {
				t.Fatalf("Start: %v", err)
			}
			for range tt.idle {
				c, err := net.Dial("tcp", control)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
			}
			for k := range 5 {
				if k > 0 {
					time.Sleep(50 * time.Millisecond)
				}
				c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", retry))
				if err != nil {
					t.Fatal(err)
				}
				// Bounded: a connection left in the queue is never closed.
				c.SetReadDeadline(time.Now().Add(10 * time.Second))
				_, err = io.Copy(io.Discard, c)
				c.Close()
				if err != nil {
					t.Fatalf("retry connection %d: %v; want the server to take and close it", k+1, err)
				}
			}
			info, err := rpc.Stop(ctx, &pb.Empty{})
			if err != nil {
				t.Fatalf("Stop: %v", err)
			}
			if b := info.BackoffMs; len(b) != 4 || slices.Min(b) < 50 {
				t.Errorf("backoff_ms %v; want four intervals of 50 ms or more", b)
			}
		})
	}
}
