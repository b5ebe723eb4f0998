package auditrun

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/backoff-audit/audit/internal/testutil"
)

// A page that is not a regular file is written in place (a FIFO stays a
// FIFO and its reader gets the page; a device stays a device), and a
// symbolic link is followed: the link stays, the file it names is written.
func TestPcapHTMLInPlace(t *testing.T) {
	dir := t.TempDir()
	page := func(t *testing.T, path string) {
		t.Helper()
		if r := auditFiles(t, FilesConfig{HTML: path}, fixture("ipv4-ether.pcap")); r.verdict() != runPassed {
			t.Fatalf("%s: %v\n%s", r.verdict(), r.err, r.stderr)
		}
	}
	kind := func(path string) fs.FileMode {
		fi, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Mode().Type()
	}

	t.Run("fifo", func(t *testing.T) {
		fifo := filepath.Join(dir, "page.fifo")
		r := testutil.FIFO(t, fifo) // its reader
		got := make(chan string, 1)
		go func() {
			var b []byte
			buf := make([]byte, 64<<10)
			r.SetReadDeadline(time.Now().Add(20 * time.Second))
			for !bytes.Contains(b, []byte("</html>")) {
				n, err := r.Read(buf)
				b = append(b, buf[:n]...)
				if err != nil {
					break
				}
			}
			got <- string(b)
		}()
		page(t, fifo)
		if s := <-got; !strings.HasPrefix(s, "<!DOCTYPE html>") || !strings.Contains(s, "</html>") {
			t.Errorf("the FIFO's reader got %d bytes beginning %.40q; want the whole page", len(s), s)
		}
		if k := kind(fifo); k != fs.ModeNamedPipe {
			t.Errorf("the FIFO is now %v; want it left a FIFO", k)
		}
	})
	t.Run("symbolic link", func(t *testing.T) {
		real := filepath.Join(dir, "real.html")
		if err := os.WriteFile(real, []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(dir, "link.html")
		if err := os.Symlink("real.html", link); err != nil {
			t.Fatal(err)
		}
		page(t, link)
		b, _ := os.ReadFile(real)
		if k := kind(link); k != fs.ModeSymlink || !bytes.HasPrefix(b, []byte("<!DOCTYPE html>")) {
			t.Errorf("the link is now %v, its file begins %.20q; want the link kept and its file the page", k, b)
		}
	})
	t.Run("device", func(t *testing.T) {
		dev := filepath.Join(dir, "null")
		if err := syscall.Mknod(dev, syscall.S_IFCHR|0o666, 1<<8|3); err != nil { // /dev/null's numbers
			t.Skipf("SKIPPED, NOT RUN: making a device node needs root: %v", err)
		}
		page(t, dev)
		if k := kind(dev); k != fs.ModeDevice|fs.ModeCharDevice {
			t.Errorf("the device node is now %v; want it left a character device", k)
		}
	})
}
