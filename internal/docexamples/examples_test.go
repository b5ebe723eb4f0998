package docexamples

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// repoRoot is the module's root seen from this package's directory.
const repoRoot = "../.."

// auditBin is the binary TestMain builds once.
var auditBin string

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "audit-docexamples-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	auditBin = filepath.Join(dir, "audit")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", auditBin, repoRoot+"/cmd/audit").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// step is one prompt of a transcript: the command, what the document
// shows it printing, and where.
type step struct {
	line int    // of the prompt, from 1
	cmd  string // after "$ "
	want []string
}

// transcripts returns the steps of every fenced block of the Markdown
// file that holds a `$ ` prompt, a block at a time.
func transcripts(path string) ([][]step, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var (
		all   [][]step
		block []step
		in    bool
	)
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		l := strings.TrimRight(sc.Text(), " \t")
		switch {
		case strings.HasPrefix(strings.TrimSpace(l), "```"):
			if in && len(block) > 0 {
				all = append(all, block)
			}
			in, block = !in, nil
		case !in:
		case strings.HasPrefix(l, "$ "):
			block = append(block, step{line: n, cmd: strings.TrimPrefix(l, "$ ")})
		case len(block) > 0:
			s := &block[len(block)-1]
			s.want = append(s.want, l)
		}
	}
	return all, sc.Err()
}

// match says whether got is want, where a want line "..." stands for any
// number of lines (none included).
func match(want, got []string) bool {
	if len(want) == 0 {
		return len(got) == 0
	}
	if strings.TrimSpace(want[0]) == "..." {
		for i := 0; i <= len(got); i++ {
			if match(want[1:], got[i:]) {
				return true
			}
		}
		return false
	}
	return len(got) > 0 && got[0] == want[0] && match(want[1:], got[1:])
}

// offline are the verbs whose examples run on committed files.
var offline = map[string]bool{"pcap": true, "h2": true}

// run runs cmd as the document shows it, from the repository's root, and
// returns its lines and exit status.
func run(t *testing.T, cmd string) (lines []string, status int) {
	t.Helper()
	dir := repoRoot
	if d, rest, ok := strings.Cut(cmd, " && "); ok && strings.HasPrefix(d, "cd ") {
		dir, cmd = filepath.Join(repoRoot, strings.TrimPrefix(d, "cd ")), rest
	}
	args := strings.Fields(cmd)[1:]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, auditBin, args...)
	c.Dir = dir
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err := c.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ee.Exited():
		status = ee.ExitCode()
	default:
		t.Fatalf("%s: %v\n%s", cmd, err, &out)
	}
	text := strings.TrimRight(out.String(), "\n")
	for _, l := range strings.Split(text, "\n") {
		lines = append(lines, strings.TrimRight(l, " \t"))
	}
	return lines, status
}

// TestExamples runs every example of the documents.
func TestExamples(t *testing.T) {
	docs, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs = append([]string{filepath.Join(repoRoot, "README.md")}, docs...)
	ran, flagsOnly := 0, 0
	for _, doc := range docs {
		blocks, err := transcripts(doc)
		if err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		name, _ := filepath.Rel(repoRoot, doc)
		for _, block := range blocks {
			status := -1 // of the last command run
			for _, s := range block {
				where := fmt.Sprintf("%s:%d", name, s.line)
				fields := strings.Fields(s.cmd)
				if d, rest, ok := strings.Cut(s.cmd, " && "); ok && strings.HasPrefix(d, "cd ") {
					fields = strings.Fields(rest)
				}
				switch {
				case s.cmd == "echo $?":
					if status < 0 {
						continue // after a command not run
					}
					if want := strings.Join(s.want, "\n"); want != strconv.Itoa(status) {
						t.Errorf("%s: the example shows exit status %s; the command before exited %d", where, want, status)
					}
				case fields[0] != "audit":
					t.Errorf("%s: %q: an example runs audit, and only it", where, s.cmd)
				case len(fields) > 1 && offline[fields[1]]:
					got, st := run(t, s.cmd)
					status = st
					ran++
					if !match(s.want, got) {
						t.Errorf("%s: %s printed (exit %d):\n%s\n\nthe document shows:\n%s", where, s.cmd, st,
							strings.Join(got, "\n"), strings.Join(s.want, "\n"))
					}
				default:
					status = -1
					flagsOnly++
					if got, st := run(t, s.cmd+" --help"); st != 0 {
						t.Errorf("%s: %s: its flags do not parse (exit %d):\n%s", where, s.cmd, st, strings.Join(got, "\n"))
					}
				}
			}
		}
	}
	if ran == 0 {
		t.Fatal("no example run: the documents lost their transcripts, or this test lost them")
	}
	t.Logf("%d examples run and compared, %d checked for their flags only", ran, flagsOnly)
}

// TestMatch pins the elision rule.
func TestMatch(t *testing.T) {
	tests := []struct {
		want, got string
		ok        bool
	}{
		{"a\nb", "a\nb", true},
		{"a\n...\nd", "a\nb\nc\nd", true},
		{"a\n...\nd", "a\nd", true},
		{"...", "", true},
		{"a\n...", "a\nb", true},
		{"a\nb", "a\nc", false},
		{"a\n...\nd", "a\nb\nc", false},
		{"a", "a\nb", false},
	}
	for _, tt := range tests {
		if got := match(strings.Split(tt.want, "\n"), strings.Split(tt.got, "\n")); got != tt.ok {
			t.Errorf("match(%q, %q) = %v, want %v", tt.want, tt.got, got, tt.ok)
		}
	}
}
