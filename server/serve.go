package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/backoff-audit/audit/internal/outfile"
)

// OpenRecord opens the record file a server appends its events to
// (Config.Record), creating it if needed, as internal/outfile appends: a
// symbolic link is followed, a FIFO or a device is written in place. A
// regular file is locked (flock) while it is open: a record another server
// holds is an error naming the file and the holder's pid.
func OpenRecord(path string) (*os.File, error) {
	f, err := outfile.Append(path)
	if err != nil {
		return nil, fmt.Errorf("open record file: %w", err)
	}
	if err := lockRecord(f, path); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Serve runs a server until ctx ends, as `audit server` does: it prints
// the chosen addresses to out, and record, when not empty, is the file the
// events are appended to (OpenRecord). cfg.Logger must be set.
func Serve(ctx context.Context, out io.Writer, cfg Config, record string) (err error) {
	if record != "" {
		f, err := OpenRecord(record)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, f.Close()) }()
		cfg.Record = f
	}
	srv, err := New(cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "control port %s\nretry port %s\n", srv.ControlAddr(), srv.RetryAddr())
	<-ctx.Done()
	cfg.Logger.Info("shutting down", "cause", context.Cause(ctx))
	return srv.Close()
}
