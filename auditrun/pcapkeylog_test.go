package auditrun

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/backoff-audit/audit/flows"
	"github.com/backoff-audit/audit/h2"
	"github.com/backoff-audit/audit/tlsdec"
)

// The grpc-js TLS 1.2 capture and its key log (testdata/README.md, "TLS
// captures").
var (
	tlsCapture = fixture("tls-grpcjs-tls12.pcap.gz")
	tlsKeylog  = fixture("tls-grpcjs-tls12.keylog")
)

type keylogAttempt struct {
	SrcPort      uint16   `json:"src_port"`
	ReadyMS      *float64 `json:"ready_ms"`
	Decrypted    bool     `json:"decrypted"`
	NotDecrypted string   `json:"not_decrypted"`
}

// keylogAttempts reads the attempts of the JSON report of the TLS 1.2
// capture, with the key log at keylog ("" for none).
func keylogAttempts(t *testing.T, keylog string) ([]keylogAttempt, string) {
	t.Helper()
	run := auditFiles(t, FilesConfig{JSON: true, KeyLog: keylog}, tlsCapture)
	if run.verdict() != runPassed {
		t.Fatalf("%s: %v\n%s", run.verdict(), run.err, run.stderr)
	}
	var rep struct {
		Peers []struct {
			Attempts []keylogAttempt `json:"attempts"`
		} `json:"peers"`
	}
	if err := json.Unmarshal([]byte(run.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Peers) != 1 {
		t.Fatalf("%d peers, want 1", len(rep.Peers))
	}
	return rep.Peers[0].Attempts, run.stderr
}

// TestPcapKeyLog: with the key log, an attempt of the TLS 1.2 capture is
// READY when the server's SETTINGS came inside its TLS, as flows decodes
// them; without, READY is the guess from its flights, which a full TLS 1.2
// handshake reaches earlier, at the server's Finished; with another
// capture's key log, the guess stands and each attempt says why.
func TestPcapKeyLog(t *testing.T) {
	keys, err := tlsdec.ReadKeyLog(tlsKeylog)
	if err != nil {
		t.Fatal(err)
	}
	res, err := flows.ReadFiles([]string{tlsCapture}, flows.Options{KeyLog: keys}, h2.DiagnoseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	settings := map[uint16]float64{} // by client port: ms from the SYN
	for _, c := range res.Conns {
		settings[c.Report.Client.Port()] = float64(flows.ServerSettings(c.Report).Sub(c.Report.Start)) / float64(time.Millisecond)
	}

	decrypted, stderr := keylogAttempts(t, tlsKeylog)
	guessed, _ := keylogAttempts(t, "")
	other, _ := keylogAttempts(t, fixture("tls-grpcgo.keylog"))
	if len(decrypted) != len(settings) || len(guessed) != len(settings) || len(other) != len(settings) {
		t.Fatalf("%d, %d and %d attempts; the capture has %d TLS connections", len(decrypted), len(guessed), len(other), len(settings))
	}
	if want := "; 24 of the 24 attempts to port "; !strings.Contains(stderr, want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr)
	}
	for i, a := range decrypted {
		want := settings[a.SrcPort]
		if !a.Decrypted || a.NotDecrypted != "" || a.ReadyMS == nil || math.Abs(*a.ReadyMS-want) > 1e-6 {
			t.Errorf("attempt %d (port %d): decrypted %v %q, READY at %v ms; want decrypted, READY at the SETTINGS, %.6f ms", i, a.SrcPort, a.Decrypted, a.NotDecrypted, a.ReadyMS, want)
		}
		g, o := guessed[i], other[i]
		if g.Decrypted || g.NotDecrypted != "" || g.ReadyMS == nil || *g.ReadyMS >= want {
			t.Errorf("attempt %d without a key log: %+v, want READY by its flights before the SETTINGS, %.6f ms", i, g, want)
		}
		if o.Decrypted || o.NotDecrypted != tlsdec.WhyNoKey || o.ReadyMS == nil || *o.ReadyMS != *g.ReadyMS {
			t.Errorf("attempt %d with another capture's key log: %+v, want not decrypted for %q, READY as guessed", i, o, tlsdec.WhyNoKey)
		}
	}
}

// TestPcapKeyLogErrors: a key log the audit cannot use is an error of the
// field, which cmd spells as the flag.
func TestPcapKeyLogErrors(t *testing.T) {
	for _, tt := range []struct {
		name  string
		files []string
		cfg   FilesConfig
		want  string
	}{
		{"missing", []string{tlsCapture}, FilesConfig{KeyLog: "/nonexistent/keys.log"}, "KeyLog: open /nonexistent/keys.log: no such file or directory"},
		{"standard input", []string{"-"}, FilesConfig{KeyLog: tlsKeylog, Stdin: strings.NewReader("")},
			"KeyLog " + tlsKeylog + ": not with standard input (-): the TLS connections are decrypted in a second pass"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			run := auditFiles(t, tt.cfg, tt.files...)
			if run.err == nil || !strings.HasPrefix(run.err.Error(), tt.want) {
				t.Errorf("error %v, want %q", run.err, tt.want)
			}
		})
	}
}
