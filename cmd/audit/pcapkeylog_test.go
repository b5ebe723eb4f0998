package main

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

// pcapAttempts reads the attempts of `audit pcap --format json` of the
// TLS 1.2 capture, with args.
func pcapAttempts(t *testing.T, args ...string) (attempts []pcapAttempt, stderr string) {
	t.Helper()
	code, stdout, stderr := runAudit(t, append(append([]string{"pcap", "--format", "json"}, args...), tlsCapture)...)
	if code != exitOK {
		t.Fatalf("exit %d, want %d; stderr: %s", code, exitOK, stderr)
	}
	var rep struct {
		Peers []struct {
			Attempts []pcapAttempt `json:"attempts"`
		} `json:"peers"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Peers) != 1 {
		t.Fatalf("%d peers, want 1", len(rep.Peers))
	}
	return rep.Peers[0].Attempts, stderr
}

type pcapAttempt struct {
	SrcPort      uint16   `json:"src_port"`
	ReadyMS      *float64 `json:"ready_ms"`
	Decrypted    bool     `json:"decrypted"`
	NotDecrypted string   `json:"not_decrypted"`
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

	decrypted, stderr := pcapAttempts(t, "--keylog", tlsKeylog)
	guessed, _ := pcapAttempts(t)
	other, _ := pcapAttempts(t, "--keylog", fixture("tls-grpcgo.keylog"))
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

// TestPcapKeyLogErrors: a key log audit pcap cannot use is a usage error
// naming the flag.
func TestPcapKeyLogErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"missing", []string{"--keylog", "/nonexistent/keys.log", tlsCapture}, "--keylog: open /nonexistent/keys.log: no such file or directory"},
		{"standard input", []string{"--keylog", tlsKeylog, "-"}, "--keylog with standard input (-): the TLS connections are decrypted in a second pass"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runAudit(t, append([]string{"pcap"}, tt.args...)...)
			if code != exitUsage || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, exitUsage, tt.want)
			}
		})
	}
}
