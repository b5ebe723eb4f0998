package main

import (
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

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
--use_tls=false makes the channel plaintext. --reissue makes the retry RPC
again each time it fails before the deadline, for a retry port whose
connections succeed and then drop (audit server --retry_mode settings-close
or goaway): a channel with no RPC waiting does not reconnect.

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
	f.IntVar(&cfg.ControlPort, "server_control_port", 0, "the server's control (plaintext gRPC) port")
	f.IntVar(&cfg.RetryPort, "server_retry_port", 0, "the server's retry port")
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
	f.BoolVar(&cfg.Reissue, "reissue", false, "make the retry RPC again when it fails before the deadline")
	f.BoolVar(&quiet, "quiet", false, "no progress lines on stderr while the retry RPC waits")
	cmd.MarkFlagRequired("server_control_port")
	cmd.MarkFlagRequired("server_retry_port")
	return cmd
}
