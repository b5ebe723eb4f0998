package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/internal/outfile"
	"github.com/backoff-audit/audit/server"
)

// serverFlags are audit server's flags; the port names are the C++
// reference server's, so its scripts work unchanged.
type serverFlags struct {
	server.Flags
	record string
}

func newServerCmd() *cobra.Command {
	var fl serverFlags
	cmd := &cobra.Command{
		Use:   "server [--control_port=PORT] [--retry_port=PORT]",
		Short: "Run the reference reconnect server (drop-in for the C++ reconnect_interop_server)",
		Long: fmt.Sprintf(`server runs the server side of gRPC's connection backoff interop test:
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

One session runs at a time; other Starts wait for it, up to --max_waiting
of them (more get RESOURCE_EXHAUSTED), whatever connection they came on:
gRPC C-core shares one connection between the channels of a process, so
the threads of one client all call from one ip:port, and each gets its
session in turn. A client that calls Start twice without Stop waits, its
second Start with it, until its first session ends at --session_timeout
(the log says so); a waiting Start also ends with its caller's deadline.
A negative max_reconnect_backoff_ms is INVALID_ARGUMENT.

The control port keeps at most --max_control_conns connections open (and
at most half the descriptor limit, ulimit -n); more are closed as soon as
accepted. A connection that has not finished its HTTP/2 handshake %v
after it connected is closed, and one with no call for %v gets a
GOAWAY (a gRPC client reconnects when it calls again). When the process
runs out of descriptors, the retry port still takes each connection at
once with a descriptor kept in reserve, so every accept keeps its own
time.

--record FILE appends one JSON line per event (session start, every accepted
connection, the port coming back in restart mode, session end) for 'audit'
to cross-check against the packets. A symbolic link is followed; a record
that is --tls_cert or --tls_key is a usage error. The server locks the
record (flock) while it runs: a record another server holds is refused at
start, naming the holder's pid, since two servers' sessions would collide
in it.

--retry_mode sets what the retry port does during a session, from its
Start to its end; outside sessions it accepts and closes in every mode. The
mode is in the record's start line and in the log.

  close           accept, note the time, close at once: the interop test
                  (the default)
  refuse          listen on nothing: the kernel resets every SYN. The
                  server sees no attempt, so Stop answers passed=false
                  with the verdict "not judged"; only a capture sees the
                  attempts ('audit live' judges them from the SYNs)
  hang            accept, note the time, then hold the connection without
                  ever writing, until the client gives up on it (at its
                  connect timeout, at least --min_connect_timeout_ms) or
                  the session ends; the log notes how long each was held.
                  At most --max_held at once: more are closed at once
  restart=D       refuse for D (e.g. restart=5s) from Start, then accept
                  and close on the same port; the record's "restart" line
                  says when the port came back. The server sees only
                  the attempts after it, so Stop's verdict is "not
                  judged" here too
  settings-close  accept, note the time, complete TLS 1.2/1.3 with ALPN h2,
                  read the client's HTTP/2 preface, send SETTINGS, close:
                  an attempt that succeeds and dies at once. Each
                  connection lives at most %v, and at most %d are in
                  their handshake at once (more are closed at once)
  goaway          settings-close, with a GOAWAY (NO_ERROR) before the close

The TLS modes present --tls_cert and --tls_key (PEM), by default the
project's test certificate (testdata/tls/server.pem, its own CA, for
localhost, foo.test.google.fr, *.test.google.fr, 127.0.0.1 and ::1).
--keylog FILE appends the TLS secrets of their connections to FILE in the
NSS key log format (SSLKEYLOGFILE's), whatever the client's stack, so that
'audit h2 --keylog FILE' decodes a capture of them. The file holds secrets:
anyone who reads it can decrypt those connections; it is created, or
appended to, with mode 0600. refuse and restart need Linux.`, server.ControlHandshakeTimeout, server.ControlIdleTimeout, server.DefaultHandshakeTimeout, server.DefaultMaxHandshakes),
		Example: `  audit server --control_port=8080 --retry_port=8081
  audit server --control_port=0 --retry_port=0 --record=run.jsonl
  audit server --retry_port=8081 --retry_mode=restart=10s
  audit server --retry_port=8081 --retry_mode=goaway --tls_cert=cert.pem --tls_key=key.pem
  audit server --retry_port=8081 --retry_mode=goaway --keylog=keys.log`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := outputsApart([]outfile.Named{{Flag: "--record", Path: fl.record}}, fl.inputs()); err != nil {
				return err
			}
			cfg, err := fl.Config()
			if err != nil {
				return usageError(err)
			}
			cfg.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if err := server.Serve(ctx, cmd.OutOrStdout(), cfg, fl.record, fl.KeyLog); err != nil {
				return usageError(err) // nothing was judged: a port, the record file
			}
			return nil
		},
	}
	fl.register(cmd.Flags(), "port that accepts and closes every connection (IPv4 and IPv6); 0 picks a free port")
	cmd.Annotations = serverFields()
	return cmd
}

// serverFields maps the fields of server.Flags and server.Config to the
// flags that set them, for errors (flagMessage).
func serverFields() map[string]string {
	return map[string]string{"ControlPort": "control_port", "RetryPort": "retry_port", "SessionTimeout": "session_timeout",
		"MaxAttempts": "max_attempts", "MaxWaiting": "max_waiting", "RetryMode": "retry_mode", "Mode": "retry_mode",
		"MinConnectTimeoutMS": "min_connect_timeout_ms", "MaxHeld": "max_held", "MaxControlConns": "max_control_conns",
		"TLSCert": "tls_cert", "TLSKey": "tls_key", "KeyLog": "keylog"}
}

// inputs are the files the server's flags name that it reads.
func (fl *serverFlags) inputs() []outfile.Named {
	return []outfile.Named{{Flag: "--tls_cert", Path: fl.TLSCert}, {Flag: "--tls_key", Path: fl.TLSKey}}
}

// register adds the server's flags to f; `audit live` shares them and words
// the retry port's help for its --attach mode.
func (fl *serverFlags) register(f *pflag.FlagSet, retryHelp string) {
	f.Var(portFlag[int]{p: &fl.ControlPort, zero: true}, "control_port", "port of the ReconnectService (plaintext gRPC); 0 picks a free port")
	f.Var(portFlag[int]{p: &fl.RetryPort, zero: true}, "retry_port", retryHelp)
	f.DurationVar(&fl.SessionTimeout, "session_timeout", server.DefaultSessionTimeout,
		"end a session this long after its Start if no Stop came, so the next Start can run")
	f.IntVar(&fl.MaxAttempts, "max_attempts", server.DefaultMaxAttempts,
		"connections one session keeps; more are counted and fail the session as 'too many attempts'")
	f.IntVar(&fl.MaxWaiting, "max_waiting", server.DefaultMaxWaiting,
		"Starts that may wait while a session runs; more are refused at once with RESOURCE_EXHAUSTED")
	f.StringVar(&fl.record, "record", "", "append one JSON line per event of the server to this file (format: session/record.go)")
	f.TextVar(&fl.RetryMode, "retry_mode", fl.RetryMode,
		"what the retry port does during a session, a `MODE`: "+backoff.ModeNames+" (see audit server --help)")
	f.IntVar(&fl.MinConnectTimeoutMS, "min_connect_timeout_ms", int(backoff.DefaultMinConnectTimeout/time.Millisecond),
		"MIN_CONNECT_TIMEOUT of the sessions' policy, 1–2147483647: the least time a client gives one attempt (hang mode's attempts last that long)")
	f.IntVar(&fl.MaxHeld, "max_held", server.DefaultMaxHeld,
		"hang mode: connections held open at once; more are accepted and closed at once, and counted")
	f.IntVar(&fl.MaxControlConns, "max_control_conns", server.DefaultMaxControlConns,
		"control port connections open at once (at most half of ulimit -n); more are closed as soon as accepted")
	f.StringVar(&fl.TLSCert, "tls_cert", "", "settings-close, goaway and outage: the certificate (PEM, at most 1 MiB) the retry port presents, with --tls_key (default: testdata/tls/server.pem, built in)")
	f.StringVar(&fl.TLSKey, "tls_key", "", "settings-close, goaway and outage: the private key (PEM, at most 1 MiB) of --tls_cert")
	f.StringVar(&fl.KeyLog, "keylog", "", "settings-close, goaway and outage: append the TLS secrets of the retry port's connections to this `FILE` (NSS key log; it holds secrets, mode 0600)")
}
