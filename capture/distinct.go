package capture

import (
	"fmt"
	"os"

	"github.com/backoff-audit/audit/attempt"
)

// Duplicate is a path that names a file already given, as Of.
type Duplicate struct {
	Path, Of string
}

// Distinct returns the paths that name distinct files (by device and
// inode, so through links too; the same path again; standard input once),
// in the order given, and the others, which a read skips: a capture read
// twice would make every SYN a retransmission of itself. A path that
// cannot be opened is kept, for its read to say why.
func Distinct(paths []string) (keep []string, dups []Duplicate) {
	type seen struct {
		path string
		fi   os.FileInfo
	}
	var files []seen
	for _, p := range paths {
		fi, err := os.Stat(p)
		if p == Stdin || err != nil {
			fi = nil
		}
		dup := ""
		for _, f := range files {
			if f.path == p || fi != nil && f.fi != nil && os.SameFile(f.fi, fi) {
				dup = f.path
				break
			}
		}
		if dup != "" {
			dups = append(dups, Duplicate{Path: p, Of: dup})
			continue
		}
		files = append(files, seen{p, fi})
		keep = append(keep, p)
	}
	return keep, dups
}

// NoteDuplicates warns, in the FileInfo of each file read, of the other
// names it was given and not read by.
func NoteDuplicates(files []attempt.FileInfo, dups []Duplicate) {
	for _, d := range dups {
		for i := range files {
			if files[i].Path == d.Of {
				files[i].Warnings = append(files[i].Warnings,
					fmt.Sprintf("%s: named again as %s, the same file: read once (twice, each SYN would be its own retransmission)", d.Of, d.Path))
				break
			}
		}
	}
}
