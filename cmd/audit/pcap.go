package main

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/backoff-audit/audit/analyze"
	"github.com/backoff-audit/audit/analyze/htmlreport"
	"github.com/backoff-audit/audit/capture"
	"github.com/backoff-audit/audit/live"
)

type pcapConfig struct {
	port    uint16
	policy  analyze.Policy
	mode    analyze.RetryMode
	format  string
	peers   []string
	record  string
	control uint16
	html    string
	herd    bool
	verbose bool
}

func newPcapCmd() *cobra.Command {
	cfg := pcapConfig{policy: analyze.DefaultPolicy(), format: "text"}
	cmd := &cobra.Command{
		Use:   "pcap FILE...",
		Short: "Audit reconnect backoff from the SYNs of capture files",
		Long: `pcap verifies every client's reconnect backoff from the kernel timestamps of
its SYNs to the retry port (docs/spec.md §5), with the reference verifier.

Files may be pcap or pcapng, gzip-compressed or not; several files (a rotated
tcpdump -C set) are merged by timestamp. A SYN sent again with the same ISN is
a retransmission, counted and not judged. Without --port the retry port is
the only port the capture has SYNs to.

The text report gives every peer its interval table when there are at most
20 peers, when --peer chooses them, with --verbose or --record; otherwise
a passing peer gets one line (its largest jitter included). JSON has every
peer in full, one peer per line. When every failing peer would pass under one
lower cap, the report names it after the summary (JSON: summary.fits_cap_ms):
a client run with its own cap, read without --max-backoff.

--retry_mode names what the retry port did (docs/spec.md §7): close, refuse,
hang, restart=DURATION, settings-close or goaway; without it, the mode is
read from the attempts' fates (most refused, hung, or closed). After an
attempt that hung (its fate, or the mode, says so) the window is at least
--min-connect-timeout, and a client still waiting past that deadline fails.
Each peer names the known deviations its chain matches (signatures).

--html FILE also writes the report as one page that opens from disk: each
chain against its windows, the herd and, with --record, kernel against server.
--herd ends the text and JSON reports with the herd: attempts per second,
waves of reconnects made together, and how well jitter spreads them.

--record RECORD.jsonl (the file of 'audit server --record') judges each
session of the record that overlaps the capture instead: the verified peer's
chain by the policy of the session's own Start (a policy flag overrides it,
and the report says so), beside the server's verdict and the cross-check of
the two lists. A record that overlaps no part of the capture (another day,
another retry port) is an input error; sessions outside it are named and not
judged. --peer does not go with --record.

Without --record, the sessions come from the server's control port when
the capture holds it (docs/spec.md §5.6): --control_port, or the port whose
plaintext HTTP/2 connections call /grpc.testing.ReconnectService/Start.
Each Start begins a session judged by its own max_reconnect_backoff_ms,
its Stop's ReconnectInfo is the server's verdict, and backoff_ms is
cross-checked against the kernel's intervals one by one. Any
ReconnectService works, the C++ reference included. --peer skips the
detection, and so does --port: the read then keeps that port's SYNs only,
so name the control port too.

Exit 0 when every peer (every session, with --record or a control port)
passes, 1 when one fails or made too few attempts (then the last line names the
session, which verdict failed, kernel or server, and why), 2 for bad flags
or unreadable input.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			peers, err := cfg.validate(cmd.Flags().Changed("port"))
			if err != nil {
				return usageError(err)
			}
			stderr := cmd.ErrOrStderr()
			pt, info, err := capture.ReadFiles(files, capture.Options{Port: cfg.port}, stderr)
			if err != nil {
				return usageError(err)
			}
			for _, w := range info.Warnings() {
				fmt.Fprintf(stderr, "audit: warning: %s\n", w)
			}
			ctl, port, err := live.ChoosePorts(files, pt, cfg.port, cfg.control, cfg.record == "" && len(peers) == 0, stderr)
			if err != nil {
				return usageError(err)
			}
			tr := pt.Tracker(port)
			info.SYNs = uint64(tr.SYNs())
			opt := live.RecordOptions{Path: cfg.record, Port: port, DefaultPolicy: cfg.policy, Herd: cfg.herd}
			if policyFlagsSet(cmd.Flags()) {
				opt.Policy = &cfg.policy
			}
			if cfg.record != "" {
				return pcapSessions(cmd, cfg)(live.AuditRecord(opt, tr.Peers(), info))
			}
			if ctl != nil {
				return pcapSessions(cmd, cfg)(live.AuditControl(opt, ctl, tr.Peers(), info))
			}
			// Every peer is verified, whatever --peer keeps.
			cs, inferred := tr.Chains(), false
			if !cmd.Flags().Changed("retry_mode") {
				cfg.mode, inferred = cs.InferMode(cfg.policy)
			}
			aud := analyze.NewAudit(port, cfg.policy, analyze.Run{Mode: cfg.mode}, cs, info).Only(peers...)
			aud.ModeInferred = inferred
			if cfg.herd {
				aud = aud.WithHerd()
			}
			if err := aud.Write(cmd.OutOrStdout(), cfg.format == "json", cfg.verbose || len(peers) > 0); err != nil {
				return usageError(err)
			}
			if cfg.html != "" {
				if err := htmlreport.WriteFile(cfg.html, aud.Report(), aud.Herd()); err != nil {
					return usageError(err)
				}
			}
			return pcapVerdict(port, aud.Summary, peers)
		},
	}
	f := cmd.Flags()
	f.Uint16Var(&cfg.port, "port", 0, "the retry port (default: the only port the capture has SYNs to)")
	addPolicyFlags(f, &cfg.policy)
	f.TextVar(&cfg.mode, "retry_mode", cfg.mode, "what the retry port did: "+analyze.ModeNames)
	f.StringVar(&cfg.format, "format", cfg.format, "output format: text or json")
	f.StringArrayVar(&cfg.peers, "peer", nil, "report only this client address (repeatable)")
	f.BoolVarP(&cfg.verbose, "verbose", "v", false, "text: the interval table of every peer, passing ones included")
	f.BoolVar(&cfg.herd, "herd", false, "end the report with the herd: attempts per second, waves of reconnects made together, jitter's spread (JSON: \"herd\")")
	f.StringVar(&cfg.html, "html", "", "also write the report as one self-contained HTML `FILE`: each chain against its windows, the herd, the cross-check")
	f.StringVar(&cfg.record, "record", "", "cross-check each session of this `RECORD.jsonl` file (written by audit server --record) against the SYNs")
	f.Uint16Var(&cfg.control, "control_port", 0, "the server's control port in the capture, whose Start and Stop calls give the sessions (default: detected)")
	recordAlias(f)
	return cmd
}

// addPolicyFlags binds the policy the clients are held to, with the spec's
// defaults (docs/spec.md §1, §3).
func addPolicyFlags(f *pflag.FlagSet, p *analyze.Policy) {
	f.DurationVar(&p.BaseDelay, "initial-backoff", p.BaseDelay, "INITIAL_BACKOFF: expected wait after the first failure")
	f.Float64Var(&p.Multiplier, "multiplier", p.Multiplier, "MULTIPLIER: growth of the backoff per attempt")
	f.Float64Var(&p.Jitter, "jitter", p.Jitter, "JITTER: allowed relative deviation of each backoff")
	f.DurationVar(&p.MaxDelay, "max-backoff", p.MaxDelay, "MAX_BACKOFF: cap on the expected backoff")
	f.DurationVar(&p.MinConnectTimeout, "min-connect-timeout", p.MinConnectTimeout, "MIN_CONNECT_TIMEOUT: the least time a client waits on an attempt that hangs")
	f.DurationVar(&p.Tolerance, "tolerance", p.Tolerance, "transmission-delay allowance on both sides of every window")
}

// policyFlags are the flags addPolicyFlags binds.
var policyFlags = []string{"initial-backoff", "multiplier", "jitter", "max-backoff", "min-connect-timeout", "tolerance"}

// policyFlagsSet reports whether a policy flag was given.
func policyFlagsSet(f *pflag.FlagSet) bool {
	for _, name := range policyFlags {
		if f.Changed(name) {
			return true
		}
	}
	return false
}

// pcapSessions writes a report of sessions (of a record file or of the
// control port) and maps their verdicts to the exit status.
func pcapSessions(cmd *cobra.Command, cfg pcapConfig) func(analyze.Report, error) error {
	return func(rep analyze.Report, err error) error {
		if err != nil {
			return usageError(err)
		}
		failed, total, first, err := live.WriteSessions(cmd.OutOrStdout(), cmd.ErrOrStderr(), rep, cfg.format == "json", cfg.html)
		if err != nil {
			return usageError(err)
		}
		return sessionsVerdict(failed, total, first)
	}
}

// validate checks the flags and parses --peer.
func (c pcapConfig) validate(portSet bool) ([]netip.Addr, error) {
	if portSet && c.port == 0 {
		return nil, fmt.Errorf("--port 0: the retry port must be 1–65535 (leave --port out to detect it)")
	}
	if err := c.policy.Validate(); err != nil {
		return nil, fmt.Errorf("policy: %s", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	if (c.record != "" || c.control != 0) && len(c.peers) > 0 {
		return nil, fmt.Errorf("--peer with --record or --control_port: each session judges its own verified peer")
	}
	if c.record != "" && c.control != 0 {
		return nil, fmt.Errorf("--control_port with --record: the sessions come from one of the two")
	}
	if c.format != "text" && c.format != "json" {
		return nil, fmt.Errorf("--format %q: must be text or json", c.format)
	}
	peers := make([]netip.Addr, 0, len(c.peers))
	for _, s := range c.peers {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("--peer %q: not an IP address", s)
		}
		peers = append(peers, a.Unmap())
	}
	return peers, nil
}

// pcapVerdict maps the summary to the exit status: nil only when there were
// peers and every one passed.
func pcapVerdict(port uint16, sum analyze.Summary, peers []netip.Addr) error {
	switch {
	case sum.PassedAll:
		return nil
	case sum.Peers == 0 && len(peers) > 0:
		return verdictError("no connection attempt to port %d from %v", port, peers)
	case sum.Peers == 0:
		return verdictError("no connection attempt to port %d", port)
	}
	return verdictError("%s", sum)
}
