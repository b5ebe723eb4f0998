package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/backoff-audit/audit/internal/field"
	"github.com/backoff-audit/audit/internal/outfile"
	"github.com/backoff-audit/audit/tlsdec"
)

// OpenRecord opens the record file a server appends its events to
// (Config.Record), creating it if needed, as internal/outfile appends: a
// symbolic link is followed, a FIFO or a device is written in place. A
// regular file is locked (flock) while it is open: a record another server
// holds is an error naming the file and the holder's pid. A record whose
// last line is torn (a server stopped while writing it) is ended with a
// newline first, so that the new lines start lines of their own; log says
// so.
func OpenRecord(path string, log *slog.Logger) (*os.File, error) {
	f, err := outfile.Append(path)
	if err != nil {
		return nil, fmt.Errorf("open record file: %w", err)
	}
	if err := lockRecord(f, path); err != nil {
		f.Close()
		return nil, err
	}
	if err := endTornLine(f, path, log); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// endTornLine writes a newline at the end of a regular file whose last
// byte is not one; the caller holds the record's lock.
func endTornLine(f *os.File, path string, log *slog.Logger) error {
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() == 0 {
		return nil
	}
	// f is open to append only: its last byte is read through a second
	// descriptor of the same file. One that cannot be read is appended to
	// as it is.
	r, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer r.Close()
	last := make([]byte, 1)
	if rfi, err := r.Stat(); err != nil || !os.SameFile(fi, rfi) {
		return nil
	}
	if _, err := r.ReadAt(last, fi.Size()-1); err != nil {
		return nil
	}
	if last[0] == '\n' {
		return nil
	}
	if _, err := f.Write([]byte{'\n'}); err != nil {
		return fmt.Errorf("record file %s: end its torn last line: %w", path, err)
	}
	log.Warn("record file ended inside a line (a server stopped while writing it): ended it with a newline before appending; readers skip the torn line",
		"record", path, "offset", fi.Size())
	return nil
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
		f, err := OpenRecord(record, cfg.Logger)
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
