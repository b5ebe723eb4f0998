//go:build unix

package server

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
)

// lockRecord takes an exclusive lock (flock) on a record file that is a
// regular file, so that two servers never append to one record: their
// sessions, each numbered from 1, would collide for every reader. The
// lock lasts as long as f is open. A file held by another server is an
// error naming it, and the holder's pid when /proc/locks gives it.
func lockRecord(f *os.File, path string) error {
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil // a FIFO or a device is nobody's record to share
	}
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.EWOULDBLOCK):
		holder := "another process"
		if pid := lockHolder(fi); pid != "" {
			holder = "process " + pid
		}
		return fmt.Errorf("record file %s is locked by %s: another server appends to it, and two servers' sessions would collide in one record; give each server its own --record", path, holder)
	}
	return fmt.Errorf("lock record file %s: %w", path, err)
}

// lockHolder returns the pid that holds a flock on the file of fi, from
// /proc/locks (Linux); "" when unknown.
func lockHolder(fi os.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	f, err := os.Open("/proc/locks")
	if err != nil {
		return ""
	}
	defer f.Close()
	// "1: FLOCK  ADVISORY  WRITE 12345 08:01:1234567 0 EOF": device as
	// major:minor in hex, then the inode.
	dev := uint64(st.Dev)
	major, minor := (dev>>8)&0xfff|(dev>>32)&^0xfff, dev&0xff|(dev>>12)&^0xff
	want := fmt.Sprintf("%02x:%02x:%d", major, minor, st.Ino)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) >= 6 && fs[1] == "FLOCK" && fs[5] == want {
			return fs[4]
		}
	}
	return ""
}
