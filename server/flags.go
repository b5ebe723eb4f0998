package server

import (
	"errors"
	"math"
	"net"
	"strconv"
	"time"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/internal/field"
)

// Flags are the settings `audit server` and `audit live` take on their
// command lines (the ports under the C++ reference server's flag names,
// docs/spec.md §2.3), before Config checks them.
type Flags struct {
	ControlPort, RetryPort int
	SessionTimeout         time.Duration
	MaxAttempts            int
	MaxWaiting             int
	RetryMode              backoff.RetryMode
	MinConnectTimeoutMS    int
	MaxHeld                int
	MaxControlConns        int
	TLSCert, TLSKey        string
	// KeyLog is the file the TLS modes' secrets are appended to
	// (Config.KeyLog); Serve opens it.
	KeyLog string
}

// MaxMS is the largest value of a millisecond flag: the range of the Start
// field max_reconnect_backoff_ms, an int32 (about 24.8 days), which a
// time.Duration holds exactly.
const MaxMS = math.MaxInt32

// CheckMS refuses a millisecond field's value outside lo–MaxMS, naming the
// field and the range (field.Error).
func CheckMS(name string, ms, lo int64) error {
	if ms < lo || ms > MaxMS {
		return field.Errorf(name, ms, "must be in %d–%d (ms)", lo, MaxMS)
	}
	return nil
}

// Config checks the flags and turns them into a Config; the error names
// every field that is wrong (field.Error).
func (fl Flags) Config() (Config, error) {
	errs := []error{field.Port("ControlPort", fl.ControlPort, true), field.Port("RetryPort", fl.RetryPort, true)}
	if fl.ControlPort != 0 && fl.ControlPort == fl.RetryPort {
		errs = append(errs, field.Errorf("ControlPort", fl.ControlPort, "is %s too: they are two ports", field.Name("RetryPort")))
	}
	if fl.SessionTimeout <= 0 {
		errs = append(errs, field.Errorf("SessionTimeout", fl.SessionTimeout, "must be positive"))
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"MaxAttempts", fl.MaxAttempts}, {"MaxWaiting", fl.MaxWaiting}, {"MaxHeld", fl.MaxHeld}} {
		if f.v <= 0 {
			errs = append(errs, field.Errorf(f.name, f.v, "must be positive"))
		}
	}
	if err := CheckMS("MinConnectTimeoutMS", int64(fl.MinConnectTimeoutMS), 1); err != nil {
		errs = append(errs, err)
	}
	if fl.MaxControlConns <= 0 {
		errs = append(errs, field.Errorf("MaxControlConns", fl.MaxControlConns, "must be positive"))
	}
	if fl.KeyLog != "" && !fl.RetryMode.Succeeds() {
		errs = append(errs, errKeyLogMode("RetryMode", fl.RetryMode))
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
