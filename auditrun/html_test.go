package auditrun

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/report/herd"
)

// FilesConfig.HTML writes one page that opens from disk: the report's
// peers and their verdicts, no address it would fetch, and nothing left
// beside it; a page it cannot write is an input error.
func TestPcapHTML(t *testing.T) {
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	r := auditFiles(t, FilesConfig{HTML: page}, fixture("mixed.pcapng"))
	if r.verdict() != runFailed {
		t.Fatalf("%s (%v), want failed (a peer fails)\n%s", r.verdict(), r.err, r.stderr)
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
	bad := filepath.Join(dir, "no", "such", "dir.html")
	if r := auditFiles(t, FilesConfig{HTML: bad}, fixture("mixed.pcapng")); r.err == nil || !strings.Contains(r.err.Error(), "HTML "+bad) {
		t.Errorf("unwritable page: error %v; want one naming the file", r.err)
	}
}

// FilesConfig.Herd ends both reports with the herd reading; without it
// neither has one.
func TestPcapHerd(t *testing.T) {
	for _, withHerd := range []bool{false, true} {
		r := auditFiles(t, FilesConfig{JSON: true, Herd: withHerd}, fixture("mixed.pcapng"))
		var doc struct {
			Herd *herd.Reading `json:"herd"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
			t.Fatal(err)
		}
		if (doc.Herd != nil) != withHerd || withHerd && (doc.Herd.Peers != 3 || doc.Herd.Attempts != 11) {
			t.Errorf("herd %v: herd %+v; want 3 peers and 11 attempts only with the herd", withHerd, doc.Herd)
		}
		text := auditFiles(t, FilesConfig{Herd: withHerd}, fixture("mixed.pcapng")).stdout
		if got := strings.Contains(text, "herd: 3 peers, 11 attempts"); got != withHerd {
			t.Errorf("herd %v: text has the herd line: %v", withHerd, got)
		}
	}
	// With a record, the herd is that of every chain of the capture.
	const record, capFile = "../testdata/real-grpc-go.record.jsonl", "../testdata/real-grpc-go.pcap"
	r := auditFiles(t, FilesConfig{Herd: true, JSON: true, Record: record}, capFile)
	var doc struct {
		Herd *herd.Reading `json:"herd"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || doc.Herd == nil || doc.Herd.Peers != 1 || doc.Herd.Attempts != 5 {
		t.Errorf("record and herd: herd %+v (%v); want 1 peer, 5 attempts\n%s", doc.Herd, err, r.stderr)
	}
	if text := auditFiles(t, FilesConfig{Herd: true, Record: record}, capFile).stdout; !strings.Contains(text, "herd: 1 peer, 5 attempts") {
		t.Errorf("record and herd: the text lacks the herd line:\n%s", text)
	}
}

// Without a mode, the audit reads it from the fates and says so; with
// one, that mode stands.
func TestPcapInfersMode(t *testing.T) {
	for _, tt := range []struct {
		port  uint16
		mode  *backoff.RetryMode
		want  backoff.RetryMode
		infer bool
	}{
		{port: 42419, want: backoff.RetryMode{Kind: backoff.ModeRefuse}, infer: true},
		{port: 46841, want: backoff.RetryMode{Kind: backoff.ModeHang}, infer: true},
		{port: 42497, want: backoff.RetryMode{}, infer: true},
		{port: 46841, mode: &backoff.RetryMode{}, want: backoff.RetryMode{}},
	} {
		cfg := FilesConfig{JSON: true, Port: tt.port, PortSet: true}
		if tt.mode != nil {
			cfg.Mode, cfg.ModeSet = *tt.mode, true
		}
		r := auditFiles(t, cfg, fixture("real-fates.pcap"))
		var doc struct {
			Mode     backoff.RetryMode `json:"retry_mode"`
			Inferred bool              `json:"retry_mode_inferred"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil {
			t.Fatal(err)
		}
		if doc.Mode != tt.want || doc.Inferred != tt.infer {
			t.Errorf("port %d, mode %v: mode %v inferred %v; want %v, %v", tt.port, tt.mode, doc.Mode, doc.Inferred, tt.want, tt.infer)
		}
	}
}

// With sessions read from the control port, the page says where they came
// from and sets the kernel's intervals against Stop's backoff_ms, interval
// by interval, rather than speaking of server accepts it does not have.
func TestPcapControlHTML(t *testing.T) {
	page := filepath.Join(t.TempDir(), "report.html")
	if r := auditFiles(t, FilesConfig{HTML: page}, fixture("control-ccore.pcap")); r.verdict() != runPassed {
		t.Fatalf("%s (%v), want passed\n%s", r.verdict(), r.err, r.stderr)
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
