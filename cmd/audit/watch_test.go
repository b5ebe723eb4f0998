package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWatchUsage: what audit watch cannot start with is exit 2, with an
// error that names the flag, the address or the interface, and a --write
// file the user had stays as it was.
func TestWatchUsage(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := t.TempDir()
	precious := filepath.Join(dir, "precious.pcap")
	if err := os.WriteFile(precious, []byte("what the user had"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"no interface", []string{"watch", "--port", "50052"}, []string{`required flag(s) "iface" not set`}},
		{"no port", []string{"watch", "--iface", "lo"}, []string{`required flag(s) "port" not set`}},
		{"port 0", []string{"watch", "--iface", "lo", "--port", "0"}, []string{"--port 0: not a port"}},
		{"port too large", []string{"watch", "--iface", "lo", "--port", "50052,70000"}, []string{"--port 70000: not a port"}},
		{"format", []string{"watch", "--iface", "lo", "--port", "1", "--format", "xml"}, []string{`--format "xml"`}},
		{"bounds", []string{"watch", "--iface", "lo", "--port", "1", "--max_chain", "1"}, []string{"--max_chain 1"}},
		{"policy", []string{"watch", "--iface", "lo", "--port", "1", "--multiplier", "0.5"}, []string{"policy: multiplier 0.5"}},
		{"metrics address in use", []string{"watch", "--iface", "lo", "--port", "1", "--metrics", busy.Addr().String()},
			[]string{"--metrics " + busy.Addr().String(), "address already in use"}},
		{"metrics address not an address", []string{"watch", "--iface", "lo", "--port", "1", "--metrics", "nowhere"},
			[]string{"--metrics nowhere"}},
		{"unknown interface, a file kept", []string{"watch", "--iface", "nosuch0", "--port", "1", "--write", precious},
			[]string{"unknown interface", "lo"}},
		{"audit live, metrics address in use", []string{"live", "--control_port=0", "--retry_port=0", "--metrics", busy.Addr().String()},
			[]string{"--metrics " + busy.Addr().String(), "address already in use"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var stdout, stderr bytes.Buffer
			if code := run(ctx, tt.args, &stdout, &stderr); code != exitUsage {
				t.Errorf("exit %d, want %d\n%s", code, exitUsage, &stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr does not say %q:\n%s", w, &stderr)
				}
			}
			if stdout.Len() > 0 {
				t.Errorf("stdout: %q; want nothing", &stdout)
			}
		})
	}
	if b, _ := os.ReadFile(precious); string(b) != "what the user had" {
		t.Errorf("--write file after a failed start holds %q; want it untouched", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d files in the folder; want only the user's (no temporary file left)", len(ents))
	}
}
