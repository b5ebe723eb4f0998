// Package infile reads the files audit is given so that no input can hold
// it: a small file (a certificate, a key) is read up to a bound, never
// whole whatever it is (/dev/zero).
//
// It imports only the standard library.
package infile

import (
	"fmt"
	"io"
	"os"
)

// MaxSmall bounds a certificate, key or CA file: real ones are a few KiB.
const MaxSmall = 1 << 20

// ReadSmall reads the whole file at path, which must hold at most MaxSmall
// bytes; a longer one (a device that never ends, a capture given by
// mistake) is an error, read no further than the bound. The caller names
// the flag and the path.
func ReadSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxSmall+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxSmall {
		return nil, fmt.Errorf("more than %d bytes: not a certificate or key file", MaxSmall)
	}
	return b, nil
}
