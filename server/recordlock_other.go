//go:build !unix

package server

import "os"

// lockRecord takes no lock here: flock is a Unix call.
func lockRecord(*os.File, string) error { return nil }
