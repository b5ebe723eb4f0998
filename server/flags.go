package server

import (
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"time"

	"github.com/backoff-audit/audit/analyze"
)

// Flags are the settings `audit server` and `audit live` take on their
// command lines, under the C++ reference server's port flag names
// (docs/spec.md §2.3).
type Flags struct {
	ControlPort, RetryPort int
	SessionTimeout         time.Duration
	MaxAttempts            int
	MaxWaiting             int
	RetryMode              analyze.RetryMode
	MinConnectTimeoutMS    int
	MaxHeld                int
	MaxControlConns        int
	TLSCert, TLSKey        string
}

// MaxMS is the largest value of a millisecond flag: the range of the Start
// field max_reconnect_backoff_ms, an int32 (about 24.8 days), which a
// time.Duration holds exactly.
const MaxMS = math.MaxInt32

// CheckMS refuses a millisecond flag's value outside lo–MaxMS, naming the
// flag and the range.
func CheckMS(flag string, ms, lo int64) error {
	if ms < lo || ms > MaxMS {
		return fmt.Errorf("%s=%d: must be in %d–%d (ms)", flag, ms, lo, MaxMS)
	}
	return nil
}

// Config checks the flags and turns them into a Config; the error names
// every flag that is wrong.
func (fl Flags) Config() (Config, error) {
	var errs []error
	if fl.ControlPort < 0 || fl.ControlPort > 65535 {
		errs = append(errs, fmt.Errorf("--control_port=%d: not a port (0-65535)", fl.ControlPort))
	}
	if fl.RetryPort < 0 || fl.RetryPort > 65535 {
		errs = append(errs, fmt.Errorf("--retry_port=%d: not a port (0-65535)", fl.RetryPort))
	}
	if fl.ControlPort != 0 && fl.ControlPort == fl.RetryPort {
		errs = append(errs, fmt.Errorf("--control_port and --retry_port are both %d", fl.ControlPort))
	}
	if fl.SessionTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--session_timeout=%v: must be positive", fl.SessionTimeout))
	}
	if fl.MaxAttempts <= 0 {
		errs = append(errs, fmt.Errorf("--max_attempts=%d: must be positive", fl.MaxAttempts))
	}
	if fl.MaxWaiting <= 0 {
		errs = append(errs, fmt.Errorf("--max_waiting=%d: must be positive", fl.MaxWaiting))
	}
	if err := CheckMS("--min_connect_timeout_ms", int64(fl.MinConnectTimeoutMS), 1); err != nil {
		errs = append(errs, err)
	}
	if fl.MaxHeld <= 0 {
		errs = append(errs, fmt.Errorf("--max_held=%d: must be positive", fl.MaxHeld))
	}
	if fl.MaxControlConns <= 0 {
		errs = append(errs, fmt.Errorf("--max_control_conns=%d: must be positive", fl.MaxControlConns))
	}
	cert, err := LoadKeyPair(fl.TLSCert, fl.TLSKey)
	if err != nil {
		errs = append(errs, err)
	}
	return Config{
		// Every interface, as the C++ server's 0.0.0.0; Go's ":port" is
		// dual-stack, so IPv6 clients reach both ports too.
		ControlAddr:       net.JoinHostPort("", strconv.Itoa(fl.ControlPort)),
		RetryAddr:         net.JoinHostPort("", strconv.Itoa(fl.RetryPort)),
		SessionTimeout:    fl.SessionTimeout,
		MaxAttempts:       fl.MaxAttempts,
		MaxWaiting:        fl.MaxWaiting,
		Mode:              fl.RetryMode,
		MinConnectTimeout: time.Duration(fl.MinConnectTimeoutMS) * time.Millisecond,
		MaxHeld:           fl.MaxHeld,
		MaxControlConns:   fl.MaxControlConns,
		TLSCert:           cert,
	}, errors.Join(errs...)
}
