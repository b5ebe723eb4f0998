//go:build !linux

package capture

import (
	"errors"
	"os"
	"sync/atomic"
)

// mapSource is Linux's (mmap_linux.go); elsewhere files are read.
type mapSource struct{ paged atomic.Int64 }

func newMapSource(*os.File, int64, int) (*mapSource, error) {
	return nil, errors.New("capture: files are mapped on Linux only")
}

func (*mapSource) next() *chunk   { panic("capture: mapSource is Linux's") }
func (*mapSource) release(*chunk) {}
func (*mapSource) stop()          {}

func (*mapSource) fault(r any, _ string) error {
	if r != nil {
		panic(r)
	}
	return nil
}
