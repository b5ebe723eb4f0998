// Command audit serves, runs and audits gRPC's connection backoff interop
// test. Each verb lives in a file of its own; this one holds the root command
// and the single places where outcomes become exit codes and a library's
// fields become flags.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/backoff-audit/audit/auditrun"
	"github.com/backoff-audit/audit/internal/buildinfo"
	"github.com/backoff-audit/audit/internal/field"
	"github.com/backoff-audit/audit/internal/outfile"
	"github.com/backoff-audit/audit/internal/text"
	"github.com/spf13/cobra"
)

// Exit codes scripts can rely on.
const (
	exitOK    = 0 // every verdict passed
	exitFail  = 1 // a verdict failed (or had too few attempts)
	exitUsage = 2 // bad flags, unreadable input, a port in use: nothing was judged
)

// exitError carries an exit code out of a RunE.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageError marks err as a usage or input problem (exit 2).
func usageError(err error) error { return &exitError{code: exitUsage, err: err} }

// outcomeError maps what a run judged to the exit status: a usage error
// when err is set or nothing was judged; a failed verdict when sessions
// failed (how many, and what failed first: which verdict, and why) or
// peers did not pass.
func outcomeError(o auditrun.Outcome, err error) error {
	switch {
	case err != nil:
		return usageError(err)
	case o.Nothing != "":
		return usageError(errors.New(o.Nothing))
	case o.Verdict != "":
		return verdictError("%s", o.Verdict)
	case o.Failed > 0:
		return verdictError("%d of %s failed; %s", o.Failed, text.Plural(o.Sessions, "session"), o.FirstFailure)
	}
	return nil
}

// flagMessage is err's message with every configuration field a library
// names in it (field.Error) spelt as the flag of cmd that sets it. A verb's
// Annotations map the fields of the configurations it fills to its flags.
func flagMessage(cmd *cobra.Command, err error) string {
	return field.Spell(err, func(f string) string {
		if name, ok := cmd.Annotations[f]; ok {
			return "--" + name
		}
		return ""
	})
}

// outputsApart refuses, as a usage error, an output that would destroy an
// input or another output (outfile.Check). Each verb calls it before it
// reads anything.
func outputsApart(outputs, inputs []outfile.Named) error {
	if err := outfile.Check(outputs, inputs); err != nil {
		return usageError(err)
	}
	return nil

}

// interruptible returns a context that SIGINT or SIGTERM ends; a second
// signal then has its default effect, so that a second Ctrl-C ends the
// process at once.
func interruptible(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	return ctx, stop
}

// verdictError marks a failed verdict (exit 1); the report is already printed.
func verdictError(format string, a ...any) error {
	return &exitError{code: exitFail, err: fmt.Errorf(format, a...)}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "audit",
		Short: "Check that gRPC clients reconnect with the backoff the spec demands",
		Long: `audit serves and audits gRPC's connection backoff interop test
(docs/spec.md).

  audit server   the reference ReconnectService and retry port (drop-in for the C++ server)
  audit client   the interop client: runs the five steps against a server
  audit live     the server and a libpcap capture of its retry port: each session
                 judged from the kernel's SYN timestamps and cross-checked
  audit pcap     the same verdicts from capture files, with or without the
                 server's record file
  audit h2       the HTTP/2 and gRPC timeline of each connection in capture files
  audit watch    the clients of production ports, continuously, from a libpcap
                 capture: each peer's chain judged as it ends, Prometheus metrics

Every verdict uses one verifier, bit for bit the reference's, with its bugs fixed.
Exit codes: 0 every verdict passed, 1 a verdict failed, 2 nothing could be judged.

Flags are spelt with underscores on every verb, as the C++ interop binaries
spell theirs (--retry_port); the same name with dashes (--retry-port) is
accepted too.`,
		Version:       buildinfo.Version(),
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		// Without a verb there is nothing to do: say what there is, and
		// fail as a usage error.
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(cmd.ErrOrStderr())
			cmd.Help()
			return usageError(errors.New("no verb given: audit server, client, live, pcap, h2 or watch"))
		},
	}
	root.SetVersionTemplate("audit {{.Version}}\n")
	root.Flags().Bool("version", false, "print the version") // no -v: that is --verbose
	root.SetFlagErrorFunc(flagError)
	root.SetGlobalNormalizationFunc(normalizeFlag)
	root.AddCommand(newServerCmd(), newClientCmd(), newLiveCmd(), newPcapCmd(), newH2Cmd(), newWatchCmd())
	return root
}

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line args (without the program name), the verbs
// printing to stdout and stderr, and returns the exit code. Tests call it in
// process, so that they see the exit codes main would exit with.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "audit: %s\n", flagMessage(cmd, err))
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	// cobra's own errors (unknown command, bad args) are usage errors.
	return exitUsage
}
