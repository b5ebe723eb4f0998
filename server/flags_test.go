package server

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestFlagsConfig: what Flags.Config, then New, refuse, each error naming
// the field (field.Error) with the value at fault: a millisecond field out
// of range, a bound that is not positive, a certificate without its key or
// in a mode that presents none, a key that is not the certificate's, a
// file that is not there or never ends, a key log no mode would write.
func TestFlagsConfig(t *testing.T) {
	const cert, key = "../testdata/tls/server.pem", "../testdata/tls/server.key"
	tests := []struct {
		name   string
		change func(*Flags)
		want   string // in the error; none when ""
	}{
		{name: "defaults", change: func(*Flags) {}},
		{name: "a certificate and its key", change: func(f *Flags) { f.RetryMode, f.TLSCert, f.TLSKey = mode(t, "goaway"), cert, key }},
		{name: "min connect timeout", change: func(f *Flags) { f.MinConnectTimeoutMS = 0 }, want: "MinConnectTimeoutMS 0: must be in 1–2147483647 (ms)"},
		{name: "min connect timeout past int64 nanoseconds", change: func(f *Flags) { f.MinConnectTimeoutMS = 99999999999999 },
			want: "MinConnectTimeoutMS 99999999999999: must be in 1–2147483647 (ms)"},
		{name: "max held", change: func(f *Flags) { f.MaxHeld = -1 }, want: "MaxHeld -1: must be positive"},
		{name: "certificate without key", change: func(f *Flags) { f.RetryMode, f.TLSCert = mode(t, "goaway"), cert },
			want: "TLSCert " + cert + ": needs TLSKey: give both or neither"},
		{name: "certificate in a mode without TLS", change: func(f *Flags) { f.RetryMode, f.TLSCert, f.TLSKey = mode(t, "hang"), cert, key },
			want: "TLSCert: Mode hang presents no certificate"},
		{name: "missing key file", change: func(f *Flags) { f.RetryMode, f.TLSCert, f.TLSKey = mode(t, "goaway"), cert, "/nonexistent/key.pem" },
			want: "TLSKey /nonexistent/key.pem: open /nonexistent/key.pem"},
		{name: "key that is not the certificate's", change: func(f *Flags) { f.RetryMode, f.TLSCert, f.TLSKey = mode(t, "goaway"), cert, cert },
			want: "TLSCert " + cert + ": with TLSKey " + cert + ": tls:"},
		{name: "endless certificate", change: func(f *Flags) { f.RetryMode, f.TLSCert, f.TLSKey = mode(t, "goaway"), "/dev/zero", key },
			want: "TLSCert /dev/zero: more than 1048576 bytes: not a certificate or key file"},
		{name: "endless key", change: func(f *Flags) { f.RetryMode, f.TLSCert, f.TLSKey = mode(t, "goaway"), cert, "/dev/zero" },
			want: "TLSKey /dev/zero: more than 1048576 bytes"},
		{name: "key log in a mode without TLS", change: func(f *Flags) { f.RetryMode, f.KeyLog = mode(t, "close"), "keys.log" },
			want: "KeyLog: RetryMode close makes no TLS connection (only settings-close, goaway and outage do)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fl := Flags{SessionTimeout: DefaultSessionTimeout, MaxAttempts: DefaultMaxAttempts, MaxWaiting: DefaultMaxWaiting,
				MinConnectTimeoutMS: 20000, MaxHeld: DefaultMaxHeld, MaxControlConns: DefaultMaxControlConns}
			tt.change(&fl)
			cfg, err := fl.Config()
			if err == nil {
				cfg.ControlAddr, cfg.RetryAddr = "127.0.0.1:0", "127.0.0.1:0"
				var s *Server
				if s, err = New(cfg); err == nil {
					s.Close()
				}
			}
			if (err == nil) != (tt.want == "") || !strings.Contains(fmt.Sprint(err), tt.want) {
				t.Errorf("Config, then New: %v; want %q", err, tt.want)
			}
			if tt.want == "" && cfg.MinConnectTimeout != 20*time.Second {
				t.Errorf("MinConnectTimeout %v; want 20s", cfg.MinConnectTimeout)
			}
		})
	}
}
