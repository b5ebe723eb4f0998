package auditrun

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/backoff-audit/audit/backoff"
)

const realCapture = "../testdata/real-grpc-go.pcap"

// TestAuditFilesStdin: "-" reads FilesConfig.Stdin, and the report is the
// file's, but for the file's name.
func TestAuditFilesStdin(t *testing.T) {
	data, err := os.ReadFile(realCapture)
	if err != nil {
		t.Fatal(err)
	}
	cfg := FilesConfig{Policy: backoff.DefaultPolicy(), JSON: true}
	var fromFile, fromStdin, errOut bytes.Buffer
	want, err := AuditFiles(context.Background(), []string{realCapture}, cfg, &fromFile, &errOut)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Stdin = bytes.NewReader(data)
	got, err := AuditFiles(context.Background(), []string{"-"}, cfg, &fromStdin, &errOut)
	if err != nil {
		t.Fatal(err)
	}
	if got != want || want.Verdict == "" {
		t.Errorf("outcome %+v from standard input, %+v from the file; want the same failed verdict", got, want)
	}
	if s := strings.Replace(fromFile.String(), `"path": "`+realCapture+`"`, `"path": "-"`, 1); s != fromStdin.String() {
		t.Errorf("reports differ beyond the path:\nfile:\n%s\nstdin:\n%s", fromFile.String(), fromStdin.String())
	}
}

// TestAuditFilesBadStdin: standard input can be read once, so it cannot be
// named twice, nor go with a control port (read in a second pass).
func TestAuditFilesBadStdin(t *testing.T) {
	for _, tt := range []struct {
		files []string
		cfg   FilesConfig
		want  string
	}{
		{[]string{"-", realCapture, "-"}, FilesConfig{}, "standard input (-) named twice"},
		{[]string{"-"}, FilesConfig{Control: 8080}, "Control 8080: not with standard input (-)"},
	} {
		tt.cfg.Policy = backoff.DefaultPolicy()
		_, err := AuditFiles(context.Background(), tt.files, tt.cfg, &bytes.Buffer{}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: error %v; want %q", tt.files, err, tt.want)
		}
	}
}

// TestAuditFilesInterrupted: a context ended before the read reads
// nothing, says so for each file, and judges nothing.
func TestAuditFilesInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// A second file, not the first named again (that is read once).
	b, err := os.ReadFile(realCapture)
	if err != nil {
		t.Fatal(err)
	}
	second := filepath.Join(t.TempDir(), "second.pcap")
	if err := os.WriteFile(second, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var errOut bytes.Buffer
	_, err = AuditFiles(ctx, []string{realCapture, second}, FilesConfig{Policy: backoff.DefaultPolicy(), Control: 8080}, &bytes.Buffer{}, &errOut)
	if err == nil || !strings.Contains(err.Error(), "no TCP SYN") {
		t.Errorf("error %v; want nothing to audit", err)
	}
	for _, w := range []string{
		realCapture + ": read interrupted at offset 0",
		realCapture + ": read interrupted: 1 later file not read: " + second,
		"read interrupted: control port 8080 not read",
	} {
		if !strings.Contains(errOut.String(), w) {
			t.Errorf("stderr lacks %q:\n%s", w, errOut.String())
		}
	}
}
