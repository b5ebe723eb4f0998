package auditrun

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/internal/testutil"
	"github.com/backoff-audit/audit/report"
)

// realFatesPorts reads testdata/real-fates.ports: the retry port of each
// mode of testdata/real-fates.pcap's runs.
func realFatesPorts(t *testing.T) map[string]uint16 {
	t.Helper()
	b, err := os.ReadFile(fixture("real-fates.ports"))
	if err != nil {
		t.Fatal(err)
	}
	ports := map[string]uint16{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		mode, port, _ := strings.Cut(line, " ")
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			t.Fatalf("real-fates.ports: %s port %q: %v", mode, port, err)
		}
		ports[mode] = uint16(n)
	}
	return ports
}

// TestPcapRealFates reads testdata/real-fates.pcap, a real grpc-go client
// on lo trying a port that accepts and closes, one that refuses and one
// that accepts and never answers (testdata/make-fates-capture.sh), and
// checks each port's fates; its text reports are golden (-update rewrites
// them after the capture is remade).
func TestPcapRealFates(t *testing.T) {
	ports := realFatesPorts(t)
	tests := []struct {
		what  string
		check func(t *testing.T, i, n int, e backoff.Ending)
	}{
		{"close", func(t *testing.T, _, _ int, e backoff.Ending) {
			if e.Fate != backoff.FateClosed || e.Accepted <= 0 || e.Duration <= e.Accepted ||
				e.ClientSent != backoff.PayloadTLSClientHello || e.ServerSent != "" {
				t.Errorf("%+v; want closed by server after a SYN-ACK, the client's TLS ClientHello, nothing from the server", e)
			}
		}},
		{"refuse", func(t *testing.T, _, _ int, e backoff.Ending) {
			if e.Fate != backoff.FateRefused || e.Accepted != 0 || e.Duration <= 0 || e.Duration > time.Second || e.ClientSent != "" {
				t.Errorf("%+v; want refused by an RST within a second", e)
			}
		}},
		{"hang", func(t *testing.T, i, n int, e backoff.Ending) {
			// Each attempt but the last is given up at grpc-go's connect
			// timeout, 20 s; the capture ends before the last one does.
			want := backoff.FateAbandoned
			if i == n-1 {
				want = backoff.FateOpen
			}
			if e.Fate != want || e.Accepted <= 0 || e.ClientSent != backoff.PayloadTLSClientHello || e.ServerSent != "" ||
				want == backoff.FateAbandoned && (e.Duration < 19*time.Second || e.Duration > 21*time.Second) {
				t.Errorf("%+v; want %s, after about 20 s when given up, the client's TLS ClientHello, nothing from the server", e, want)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.what, func(t *testing.T) {
			port := ports[tt.what]
			if port == 0 {
				t.Fatalf("real-fates.ports names no %s port", tt.what)
			}
			cfg := capped(time.Second)
			cfg.Port, cfg.PortSet, cfg.JSON = port, true, true
			r := auditFiles(t, cfg, fixture("real-fates.pcap"))
			var rep report.Report
			if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
				t.Fatalf("%v (%v)\n%s", err, r.err, r.stderr)
			}
			if rep.Capture.SYNOnly || len(rep.Peers) != 1 || len(rep.Peers[0].Attempts) < 2 {
				t.Fatalf("capture %+v, peers %+v; want one peer with attempts", rep.Capture, rep.Peers)
			}
			as := rep.Peers[0].Attempts
			for i, a := range as {
				tt.check(t, i, len(as), a.Ending)
			}
			cfg.JSON = false
			text := auditFiles(t, cfg, fixture("real-fates.pcap")).stdout
			testutil.Golden(t, filepath.Join("testdata", "real-fates-"+tt.what+".txt"), []byte(text), *update)
		})
	}
}
