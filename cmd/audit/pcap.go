package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/backoff-audit/audit/auditrun"
	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/internal/outfile"
)

func newPcapCmd() *cobra.Command {
	cfg := auditrun.FilesConfig{Policy: backoff.DefaultPolicy()}
	format := "text"
	cmd := &cobra.Command{
		Use:   "pcap FILE...",
		Short: "Audit reconnect backoff from the SYNs of capture files",
		Long: `pcap verifies every client's reconnect backoff from the kernel timestamps of
its SYNs to the retry port (docs/spec.md §5), with the reference verifier.

Files may be pcap or pcapng, gzip-compressed or not; several files (a rotated
tcpdump -C set) are merged by timestamp; a file named twice (or through a
link) is read once, with a warning. The file - is standard input
(tcpdump -w - | audit pcap -). Ctrl-C or SIGTERM while reading stops the
read there at once, whether a byte came or not (a FIFO whose writer never
opened it, an idle pipe): the report covers what was read (a warning gives
the offset), and a second Ctrl-C ends the process. A SYN sent again with the same ISN is
a retransmission, counted and not judged. Without --port the retry port is
the only port the capture has SYNs to.

The text report gives every peer its interval table when there are at most
20 peers, when --peer chooses them, with --verbose or --record; otherwise
a passing peer gets one line (its largest jitter included). JSON has every
peer in full, one peer per line. When every failing peer would pass under one
lower cap, the report names it after the summary (JSON: summary.fits_cap_ms):
a client run with its own cap, read without --max_backoff.

--retry_mode names what the retry port did (docs/spec.md §7): close, refuse,
hang, restart=DURATION, settings-close or goaway; without it, the mode is
read from the attempts' fates (most refused, hung, or closed). After an
attempt that hung (its fate, or the mode, says so) the window is at least
--min_connect_timeout, and a client still waiting past that deadline fails.
Each peer names the known deviations its chain matches (signatures).

--keylog FILE decrypts the retry port's TLS connections with an NSS key log
(audit server --keylog, audit client --keylog, NODE_OPTIONS=--tls-keylog=FILE
for grpc-js; see audit h2 --help): an attempt reached READY, which resets the
backoff, exactly when the server's SETTINGS came inside its TLS, as when they
are a plaintext connection's first bytes, instead of when its flights of data
suggest it. Each attempt's fate says whether it was decrypted, or why not
(JSON: decrypted, not_decrypted), and stderr what the key log held. The
files are read a second time for it, which standard input (-) does not
allow.

--html FILE also writes the report as one page that opens from disk: each
chain against its windows, the herd and, with --record, kernel against server.
The page replaces a regular file whole, once written; a FIFO or a device is
written in place, and a symbolic link is followed. An --html that is one of
the inputs (a capture file, the record) is a usage error, before anything
is read.
--herd ends the text and JSON reports with the herd: attempts per second,
waves of reconnects made together, and how well jitter spreads them.

--infer reads from each chain the policy its client runs, without assuming
one (docs/spec.md §8): initial backoff, multiplier, jitter, cap (null when
never reached) and connect timeout, each with an interval or "undetermined"
and why (JSON: each peer's "inferred"). It then groups the peers into the
policies they run, says which is gRPC's default, judges each chain against
its own policy and counts the signatures it carries (JSON "policies", the
text's last section, the HTML page's Policies table); a chain no policy
explains is an outlier, named. The verdict and the exit code stay those of
the policy flags.

--record RECORD.jsonl (the file of 'audit server --record') judges each
session of the record that overlaps the capture instead: the verified peer's
chain by the policy of the session's own Start (a policy flag overrides it:
every policy flag then has its default, and the report says so), beside the
server's verdict and the cross-check of the two lists. A record that
overlaps no part of the capture (another day, another retry port) is an
input error; sessions outside it are named and not judged. Without --port
the retry port is the one the record's start lines name, when the capture
has SYNs to it. --peer does not go with --record.
--server_log is a former name of --record.

Without --record, the sessions come from the server's control port when
the capture holds it (docs/spec.md §5.6): --control_port, or the port whose
plaintext HTTP/2 connections call /grpc.testing.ReconnectService/Start.
Each Start begins a session judged by its own max_reconnect_backoff_ms,
its Stop's ReconnectInfo is the server's verdict, and backoff_ms is
cross-checked against the kernel's intervals one by one. Any
ReconnectService works, the C++ reference included. --peer skips the
detection, and so does --port: the read then keeps that port's SYNs only,
so name the control port too. The control port is read in a second pass,
which standard input (-) does not allow, nor an interrupted read.

Exit 0 when every peer (every session, with --record or a control port)
passes, 1 when one fails or made too few attempts (then the last line names the
session, which verdict failed, kernel or server, and why), 2 for bad flags
or unreadable input.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			if format != "text" && format != "json" {
				return usageError(fmt.Errorf("--format %q: must be text or json", format))
			}
			inputs := []outfile.Named{{Flag: "--record", Path: cfg.Record}}
			for _, file := range files {
				inputs = append(inputs, outfile.Named{Flag: "capture file", Path: file})
			}
			if err := outputsApart([]outfile.Named{{Flag: "--html", Path: cfg.HTML}}, inputs); err != nil {
				return err
			}
			f := cmd.Flags()
			cfg.JSON, cfg.PortSet, cfg.ModeSet, cfg.PolicySet = format == "json", f.Changed("port"), f.Changed("retry_mode"), policyFlagsSet(f)
			cfg.Stdin = cmd.InOrStdin()
			ctx, stop := interruptible(cmd.Context())
			defer stop()
			return outcomeError(auditrun.AuditFiles(ctx, files, cfg, cmd.OutOrStdout(), cmd.ErrOrStderr()))
		},
	}
	f := cmd.Flags()
	f.Var(portFlag[uint16]{p: &cfg.Port}, "port", "the retry port (default: the only port the capture has SYNs to)")
	addPolicyFlags(f, &cfg.Policy, true)
	f.TextVar(&cfg.Mode, "retry_mode", cfg.Mode, "the `MODE` the retry port was in: "+backoff.ModeNames+" (default: read from the attempts' fates)")
	withoutDefault(f, "retry_mode")
	f.StringVar(&format, "format", format, "output format: text or json")
	f.StringArrayVar(&cfg.Peers, "peer", nil, "report only this client address (repeatable)")
	f.BoolVarP(&cfg.Verbose, "verbose", "v", false, "text: the interval table of every peer, passing ones included")
	f.BoolVar(&cfg.Infer, "infer", false, "read each peer's policy from its chain and the policies the peers run (JSON: each peer's \"inferred\", \"policies\")")
	f.BoolVar(&cfg.Herd, "herd", false, "end the report with the herd: attempts per second, waves of reconnects made together, jitter's spread (JSON: \"herd\")")
	f.StringVar(&cfg.HTML, "html", "", "also write the report as one self-contained HTML `FILE`: each chain against its windows, the herd, the cross-check")
	f.StringVar(&cfg.Record, "record", "", "cross-check each session of this `RECORD.jsonl` file (written by audit server --record) against the SYNs")
	f.StringVar(&cfg.KeyLog, "keylog", "", "decrypt the retry port's TLS connections with this NSS key log `FILE`: an attempt succeeded when the server's SETTINGS came inside")
	f.Var(portFlag[uint16]{p: &cfg.Control}, "control_port", "the server's control port in the capture, whose Start and Stop calls give the sessions (default: detected)")
	cmd.Annotations = map[string]string{"Port": "port", "Peers": "peer", "Record": "record", "Control": "control_port",
		"HTML": "html", "Mode": "retry_mode", "KeyLog": "keylog"}
	return cmd
}

// addPolicyFlags binds the policy the clients are held to, with the spec's
// defaults (docs/spec.md §1, §3). Where there are sessions (of a record or
// a control port), each is judged by its own Start's policy unless one of
// these is given, so the help says so beside each default.
func addPolicyFlags(f *pflag.FlagSet, p *backoff.Policy, sessions bool) {
	f.DurationVar(&p.BaseDelay, "initial_backoff", p.BaseDelay, "INITIAL_BACKOFF: expected wait after the first failure")
	f.Float64Var(&p.Multiplier, "multiplier", p.Multiplier, "MULTIPLIER: growth of the backoff per attempt")
	f.Float64Var(&p.Jitter, "jitter", p.Jitter, "JITTER: allowed relative deviation of each backoff")
	f.DurationVar(&p.MaxDelay, "max_backoff", p.MaxDelay, "MAX_BACKOFF: cap on the expected backoff")
	f.DurationVar(&p.MinConnectTimeout, "min_connect_timeout", p.MinConnectTimeout, "MIN_CONNECT_TIMEOUT: the least time a client waits on an attempt that hangs")
	f.DurationVar(&p.Tolerance, "tolerance", p.Tolerance, "transmission-delay allowance on both sides of every window")
	if !sessions {
		return
	}
	for _, name := range policyFlags {
		fl := f.Lookup(name)
		fl.Usage += fmt.Sprintf(" (default %s, or each session's own)", fl.DefValue)
		withoutDefault(f, name)
	}
}

// policyFlags are the flags addPolicyFlags binds.
var policyFlags = []string{"initial_backoff", "multiplier", "jitter", "max_backoff", "min_connect_timeout", "tolerance"}

// policyFlagsSet reports whether a policy flag was given.
func policyFlagsSet(f *pflag.FlagSet) bool {
	for _, name := range policyFlags {
		if f.Changed(name) {
			return true
		}
	}
	return false
}
