package auditrun

import (
	"context"
	"fmt"
	"io"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/flows"
	"github.com/backoff-audit/audit/h2"
	"github.com/backoff-audit/audit/internal/field"
	"github.com/backoff-audit/audit/internal/text"
	"github.com/backoff-audit/audit/tlsdec"
)

// decryptAttempts reads the files again for the TLS connections of port,
// decrypts them with the key log at path, and gives tr what that showed
// of each attempt (attempt.Tracker.Decrypt): one that reached the
// server's SETTINGS inside TLS succeeded, as a plaintext one does
// (docs/spec.md §7.2). A line on warn says what the key log held and how
// many of the port's attempts it decrypted.
func decryptAttempts(ctx context.Context, files []string, port uint16, path string, tr *attempt.Tracker, warn io.Writer) error {
	keys, err := tlsdec.ReadKeyLog(path)
	if err != nil {
		return field.Errorf("KeyLog", nil, "%w", err)
	}
	res, err := flows.ReadFiles(files, flows.Options{Ports: []uint16{port}, KeyLog: keys, Done: ctx.Done()}, h2.DiagnoseOptions{})
	if err != nil {
		return err
	}
	ds := flows.Decryptions(res.Conns)
	decrypted := 0
	for _, d := range ds {
		if d.Decrypted {
			decrypted++
		}
	}
	matched := tr.Decrypt(ds)
	fmt.Fprintf(warn, "audit: key log %s; %d of the %s to port %d decrypted, %d TLS connections not\n",
		keys.Summary(), decrypted, text.Plural(tr.Attempts(), "attempt"), port, len(ds)-decrypted)
	if matched < len(ds) {
		fmt.Fprintf(warn, "audit: warning: %d TLS connections to port %d are no attempt of the capture's SYNs\n", len(ds)-matched, port)
	}
	return nil
}
