package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/report"
)

// audit pcap --html writes one page that opens from disk: the report's
// peers and their verdicts, no address it would fetch, and nothing left
// beside it; a page it cannot write is an input error.
func TestPcapHTML(t *testing.T) {
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	code, _, stderr := runAudit(t, "pcap", "--html", page, fixture("mixed.pcapng"))
	if code != exitFail {
		t.Fatalf("exit %d, want %d (a peer fails)\n%s", code, exitFail, stderr)
	}
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	html := string(b)
	for _, want := range []string{"<!DOCTYPE html>", "<svg", "127.0.0.2", "127.0.0.3", "127.0.0.4", "early"} {
		if !strings.Contains(html, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if m := regexp.MustCompile(`(src|href)="(https?:)?//`).FindString(html); m != "" {
		t.Errorf("the page fetches from elsewhere: %s", m)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d files in the folder, want the page alone", len(ents))
	}
	code, _, stderr = runAudit(t, "pcap", "--html", filepath.Join(dir, "no", "such", "dir.html"), fixture("mixed.pcapng"))
	if code != exitUsage || !strings.Contains(stderr, "--html "+filepath.Join(dir, "no", "such", "dir.html")) {
		t.Errorf("unwritable page: exit %d, stderr %q; want %d naming the file", code, stderr, exitUsage)
	}
}

// audit pcap --herd ends both reports with the herd reading; without it
// neither has one.
func TestPcapHerd(t *testing.T) {
	for _, herd := range []bool{false, true} {
		args := []string{"pcap", "--format", "json", fixture("mixed.pcapng")}
		if herd {
			args = append(args, "--herd")
		}
		_, out, _ := runAudit(t, args...)
		var doc struct {
			Herd *report.Herd `json:"herd"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatal(err)
		}
		if (doc.Herd != nil) != herd || herd && (doc.Herd.Peers != 3 || doc.Herd.Attempts != 11) {
			t.Errorf("--herd %v: herd %+v; want 3 peers and 11 attempts only with --herd", herd, doc.Herd)
		}
		_, text, _ := runAudit(t, append([]string{"pcap", fixture("mixed.pcapng")}, args[4:]...)...)
		if got := strings.Contains(text, "herd: 3 peers, 11 attempts"); got != herd {
			t.Errorf("--herd %v: text has the herd line: %v", herd, got)
		}
	}
	// With --record, the herd is that of every chain of the capture.
	_, out, stderr := runAudit(t, "pcap", "--herd", "--format", "json", "--record", "../../testdata/real-grpc-go.record.jsonl", "../../testdata/real-grpc-go.pcap")
	var doc struct {
		Herd *report.Herd `json:"herd"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || doc.Herd == nil || doc.Herd.Peers != 1 || doc.Herd.Attempts != 5 {
		t.Errorf("--record --herd: herd %+v (%v); want 1 peer, 5 attempts\n%s", doc.Herd, err, stderr)
	}
	_, text, _ := runAudit(t, "pcap", "--herd", "--record", "../../testdata/real-grpc-go.record.jsonl", "../../testdata/real-grpc-go.pcap")
	if !strings.Contains(text, "herd: 1 peer, 5 attempts") {
		t.Errorf("--record --herd: the text lacks the herd line:\n%s", text)
	}
}

// Without --retry_mode, audit pcap reads the mode from the fates and says
// so; with it, the flag's mode stands.
func TestPcapInfersMode(t *testing.T) {
	for _, tt := range []struct {
		port  string
		flag  string
		want  backoff.RetryMode
		infer bool
	}{
		{port: "42419", want: backoff.RetryMode{Kind: backoff.ModeRefuse}, infer: true},
		{port: "46841", want: backoff.RetryMode{Kind: backoff.ModeHang}, infer: true},
		{port: "42497", want: backoff.RetryMode{}, infer: true},
		{port: "46841", flag: "close", want: backoff.RetryMode{}},
	} {
		args := []string{"pcap", "--format", "json", "--port", tt.port, fixture("real-fates.pcap")}
		if tt.flag != "" {
			args = append(args, "--retry_mode", tt.flag)
		}
		_, out, _ := runAudit(t, args...)
		var doc struct {
			Mode     backoff.RetryMode `json:"retry_mode"`
			Inferred bool              `json:"retry_mode_inferred"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatal(err)
		}
		if doc.Mode != tt.want || doc.Inferred != tt.infer {
			t.Errorf("port %s, --retry_mode %q: mode %v inferred %v; want %v, %v", tt.port, tt.flag, doc.Mode, doc.Inferred, tt.want, tt.infer)
		}
	}
}

// With sessions read from the control port, the page says where they came
// from and sets the kernel's intervals against Stop's backoff_ms, interval
// by interval, rather than speaking of server accepts it does not have.
func TestPcapControlHTML(t *testing.T) {
	page := filepath.Join(t.TempDir(), "report.html")
	if code, _, stderr := runAudit(t, "pcap", "--html", page, "../../testdata/control-ccore.pcap"); code != exitOK {
		t.Fatalf("exit %d, want %d\n%s", code, exitOK, stderr)
	}
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	html := string(b)
	for _, want := range []string{"from the server's control port 39799", "against the server's backoff_ms",
		"<td>1</td><td>1001.065</td><td>1001</td><td>&#43;0</td>", "<td>3</td><td>1695.693</td><td>1695</td><td>&#43;0</td>"} {
		if !strings.Contains(html, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(html, "server accept") || strings.Contains(html, "Server record") {
		t.Error("the page speaks of server accepts or a record file, which a control port does not give")
	}
}
