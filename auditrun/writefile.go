package auditrun

import (
	"os"

	"github.com/backoff-audit/audit/internal/field"
	"github.com/backoff-audit/audit/internal/outfile"
)

// writeFile is the Write file, written as internal/outfile writes every
// output: under a temporary name beside the file path leads to (a symbolic
// link is followed), so that a run that fails before its capture opens
// leaves what was there untouched; a target that is not a regular file (a
// FIFO, /dev/stdout) is written in place.
type writeFile struct {
	f    *os.File
	out  *outfile.File
	path string
}

func createWriteFile(path string) (*writeFile, error) {
	out, err := outfile.Create(path)
	if err != nil {
		return nil, field.Errorf("Write", path, "%w", err)
	}
	return &writeFile{f: out.File, out: out, path: path}, nil
}

// commit gives the file its name.
func (w *writeFile) commit() error {
	if err := w.out.Commit(); err != nil {
		return field.Errorf("Write", w.path, "%w", err)
	}
	return nil
}

// abort removes the temporary file of a run that never committed it.
func (w *writeFile) abort() { w.out.Abort() }
