package field_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/backoff-audit/audit/internal/field"
)

// flags spells fields as a command line of the example names them.
func flags(f string) string {
	return map[string]string{"RetryPort": "--retry_port", "Attach": "--attach", "Record": "--record"}[f]
}

func TestSpell(t *testing.T) {
	notExist := &fs.PathError{Op: "open", Path: "run.jsonl", Err: fs.ErrNotExist}
	tests := []struct {
		name      string
		err       error
		goNames   string // Error()
		flagNames string // Spell with flags
	}{
		{name: "field and value", err: field.Errorf("RetryPort", 70000, "not a port"),
			goNames: "RetryPort 70000: not a port", flagNames: "--retry_port 70000: not a port"},
		{name: "no value", err: field.Errorf("Attach", nil, "needs %s, the port to watch", field.Name("RetryPort")),
			goNames: "Attach: needs RetryPort, the port to watch", flagNames: "--attach: needs --retry_port, the port to watch"},
		{name: "a field of no flag keeps its name", err: field.Errorf("Server.Record", nil, "with %s", field.Name("Record")),
			goNames: "Server.Record: with Record", flagNames: "Server.Record: with --record"},
		{name: "a wrapped error", err: field.Errorf("Record", "run.jsonl", "%w", notExist),
			goNames: "Record run.jsonl: open run.jsonl: file does not exist", flagNames: "--record run.jsonl: open run.jsonl: file does not exist"},
		{name: "joined", err: errors.Join(field.Errorf("RetryPort", -1, "not a port"), errors.New("plain"), field.Errorf("Attach", nil, "off")),
			goNames: "RetryPort -1: not a port\nplain\nAttach: off", flagNames: "--retry_port -1: not a port\nplain\n--attach: off"},
		{name: "wrapped with context", err: fmt.Errorf("start: %w", field.Errorf("RetryPort", 0, "in use")),
			goNames: "start: RetryPort 0: in use", flagNames: "start: --retry_port 0: in use"},
		{name: "wrapped mid-message is left as it is", err: fmt.Errorf("start (%w) failed", field.Errorf("RetryPort", 0, "in use")),
			goNames: "start (RetryPort 0: in use) failed", flagNames: "start (RetryPort 0: in use) failed"},
		{name: "no field error", err: errors.New("plain"), goNames: "plain", flagNames: "plain"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := []string{tt.err.Error(), field.Spell(tt.err, flags)}
			if diff := cmp.Diff([]string{tt.goNames, tt.flagNames}, got); diff != "" {
				t.Errorf("Error, Spell (-want +got):\n%s", diff)
			}
		})
	}
	if err := field.Errorf("Record", "run.jsonl", "%w", notExist); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("errors.Is(%v, os.ErrNotExist) = false; want the wrapped error found", err)
	}
}

func TestPort(t *testing.T) {
	tests := []struct {
		v    int
		zero bool
		want string // "" for none
	}{
		{v: 1}, {v: 65535}, {v: 0, zero: true},
		{v: 0, want: "Port 0: not a port (1–65535)"},
		{v: 65536, want: "Port 65536: not a port (1–65535)"},
		{v: -1, zero: true, want: "Port -1: not a port (0–65535)"},
		{v: 70000, zero: true, want: "Port 70000: not a port (0–65535)"},
	}
	for _, tt := range tests {
		var got string
		if err := field.Port("Port", tt.v, tt.zero); err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("Port(%d, zero %v) = %q; want %q", tt.v, tt.zero, got, tt.want)
		}
	}
	// A flag's text: what is not a number is not a port either.
	for _, s := range []string{"http", "8080.5", ""} {
		if err := field.PortRange(s, true); err == nil || err.Error() != "not a port (0–65535)" {
			t.Errorf("PortRange(%q) = %v; want the range", s, err)
		}
	}
}

func ExampleError() {
	err := field.Errorf("Attach", nil, "needs %s, the port the server listens on", field.Name("RetryPort"))
	fmt.Println(err)
	fmt.Println(field.Spell(err, func(f string) string {
		return map[string]string{"Attach": "--attach", "RetryPort": "--retry_port"}[f]
	}))
	// Output:
	// Attach: needs RetryPort, the port the server listens on
	// --attach: needs --retry_port, the port the server listens on
}
