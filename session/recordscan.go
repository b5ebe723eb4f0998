package session

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// ScanRecord reads a record file line by line and calls fn with each event,
// in order, keeping nothing itself: a caller bounds what it keeps. A torn
// line, one a writer cut short (a full disk, a killed server), is skipped
// with a warning naming its line and byte offset, wherever it is: at the
// end of the file, ended by the newline a later server wrote (server's
// OpenRecord), or with the next run's line appended onto it, which is
// then read. Any other line that does not read is an error naming its
// line and offset, as is a line longer than MaxRecordLine; so is fn's
// error, and the reader's (returned wrapped).
func ScanRecord(r io.Reader, fn func(RecordEvent) error, warn func(string)) error {
	return scanRecord(r, MaxRecordLine, recordBuf, fn, warn)
}

// eventStart is how every line the writer writes begins (recordJSON's
// first member): where a line appended onto a torn one starts.
var eventStart = []byte(`{"event":`)

// scanRecord is ScanRecord with the line bound and read size as
// parameters. With warn nil it is strict, as ReadRecord: a torn line in
// the middle is an error, and a torn last line ends the read with an
// error wrapping ErrTornLine.
func scanRecord(r io.Reader, maxLine, bufSize int, fn func(RecordEvent) error, warn func(string)) error {
	br := bufio.NewReaderSize(r, bufSize)
	var (
		off  int64  // where the current line starts
		long []byte // a line that spans bufio's buffer, gathered here
	)
	for line := 1; ; line++ {
		fail := func(format string, args ...any) error {
			return fmt.Errorf("read record line %d at offset %d: %w", line, off, fmt.Errorf(format, args...))
		}
		long = long[:0]
		var b []byte
		for {
			frag, err := br.ReadSlice('\n')
			content := len(long) + len(frag)
			if err == nil {
				content-- // the newline
			}
			if content > maxLine {
				// Decided as soon as the bound is passed, newline or not, so
				// the answer does not depend on how the reader cuts its reads.
				return fail("line longer than %d bytes", maxLine)
			}
			switch {
			case err == bufio.ErrBufferFull:
				long = append(long, frag...)
				continue
			case err == io.EOF:
				if content == 0 {
					return nil
				}
				if warn == nil {
					return fail("%w: its %d bytes are ignored", ErrTornLine, content)
				}
				warn(fmt.Sprintf("record line %d at offset %d: %v: its %d bytes are ignored; the lines before it are used", line, off, ErrTornLine, content))
				return nil
			case err != nil:
				return fail("%w", err)
			}
			if len(long) == 0 {
				b = frag // valid until the next read; Unmarshal copies what it keeps
			} else {
				b = append(long, frag...)
				long = b
			}
			break
		}
		text := b[:len(b)-1]
		var e RecordEvent
		err := json.Unmarshal(text, &e)
		if err != nil && warn != nil {
			e, err = readTorn(text, func(what string) {
				warn(fmt.Sprintf("record line %d at offset %d: %s", line, off, what))
			})
		}
		switch {
		case errors.Is(err, errSkipped):
		case err != nil:
			return fail("%w", err)
		default:
			if err := fn(e); err != nil {
				return err
			}
		}
		off += int64(len(b))
	}
}

// errSkipped is readTorn's answer for a line that is torn whole.
var errSkipped = errors.New("torn line skipped")

// readTorn reads a line that did not read as an event, when it is a torn
// one: a line cut short (JSON ended early) is skipped, errSkipped; one
// with the next run's line appended onto it gives that line's event. warn
// says which. Any other line keeps its error.
func readTorn(text []byte, warn func(string)) (RecordEvent, error) {
	var e RecordEvent
	err := json.Unmarshal(text, &e)
	var syn *json.SyntaxError
	if errors.As(err, &syn) && syn.Offset == int64(len(text)) && bytes.HasPrefix(text, eventStart) {
		warn(fmt.Sprintf("torn line (%d bytes, cut short by a writer that stopped) skipped", len(text)))
		return RecordEvent{}, errSkipped
	}
	if i := bytes.LastIndex(text, eventStart); i > 0 && bytes.HasPrefix(text, eventStart) {
		if json.Unmarshal(text[i:], &e) == nil {
			warn(fmt.Sprintf("torn line (%d bytes, cut short by a writer that stopped) skipped; the line appended onto it is read", i))
			return e, nil
		}
	}
	return RecordEvent{}, err
}
