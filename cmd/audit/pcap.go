package main

import (
	"encoding/json"
	"fmt"
	"io"
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

Exit 0 when every peer (every session, with --record) passes, 1 when one
fails or made too few attempts (with --record the last line names the
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
			port := cfg.port
			if port == 0 {
				if port, err = pt.OnlyPort(); err != nil {
					return usageError(err)
				}
			}
			tr := pt.Tracker(port)
			info.SYNs = uint64(tr.SYNs())
			if cfg.record != "" {
				var override *analyze.Policy
				if policyFlagsSet(cmd.Flags()) {
					override = &cfg.policy
				}
				return pcapWithRecord(cmd.OutOrStdout(), stderr, cfg, port, tr.Peers(), info, override)
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

// pcapWithRecord writes the report of every session of the record that
// overlaps the capture, each judged by its own policy unless override is
// set, and maps the sessions' verdicts to the exit status.
func pcapWithRecord(out, stderr io.Writer, cfg pcapConfig, port uint16, chains []analyze.Chain, info analyze.CaptureInfo, override *analyze.Policy) error {
	rep, err := live.AuditRecord(live.RecordOptions{Path: cfg.record, Port: port, Policy: override, DefaultPolicy: cfg.policy, Herd: cfg.herd}, chains, info)
	if err != nil {
		return usageError(err)
	}
	for _, w := range rep.Record.Warnings {
		fmt.Fprintf(stderr, "audit: warning: %s\n", w)
	}
	if n := len(rep.Record.Outside); n > 0 {
		fmt.Fprintf(stderr, "audit: warning: %s of %s lie outside the capture (another time or retry port): not judged\n",
			analyze.Plural(n, "session"), cfg.record)
	}
	if cfg.format == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		err = enc.Encode(rep)
	} else {
		err = rep.WriteText(out)
	}
	if err == nil && cfg.html != "" {
		err = htmlreport.WriteFile(cfg.html, rep, rep.Herd())
	}
	if err != nil {
		return usageError(err)
	}
	failed, total, first := rep.Failures()
	return sessionsVerdict(failed, total, first)
}

// validate checks the flags and parses --peer.
func (c pcapConfig) validate(portSet bool) ([]netip.Addr, error) {
	if portSet && c.port == 0 {
		return nil, fmt.Errorf("--port 0: the retry port must be 1–65535 (leave --port out to detect it)")
	}
	if err := c.policy.Validate(); err != nil {
		return nil, fmt.Errorf("policy: %s", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	if c.record != "" && len(c.peers) > 0 {
		return nil, fmt.Errorf("--peer with --record: each session of a record judges its own verified peer")
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
