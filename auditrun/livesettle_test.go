package auditrun

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/pb"
	"github.com/backoff-audit/audit/report"
	"github.com/backoff-audit/audit/server"
)

// TestLiveReportIsTheFilesReport: a live session's report is made once
// the capture has passed the session's end and its attempts have ended on
// the wire, so it says what audit pcap --record says of the session from
// the run's --write file and record: here a held connection the server
// closes as the session ends reads "closed by server" in both, not "open
// at end" in the report made first.
func TestLiveReportIsTheFilesReport(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rec := filepath.Join(dir, "record.jsonl")
	f, err := server.OpenRecord(rec, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg := Config{Write: filepath.Join(dir, "live.pcap")}
	cfg.Server.Mode = backoff.RetryMode{Kind: backoff.ModeHang}
	cfg.Server.MinConnectTimeout = time.Second
	cfg.Server.Record = f
	r := startLive(t, cfg)
	rpc, ctx := startSession(t, r)
	// One connection the client gives up on, one the server holds to the
	// session's end.
	for _, hold := range []bool{false, true} {
		c, err := net.Dial("tcp4", fmt.Sprintf("127.0.0.1:%d", r.retry))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		time.Sleep(100 * time.Millisecond)
		if !hold {
			c.Close()
		}
	}
	if _, err := rpc.Stop(ctx, &pb.Empty{}); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	reps, _ := r.reports(t, 1)
	if len(reps[0].Peers) != 1 {
		t.Fatalf("peers %+v; want the one client", reps[0].Peers)
	}
	live := reps[0].Peers[0]
	if res := r.stop(t); res.err != nil {
		t.Fatal(res.err)
	}
	files := auditFiles(t, FilesConfig{Record: rec, JSON: true}, cfg.Write)
	if files.err != nil {
		t.Fatalf("audit pcap --record: %v\n%s", files.err, files.stderr)
	}
	var doc report.Report
	if err := json.Unmarshal([]byte(files.stdout), &doc); err != nil || len(doc.Peers) != 1 {
		t.Fatalf("audit pcap --record: %d peers, %v", len(doc.Peers), err)
	}
	if diff := cmp.Diff(live, doc.Peers[0], cmpopts.EquateEmpty(), cmpopts.EquateComparable(netip.Addr{})); diff != "" {
		t.Errorf("the session's chain (-audit live +audit pcap --record of its file):\n%s", diff)
	}
	var fates []backoff.Fate
	for _, a := range live.Attempts {
		fates = append(fates, a.Ending.Fate)
	}
	if diff := cmp.Diff([]backoff.Fate{backoff.FateAbandoned, backoff.FateClosed}, fates); diff != "" {
		t.Errorf("fates (-want +got):\n%s", diff)
	}
}
