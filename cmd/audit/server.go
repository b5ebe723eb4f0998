package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/backoff-audit/audit/server"
)

// serverFlags are audit server's flags; the port names are the C++
// reference server's, so its scripts work unchanged.
type serverFlags struct {
	controlPort    int
	retryPort      int
	sessionTimeout time.Duration
	maxAttempts    int
	maxWaiting     int
	record         string
}

func newServerCmd() *cobra.Command {
	var fl serverFlags
	cmd := &cobra.Command{
		Use:   "server [--control_port=PORT] [--retry_port=PORT]",
		Short: "Run the reference reconnect server (drop-in for the C++ reconnect_interop_server)",
		Long: `server runs the server side of gRPC's connection backoff interop test:
grpc.testing.ReconnectService (plaintext) on the control port, and a retry
port that accepts and closes every connection, on IPv4 and IPv6, recording
when each arrived and from which address. Both listen on every interface.

Between a client's Start and Stop the retry connections are grouped by
source address. The chain of the address that called Start is verified
(if none came from it but exactly one other address connected, that one is,
and the log says so); every other chain is logged as foreign and never
counted. Stop answers passed and backoff_ms with the reference's verifier,
its bugs fixed: too few attempts fails, each session uses its own
max_reconnect_backoff_ms, Stop without Start is FAILED_PRECONDITION.

On start it prints one line per port to stdout, e.g.

  control port [::]:40111
  retry port [::]:40112

and then logs to stderr, one line per backoff interval as connections
arrive. A port of 0 picks a free port. SIGINT or SIGTERM shuts it down
cleanly within a second: both ports stop accepting at once, waiting Starts
get UNAVAILABLE, and the record file is complete.

One session runs at a time; other callers' Starts wait for it, up to
--max_waiting of them (more get RESOURCE_EXHAUSTED). A Start from the
caller that holds the running session is FAILED_PRECONDITION, and a
negative max_reconnect_backoff_ms INVALID_ARGUMENT.

--record FILE appends one JSON line per event (session start, every accepted
connection, session end) for 'audit' to cross-check against the packets.`,
		Example: `  audit server --control_port=8080 --retry_port=8081
  audit server --control_port=0 --retry_port=0 --record=run.jsonl`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := fl.config()
			if err != nil {
				return usageError(err)
			}
			cfg.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if err := serve(ctx, cmd.OutOrStdout(), cfg, fl.record); err != nil {
				return usageError(err) // nothing was judged: a port, the record file
			}
			return nil
		},
	}
	fl.register(cmd.Flags(), "port that accepts and closes every connection (IPv4 and IPv6); 0 picks a free port")
	return cmd
}

// register adds the server's flags to f; `audit live` shares them and words
// the retry port's help for its --attach mode.
func (fl *serverFlags) register(f *pflag.FlagSet, retryHelp string) {
	f.IntVar(&fl.controlPort, "control_port", 0, "port of the ReconnectService (plaintext gRPC); 0 picks a free port")
	f.IntVar(&fl.retryPort, "retry_port", 0, retryHelp)
	f.DurationVar(&fl.sessionTimeout, "session_timeout", server.DefaultSessionTimeout,
		"end a session this long after its Start if no Stop came, so the next Start can run")
	f.IntVar(&fl.maxAttempts, "max_attempts", server.DefaultMaxAttempts,
		"connections one session keeps; more are counted and fail the session as 'too many attempts'")
	f.IntVar(&fl.maxWaiting, "max_waiting", server.DefaultMaxWaiting,
		"Starts that may wait while a session runs; more are refused at once with RESOURCE_EXHAUSTED")
	f.StringVar(&fl.record, "record", "", "append one JSON line per event of the server to this file (format: analyze/record.go)")
}

// config checks the flags and turns them into a server.Config.
func (fl serverFlags) config() (server.Config, error) {
	var errs []error
	if fl.controlPort < 0 || fl.controlPort > 65535 {
		errs = append(errs, fmt.Errorf("--control_port=%d: not a port (0-65535)", fl.controlPort))
	}
	if fl.retryPort < 0 || fl.retryPort > 65535 {
		errs = append(errs, fmt.Errorf("--retry_port=%d: not a port (0-65535)", fl.retryPort))
	}
	if fl.controlPort != 0 && fl.controlPort == fl.retryPort {
		errs = append(errs, fmt.Errorf("--control_port and --retry_port are both %d", fl.controlPort))
	}
	if fl.sessionTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--session_timeout=%v: must be positive", fl.sessionTimeout))
	}
	if fl.maxAttempts <= 0 {
		errs = append(errs, fmt.Errorf("--max_attempts=%d: must be positive", fl.maxAttempts))
	}
	if fl.maxWaiting <= 0 {
		errs = append(errs, fmt.Errorf("--max_waiting=%d: must be positive", fl.maxWaiting))
	}
	return server.Config{
		// Every interface, as the C++ server's 0.0.0.0; Go's ":port" is
		// dual-stack, so IPv6 clients reach both ports too.
		ControlAddr:    net.JoinHostPort("", strconv.Itoa(fl.controlPort)),
		RetryAddr:      net.JoinHostPort("", strconv.Itoa(fl.retryPort)),
		SessionTimeout: fl.sessionTimeout,
		MaxAttempts:    fl.maxAttempts,
		MaxWaiting:     fl.maxWaiting,
	}, errors.Join(errs...)
}

// serve runs the server until ctx ends, printing the chosen addresses to
// out; record, when not empty, is the file the events are appended to.
func serve(ctx context.Context, out io.Writer, cfg server.Config, record string) (err error) {
	if record != "" {
		f, err := openRecord(record)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, f.Close()) }()
		cfg.Record = f
	}
	srv, err := server.New(cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "control port %s\nretry port %s\n", srv.ControlAddr(), srv.RetryAddr())
	<-ctx.Done()
	cfg.Logger.Info("shutting down", "cause", context.Cause(ctx))
	return srv.Close()
}
