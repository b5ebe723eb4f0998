package main

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/backoff-audit/audit/flows"
	"github.com/backoff-audit/audit/h2"
)

func newH2Cmd() *cobra.Command {
	var ports []uint
	var keylog string
	format, tol := "text", h2.DefaultTolerance
	retry := h2.RetryPolicy{MaxAttempts: 5, InitialBackoff: 100 * time.Millisecond, MaxBackoff: time.Second, BackoffMultiplier: 2}
	cmd := &cobra.Command{
		Use:   "h2 FILE... [--port P ...] [--keylog FILE]",
		Short: "Print the HTTP/2 and gRPC timeline of each connection in capture files",
		Long: `h2 reassembles the TCP connections of capture files (pcap, pcapng, gzip; several
files are one rotated set, in time order) and decodes their HTTP/2 and gRPC
frames. Per connection: addresses, start and end, encrypted or damaged (and
why), its RPCs (ReconnectService as docs/spec.md §2 names it), each side's
PING cadence (BDP probes aside: grpc-go's by their data, and any PING that
answers the peer's DATA within 10 ms), every GOAWAY (last stream id, error
code, debug data, streams in flight), RST_STREAMs, streams above a GOAWAY's
last stream id, and the client's next connection after a GOAWAY or a close. Then the findings:
keepalive PINGs answered by GOAWAY too_many_pings, GOAWAY connection ages (a
max connection age), reconnects, and RPCs retried with grpc-previous-rpc-attempts,
checked when a --retry_* flag is given against that policy, the others at
their defaults (gRFC A6: retry n waits U(0, min(initial·multiplier^(n−1),
max)), or ±20 % around it as revised; each window widened by
--retry_tolerance). JSON lists every retried RPC's
attempts ("retries"), with the check of each delay when a policy is given.

--port P (repeatable) decodes every connection of P; without it, those whose
client starts with the HTTP/2 preface, and those starting with TLS as encrypted.

--keylog FILE decrypts the TLS connections with the secrets of an NSS key log
(SSLKEYLOGFILE; audit server --keylog, audit client --keylog,
NODE_OPTIONS=--tls-keylog=FILE for grpc-js): TLS 1.3 and TLS 1.2 with
AES-GCM or ChaCha20-Poly1305, key updates followed. Their HTTP/2 is decoded
as a plaintext connection's. Each says whether it was decrypted, or why not:
no key (the log has no line for its ClientHello random), unsupported suite
or version, damaged record (bytes lost, a record cut short or too long),
the key log's secret does not decrypt it, no ServerHello (the server never
answered: nothing was encrypted), handshake not captured. JSON: "tls" per
connection, "keylog" with the lines read and skipped (lines not of the
format are skipped and counted).

A connection's timeline keeps 20000 events (SETTINGS, PINGs and their
ACKs, GOAWAYs, RST_STREAMs), 10000 RPCs and 1000 warnings; what it drops
beyond is counted (text: "not kept past the decoder's limits", JSON:
"dropped"). GOAWAYs and RST_STREAMs are kept past the budget, up to as many
again, and the PING cadence and the findings count every PING.

The file - is standard input. Ctrl-C or SIGTERM while reading stops the read
there at once, whether a byte came or not: the report covers what was read
(a warning gives the offset), and a second Ctrl-C ends the process.

Exit 0 when no finding is a problem; 1 when one is (marked ! in the text: a
damaged connection, too_many_pings, a stream opened or answered above a
GOAWAY's last stream id, a retry outside both windows or beyond
--retry_max_attempts); 2 for bad flags, an unreadable file, or nothing judged:
no connection of a --port in the files, or, without --port, files that hold
no connection to decode (as audit pcap exits 2 on a capture with no attempt).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			ctx, stop := interruptible(cmd.Context())
			defer stop()
			opt := flows.AuditOptions{Ports: ports, Format: format, Tolerance: tol, KeyLog: keylog, Done: ctx.Done(), Progress: cmd.ErrOrStderr()}
			if slices.ContainsFunc(retryFlags, cmd.Flags().Changed) {
				opt.Retry = &retry // checked only when given
			}
			rep, err := flows.Audit(files, opt)
			if rep != nil {
				for _, w := range rep.Warnings {
					fmt.Fprintf(cmd.ErrOrStderr(), "audit: warning: %s\n", w)
				}
			}
			if err == nil {
				err = rep.Write(cmd.OutOrStdout(), format)
			}
			switch {
			case errors.Is(err, flows.ErrNoConnection):
				return usageError(fmt.Errorf("%w (--port names the port to decode when it is not detected)", err))
			case err != nil:
				return usageError(err)
			case rep.Nothing() != "":
				return usageError(fmt.Errorf("nothing judged: %s", rep.Nothing()))
			case rep.Verdict() != "":
				return verdictError("%s", rep.Verdict())
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.Var(portsFlag{&ports}, "port", "decode every connection of this port (repeatable; default: detect HTTP/2)")
	f.StringVar(&format, "format", format, "output format: text or json")
	f.StringVar(&keylog, "keylog", "", "decrypt TLS connections with this NSS key log `FILE` (SSLKEYLOGFILE format)")
	f.DurationVar(&retry.InitialBackoff, "retry_initial_backoff", retry.InitialBackoff, "retryPolicy initialBackoff")
	f.DurationVar(&retry.MaxBackoff, "retry_max_backoff", retry.MaxBackoff, "retryPolicy maxBackoff")
	f.Float64Var(&retry.BackoffMultiplier, "retry_multiplier", retry.BackoffMultiplier, "retryPolicy backoffMultiplier")
	f.IntVar(&retry.MaxAttempts, "retry_max_attempts", retry.MaxAttempts, "retryPolicy maxAttempts (capped at 5, as clients cap it)")
	f.DurationVar(&tol, "retry_tolerance", tol, "widen every retry delay's window by this much on both sides (the client's timer against the wire)")
	for _, name := range retryFlags {
		fl := f.Lookup(name)
		fl.Usage += fmt.Sprintf(" (default %s, once a retry flag asks for the check)", fl.DefValue)
		withoutDefault(f, name)
	}
	cmd.Annotations = map[string]string{"Format": "format", "Ports": "port", "Tolerance": "retry_tolerance",
		"Retry.MaxAttempts": "retry_max_attempts", "Retry.InitialBackoff": "retry_initial_backoff",
		"Retry.MaxBackoff": "retry_max_backoff", "Retry.BackoffMultiplier": "retry_multiplier", "KeyLog": "keylog"}
	return cmd
}

// retryFlags are the flags of the retry policy retried RPCs are checked
// against; giving one asks for the check.
var retryFlags = []string{"retry_initial_backoff", "retry_max_backoff", "retry_multiplier", "retry_max_attempts"}
