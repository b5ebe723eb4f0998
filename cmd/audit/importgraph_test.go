package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/backoff-audit/audit"

// TestImportGraph keeps the package graph the README's Layout describes.
// backoff, the spec's rules and the model of a channel's life, is standard
// library only; attempt reads the wire's attempts with backoff and the
// standard library only, its pointer-free records in attempt/internal/rec
// (backoff and the standard library too); attempt/stream, the chains of
// one retry port handed over as a capture comes, adds internal/arena and
// internal/spill; session (the record file, the one Session and
// Fold, the cross-check) adds attempt; infer, the policy a client runs
// read from its chain and the policies of a fleet, reads chains with
// backoff and the standard library only, and holds its own JSON and text
// section, so that report only calls it; report writes documents from
// those four, and report/html from report; report/herd, how peers
// reconnect together, reads only attempt times with backoff. The server judges its list with
// backoff and session, never report, and builds without libpcap (it never
// reaches gopacket). The interop client shares only the model and the
// wire types with the server it judges, and runs where nothing may
// capture. The HTTP/2 decoder reads bytes and the wire types, nothing that
// captures or serves; flows joins it to the capture readers; control reads
// its reports; tlsdec, the TLS record layer flows decrypts with, reads
// bytes and key logs with the standard library and golang.org/x/crypto's
// primitives, and reaches no package of the module. metrics only exposes
// what it is told, and watch judges chains from what it is fed: neither
// captures. internal/field (a library's error for a field of its
// configuration), internal/outfile (which every writer of a file uses),
// internal/infile (which bounds what is read) and internal/quote (which
// quotes what a report prints of its input) are standard library only, so
// any package may use them; internal/testutil, the tests' shared helpers,
// reaches no package of the module. internal/arena, where a streamed audit
// keeps its records off the Go heap, and internal/spill, where it sets its
// chains aside, are standard library only too.
func TestImportGraph(t *testing.T) {
	tests := []struct {
		pkg       string
		forbidden []string // import path prefixes that must not be reached
		onlyStd   bool     // standard library only
		allowed   []string // with onlyStd unset and forbidden empty: the standard library and these only
	}{
		{pkg: "infer", allowed: []string{module + "/backoff", module + "/internal/text"}},
		{pkg: "report", allowed: []string{module + "/backoff", module + "/attempt", module + "/attempt/internal/rec", module + "/session", module + "/report/herd", module + "/infer", module + "/internal/text", module + "/internal/field", module + "/internal/quote", module + "/internal/arena", module + "/internal/spill"}},
		{pkg: "report/html", allowed: []string{module + "/backoff", module + "/attempt", module + "/attempt/internal/rec", module + "/session", module + "/report", module + "/report/herd", module + "/infer", module + "/internal/text", module + "/internal/field", module + "/internal/quote", module + "/internal/outfile", module + "/internal/arena", module + "/internal/spill"}},
		{pkg: "backoff", onlyStd: true},
		{pkg: "report/herd", allowed: []string{module + "/backoff", module + "/internal/text"}},
		{pkg: "attempt", allowed: []string{module + "/backoff", module + "/attempt/internal/rec", module + "/internal/text", module + "/internal/field"}},
		{pkg: "attempt/internal/rec", allowed: []string{module + "/backoff"}},
		{pkg: "attempt/stream", allowed: []string{module + "/backoff", module + "/attempt", module + "/attempt/internal/rec", module + "/internal/text", module + "/internal/field", module + "/internal/arena", module + "/internal/spill"}},
		{pkg: "internal/arena", onlyStd: true},
		{pkg: "internal/spill", onlyStd: true},
		{pkg: "session", allowed: []string{module + "/backoff", module + "/attempt", module + "/attempt/internal/rec", module + "/internal/text", module + "/internal/field", module + "/internal/arena", module + "/internal/spill"}},
		{pkg: "pb", forbidden: []string{module + "/report", module + "/server", module + "/capture", module + "/interop", "github.com/gopacket/"}},
		{pkg: "server", forbidden: []string{module + "/report", module + "/auditrun", module + "/capture", module + "/interop", "github.com/gopacket/", "github.com/google/gopacket"}},
		{pkg: "capture", forbidden: []string{module + "/server", module + "/pb", module + "/interop", "google.golang.org/grpc"}},
		{pkg: "interop", forbidden: []string{module + "/capture", module + "/server", "github.com/gopacket/", "github.com/google/gopacket"}},
		{pkg: "h2", forbidden: []string{module + "/capture", module + "/server", module + "/interop", module + "/auditrun", "github.com/gopacket/", "github.com/google/gopacket"}},
		{pkg: "flows", forbidden: []string{module + "/server", module + "/interop", module + "/auditrun"}},
		{pkg: "tlsdec", forbidden: []string{module + "/", "github.com/gopacket/", "github.com/google/gopacket", "google.golang.org/grpc", "golang.org/x/net"}},
		{pkg: "control", forbidden: []string{module + "/capture", module + "/server", module + "/interop", module + "/auditrun", "github.com/gopacket/", "github.com/google/gopacket"}},
		{pkg: "internal/field", onlyStd: true},
		{pkg: "internal/outfile", onlyStd: true},
		{pkg: "internal/infile", onlyStd: true},
		{pkg: "internal/quote", onlyStd: true},
		{pkg: "metrics", forbidden: []string{module + "/capture", module + "/server", module + "/auditrun", module + "/watch", "github.com/gopacket/", "google.golang.org/grpc"}},
		{pkg: "watch", forbidden: []string{module + "/capture", module + "/server", module + "/auditrun", "github.com/gopacket/", "google.golang.org/grpc"}},
		{pkg: "internal/testutil", forbidden: []string{module + "/", "github.com/gopacket/", "github.com/google/gopacket", "google.golang.org/grpc"}},
	}
	for _, tt := range tests {
		t.Run(tt.pkg, func(t *testing.T) {
			out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{.Standard}}", "../../"+tt.pkg).CombinedOutput()
			if err != nil {
				t.Fatalf("go list %s: %v\n%s", tt.pkg, err, out)
			}
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				path, std, _ := strings.Cut(line, " ")
				if path == module+"/"+tt.pkg {
					continue
				}
				if tt.allowed != nil && std != "true" && !slices.Contains(tt.allowed, path) {
					t.Errorf("%s imports %s; it may import only the standard library and %v", tt.pkg, path, tt.allowed)
				}
				if tt.onlyStd && std != "true" {
					t.Errorf("%s imports %s; it must import only the standard library", tt.pkg, path)
				}
				for _, f := range tt.forbidden {
					if strings.HasPrefix(path, f) {
						t.Errorf("%s reaches %s; the import graph forbids it", tt.pkg, path)
					}
				}
			}
		})
	}
}

// TestTestutilOnlyInTests keeps internal/testutil out of every package's
// own code: only _test.go files may import it.
func TestTestutilOnlyInTests(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "../../...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, " ")
		if slices.Contains(strings.Fields(imports), module+"/internal/testutil") {
			t.Errorf("%s imports internal/testutil outside its tests", pkg)
		}
	}
}
