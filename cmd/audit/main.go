// Command audit serves, runs and audits gRPC's connection backoff interop
// test. Each verb lives in a file of its own; this one holds the root command
// and the single place where outcomes become exit codes.
package main

import (
	"errors"
	"fmt"
	"os"

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

// verdictError marks a failed verdict (exit 1); the report is already printed.
func verdictError(format string, a ...any) error {
	return &exitError{code: exitFail, err: fmt.Errorf(format, a...)}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "audit",
		Short: "Check that gRPC clients reconnect with the backoff the spec demands",
		Long: `audit serves and audits gRPC's connection backoff interop test.

  audit server   the reference ReconnectService and retry port (drop-in for the C++ server)
  audit client   the interop client: runs the five steps against a server

Every verdict uses one verifier, bit for bit the reference's, with its bugs fixed.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError(err) })
	for _, add := range commands {
		root.AddCommand(add())
	}
	return root
}

// commands is filled by each verb's file in its init, so adding a verb
// touches only its own file.
var commands []func() *cobra.Command

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	root := newRootCmd()
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(os.Stderr, "audit: %v\n", err)
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	// cobra's own errors (unknown command, bad args) are usage errors.
	return exitUsage
}
