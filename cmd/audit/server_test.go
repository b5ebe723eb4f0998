package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/internal/testutil"
	"github.com/backoff-audit/audit/pb"
	"github.com/backoff-audit/audit/session"
)

// TestServerModeFlags: a mode that is not one, or a flag of the modes out
// of range, is a usage error naming the flag, for audit server and for
// audit live, which shares the flags; the help explains every mode.
func TestServerModeFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		code    int
		wantOut []string // in stdout
		wantErr []string // in stderr
	}{
		{name: "unknown mode", args: []string{"server", "--retry_mode=sleep"}, code: exitUsage,
			wantErr: []string{`--retry_mode sleep: retry mode "sleep": unknown; the modes are ` + backoff.ModeNames}},
		{name: "restart without duration", args: []string{"server", "--retry_mode=restart"}, code: exitUsage,
			wantErr: []string{`--retry_mode restart: retry mode "restart": restart needs how long the port stays down`}},
		{name: "live: unknown mode", args: []string{"live", "--retry_mode=sleep"}, code: exitUsage,
			wantErr: []string{"the modes are " + backoff.ModeNames}},
		{name: "min connect timeout", args: []string{"server", "--min_connect_timeout_ms=0"}, code: exitUsage,
			wantErr: []string{"--min_connect_timeout_ms 0: must be in 1–2147483647 (ms)"}},
		{name: "min connect timeout past int64 nanoseconds", args: []string{"server", "--min_connect_timeout_ms=99999999999999"}, code: exitUsage,
			wantErr: []string{"--min_connect_timeout_ms 99999999999999: must be in 1–2147483647 (ms)"}},
		{name: "min connect timeout that wrapped to the default", args: []string{"live", "--min_connect_timeout_ms=9300000000000"}, code: exitUsage,
			wantErr: []string{"9300000000000: must be in 1–2147483647 (ms)"}},
		{name: "negative idle", args: []string{"live", "--iface", "nonexist0", "--attach", "--retry_port=5", "--idle=-5s"}, code: exitUsage,
			wantErr: []string{"--idle -5s: must not be negative"}},
		{name: "negative sniffing cap", args: []string{"live", "--iface", "nonexist0", "--attach", "--retry_port=5", "--max_reconnect_backoff_ms=-5"}, code: exitUsage,
			wantErr: []string{"-5: must be in 0–2147483647 (ms)"}},
		{name: "max held", args: []string{"server", "--max_held=-1"}, code: exitUsage,
			wantErr: []string{"--max_held -1: must be positive"}},
		{name: "certificate without key", args: []string{"server", "--retry_mode=goaway", "--tls_cert=" + fixture("tls/server.pem")}, code: exitUsage,
			wantErr: []string{"--tls_cert " + fixture("tls/server.pem") + ": needs --tls_key: give both or neither"}},
		{name: "certificate in a mode without TLS", args: []string{"server", "--retry_mode=hang", "--tls_cert=" + fixture("tls/server.pem"), "--tls_key=" + fixture("tls/server.key")},
			code: exitUsage, wantErr: []string{"--tls_cert: --retry_mode hang presents no certificate"}},
		{name: "missing key file", args: []string{"server", "--retry_mode=goaway", "--tls_cert=" + fixture("tls/server.pem"), "--tls_key=/nonexistent/key.pem"},
			code: exitUsage, wantErr: []string{"--tls_key /nonexistent/key.pem: open /nonexistent/key.pem"}},
		{name: "key that is not the certificate's", args: []string{"server", "--retry_mode=goaway", "--tls_cert=" + fixture("tls/server.pem"), "--tls_key=" + fixture("tls/server.pem")},
			code: exitUsage, wantErr: []string{"--tls_cert " + fixture("tls/server.pem") + ": with --tls_key " + fixture("tls/server.pem") + ": tls:"}},
		{name: "endless certificate", args: []string{"server", "--retry_mode=goaway", "--tls_cert=/dev/zero", "--tls_key=" + fixture("tls/server.key")},
			code: exitUsage, wantErr: []string{"--tls_cert /dev/zero: more than 1048576 bytes: not a certificate or key file"}},
		{name: "endless key", args: []string{"live", "--retry_mode=goaway", "--tls_cert=" + fixture("tls/server.pem"), "--tls_key=/dev/zero"},
			code: exitUsage, wantErr: []string{"--tls_key /dev/zero: more than 1048576 bytes"}},
		{name: "help explains the modes", args: []string{"server", "--help"}, code: exitOK,
			wantOut: []string{"--retry_mode", "  close ", "  refuse ", "  hang ", "  restart=D ", "  settings-close ", "  goaway ",
				"passed=false", "--min_connect_timeout_ms", "--max_held", "--tls_cert", "--tls_key"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runAudit(t, tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d\nstderr:\n%s", code, tt.code, stderr)
			}
			for _, w := range tt.wantOut {
				if !strings.Contains(stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout)
				}
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
		})
	}
}

// TestServerFlagsConfig: the mode flags reach server.Config.
func TestServerFlagsConfig(t *testing.T) {
	var fl serverFlags
	f := pflag.NewFlagSet("server", pflag.ContinueOnError)
	fl.register(f, "")
	if err := f.Parse([]string{"--retry_mode=settings-close", "--min_connect_timeout_ms=1500", "--max_held=7",
		"--tls_cert=" + fixture("tls/server.pem"), "--tls_key=" + fixture("tls/server.key")}); err != nil {
		t.Fatal(err)
	}
	cfg, err := fl.Config()
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Mode.Is(backoff.ModeSettingsClose) || cfg.MinConnectTimeout != 1500*time.Millisecond || cfg.MaxHeld != 7 || cfg.TLSCert == nil {
		t.Errorf("config: mode %v, min connect timeout %v, max held %d, certificate %v; want settings-close, 1.5s, 7, loaded",
			cfg.Mode, cfg.MinConnectTimeout, cfg.MaxHeld, cfg.TLSCert != nil)
	}

	var def serverFlags
	f = pflag.NewFlagSet("server", pflag.ContinueOnError)
	def.register(f, "")
	if cfg, err = def.Config(); err != nil {
		t.Fatal(err)
	}
	if !cfg.Mode.Is(backoff.ModeClose) || cfg.MinConnectTimeout != backoff.DefaultMinConnectTimeout || cfg.TLSCert != nil {
		t.Errorf("defaults: mode %v, min connect timeout %v, certificate %v; want close, 20s, none", cfg.Mode, cfg.MinConnectTimeout, cfg.TLSCert != nil)
	}
}

// TestServerRefuseMode runs `audit server --retry_mode=refuse` in process:
// during the session the retry port refuses, Stop answers passed=false,
// and the record's start line names the mode and the MIN_CONNECT_TIMEOUT.
func TestServerRefuseMode(t *testing.T) {
	record := filepath.Join(t.TempDir(), "run.jsonl")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	runCtx, stopServer := context.WithCancel(ctx)
	var stdout, stderr testutil.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(runCtx, []string{"server", "--control_port=0", "--retry_port=0", "--retry_mode=refuse",
			"--min_connect_timeout_ms=4000", "--record=" + record}, &stdout, &stderr)
	}()
	ports := regexp.MustCompile(`control port \S+:(\d+)\nretry port \S+:(\d+)\n`)
	var m []string
	for m == nil {
		select {
		case code := <-done:
			t.Fatalf("audit server exited %d:\n%s", code, stderr.String())
		case <-ctx.Done():
			t.Fatalf("no ports printed: %v", ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
		m = ports.FindStringSubmatch(stdout.String())
	}
	cc, err := grpc.NewClient(net.JoinHostPort("127.0.0.1", m[1]), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	rpc := pb.NewReconnectServiceClient(cc)
	if _, err := rpc.Start(ctx, &pb.ReconnectParams{}); err != nil {
		t.Fatal(err)
	}
	var d net.Dialer
	if c, err := d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", m[2])); !errors.Is(err, syscall.ECONNREFUSED) {
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
	stopServer()
	if code := <-done; code != exitOK {
		t.Fatalf("audit server exited %d:\n%s", code, stderr.String())
	}
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
