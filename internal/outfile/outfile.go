// Package outfile writes the files audit writes (--html, --write, --record)
// so that output never destroys input: an output that is one of the run's
// inputs is refused before anything is read (Check); a regular file is
// replaced whole, through a temporary file in its own directory renamed
// over it, so a reader never sees half of it and a failed run leaves what
// was there; a file that is not regular (a device such as /dev/null, a
// FIFO, a terminal) is written in place, never replaced; and a symbolic
// link is followed, so the file it names is written and the link stays.
//
// It imports only the standard library.
package outfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Named is a file a flag or an argument names: Flag says which, for
// messages ("--html", "capture file"), Path is the path as given.
type Named struct {
	Flag, Path string
}

// Check refuses outputs that would destroy an input: an output that is the
// same file as an input (by device and inode, through symbolic links), or
// the same regular file as another output. Empty paths and "-" (standard
// input or output) are not files and are skipped, as are inputs that do
// not exist (their read fails later with its own error).
func Check(outputs, inputs []Named) error {
	type seen struct {
		Named
		fi   fs.FileInfo // nil when nothing is there yet
		dest string      // the path a missing output would be created at
	}
	var outs []seen
	for _, o := range outputs {
		if skip(o.Path) {
			continue
		}
		s := seen{Named: o}
		if fi, err := os.Stat(o.Path); err == nil {
			s.fi = fi
		} else if dest, err := Resolve(o.Path); err == nil {
			s.dest, _ = filepath.Abs(dest)
		}
		for _, p := range outs {
			switch {
			case s.fi != nil && p.fi != nil && os.SameFile(s.fi, p.fi) && s.fi.Mode().IsRegular(),
				s.fi == nil && p.fi == nil && s.dest != "" && s.dest == p.dest:
				return fmt.Errorf("%s %s and %s %s are the same file: each would overwrite the other", p.Flag, p.Path, o.Flag, o.Path)
			}
		}
		outs = append(outs, s)
	}
	for _, in := range inputs {
		if skip(in.Path) {
			continue
		}
		fi, err := os.Stat(in.Path)
		if err != nil {
			continue
		}
		for _, o := range outs {
			if o.fi != nil && os.SameFile(o.fi, fi) {
				return fmt.Errorf("%s %s is the %s %s: writing it would destroy the input", o.Flag, o.Path, in.Flag, in.Path)
			}
		}
	}
	return nil
}

func skip(path string) bool { return path == "" || path == "-" }

// maxLinks bounds the symbolic links Resolve follows, as Linux's ELOOP does.
const maxLinks = 40

// Resolve follows path's symbolic links, the last one dangling or not, and
// returns the path of the file they lead to (which may not exist yet).
func Resolve(path string) (string, error) {
	for range maxLinks {
		fi, err := os.Lstat(path)
		if errors.Is(err, fs.ErrNotExist) {
			return path, nil
		}
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			return path, nil
		}
		target, err := os.Readlink(path)
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(path), target)
		}
		path = target
	}
	return "", fmt.Errorf("%s: more than %d symbolic links", path, maxLinks)
}

// File is an output being written: the file itself when it is written in
// place, else a temporary file beside the target that Commit renames over
// it. Write through the embedded *os.File.
type File struct {
	*os.File
	// dest is the file the rename replaces; tmp the temporary file until
	// Commit.
	dest, tmp string
}

// Create starts writing the output at path (see the package comment).
// Nothing at path changes until Commit; Abort removes what Create made.
func Create(path string) (*File, error) {
	dest, err := Resolve(path)
	if err != nil {
		return nil, err
	}
	mode := fs.FileMode(0o644)
	if fi, err := os.Stat(dest); err == nil {
		if !fi.Mode().IsRegular() {
			// A device, a FIFO, a terminal: written where it is. O_TRUNC
			// is harmless on them and a directory refuses O_WRONLY.
			f, err := os.OpenFile(dest, os.O_WRONLY, 0)
			if err != nil {
				return nil, err
			}
			return &File{File: f, dest: dest}, nil
		}
		mode = fi.Mode().Perm()
	}
	dir, base := filepath.Split(dest)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".*.tmp")
	if err != nil {
		return nil, err
	}
	// CreateTemp makes the file private; the output keeps the mode of
	// the file it replaces, or has os.Create's usual 0644.
	if err := f.Chmod(mode); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return &File{File: f, dest: dest, tmp: f.Name()}, nil
}

// Commit gives the written file its name: the temporary file replaces
// what was at the target, atomically. The file stays open for more
// writes. It does nothing for a file written in place, or a second time.
func (f *File) Commit() error {
	if f.tmp == "" {
		return nil
	}
	if err := os.Rename(f.tmp, f.dest); err != nil {
		return err
	}
	f.tmp = ""
	return nil
}

// Abort closes the file and removes the temporary file of an output never
// committed; what was at the target is left as it was. After Commit it
// does nothing.
func (f *File) Abort() {
	if f.tmp != "" {
		f.File.Close()
		os.Remove(f.tmp)
		f.tmp = ""
	}
}

// Write writes a whole output at path with write, through a buffer:
// Create, then Commit once write, the flush and the close succeeded; on
// an error, Abort.
func Write(path string, write func(io.Writer) error) (err error) {
	f, err := Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Abort()
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	if err := write(bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if err := f.File.Close(); err != nil {
		return err
	}
	return f.Commit()
}

// Append opens path to add to its end (a record file), creating it as a
// regular file if there is none. A symbolic link is followed, as open(2)
// does; a file that is not regular is appended to in place.
func Append(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
}
