package auditrun

import (
	"testing"
	"time"

	"github.com/backoff-audit/audit/backoff"
)

// TestLiveFates: a session's report gives each attempt its fate from the
// wire (docs/spec.md §7). The project's server accepts each connection on
// the retry port and closes it without a byte, and grpc-go opens each
// with a TLS ClientHello: every attempt is closed by the server, after a
// SYN-ACK, with the client's hello and nothing from the server.
func TestLiveFates(t *testing.T) {
	t.Parallel()
	r := startLive(t, Config{})
	runLiveClient(t, r.control, r.retry, 3500*time.Millisecond)
	reps, _ := r.reports(t, 1)
	r.stop(t)
	rep := reps[0]
	if rep.Capture.SYNOnly || len(rep.Peers) != 1 || len(rep.Peers[0].Attempts) < 2 {
		t.Fatalf("capture %+v, peers %+v; want a chain of attempts with fates", rep.Capture, rep.Peers)
	}
	for i, a := range rep.Peers[0].Attempts {
		e := a.Ending
		if e.Fate != backoff.FateClosed || e.Accepted <= 0 || e.Duration < e.Accepted ||
			e.ClientSent != backoff.PayloadTLSClientHello || e.ServerSent != "" {
			t.Errorf("attempt %d: %+v; want closed by server after a SYN-ACK, a TLS ClientHello from the client, nothing from the server", i+1, e)
		}
	}
}
