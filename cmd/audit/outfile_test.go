package main

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

// copyFile copies a fixture into dir and returns the copy's path.
func copyFile(t *testing.T, src, dir string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, filepath.Base(src))
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

// An output that is one of the inputs, by device and inode and through
// symbolic links, or another output, is a usage error before anything is
// read or written; the input is left as it was.
func TestOutputIsAnInput(t *testing.T) {
	dir := t.TempDir()
	capFile := copyFile(t, "../../testdata/real-grpc-go.pcap", dir)
	record := copyFile(t, "../../testdata/real-grpc-go.record.jsonl", dir)
	cert := copyFile(t, "../../testdata/tls/server.pem", dir)
	key := copyFile(t, "../../testdata/tls/server.key", dir)
	link := filepath.Join(dir, "report.html")
	if err := os.Symlink(filepath.Base(capFile), link); err != nil {
		t.Fatal(err)
	}
	fresh := filepath.Join(dir, "fresh.out")
	tests := []struct {
		name string
		args []string
		want string // in stderr
	}{
		{name: "pcap --html the capture", args: []string{"pcap", capFile, "--html", capFile},
			want: "--html " + capFile + " is the capture file " + capFile + ": writing it would destroy the input"},
		{name: "pcap --html a link to the capture", args: []string{"pcap", capFile, "--html", link},
			want: "--html " + link + " is the capture file " + capFile},
		{name: "pcap --html the record", args: []string{"pcap", capFile, "--record", record, "--html", record},
			want: "--html " + record + " is the --record " + record},
		{name: "server --record the certificate", args: []string{"server", "--control_port=0", "--retry_port=0", "--retry_mode=settings-close",
			"--tls_cert", cert, "--tls_key", key, "--record", cert},
			want: "--record " + cert + " is the --tls_cert " + cert},
		{name: "live --attach --html the record it follows", args: []string{"live", "--iface", "nonexist0", "--attach", "--retry_port=50052",
			"--record", record, "--html", record}, want: "--html " + record + " is the --record " + record},
		{name: "live --write and --html one file", args: []string{"live", "--iface", "nonexist0", "--write", fresh, "--html", fresh},
			want: "--write " + fresh + " and --html " + fresh + " are the same file"},
		{name: "live --record the key", args: []string{"live", "--iface", "nonexist0", "--retry_mode=goaway",
			"--tls_cert", cert, "--tls_key", key, "--record", key}, want: "--record " + key + " is the --tls_key " + key},
	}
	before := map[string][]byte{}
	for _, p := range []string{capFile, record, cert, key} {
		before[p], _ = os.ReadFile(p)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runAudit(t, tt.args...)
			if code != exitUsage || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, exitUsage, tt.want)
			}
			if stdout != "" {
				t.Errorf("stdout %q; want nothing: nothing is judged", stdout)
			}
			for p, b := range before {
				if now, _ := os.ReadFile(p); !bytes.Equal(now, b) {
					t.Errorf("%s changed", p)
				}
			}
			if _, err := os.Lstat(fresh); err == nil {
				t.Errorf("%s was created", fresh)
			}
		})
	}
}

// An output that is not a regular file is written in place (a FIFO stays
// a FIFO and its reader gets the page; a device stays a device), and a
// symbolic link is followed: the link stays, the file it names is written.
func TestOutputInPlace(t *testing.T) {
	dir := t.TempDir()
	page := func(t *testing.T, path string) {
		t.Helper()
		if code, _, stderr := runAudit(t, "pcap", fixture("ipv4-ether.pcap"), "--html", path); code != exitOK {
			t.Fatalf("exit %d: %s", code, stderr)
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
