package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/backoff-audit/audit/auditrun"
	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/capture"
	"github.com/backoff-audit/audit/watch"
)

func newWatchCmd() *cobra.Command {
	cfg := auditrun.WatchConfig{Watch: watch.Config{Policy: backoff.DefaultPolicy()}}
	var ports []int
	format := "text"
	cmd := &cobra.Command{
		Use:   "watch --iface IFACE --port PORT...",
		Short: "Audit the reconnect backoff of a production port's clients, continuously",
		Long: `watch captures, with libpcap, the SYNs to one or more ports and the segments
that tell what became of each attempt (docs/spec.md §7.2), and judges every
client's chain of attempts as it goes, with no server of its own and no
session: run it beside any server, on every host of a fleet.

A peer is a client address of one port. Its attempts form a chain, judged
with the policy flags (audit pcap's; by default the spec's) and the
attempts' fates, as audit pcap judges a peer:
  - a success ends the chain: the connection reached READY (the server's
    HTTP/2 SETTINGS, or inside TLS the server's data after the client's
    second flight: docs/spec.md §7.2), after which the spec resets the
    backoff; an attempt that succeeded with no failure before it is a
    connection, not a chain;
  - a chain is over, judged and freed, when no attempt came by the upper
    bound of its next window and past its last attempt's connect
    deadline: the client stopped retrying;
  - a chain is judged on its first --max_chain attempts when it reaches
    them; later ones are counted until it ends;
  - Ctrl-C or SIGTERM judges the chains still open, and prints the summary.

It prints one line per failed chain, per signature a chain matches, per
tight reconnect loop (successes that drop, each followed by an immediate
reconnect) and per herd wave (10 or more peers making the same attempt of
their chains within 100 ms; at most one line per port and attempt every
10 s, every wave counted); --format json writes the same as JSON Lines,
the summary last. Memory is bounded by the peers retrying: a peer is
forgotten (and counted) once idle past its window, at most --max_peers are
tracked (the attempts of others are counted, not judged), and a chain keeps
at most --max_chain attempts.

--metrics ADDR serves the Prometheus exposition at http://ADDR/metrics
(deploy/prometheus/audit-rules.yml has alert rules for it; README, "A
fleet"): attempts, SYN retransmissions, fates, chains by verdict and end,
intervals by verdict, signatures, peers retrying, peers in a tight loop,
herd waves, and libpcap's counters read at each scrape. The port is a
label, a peer's address never is. --write FILE saves every captured packet
(pcap, nanosecond timestamps) for audit pcap; the file replaces what was
at its path only once the capture is open.

--infer reads from each judged chain the schedule its client runs, as
audit pcap --infer reads a peer's (docs/spec.md §8): every judged chain is
then a line, with its initial backoff, multiplier, jitter and cap, each
with an interval or "undetermined" and why (JSON: the chain's "inferred").
Each port keeps the last --infer_sample chains it judged, and every
--infer_every, when chains came since, and once at the end, reads from
them the policies its clients run: a "policies" line (the headline and
table of audit pcap --infer's section; JSON "policies", the same object),
and the audit_policy_ gauges, replaced whole at each reading. Each chain
judged after a reading is placed in the policy that explains it, by that
reading's numbers, or named an outlier, and judged against its policy.
The verdicts and the exit code stay those of the policy flags.

A health check that connects and closes is a client like any other.
Capturing needs root, or CAP_NET_RAW and CAP_NET_ADMIN on the binary.

Exit 0 when no chain failed, 1 when one did (the last line names the
first), 2 when the run could not start (a bad flag, an address that cannot
be bound, no capture permission) or the capture failed (an interface that
disappeared): what was judged until then is printed first.`,
		Example: `  audit watch --iface eth0 --port 443 --metrics :9465
  audit watch --iface lo --port 50051 --port 50052 --format json --write watch.pcap
  audit watch --iface eth0 --port 443 --infer --infer_every 5m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format != "text" && format != "json" {
				return usageError(fmt.Errorf("--format %q: must be text or json", format))
			}
			cfg.Watch.JSON = format == "json"
			for _, p := range ports {
				if p <= 0 || p > 65535 {
					return usageError(fmt.Errorf("--port %d: not a port (1–65535)", p))
				}
				cfg.Ports = append(cfg.Ports, uint16(p))
			}
			ctx, stop := interruptible(cmd.Context())
			defer stop()
			return outcomeError(auditrun.Watch(ctx, cfg, cmd.OutOrStdout(), cmd.ErrOrStderr()))
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Iface, "iface", "", "interface to capture on (required; not any: a packet that crosses two interfaces would be seen twice)")
	f.IntSliceVar(&ports, "port", nil, "a port to watch (repeatable, or comma-separated; at most 64)")
	addPolicyFlags(f, &cfg.Watch.Policy, false)
	f.StringVar(&format, "format", format, "output format: text, or json (JSON Lines)")
	f.StringVar(&cfg.Write, "write", "", "also save every captured packet to this `FILE` (pcap, nanosecond timestamps), for 'audit pcap'")
	f.StringVar(&cfg.Metrics, "metrics", "", "serve the Prometheus exposition at http://`ADDR`/metrics (host:port; :9465 listens on every address)")
	f.IntVar(&cfg.BufferSize, "buffer", capture.DefaultLiveBuffer, "kernel capture buffer in bytes")
	f.IntVar(&cfg.Watch.MaxPeers, "max_peers", watch.DefaultMaxPeers, "the most peers tracked at once; attempts of others are counted, not judged")
	f.IntVar(&cfg.Watch.MaxChain, "max_chain", watch.DefaultMaxChain, "the most attempts a chain keeps; it is judged on them, later ones counted")
	f.BoolVar(&cfg.Watch.Infer, "infer", false, "read each judged chain's schedule (a line each) and the policies each port's clients run (docs/spec.md §8.7)")
	f.DurationVar(&cfg.Watch.InferEvery, "infer_every", watch.DefaultInferEvery, "with --infer: how often the policies are read again (when chains came since; and once at the end)")
	f.IntVar(&cfg.Watch.InferSample, "infer_sample", watch.DefaultInferSample,
		fmt.Sprintf("with --infer: the most chains of each port the policies are read from (at most %d), the last judged, and at most %d times as many attempts (the oldest chains go first): %.1f MB a port at the default",
			watch.MaxInferSample, watch.SampleAttempts, float64(watch.SampleBytes(watch.DefaultInferSample))/1e6))
	cmd.MarkFlagRequired("iface")
	cmd.MarkFlagRequired("port")
	cmd.Annotations = map[string]string{"MaxPeers": "max_peers", "MaxChain": "max_chain", "InferEvery": "infer_every", "InferSample": "infer_sample"}
	return cmd
}
