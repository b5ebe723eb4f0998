package main

import (
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/backoff-audit/audit/backoff"
)

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
