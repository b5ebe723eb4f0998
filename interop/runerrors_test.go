package interop

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/backoff-audit/audit/internal/testutil"
)

// TestRunErrors: what Run cannot judge is an error naming the field or
// the address at fault; the files a run needs are opened before Start, so that no session opens for a client that cannot
// run (the control port here is closed: an error that names it would
// mean Start came first).
func TestRunErrors(t *testing.T) {
	closed := int(testutil.ClosedPort(t))
	tests := []struct {
		name   string
		change func(*Config)
		want   string
	}{
		{name: "unreadable roots", change: func(c *Config) { c.CAFile = "/nonexistent/ca.pem" }, want: "CAFile /nonexistent/ca.pem: open /nonexistent/ca.pem"},
		{name: "endless roots", change: func(c *Config) { c.CAFile = "/dev/zero" }, want: "CAFile /dev/zero: more than 1048576 bytes: not a certificate or key file"},
		{name: "a key log's folder that is not there", change: func(c *Config) { c.KeyLog = "/nonexistent/keys.log" },
			want: "KeyLog: open /nonexistent/keys.log: no such file or directory"},
		{name: "unreachable control port", change: func(*Config) {}, want: "control port 127.0.0.1:" + strconv.Itoa(closed) + " unreachable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{ServerHost: "127.0.0.1", ControlPort: closed, RetryPort: 1, InitialBackoffMS: 1000, Deadline: 5 * time.Second}
			tt.change(&cfg)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if rep, err := Run(ctx, cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Run: %+v, %v; want an error with %q", rep, err, tt.want)
			}
		})
	}
}
