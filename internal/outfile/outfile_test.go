package outfile

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/backoff-audit/audit/internal/testutil"
)

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "run.pcap")
	other := filepath.Join(dir, "other.pcap")
	for _, p := range []string{in, other} {
		if err := os.WriteFile(p, []byte("capture"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(dir, "link.html")
	if err := os.Symlink("run.pcap", link); err != nil {
		t.Fatal(err)
	}
	hard := filepath.Join(dir, "hard.pcap")
	if err := os.Link(in, hard); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		outputs []Named
		inputs  []Named
		want    string // in the error; "" for none
	}{
		{name: "distinct", outputs: []Named{{"--html", filepath.Join(dir, "page.html")}}, inputs: []Named{{"capture file", in}}},
		{name: "the input itself", outputs: []Named{{"--html", in}}, inputs: []Named{{"capture file", in}},
			want: "--html " + in + " is the capture file " + in + ": writing it would destroy the input"},
		{name: "through a symbolic link", outputs: []Named{{"--html", link}}, inputs: []Named{{"capture file", other}, {"capture file", in}},
			want: "--html " + link + " is the capture file " + in},
		{name: "a hard link", outputs: []Named{{"--write", hard}}, inputs: []Named{{"--record", in}}, want: "is the --record"},
		{name: "relative and absolute", outputs: []Named{{"--html", "./" + filepath.Base(in)}}, inputs: []Named{{"capture file", in}}, want: "would destroy"},
		{name: "missing input", outputs: []Named{{"--html", in}}, inputs: []Named{{"--record", filepath.Join(dir, "none.jsonl")}}},
		{name: "standard input and empty paths", outputs: []Named{{"--html", ""}, {"--write", "-"}}, inputs: []Named{{"capture file", "-"}, {"--record", ""}}},
		{name: "two outputs, one new file", outputs: []Named{{"--write", filepath.Join(dir, "new")}, {"--html", filepath.Join(dir, ".", "new")}},
			want: "--write " + filepath.Join(dir, "new") + " and --html " + filepath.Join(dir, "new") + " are the same file"},
		{name: "two outputs, one regular file", outputs: []Named{{"--write", other}, {"--html", other}}, want: "are the same file"},
		{name: "two outputs on a device", outputs: []Named{{"--write", os.DevNull}, {"--html", os.DevNull}}},
	}
	wd, _ := os.Getwd()
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check(tt.outputs, tt.inputs)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if tt.want == "" && err != nil || tt.want != "" && !strings.Contains(got, tt.want) {
				t.Errorf("Check = %q; want %q", got, tt.want)
			}
		})
	}
}

// writeAt writes s to path with Write and returns what the directory then
// holds (list).
func writeAt(t *testing.T, dir, path, s string) (map[string]string, error) {
	t.Helper()
	err := Write(path, func(w io.Writer) error {
		_, err := io.WriteString(w, s)
		return err
	})
	return list(dir), err
}

// list returns what dir holds, by name: each entry's kind and, for
// regular files, content and mode.
func list(dir string) map[string]string {
	got := map[string]string{}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		fi, _ := os.Lstat(p)
		switch m := fi.Mode(); {
		case m&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			got[e.Name()] = "symlink to " + target
		case m&fs.ModeNamedPipe != 0:
			got[e.Name()] = "fifo"
		case m&fs.ModeDevice != 0:
			got[e.Name()] = "device"
		case m.IsRegular():
			b, _ := os.ReadFile(p)
			got[e.Name()] = string(b) + " " + m.Perm().String()
		default:
			got[e.Name()] = m.String()
		}
	}
	return got
}

func TestWrite(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string) // makes what the directory holds before
		path  string
		want  map[string]string
	}{
		{name: "new file", path: "page.html", want: map[string]string{"page.html": "new -rw-r--r--"}},
		{name: "regular file replaced, mode kept", path: "page.html",
			setup: func(t *testing.T, dir string) { write(t, filepath.Join(dir, "page.html"), "old", 0o600) },
			want:  map[string]string{"page.html": "new -rw-------"}},
		{name: "symbolic link followed", path: "link.html",
			setup: func(t *testing.T, dir string) {
				write(t, filepath.Join(dir, "real.html"), "old", 0o644)
				symlink(t, "real.html", filepath.Join(dir, "link.html"))
			},
			want: map[string]string{"link.html": "symlink to real.html", "real.html": "new -rw-r--r--"}},
		{name: "dangling symbolic link followed", path: "link.html",
			setup: func(t *testing.T, dir string) { symlink(t, "real.html", filepath.Join(dir, "link.html")) },
			want:  map[string]string{"link.html": "symlink to real.html", "real.html": "new -rw-r--r--"}},
		{name: "chain of links", path: "a",
			setup: func(t *testing.T, dir string) {
				symlink(t, "b", filepath.Join(dir, "a"))
				symlink(t, "c", filepath.Join(dir, "b"))
			},
			want: map[string]string{"a": "symlink to b", "b": "symlink to c", "c": "new -rw-r--r--"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.setup != nil {
				tt.setup(t, dir)
			}
			got, err := writeAt(t, dir, filepath.Join(dir, tt.path), "new")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("the directory after Write (-want +got):\n%s", diff)
			}
		})
	}
}

// A file that is not regular is written where it is: a FIFO stays a FIFO
// and its reader gets the bytes; a device node stays a device.
func TestWriteInPlace(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	r := testutil.FIFO(t, fifo) // a reader: Write's open does not wait
	got, err := writeAt(t, dir, fifo, "through the pipe")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, _ := r.Read(buf)
	if string(buf[:n]) != "through the pipe" || got["fifo"] != "fifo" || len(got) != 1 {
		t.Errorf("FIFO: read %q, directory %v; want the bytes through the FIFO, left a FIFO, nothing beside it", buf[:n], got)
	}

	dev := filepath.Join(dir, "null")
	if err := syscall.Mknod(dev, syscall.S_IFCHR|0o666, 1<<8|3); err != nil { // /dev/null's numbers
		t.Logf("SKIPPED the device case: mknod needs root: %v", err)
		return
	}
	got, err = writeAt(t, dir, dev, "into the device")
	if err != nil || got["null"] != "device" || len(got) != 2 {
		t.Errorf("device: %v, directory %v; want it written and left a device, nothing beside it", err, got)
	}
}

// A failed write leaves what was at the path, and no temporary file.
func TestWriteFailsLeavesTarget(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "page.html")
	write(t, path, "old", 0o644)
	err := Write(path, func(w io.Writer) error {
		io.WriteString(w, "half a page")
		return io.ErrShortWrite
	})
	if err == nil {
		t.Fatal("Write succeeded; want the writer's error")
	}
	if diff := cmp.Diff(map[string]string{"page.html": "old -rw-r--r--"}, list(dir)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// Create leaves the target alone until Commit, and Abort removes what it
// made.
func TestCreateCommitAbort(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "run.pcap")
	write(t, path, "old", 0o644)
	f, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(f, "new")
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Errorf("before Commit the target holds %q; want it untouched", b)
	}
	f.Abort()
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("after Abort %d files; want the target alone", len(ents))
	}
	f, err = Create(path)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(f, "new")
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	io.WriteString(f, ", and more after Commit")
	f.Abort() // does nothing once committed
	f.Close()
	if b, _ := os.ReadFile(path); string(b) != "new, and more after Commit" {
		t.Errorf("after Commit the target holds %q", b)
	}
}

func write(t *testing.T, path, s string, mode fs.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}
