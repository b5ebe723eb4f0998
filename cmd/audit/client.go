package main

import (
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/interop"
)

func newClientCmd() *cobra.Command {
	cfg := interop.Config{
		ServerHost:       "localhost",
		InitialBackoffMS: 1000,
		Deadline:         540 * time.Second,
	}
	var quiet bool
	useTLS := true
	cmd := &cobra.Command{
		Use:   "client --server_control_port=PORT --server_retry_port=PORT",
		Short: "Run the interop client (grpc-go) against a reconnect server",
		Long: `client runs the five steps of the connection backoff interop test with
grpc-go: Start on the control port, one wait-for-ready RPC on a TLS channel to
the retry port until its deadline, Stop, then the server's verdict and the
client's own check of backoff_ms with the same verifier.

The retry channel asks TLS for --server_host_override and trusts a
certificate made in memory, which no server of the interop test presents
(its retry port closes every connection first); --ca_file trusts the roots
of a PEM file instead, for a retry port that completes the handshake, and
--use_tls=false makes the channel plaintext. --keylog FILE appends the
retry channel's TLS secrets to FILE in the NSS key log format, for
'audit h2 --keylog FILE' to decode a capture of its connections; the file
holds secrets (anyone who reads it can decrypt them) and is created, or
appended to, with mode 0600. --reissue makes the retry RPC
again each time it fails before the deadline, for a retry port whose
connections succeed and then drop (audit server --retry_mode settings-close
or goaway): a channel with no RPC waiting does not reconnect.

--retry_mode names the retry port's mode (audit server --retry_mode), which
the own check judges backoff_ms in: after a connection that reached READY
(settings-close, goaway) the backoff begins anew and the interval is not
judged. In refuse, restart and outage the server's list lacks the attempts
its port refused: neither its answer nor the own check can judge the chain,
both say so, and that is not a failure (audit live judges it from the
kernel's SYNs).

While the retry RPC waits, stderr gets a line per state change of the retry
channel and one every ` + interop.DefaultProgressEvery.String() + ` otherwise, each with the time so far and the
deadline; --quiet leaves them out. The report goes to stdout.

Exit 0 when both pass, 1 when either fails, 2 when nothing could be judged.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if !quiet {
				cfg.Progress = cmd.ErrOrStderr()
			}
			cfg.Plaintext = !useTLS
			rep, err := interop.Run(ctx, cfg)
			if err != nil {
				return usageError(err)
			}
			if err := rep.Write(cmd.OutOrStdout()); err != nil {
				return usageError(err)
			}
			if ok, reason := rep.Verdict(); !ok {
				return verdictError("%s", reason)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.ServerHost, "server_host", cfg.ServerHost, "server host for both ports")
	f.Var(portFlag[int]{p: &cfg.ControlPort}, "server_control_port", "the server's control (plaintext gRPC) port")
	f.Var(portFlag[int]{p: &cfg.RetryPort}, "server_retry_port", "the server's retry port")
	f.Int32Var(&cfg.MaxReconnectBackoffMS, "max_reconnect_backoff_ms", 0,
		"cap on the backoff, sent in Start and given to grpc-go (0 = default 120000)")
	f.Int32Var(&cfg.InitialBackoffMS, "initial_backoff_ms", cfg.InitialBackoffMS,
		"grpc-go's initial backoff; anything but 1000 is a deliberately wrong client")
	f.Int32Var(&cfg.MinConnectTimeoutMS, "min_connect_timeout_ms", 20000,
		"grpc-go's MinConnectTimeout: the least time one attempt is given to connect")
	f.DurationVar(&cfg.Deadline, "deadline", cfg.Deadline, "deadline of the wait-for-ready RPC on the retry port")
	f.BoolVar(&useTLS, "use_tls", useTLS, "TLS on the retry channel, as the interop test has it; false: plaintext")
	f.StringVar(&cfg.CAFile, "ca_file", "", "PEM roots the retry channel trusts, at most 1 MiB (default: a certificate made in memory)")
	f.StringVar(&cfg.ServerHostOverride, "server_host_override", interop.DefaultServerHostOverride,
		"the server name TLS asks for and checks")
	f.TextVar(&cfg.Mode, "retry_mode", cfg.Mode, "the retry port's mode, which the own check judges backoff_ms in: "+backoff.ModeNames)
	f.StringVar(&cfg.KeyLog, "keylog", "", "append the retry channel's TLS secrets to this `FILE` (NSS key log; it holds secrets, mode 0600)")
	f.BoolVar(&cfg.Reissue, "reissue", false, "make the retry RPC again when it fails before the deadline")
	f.BoolVar(&quiet, "quiet", false, "no progress lines on stderr while the retry RPC waits")
	cmd.MarkFlagRequired("server_control_port")
	cmd.MarkFlagRequired("server_retry_port")
	cmd.Annotations = map[string]string{"ServerHost": "server_host", "ControlPort": "server_control_port", "KeyLog": "keylog",
		"RetryPort": "server_retry_port", "MaxReconnectBackoffMS": "max_reconnect_backoff_ms",
		"InitialBackoffMS": "initial_backoff_ms", "MinConnectTimeoutMS": "min_connect_timeout_ms",
		"Deadline": "deadline", "CAFile": "ca_file", "Plaintext": "use_tls"}
	return cmd
}
