// Package buildinfo says which build a binary is: the module version and
// the VCS revision the Go toolchain recorded.
package buildinfo

import (
	"fmt"
	"runtime/debug"
)

// Version is the module version and the VCS revision the binary was built
// from, as the Go toolchain recorded them.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown: built without module information)"
	}
	v := bi.Main.Version
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = ", modified"
			}
		}
	}
	if rev == "" {
		return v + " (no VCS revision recorded: built outside a checkout or with -buildvcs=false)"
	}
	return v + fmt.Sprintf(" (revision %s%s)", rev, modified)
}
