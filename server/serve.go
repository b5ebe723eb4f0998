package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/backoff-audit/audit/internal/field"
	"github.com/backoff-audit/audit/tlsdec"
)

// OpenRecord opens the record file a server appends its events to
// (Config.Record), creating it if needed.
func OpenRecord(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open record file: %w", err)
	}
	return f, nil
}

// OpenFiles opens the files a server writes, when named: record, the
// record file its events are appended to (OpenRecord, Config.Record), and
// keylog, the key log its TLS modes' secrets are appended to
// (tlsdec.OpenKeyLogWriter, mode 0600, Config.KeyLog), into cfg. closeAll
// closes them; it is never nil.
func OpenFiles(cfg *Config, record, keylog string) (closeAll func() error, err error) {
	var files []*os.File
	closeAll = func() error {
		var errs []error
		for _, f := range files {
			errs = append(errs, f.Close())
		}
		return errors.Join(errs...)
	}
	if record != "" {
		f, err := OpenRecord(record)
		if err != nil {
			return closeAll, err
		}
		files, cfg.Record = append(files, f), f
	}
	if keylog != "" {
		f, err := tlsdec.OpenKeyLogWriter(keylog)
		if err != nil {
			return closeAll, errors.Join(field.Errorf("KeyLog", nil, "%w", err), closeAll())
		}
		files, cfg.KeyLog = append(files, f), f
	}
	return closeAll, nil
}

// Serve runs a server until ctx ends, as `audit server` does: it prints
// the chosen addresses to out, and writes the files record and keylog
// name (OpenFiles). cfg.Logger must be set.
func Serve(ctx context.Context, out io.Writer, cfg Config, record, keylog string) (err error) {
	closeAll, err := OpenFiles(&cfg, record, keylog)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeAll()) }()
	srv, err := New(cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "control port %s\nretry port %s\n", srv.ControlAddr(), srv.RetryAddr())
	<-ctx.Done()
	cfg.Logger.Info("shutting down", "cause", context.Cause(ctx))
	return srv.Close()
}
