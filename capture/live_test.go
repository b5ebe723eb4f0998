package capture

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcap"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/internal/testutil"
)

// The filter runs in libpcap without a capture, so it is checked here
// without privileges, on hand-made frames.
func TestSYNFilter(t *testing.T) {
	const port = 50052
	v4 := func(flags byte, dport uint16) []byte {
		return ethFrame(0x0800, ipv4Packet("127.0.0.1", "127.0.0.1", 6, tcpHeader(40000, dport, 1, flags, 5)))
	}
	v6 := func(flags byte, dport uint16) []byte {
		return ethFrame(0x86dd, ipv6Packet("::1", "::1", 6, tcpHeader(40000, dport, 1, flags, 5)))
	}
	tests := []struct {
		name  string
		frame []byte
		want  bool
	}{
		{"ipv4 syn", v4(flagSYN, port), true},
		{"ipv4 ecn-setup syn", v4(flagSYN|flagECE|flagCWR, port), true},
		{"ipv4 syn-ack", v4(flagSYN|flagACK, port), false},
		{"ipv4 ack", v4(flagACK, port), false},
		{"ipv4 syn to another port", v4(flagSYN, port+1), false},
		{"ipv4 syn from the port", ethFrame(0x0800, ipv4Packet("127.0.0.1", "127.0.0.1", 6, tcpHeader(port, 40000, 1, flagSYN, 5))), false},
		{"ipv6 syn", v6(flagSYN, port), true},
		{"ipv6 syn-ack", v6(flagSYN|flagACK, port), false},
		{"ipv6 rst", v6(flagRST, port), false},
		{"ipv6 syn to another port", v6(flagSYN, port+1), false},
		{"ipv6 udp to the port", ethFrame(0x86dd, ipv6Packet("::1", "::1", 17, tcpHeader(40000, port, 1, flagSYN, 5))), false},
	}
	bpf, err := pcap.NewBPF(layers.LinkTypeEthernet, liveSnapLen, SYNFilter(port))
	if err != nil {
		t.Fatalf("compile %q: %v", SYNFilter(port), err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ci := gopacket.CaptureInfo{CaptureLength: len(tt.frame), Length: len(tt.frame)}
			if got := bpf.Matches(ci, tt.frame); got != tt.want {
				t.Errorf("Matches = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestOpenLiveUnknownInterface(t *testing.T) {
	_, err := OpenLive(LiveConfig{Iface: "nosuch0", Port: 50052})
	if !errors.Is(err, ErrUnknownInterface) {
		t.Fatalf("OpenLive(nosuch0) = %v, want ErrUnknownInterface", err)
	}
	if !strings.Contains(err.Error(), "lo") {
		t.Errorf("error %q does not list the available interfaces (lo)", err)
	}
}

// envPermissionChild makes the test binary, run as nobody, try a capture.
const envPermissionChild = "AUDIT_LIVE_PERMISSION_CHILD"

func TestOpenLivePermission(t *testing.T) {
	if os.Getenv(envPermissionChild) != "" {
		_, err := OpenLive(LiveConfig{Iface: "lo", Port: 50052})
		fmt.Println(err)
		if errors.Is(err, os.ErrPermission) {
			os.Exit(0)
		}
		os.Exit(3)
	}
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: needs root to run a child as nobody; without root the capture tests below skip")
	}
	// A copy nobody can execute (the go-build directory is private).
	dir, err := os.MkdirTemp("", "audit-live-perm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "capture.test")
	data, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-test.run=^TestOpenLivePermission$")
	cmd.Env = append(os.Environ(), envPermissionChild+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("as nobody: %v; want a permission error\n%s", err, out)
	}
	t.Logf("as nobody: %s", bytes.TrimSpace(out))
	for _, want := range []string{"CAP_NET_RAW", "CAP_NET_ADMIN", "setcap"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("permission error does not mention %s:\n%s", want, out)
		}
	}
}

// openLive opens a capture on lo, or skips the test loudly without the
// privileges to capture.
func openLive(t *testing.T, cfg LiveConfig) *Live {
	t.Helper()
	l, err := OpenLive(cfg)
	if errors.Is(err, os.ErrPermission) {
		t.Skipf("SKIPPED, NOT RUN: live capture needs root or CAP_NET_RAW+CAP_NET_ADMIN: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func TestLiveCapture(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	var ln6 net.Listener
	if l, err := net.Listen("tcp", fmt.Sprintf("[::1]:%d", port)); err == nil {
		ln6 = l
		defer ln6.Close()
	} else {
		t.Logf("no IPv6 loopback on port %d (%v): IPv4 only", port, err)
	}
	var file testutil.SyncBuffer
	l := openLive(t, LiveConfig{Iface: "lo", Port: port, Write: &file})
	t.Logf("timestamps: %s", l.Timestamps())

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	var mu sync.Mutex
	var got []attempt.SYN
	done := make(chan error, 1)
	go func() {
		done <- l.Run(runCtx, func(s attempt.SYN) {
			mu.Lock()
			got = append(got, s)
			mu.Unlock()
		}, nil)
	}()

	// Two IPv4 connections, one of which sends data (its segments must not
	// pass), one IPv6 connection, and a SYN to another port (refused).
	var want []netip.AddrPort
	dial := func(network, addr string, data bool) {
		t.Helper()
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if data {
			c.Write([]byte("not a SYN"))
		}
		want = append(want, c.LocalAddr().(*net.TCPAddr).AddrPort())
	}
	dial("tcp4", ln.Addr().String(), false)
	dial("tcp4", ln.Addr().String(), true)
	if ln6 != nil {
		dial("tcp6", ln6.Addr().String(), false)
	}
	if c, err := net.Dial("tcp4", fmt.Sprintf("127.0.0.1:%d", testutil.ClosedPort(t))); err == nil {
		c.Close()
	}

	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= len(want) || time.Now().After(deadline) {
			break
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	var srcs []netip.AddrPort
	for _, s := range got {
		srcs = append(srcs, s.Src)
		if s.Dst.Port() != port || s.Time.IsZero() {
			t.Errorf("SYN %v → %v at %v: want port %d and a timestamp", s.Src, s.Dst, s.Time, port)
		}
	}
	addrPorts := cmpopts.EquateComparable(netip.AddrPort{}, netip.Addr{})
	if diff := cmp.Diff(want, srcs, addrPorts, cmpopts.SortSlices(func(a, b netip.AddrPort) bool { return a.Compare(b) < 0 })); diff != "" {
		t.Errorf("SYN sources (-want +got):\n%s", diff)
	}

	// The written file reads back with the same SYNs, to the nanosecond.
	path := filepath.Join(t.TempDir(), "live.pcap")
	if err := os.WriteFile(path, file.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var back []attempt.SYN
	st, err := ReadFile(path, Options{Port: port}, func(s attempt.SYN) { back = append(back, s) })
	if err != nil {
		t.Fatalf("read back %s: %v", path, err)
	}
	if st.Format != "pcap (ns)" || st.Truncated {
		t.Errorf("written file: format %q, truncated %v; want a complete nanosecond pcap", st.Format, st.Truncated)
	}
	if diff := cmp.Diff(got, back, addrPorts); diff != "" {
		t.Errorf("read back (-live +file):\n%s", diff)
	}
	if _, err := l.Stats(); err == nil {
		t.Error("Stats after Close: no error")
	}
}

func TestLiveCloseWakesRun(t *testing.T) {
	t.Parallel()
	l := openLive(t, LiveConfig{Iface: "lo", Port: testutil.ClosedPort(t)})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx, func(attempt.SYN) {}, nil) }()
	st, err := l.Stats()
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	if st.Lost() != 0 {
		t.Logf("drops on an idle capture: %+v", st)
	}
	for range 2 { // idempotent
		if err := l.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, io.EOF) {
			t.Errorf("Run after Close: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("Run did not return after Close")
	}
}

// A read error names libpcap's reason when the handle is open, and after
// Close (which frees the handle) only gopacket's status: asking libpcap
// then would read freed memory. The veth case, where libpcap says "The
// interface disappeared", is auditrun's TestLiveFaults.
func TestLiveReadErrorAfterClose(t *testing.T) {
	t.Parallel()
	l := openLive(t, LiveConfig{Iface: "lo", Port: testutil.ClosedPort(t)})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	err := l.readError(pcap.NextErrorReadError)
	if !errors.Is(err, pcap.NextErrorReadError) || err.Error() != "read capture on lo: Read Error" {
		t.Errorf("readError after Close = %v; want gopacket's status alone, wrapped", err)
	}
}
