package live

import (
	"fmt"
	"os"

	"github.com/backoff-audit/audit/internal/outfile"
)

// writeFile is the --write file, written as internal/outfile writes every
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
		return nil, fmt.Errorf("--write %s: %w", path, err)
	}
	return &writeFile{f: out.File, out: out, path: path}, nil
}

// commit gives the file its name.
func (w *writeFile) commit() error {
	if err := w.out.Commit(); err != nil {
		return fmt.Errorf("--write %s: %w", w.path, err)
	}
	return nil
}

// abort removes the temporary file of a run that never committed it.
func (w *writeFile) abort() { w.out.Abort() }
