package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/internal/testutil"
)

// TestUsageErrors: what a verb cannot start with is exit 2 with nothing
// on stdout, and an error that names the flag (a library's field spelt as
// the verb's flag), the file or the address; nothing it would write is
// written, and no input is changed (outputsApart: an output that is an
// input, by device and inode and through links, or another output).
func TestUsageErrors(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := t.TempDir()
	copyOf := func(src string) string {
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
	capFile, record := copyOf(fixture("real-grpc-go.pcap")), copyOf(fixture("real-grpc-go.record.jsonl"))
	cert, key, pem := copyOf(fixture("tls/server.pem")), copyOf(fixture("tls/server.key")), fixture("tls/server.pem")
	precious := filepath.Join(dir, "precious.pcap")
	if err := os.WriteFile(precious, []byte("what the user had"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "report.html")
	if err := os.Symlink(filepath.Base(capFile), link); err != nil {
		t.Fatal(err)
	}
	fresh, keylog := filepath.Join(dir, "fresh.out"), filepath.Join(dir, "keys.log")
	closed := strconv.Itoa(int(testutil.ClosedPort(t)))
	client := func(args ...string) []string {
		return append([]string{"client", "--server_host=127.0.0.1", "--server_control_port=" + closed, "--server_retry_port=1"}, args...)
	}
	tests := []struct {
		name string
		args []string
		want []string // in stderr
	}{
		// audit server and audit live, which shares its flags.
		{"unknown mode", []string{"server", "--retry_mode=sleep"}, []string{`--retry_mode sleep: retry mode "sleep": unknown; the modes are ` + backoff.ModeNames}},
		{"restart without duration", []string{"server", "--retry_mode=restart"}, []string{`--retry_mode restart: retry mode "restart": restart needs how long the port stays down`}},
		{"live: unknown mode", []string{"live", "--retry_mode=sleep"}, []string{"the modes are " + backoff.ModeNames}},
		{"min connect timeout", []string{"server", "--min_connect_timeout_ms=0"}, []string{"--min_connect_timeout_ms 0: must be in 1–2147483647 (ms)"}},
		{"live: min connect timeout that wrapped to the default", []string{"live", "--min_connect_timeout_ms=9300000000000"}, []string{"9300000000000: must be in 1–2147483647 (ms)"}},
		{"max held", []string{"server", "--max_held=-1"}, []string{"--max_held -1: must be positive"}},
		{"certificate without key", []string{"server", "--retry_mode=goaway", "--tls_cert=" + pem}, []string{"--tls_cert " + pem + ": needs --tls_key: give both or neither"}},
		{"certificate in a mode without TLS", []string{"server", "--retry_mode=hang", "--tls_cert=" + pem, "--tls_key=" + fixture("tls/server.key")},
			[]string{"--tls_cert: --retry_mode hang presents no certificate"}},
		{"live: endless key", []string{"live", "--retry_mode=goaway", "--tls_cert=" + pem, "--tls_key=/dev/zero"}, []string{"--tls_key /dev/zero: more than 1048576 bytes"}},
		{"live: negative idle", []string{"live", "--iface", "nonexist0", "--attach", "--retry_port=5", "--idle=-5s"}, []string{"--idle -5s: must not be negative"}},
		{"live: negative sniffing cap", []string{"live", "--iface", "nonexist0", "--attach", "--retry_port=5", "--max_reconnect_backoff_ms=-5"},
			[]string{"-5: must be in 0–2147483647 (ms)"}},
		{"live: control port with a record", []string{"live", "--attach", "--retry_port=9", "--control_port=8", "--record=run.jsonl"}, []string{"--control_port 8: not with --record"}},
		// audit client: the files it reads are read before Start.
		{"client: no ports", []string{"client"}, []string{"server_control_port"}},
		{"client: zero initial backoff", client("--initial_backoff_ms=0"), []string{"--initial_backoff_ms 0"}},
		{"client: negative connect timeout", client("--min_connect_timeout_ms=-5"), []string{"--min_connect_timeout_ms -5"}},
		{"client: roots without TLS", client("--use_tls=false", "--ca_file=ca.pem"), []string{"--ca_file ca.pem: trusts roots for TLS, and the retry channel is plaintext (--use_tls)"}},
		{"client: unreadable roots", client("--ca_file=/nonexistent/ca.pem"), []string{"--ca_file /nonexistent/ca.pem: open /nonexistent/ca.pem"}},
		{"client: unreachable control port", client("--deadline=5s"), []string{"control port 127.0.0.1:" + closed + " unreachable"}},
		// --keylog where no TLS connection could be logged.
		{"keylog: server, a mode without TLS", []string{"server", "--retry_mode=close", "--keylog=" + keylog},
			[]string{"--keylog: --retry_mode close makes no TLS connection (only settings-close, goaway and outage do)"}},
		{"keylog: live, a mode without TLS", []string{"live", "--retry_mode=hang", "--keylog=" + keylog}, []string{"--keylog: --retry_mode hang makes no TLS connection"}},
		{"keylog: live --attach", []string{"live", "--attach", "--retry_port=1", "--retry_mode=goaway", "--keylog=" + keylog},
			[]string{"--keylog with --attach: the server that would write it runs elsewhere"}},
		{"keylog: client, plaintext", client("--use_tls=false", "--keylog="+keylog), []string{"--keylog " + keylog + ": logs TLS secrets, and the retry channel is plaintext (--use_tls)"}},
		{"keylog: client, a folder that is not there", client("--keylog=/nonexistent/keys.log"), []string{"--keylog: open /nonexistent/keys.log: no such file or directory"}},
		{"keylog: h2, a key log that is not there", []string{"h2", "--keylog", "/nonexistent/keys.log", fixture("tls-grpcgo.pcap.gz")},
			[]string{"--keylog: open /nonexistent/keys.log: no such file or directory"}},
		{"keylog: pcap, standard input", []string{"pcap", "--keylog", fixture("tls-grpcgo.keylog"), "-"}, []string{"--keylog " + fixture("tls-grpcgo.keylog") + ": not with standard input (-)"}},
		// audit pcap and audit h2.
		{"pcap: ambiguous ports are listed", []string{"pcap", fixture("two-ports.pcap")},
			[]string{"--port: the capture holds SYNs to 2 ports, choose the retry port: 50052 (6 SYNs), 50051 (1 SYN)"}},
		{"pcap: bad peer", []string{"pcap", "--peer", "localhost", fixture("mixed.pcapng")}, []string{`--peer "localhost": not an IP address`}},
		{"pcap: unparsable duration", []string{"pcap", "--initial_backoff", "soon", fixture("ipv4-ether.pcap")}, []string{`--initial_backoff soon: time: invalid duration "soon"`}},
		{"pcap: bad format", []string{"pcap", "--format", "xml", fixture("ipv4-ether.pcap")}, []string{`--format "xml"`}},
		{"pcap: no file", []string{"pcap"}, []string{"requires at least 1 arg"}},
		{"pcap: missing file named", []string{"pcap", fixture("ipv4-ether.pcap"), "no/such.pcap"}, []string{"no/such.pcap"}},
		{"h2: bad format", []string{"h2", "--format", "xml", capFile}, []string{`--format "xml"`}},
		{"h2: bad retry policy", []string{"h2", "--retry_max_attempts", "1", capFile}, []string{"--retry_max_attempts 1: must be at least 2"}},
		{"h2: negative tolerance", []string{"h2", "--retry_tolerance", "-1ms", capFile}, []string{"--retry_tolerance -1ms: must not be negative"}},
		{"h2: no file", []string{"h2"}, []string{"requires at least 1 arg"}},
		// audit watch, and its --metrics on audit live.
		{"watch: no interface", []string{"watch", "--port", "50052"}, []string{`required flag(s) "iface" not set`}},
		{"watch: no port", []string{"watch", "--iface", "lo"}, []string{`required flag(s) "port" not set`}},
		{"watch: port 0", []string{"watch", "--iface", "lo", "--port", "0"}, []string{"--port 0: not a port"}},
		{"watch: port too large", []string{"watch", "--iface", "lo", "--port", "50052,70000"}, []string{"--port 70000: not a port"}},
		{"watch: format", []string{"watch", "--iface", "lo", "--port", "1", "--format", "xml"}, []string{`--format "xml"`}},
		{"watch: bounds", []string{"watch", "--iface", "lo", "--port", "1", "--max_chain", "1"}, []string{"--max_chain 1"}},
		{"watch: policy", []string{"watch", "--iface", "lo", "--port", "1", "--multiplier", "0.5"}, []string{"policy: multiplier 0.5"}},
		{"watch: a reading too often", []string{"watch", "--iface", "lo", "--port", "1", "--infer", "--infer_every", "10ms"}, []string{"--infer_every 10ms: at least 1s"}},
		{"watch: a sample too large", []string{"watch", "--iface", "lo", "--port", "1", "--infer", "--infer_sample", "20000"}, []string{"--infer_sample 20000: 1 to 10000 chains"}},
		{"watch: metrics address in use", []string{"watch", "--iface", "lo", "--port", "1", "--metrics", busy.Addr().String()},
			[]string{"--metrics " + busy.Addr().String(), "address already in use"}},
		{"watch: metrics address not an address", []string{"watch", "--iface", "lo", "--port", "1", "--metrics", "nowhere"}, []string{"--metrics nowhere"}},
		{"watch: unknown interface, a file kept", []string{"watch", "--iface", "nosuch0", "--port", "1", "--write", precious}, []string{"unknown interface", "lo"}},
		{"live: metrics address in use", []string{"live", "--control_port=0", "--retry_port=0", "--metrics", busy.Addr().String()},
			[]string{"--metrics " + busy.Addr().String(), "address already in use"}},
		// An output that would destroy an input or another output.
		{"pcap --html the capture", []string{"pcap", capFile, "--html", capFile},
			[]string{"--html " + capFile + " is the capture file " + capFile + ": writing it would destroy the input"}},
		{"pcap --html a link to the capture", []string{"pcap", capFile, "--html", link}, []string{"--html " + link + " is the capture file " + capFile}},
		{"pcap --html the record", []string{"pcap", capFile, "--record", record, "--html", record}, []string{"--html " + record + " is the --record " + record}},
		{"server --record the certificate", []string{"server", "--control_port=0", "--retry_port=0", "--retry_mode=settings-close",
			"--tls_cert", cert, "--tls_key", key, "--record", cert}, []string{"--record " + cert + " is the --tls_cert " + cert}},
		{"live --attach --html the record it follows", []string{"live", "--iface", "nonexist0", "--attach", "--retry_port=50052",
			"--record", record, "--html", record}, []string{"--html " + record + " is the --record " + record}},
		{"live --write and --html one file", []string{"live", "--iface", "nonexist0", "--write", fresh, "--html", fresh},
			[]string{"--write " + fresh + " and --html " + fresh + " are the same file"}},
		{"live --record the key", []string{"live", "--iface", "nonexist0", "--retry_mode=goaway", "--tls_cert", cert, "--tls_key", key, "--record", key},
			[]string{"--record " + key + " is the --tls_key " + key}},
	}
	before := map[string][]byte{}
	for _, p := range []string{capFile, record, cert, key, precious} {
		before[p], _ = os.ReadFile(p)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runAudit(t, tt.args...)
			if code != exitUsage || stdout != "" {
				t.Errorf("exit %d, stdout %q; want %d and nothing", code, stdout, exitUsage)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			for p, b := range before {
				if now, _ := os.ReadFile(p); !bytes.Equal(now, b) {
					t.Errorf("%s changed", p)
				}
			}
			for _, p := range []string{fresh, keylog} {
				if _, err := os.Lstat(p); err == nil {
					t.Errorf("%s was written", p)
				}
			}
		})
	}
	if ents, _ := os.ReadDir(dir); len(ents) != len(before)+1 {
		t.Errorf("%d files in the folder; want the %d there before (no temporary file left)", len(ents), len(before)+1)
	}
}
