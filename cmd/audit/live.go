package main

import (
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/backoff-audit/audit/auditrun"
	"github.com/backoff-audit/audit/capture"
	"github.com/backoff-audit/audit/internal/outfile"
	"github.com/backoff-audit/audit/server"
)

func newLiveCmd() *cobra.Command {
	var cfg auditrun.Config
	var fl serverFlags // the flags of `audit server`, with the same names
	var format string
	cmd := &cobra.Command{
		Use:   "live [--iface IFACE]",
		Short: "Run the reference server and verify each session from the kernel's SYN timestamps",
		Long: `live runs the reference server (the flags of 'audit server') and, in the same
process, captures the SYNs to its retry port with libpcap. While a session
runs it prints one line per attempt; when the session's Stop returns it
prints the kernel's verdict over the SYN timestamps, the server's verdict,
and a cross-check of the two lists: each attempt paired by peer ip and port
with its app delay, attempts only one side saw and why, and a diagnosis of
every interval whose verdict the server's timestamps changed
(docs/spec.md §5).

--record FILE appends the in-process server's events to FILE, as
'audit server --record' does. With --attach it only captures: the server
runs elsewhere on this host and --retry_port names its port; --record is
then that server's record file, which sessions follow (Start and Stop) so
that the cross-check runs too. Without a record a session ends after --idle
without a SYN, and is judged against --max_backoff. A record file truncated
or replaced while it is followed is read again from its start.

--attach --control_port=P follows any ReconnectService instead of a record
(docs/spec.md §5.6): port P is captured too, whole, on a libpcap handle of
its own; each Start decoded from it begins a session judged by its own cap,
each Stop ends it with the server's verdict, and Stop's backoff_ms is
cross-checked against the kernel's intervals one by one. A control
connection open before the capture cannot be decoded: a warning says so.
--write then keeps both ports in one pcapng file, an interface each (retry
port headers, control port whole), each in capture order.

A session keeps at most --max_attempts attempts on either side; later ones
are counted and its verdict is "too many attempts", so a SYN flood cannot
exhaust memory. Of the attempts outside any session only the last 8192 to
16384 are kept, for the next report's cross-check; older ones are counted.

Ctrl-C or SIGTERM reports what was captured, stops the server and closes the
--write file complete; so does a capture error, which ends the open session
at once (its cause then says "capture error"). The --write file replaces
what was at its path only once the capture is open; a FIFO or a device is
written in place, and a symbolic link is followed (so for --html and
--record). An output that is an input (the record followed, --tls_cert,
--tls_key) or another output is a usage error, before anything is read. It is flushed when the
capture is idle, at least every 250 ms while SYNs come, and at the end.
libpcap's counters ("received", "dropped") count packets: on a loopback
interface the kernel's capture sees each SYN twice, leaving and arriving,
so there they read two per SYN. Capturing needs root, or CAP_NET_RAW and
CAP_NET_ADMIN on the binary.

--metrics ADDR serves the Prometheus exposition at http://ADDR/metrics, as
'audit watch --metrics' does (see its help): the retry port's attempts as
they come, each session's chains when it ends (end "session end"), and
libpcap's counters read at each scrape. An address that cannot be bound
ends the run before it starts (exit 2).

Exit 0 when every verdict passed, 1 when one failed (the last line names
the session, which verdict failed, kernel or server, and why), 2 when the
run could not start or the capture failed. A run that ends having judged
no session exits 0: stderr says what it saw.

--min_connect_timeout and --max_backoff are durations, as audit pcap's;
--min_connect_timeout_ms and --max_reconnect_backoff_ms, in milliseconds
as 'audit server' and 'audit client' spell them, are accepted for them.
--server_log is a former name of --record.`,
		Example: `  audit live --control_port=8080 --retry_port=8081
  audit live --iface lo --attach --retry_port=8081 --record=run.jsonl --format=json
  audit live --iface lo --attach --retry_port=8081 --control_port=8080`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format != "text" && format != "json" {
				return usageError(fmt.Errorf("--format %q: must be text or json", format))
			}
			cfg.JSON = format == "json"
			outputs := []outfile.Named{{Flag: "--write", Path: cfg.Write}, {Flag: "--html", Path: cfg.HTML}}
			inputs := fl.inputs()
			if record := (outfile.Named{Flag: "--record", Path: fl.record}); cfg.Attach {
				inputs = append(inputs, record)
			} else {
				outputs = append(outputs, record)
			}
			if err := outputsApart(outputs, inputs); err != nil {
				return err
			}
			srvCfg, err := fl.Config()
			if err != nil {
				return usageError(err)
			}
			cfg.Server, cfg.RetryPort = srvCfg, fl.RetryPort
			cfg.Server.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			if cfg.Attach {
				if fl.KeyLog != "" {
					return usageError(fmt.Errorf("--keylog with --attach: the server that would write it runs elsewhere"))
				}
				cfg.Record, cfg.ControlPort = fl.record, fl.ControlPort
			} else {
				closeAll, err := server.OpenFiles(&cfg.Server, fl.record, fl.KeyLog)
				if err != nil {
					return usageError(err)
				}
				defer closeAll()
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return outcomeError(auditrun.Run(ctx, cfg, cmd.OutOrStdout(), cmd.ErrOrStderr()))
		},
	}
	f := cmd.Flags()
	fl.register(f, "port that accepts and closes every connection; 0 picks a free port. With --attach: the port to watch")
	f.Lookup("control_port").Usage += ". With --attach: the server's control port, whose Start and Stop calls sessions follow (not with --record)"
	f.Lookup("record").Usage += ". With --attach: that server's record file, whose Start and Stop events sessions follow"
	f.Var(msFlag[int]{&fl.MinConnectTimeoutMS}, "min_connect_timeout", f.Lookup("min_connect_timeout_ms").Usage)
	f.MarkHidden("min_connect_timeout_ms")
	f.StringVar(&cfg.Iface, "iface", "lo", "interface to capture on")
	f.BoolVar(&cfg.Attach, "attach", false, "only capture; the server runs elsewhere on this host (--retry_port is its port; --record its record file or --control_port its control port)")
	f.DurationVar(&cfg.Idle, "idle", 0, "with --attach and neither --record nor --control_port: end a session after this long without a SYN (default twice --max_backoff plus the tolerance)")
	f.Var(msFlag[int32]{&cfg.MaxMS}, "max_backoff", "with --attach and neither --record nor --control_port: MAX_BACKOFF, the cap sessions are judged against (default 2m0s; a followed session's is its Start's)")
	withoutDefault(f, "max_backoff")
	f.Int32Var(&cfg.MaxMS, "max_reconnect_backoff_ms", 0, "--max_backoff in milliseconds")
	f.MarkHidden("max_reconnect_backoff_ms")
	f.StringVar(&cfg.HTML, "html", "", "rewrite this HTML `FILE` with each session's report (see audit pcap --help)")
	f.BoolVar(&cfg.Herd, "herd", false, "end each session's report with the herd of its peers (see audit pcap --help)")
	f.StringVar(&cfg.Write, "write", "", "also save every captured packet to this file (pcap, nanosecond timestamps; pcapng with --control_port), for 'audit pcap'")
	f.StringVar(&format, "format", "text", "report format: text, or json (one line per session)")
	f.IntVar(&cfg.BufferSize, "buffer", capture.DefaultLiveBuffer, "kernel capture buffer in bytes")
	f.StringVar(&cfg.Metrics, "metrics", "", "serve the Prometheus exposition at http://`ADDR`/metrics (host:port)")
	cmd.Annotations = serverFields()
	maps.Copy(cmd.Annotations, map[string]string{"Attach": "attach", "Record": "record", "Write": "write", "HTML": "html",
		"Idle": "idle", "MaxMS": "max_backoff", "BufferSize": "buffer", "MinConnectTimeoutMS": "min_connect_timeout", "Metrics": "metrics"})
	return cmd
}
