package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/backoff-audit/audit"

// TestImportGraph keeps the package graph the README's Layout describes: cmd → {server,
// capture, interop} → analyze, {server, interop} → pb. analyze stays a
// standard-library package (but for internal/quote, itself one), and the server builds without libpcap (it never
// reaches gopacket). The interop client shares only the verifier and the
// wire types with the server it judges, and it runs where nothing may
// capture; only cmd imports it. internal/testutil, the tests' shared
// helpers, reaches no package of the module, so any test may import it.
// The HTTP/2 decoder reads bytes and the wire types, nothing that captures
// or serves; flows joins it to the capture readers, and serves nothing;
// control reads its reports, nothing more. internal/outfile, which every
// writer of a file uses, internal/infile, which bounds what is read, and
// internal/quote, which quotes what a report prints of its input, are
// standard-library leaves.
func TestImportGraph(t *testing.T) {
	tests := []struct {
		pkg       string
		forbidden []string // import path prefixes that must not be reached
		onlyStd   bool     // standard library only, but for leaves
		leaves    []string // the module's standard-library leaves it may import
	}{
		{pkg: "analyze", onlyStd: true, leaves: []string{module + "/internal/quote"}},
		{pkg: "pb", forbidden: []string{module + "/analyze", module + "/server", module + "/capture", module + "/interop", "github.com/gopacket/"}},
		{pkg: "server", forbidden: []string{module + "/capture", module + "/interop", "github.com/gopacket/", "github.com/google/gopacket"}},
		{pkg: "capture", forbidden: []string{module + "/server", module + "/pb", module + "/interop", "google.golang.org/grpc"}},
		{pkg: "interop", forbidden: []string{module + "/capture", module + "/server", "github.com/gopacket/", "github.com/google/gopacket"}},
		{pkg: "h2", forbidden: []string{module + "/capture", module + "/server", module + "/interop", module + "/live", "github.com/gopacket/", "github.com/google/gopacket"}},
		{pkg: "flows", forbidden: []string{module + "/server", module + "/interop", module + "/live"}},
		{pkg: "control", forbidden: []string{module + "/capture", module + "/server", module + "/interop", module + "/live", "github.com/gopacket/", "github.com/google/gopacket"}},
		{pkg: "internal/outfile", onlyStd: true},
		{pkg: "internal/infile", onlyStd: true},
		{pkg: "internal/quote", onlyStd: true},
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
				if tt.onlyStd && std != "true" && !slices.Contains(tt.leaves, path) {
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
