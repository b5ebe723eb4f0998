package auditrun

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/backoff-audit/audit/internal/field"
	"github.com/backoff-audit/audit/session"
)

// recordPoll is how often the record file of another server is read.
const recordPoll = 100 * time.Millisecond

// recordChunk bounds what one poll reads of the record file, so that a
// file that grows without end (or /dev/zero) is read a piece at a time.
const recordChunk = 4 << 20

// tailRecord follows a record file written by `audit server --record`:
// first the session still open in what the file held when it was first
// read, if any, then every event appended after, until ctx ends (with one
// last read). A missing or empty file is waited for, and all that is
// written to it is new: a session that starts and ends between two reads
// is followed too. A file that shrinks (truncated) or is replaced
// (rotated) is read again from its start, and warn says so, as it says of
// a torn line skipped (session.ScanRecord). A line longer than
// session.MaxRecordLine is an error naming its offset.
func tailRecord(ctx context.Context, path string, push func(session.RecordEvent), warn func(string)) error {
	var (
		off     int64 // bytes of the file taken
		partial []byte
		line    = 1 // number of the line partial starts
		last    os.FileInfo
		// first is set while what the file held at the first read is
		// read, chunk by chunk; history keeps its events from its last
		// start on.
		first   = true
		history []session.RecordEvent
	)
	t := time.NewTicker(recordPoll)
	defer t.Stop()
	for {
		done := ctx.Err() != nil
		b, fi, err := readFrom(path, off, recordChunk)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return field.Errorf("Record", nil, "%w", err)
		}
		if fi != nil && last != nil && (!os.SameFile(fi, last) || fi.Mode().IsRegular() && fi.Size() < off) {
			what := "truncated"
			if !os.SameFile(fi, last) {
				what = "replaced"
			}
			warn(fmt.Sprintf("record %s was %s; reading it from its start", path, what))
			off, partial, line = 0, nil, 1
			if b, fi, err = readFrom(path, 0, recordChunk); err != nil {
				return field.Errorf("Record", nil, "%w", err)
			}
		}
		if fi != nil {
			last = fi
		}
		lineOff := off - int64(len(partial))
		off += int64(len(b))
		partial = append(partial, b...)
		n := bytes.LastIndexByte(partial, '\n') + 1
		if n == 0 && len(partial) > session.MaxRecordLine {
			return field.Errorf("Record", path, "line %d at offset %d is longer than %d bytes", line, lineOff, session.MaxRecordLine)
		}
		var events []session.RecordEvent
		err = session.ScanRecord(bytes.NewReader(partial[:n]), func(e session.RecordEvent) error {
			events = append(events, e)
			return nil
		}, func(w string) {
			warn(fmt.Sprintf("record %s: from line %d at offset %d: %s", path, line, lineOff, w))
		})
		if err != nil {
			return field.Errorf("Record", path, "from line %d at offset %d: %w", line, lineOff, err)
		}
		line += bytes.Count(partial[:n], []byte{'\n'})
		partial = append(partial[:0], partial[n:]...)
		if first {
			history = lastSession(append(history, events...))
			if len(b) == recordChunk && !done {
				continue // more of what was there: read on
			}
			events, history, first = openSession(history), nil, false
		}
		for _, e := range events {
			push(e)
		}
		if done && len(b) < recordChunk {
			return nil
		}
		if len(b) == recordChunk && !done {
			continue // more is there: read on before waiting
		}
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
}

// lastSession keeps, of events, those from the last start on; none
// when there is no start.
func lastSession(events []session.RecordEvent) []session.RecordEvent {
	last := -1
	for i, e := range events {
		if e.Event == session.EventStart {
			last = i
		}
	}
	if last < 0 {
		return events[:0]
	}
	return events[last:]
}

// openSession keeps, of the events already in a record file, those of its
// last session if that session is still open.
func openSession(events []session.RecordEvent) []session.RecordEvent {
	events = lastSession(events)
	if len(events) == 0 {
		return nil
	}
	var out []session.RecordEvent
	for _, e := range events {
		if e.Event == session.EventStop || e.Event == session.EventExpire {
			return nil
		}
		if e.Session == events[0].Session {
			out = append(out, e)
		}
	}
	return out
}

// readFrom reads at most max bytes of the file at path from off, and
// returns them with the file's information.
func readFrom(path string, off int64, max int) ([]byte, os.FileInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if fi.Mode().IsRegular() && fi.Size() < off {
		return nil, fi, nil // truncated: the caller starts again
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return nil, fi, err
	}
	b, err := io.ReadAll(io.LimitReader(f, int64(max)))
	return b, fi, err
}
