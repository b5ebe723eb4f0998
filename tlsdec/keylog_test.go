package tlsdec

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

// TestParseKeyLog counts the lines of every kind, and keeps what it
// should.
func TestParseKeyLog(t *testing.T) {
	r1 := strings.Repeat("11", 32)
	r2 := strings.Repeat("22", 32)
	s32 := strings.Repeat("ab", 32)
	s48 := strings.Repeat("cd", 48)
	type counts struct {
		Lines, Entries, Ignored, Skipped, FirstSkipped, Dropped, Connections int
	}
	tests := []struct {
		name string
		in   string
		max  int
		want counts
		// has lists the randoms (hex) that must have secrets.
		has []string
	}{
		{name: "TLS 1.3, four secrets", in: "CLIENT_HANDSHAKE_TRAFFIC_SECRET " + r1 + " " + s32 + "\nSERVER_HANDSHAKE_TRAFFIC_SECRET " + r1 + " " + s32 +
			"\nCLIENT_TRAFFIC_SECRET_0 " + r1 + " " + s32 + "\nSERVER_TRAFFIC_SECRET_0 " + r1 + " " + s32 + "\n",
			want: counts{Lines: 4, Entries: 4, Connections: 1}, has: []string{r1}},
		{name: "TLS 1.2 and SHA-384 secrets, CRLF, no final newline", in: "CLIENT_RANDOM " + r1 + " " + s48 + "\r\nCLIENT_TRAFFIC_SECRET_0 " + r2 + " " + s48,
			want: counts{Lines: 2, Entries: 2, Connections: 2}, has: []string{r1, r2}},
		{name: "comments, blank lines, labels not used", in: "# SSL/TLS secrets log file\n\n   \nEXPORTER_SECRET " + r1 + " " + s32 + "\nCLIENT_EARLY_TRAFFIC_SECRET " + r1 + " " + s32 + "\n",
			want: counts{Lines: 5, Ignored: 2}},
		{name: "garbage skipped and counted", in: "CLIENT_RANDOM " + r1 + " " + s48 + "\nhello\nCLIENT_RANDOM " + r1[:62] + " " + s48 +
			"\nCLIENT_RANDOM " + r2 + " " + s32 + "\nCLIENT_RANDOM zz" + r2[2:] + " " + s48 + "\nCLIENT_RANDOM " + r2 + " " + s48 + " extra\nNOT_A_LABEL " + r2 + " " + s48 +
			"\nCLIENT_HANDSHAKE_TRAFFIC_SECRET " + r2 + " " + s48[:40] + "\nCLIENT_RANDOM " + r2 + " " + s48[:95] + "\n",
			want: counts{Lines: 9, Entries: 1, Skipped: 8, FirstSkipped: 2, Connections: 1}, has: []string{r1}},
		{name: "a line longer than any buffer", in: "CLIENT_RANDOM " + r1 + " " + strings.Repeat("ab", 100000) + "\nCLIENT_RANDOM " + r2 + " " + s48 + "\n",
			want: counts{Lines: 2, Entries: 1, Skipped: 1, FirstSkipped: 1, Connections: 1}, has: []string{r2}},
		{name: "beyond the bound of connections", max: 1, in: "CLIENT_RANDOM " + r1 + " " + s48 + "\nCLIENT_RANDOM " + r2 + " " + s48 + "\nCLIENT_RANDOM " + r1 + " " + s48 + "\n",
			want: counts{Lines: 3, Entries: 2, Dropped: 1, Connections: 1}, has: []string{r1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "keys.log")
			if err := os.WriteFile(path, []byte(tt.in), 0o600); err != nil {
				t.Fatal(err)
			}
			max := tt.max
			if max == 0 {
				max = DefaultMaxConnections
			}
			k, err := ReadKeyLogLimit(path, max)
			if err != nil {
				t.Fatal(err)
			}
			got := counts{k.Lines, k.Entries, k.Ignored, k.Skipped, k.FirstSkipped, k.Dropped, k.Connections()}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
			for _, h := range tt.has {
				if k.Lookup(randomOf(t, h)) == nil {
					t.Errorf("no secrets for %s…", h[:8])
				}
			}
			// One byte at a time reads the same.
			k1, err := parse(iotest.OneByteReader(strings.NewReader(tt.in)), "x", max)
			if err != nil {
				t.Fatal(err)
			}
			if got1 := (counts{k1.Lines, k1.Entries, k1.Ignored, k1.Skipped, k1.FirstSkipped, k1.Dropped, k1.Connections()}); got1 != got {
				t.Errorf("one byte at a time: %+v, whole: %+v", got1, got)
			}
		})
	}
}

func randomOf(t *testing.T, h string) (r [32]byte) {
	t.Helper()
	if _, err := hex.Decode(r[:], []byte(h)); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestReadKeyLogErrors: an unreadable key log is an error that names the
// file.
func TestReadKeyLogErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct{ name, path, want string }{
		{"missing", filepath.Join(dir, "none.log"), "open " + filepath.Join(dir, "none.log") + ": no such file or directory"},
		{"a directory", dir, "key log " + dir + ": read line 1: read " + dir + ": is a directory"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadKeyLog(tt.path)
			if err == nil || err.Error() != tt.want {
				t.Errorf("error %v, want %q", err, tt.want)
			}
		})
	}
}

func TestKeyLogSummary(t *testing.T) {
	r1 := strings.Repeat("11", 32)
	k, err := ParseKeyLog(strings.NewReader("junk\nCLIENT_RANDOM "+r1+" "+strings.Repeat("00", 48)+"\n"), "keys.log")
	if err != nil {
		t.Fatal(err)
	}
	want := "keys.log: 1 connection (1 entry), 1 line skipped, not of the key log format (first: line 1)"
	if got := k.Summary(); got != want {
		t.Errorf("Summary() = %q, want %q", got, want)
	}
}
