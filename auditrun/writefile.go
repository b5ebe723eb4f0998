package auditrun

import (
	"cmp"
	"os"
	"path/filepath"

	"github.com/backoff-audit/audit/internal/field"
)

// writeFile is the Write file: written under a temporary name beside
// the target, so that a run that fails before its capture opens leaves
// what was at the target untouched. A target that is not a regular file
// (a FIFO, /dev/stdout) is written in place.
type writeFile struct {
	f         *os.File
	tmp, path string
}

func createWriteFile(path string) (*writeFile, error) {
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return nil, field.Errorf("Write", nil, "%w", err)
		}
		return &writeFile{f: f, path: path}, nil
	}
	dir, base := filepath.Split(path)
	f, err := os.CreateTemp(cmp.Or(dir, "."), "."+base+".*.tmp")
	if err != nil {
		return nil, field.Errorf("Write", path, "%w", err)
	}
	// CreateTemp makes the file private; a capture file is as readable
	// as os.Create would have made it.
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, field.Errorf("Write", path, "%w", err)
	}
	return &writeFile{f: f, tmp: f.Name(), path: path}, nil
}

// commit gives the file its name.
func (w *writeFile) commit() error {
	if w.tmp == "" {
		return nil
	}
	if err := os.Rename(w.tmp, w.path); err != nil {
		return field.Errorf("Write", w.path, "%w", err)
	}
	w.tmp = ""
	return nil
}

// abort removes the temporary file of a run that never committed it.
func (w *writeFile) abort() {
	if w.tmp != "" {
		w.f.Close()
		os.Remove(w.tmp)
	}
}
