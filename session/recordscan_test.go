package session

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// ScanRecord skips a torn line wherever it is, with a warning naming its
// line and offset, and reads the lines around it; a line appended onto a
// torn one is read. Any other bad line stops it with an error naming it.
func TestScanRecordTornLines(t *testing.T) {
	start := `{"event":"start","time":"2025-01-02T15:04:05.000000000Z","session":1,"peer":"127.0.0.1:40112","params":{"max_reconnect_backoff_ms":0,"policy":{"initial_backoff_ms":1000,"multiplier":1.6,"jitter":0.2,"max_backoff_ms":120000,"min_connect_timeout_ms":20000,"tolerance_ms":100},"retry_mode":"close"}}`
	accept := `{"event":"accept","time":"2025-01-02T15:04:05.210000000Z","session":1,"peer":"127.0.0.1:40114"}`
	torn := `{"event":"accept","time":"2025-01-0`
	tests := []struct {
		name     string
		file     string
		events   []EventKind
		warnings []string
		err      string
	}{
		{name: "torn line ended by the next run", file: start + "\n" + torn + "\n" + accept + "\n",
			events:   []EventKind{EventStart, EventAccept},
			warnings: []string{fmt.Sprintf("record line 2 at offset %d: torn line (%d bytes, cut short by a writer that stopped) skipped", len(start)+1, len(torn))}},
		{name: "the next run's line appended onto it", file: start + "\n" + torn + start + "\n" + accept + "\n",
			events: []EventKind{EventStart, EventStart, EventAccept},
			warnings: []string{fmt.Sprintf("record line 2 at offset %d: torn line (%d bytes, cut short by a writer that stopped) skipped; the line appended onto it is read",
				len(start)+1, len(torn))}},
		{name: "torn last line", file: start + "\n" + torn, events: []EventKind{EventStart},
			warnings: []string{fmt.Sprintf("record line 2 at offset %d: %v: its %d bytes are ignored; the lines before it are used", len(start)+1, ErrTornLine, len(torn))}},
		{name: "not a record line", file: start + "\n" + "garbage\n" + accept + "\n", events: []EventKind{EventStart},
			err: fmt.Sprintf("read record line 2 at offset %d: invalid character", len(start)+1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var events []EventKind
			var warnings []string
			err := ScanRecord(strings.NewReader(tt.file), func(e RecordEvent) error {
				events = append(events, e.Event)
				return nil
			}, func(w string) { warnings = append(warnings, w) })
			if diff := cmp.Diff(tt.events, events); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.warnings, warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
				t.Errorf("error %v, want %q", err, tt.err)
			}
		})
	}
}
