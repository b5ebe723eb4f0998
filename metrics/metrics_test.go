package metrics

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/report"
	"github.com/google/go-cmp/cmp"
)

// stats is a capture's counters as libpcap would give them.
type stats attempt.LiveStats

func (s stats) Stats() (attempt.LiveStats, error) { return attempt.LiveStats(s), nil }

// samples reads the audit_ samples of an exposition: series → value.
func samples(t *testing.T, body []byte) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "audit_") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// scrape gets the exposition of m as Prometheus would.
func scrape(t *testing.T, m *Metrics) []byte {
	t.Helper()
	srv, err := Listen("127.0.0.1:0", m)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+srv.Addr().String()+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %v %s", err, resp.Status)
	}
	return body
}

// chainOf is a chain of attempts at the offsets given, each refused.
func chainOf(offsets ...time.Duration) report.PeerReport {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	c := attempt.Chain{Peer: netip.MustParseAddr("127.0.0.1")}
	for i, d := range offsets {
		c.Attempts = append(c.Attempts, attempt.Attempt{Time: t0.Add(d), Src: netip.MustParseAddrPort("127.0.0.1:40000"),
			Dst: netip.MustParseAddrPort("127.0.0.1:50052"), Seq: uint32(i), Ending: backoff.Ending{Fate: backoff.FateRefused}})
	}
	return report.PeerReportOf(c, backoff.VerifyRun(backoff.DefaultPolicy(), c.Times(), backoff.Run{Endings: c.Endings()}))
}

func TestExposition(t *testing.T) {
	m := New()
	m.Watch(50052)
	for range 3 {
		m.Attempt(50052)
	}
	m.Retransmit(50052)
	m.Chain(50052, EndStopped, chainOf(0, time.Second, 2600*time.Millisecond, 4100*time.Millisecond))
	m.Connected(50052, backoff.Ending{Fate: backoff.FateClosed, ServerSent: backoff.PayloadH2Settings})
	m.Reset(50052)
	m.Wave(50052, false)
	m.Peers(50052, 2, 1)
	m.Forgotten(50052)
	m.AddCapture("lo", stats{Received: 10, Dropped: 1, IfDropped: 2}, func() uint64 { return 3 })
	body := scrape(t, m)
	got := samples(t, body)
	want := map[string]float64{
		`audit_attempts_total{port="50052"}`:                                       3,
		`audit_syn_retransmissions_total{port="50052"}`:                            1,
		`audit_chains_total{end="stopped retrying",port="50052",verdict="failed"}`: 1,
		`audit_intervals_total{port="50052",verdict="ok"}`:                         2,
		`audit_intervals_total{port="50052",verdict="early"}`:                      1,
		`audit_intervals_total{port="50052",verdict="reset"}`:                      1,
		`audit_attempt_fates_total{fate="refused",port="50052"}`:                   4,
		`audit_attempt_fates_total{fate="closed by server",port="50052"}`:          1,
		`audit_herd_waves_total{expected="false",port="50052"}`:                    1,
		`audit_peers_retrying{port="50052"}`:                                       2,
		`audit_reconnect_storm_peers{port="50052"}`:                                1,
		`audit_peers_forgotten_total{port="50052"}`:                                1,
		`audit_capture_packets_received_total{iface="lo"}`:                         10,
		`audit_capture_packets_dropped_total{iface="lo"}`:                          1,
		`audit_capture_packets_interface_dropped_total{iface="lo"}`:                2,
		`audit_capture_packets_not_taken_total{iface="lo"}`:                        3,
	}
	for k, v := range got {
		if v == 0 {
			delete(got, k) // the series Watch made exist
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("samples (-want +got):\n%s", diff)
	}
	promtoolCheck(t, body)
}

// promtoolCheck runs `promtool check metrics` on an exposition: names,
// units, _total suffixes and HELP as Prometheus's conventions say.
func promtoolCheck(t *testing.T, body []byte) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool missing in CI: .ci/deps.sh installs Debian's prometheus")
		}
		t.Skip("SKIPPED, NOT RUN: promtool missing (apt-get install prometheus, or .ci/deps.sh)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

func TestListen(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	if _, err := Listen(addr, New()); err == nil || !strings.Contains(err.Error(), addr) {
		t.Errorf("Listen on %s, in use: %v; want an error naming it", addr, err)
	}
	srv, err := Listen("127.0.0.1:0", New())
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(srv.Close(), srv.Close()); err != nil {
		t.Errorf("Close twice: %v", err)
	}
}
