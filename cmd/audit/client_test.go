package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestClientUsageErrors(t *testing.T) {
	closed := closedPort(t)
	tests := []struct {
		name string
		args []string
		want string // in the error
	}{
		{name: "no ports", args: []string{"client"}, want: "server_control_port"},
		{name: "bad port", args: []string{"client", "--server_control_port=70000", "--server_retry_port=1"}, want: "--server_control_port 70000"},
		{name: "zero initial backoff", args: []string{"client", "--server_control_port=1", "--server_retry_port=1", "--initial_backoff_ms=0"}, want: "--initial_backoff_ms 0"},
		{
			name: "unreachable control port",
			args: []string{"client", "--server_host=127.0.0.1", "--server_control_port=" + closed, "--server_retry_port=1", "--deadline=5s"},
			want: "control port 127.0.0.1:" + closed + " unreachable",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := newRootCmd()
			root.SetArgs(tt.args)
			root.SetOut(&bytes.Buffer{})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := root.ExecuteContext(ctx)
			var ee *exitError
			if errors.As(err, &ee) && ee.code != exitUsage {
				t.Errorf("exit code %d, want %d (usage)", ee.code, exitUsage)
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// closedPort is a loopback port that nothing listens on (it was free a
// moment ago).
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	return port
}
