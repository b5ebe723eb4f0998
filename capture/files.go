package capture

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/internal/text"
)

// Sink is what ReadInto hands a capture's attempts to: a PortTracker, or
// a stream.Stream of one port.
type Sink interface {
	Add(attempt.SYN)
	AddSegmentView(*attempt.SegmentView)
	// SetFatesKnown is told whether the capture can show fates
	// (attempt.Tracker.SetFatesKnown): true as soon as a TCP segment
	// other than a SYN is seen, and finally what the whole read found.
	SetFatesKnown(bool)
}

// ReadFiles reads the files into a PortTracker (ReadInto).
func ReadFiles(paths []string, opt Options, progress io.Writer) (*attempt.PortTracker, attempt.CaptureInfo, error) {
	pt := attempt.NewPortTracker()
	info, err := ReadInto(paths, opt, pt, progress)
	if err != nil {
		return nil, info, err
	}
	return pt, info, nil
}

// ReadInto reads every file with ReadFile into sink, SYNs to opt.Port
// only (any port when 0), with the segments their fates are read from
// (Options.Segments; docs/spec.md §7.2). Files may come in any order (a
// rotated tcpdump -C set): the trackers sort by time; but an attempt
// split between two files given out of time order loses the segments
// read before any SYN of its tuple (attempt.Tracker.AddSegment). info
// lists each file as ReadFile found it, in the order given, with their
// packets and skips summed; its SYNs are left to the caller, who knows
// the port. When no file holds a TCP segment other than a SYN,
// info.SYNOnly is set and the sink is told the capture gives no fates;
// otherwise that it does.
//
// A file named twice (Distinct) is read once, with a warning. The first
// file that cannot be read stops the read with ReadFile's error, which
// names the file. When opt.Done is closed, the file being read ends
// there, with a warning, and the files after it are named in another
// (StopBefore). When progress is a terminal, a read that takes more than a
// second shows its progress there; opt.Progress, when set, is called as
// well.
func ReadInto(paths []string, opt Options, sink Sink, progress io.Writer) (info attempt.CaptureInfo, _ error) {
	info = attempt.CaptureInfo{Skipped: map[string]uint64{}}
	show := ProgressTo(progress)
	var other uint64
	paths, dups := Distinct(paths)
	defer func() { NoteDuplicates(info.Files, dups) }()
	for i, path := range paths {
		if StopBefore(opt.Done, info.Files, paths[i:]) {
			break
		}
		o := opt
		o.Progress = bothProgress(opt.Progress, show(path))
		o.Segments = sink.AddSegmentView
		if other == 0 {
			o.otherTCP = func() { sink.SetFatesKnown(true) }
		}
		st, err := ReadFile(path, o, sink.Add)
		if err != nil {
			return info, err
		}
		info.Packets += st.Packets
		for reason, n := range st.Skipped {
			info.Skipped[reason] += n
		}
		info.Files = append(info.Files, st)
		other += st.OtherTCP
	}
	info.SYNOnly = other == 0
	sink.SetFatesKnown(!info.SYNOnly)
	return info, nil
}

// StopBefore ends a read of several files that Options.Done interrupted
// before the files rest: it names them in a warning of the last file read
// (read, the files read so far) and reports true; false while done is
// open, or when no file was read yet (the first file's read says it was
// interrupted).
func StopBefore(done <-chan struct{}, read []attempt.FileInfo, rest []string) bool {
	if !closed(done) || len(read) == 0 || len(rest) == 0 {
		return false
	}
	last := &read[len(read)-1]
	last.Warnings = append(last.Warnings, fmt.Sprintf("%s: read interrupted: %s not read: %s",
		last.Path, text.Plural(len(rest), "later file"), strings.Join(rest, ", ")))
	return true
}

// bothProgress calls a and b, either of which may be nil.
func bothProgress(a, b func(done, total int64)) func(done, total int64) {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return func(done, total int64) { a(done, total); b(done, total) }
}

// ProgressTo returns a per-file progress printer for w (Options.Progress
// of the file's read), or callbacks that do nothing (nil) when w is not a
// terminal: a redirected stderr gets no carriage returns. A read that
// takes more than a second shows the share read and the rate.
func ProgressTo(w io.Writer) func(path string) func(done, total int64) {
	f, ok := w.(*os.File)
	if !ok || f == nil {
		return func(string) func(int64, int64) { return nil }
	}
	if fi, err := f.Stat(); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return func(string) func(int64, int64) { return nil }
	}
	return progressPrinter(f, time.Now)
}

// progressPrinter is ProgressTo's printer for a terminal w, on the clock
// now.
func progressPrinter(w io.Writer, now func() time.Time) func(path string) func(done, total int64) {
	return func(path string) func(done, total int64) {
		start := now()
		var last time.Time
		return func(done, total int64) {
			t := now()
			if finished := total >= 0 && done >= total; finished {
				if !last.IsZero() {
					fmt.Fprint(w, "\r\033[K")
				}
				return
			}
			// Only long reads show progress, at most five times a second.
			if t.Sub(start) < time.Second || t.Sub(last) < 200*time.Millisecond {
				return
			}
			last = t
			rate := int64(float64(done>>20) / t.Sub(start).Seconds())
			if total > 0 {
				fmt.Fprintf(w, "\r\033[Kreading %s: %3d%% of %d MB, %d MB/s", path, done*100/total, total>>20, rate)
			} else {
				fmt.Fprintf(w, "\r\033[Kreading %s: %d MB, %d MB/s", path, done>>20, rate)
			}
		}
	}
}
