package flows_test

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/backoff-audit/audit/flows"
	"github.com/backoff-audit/audit/h2"
	"github.com/backoff-audit/audit/tlsdec"
)

// TestWriteJSONAsEncoder holds WriteJSON, which encodes the connections
// one at a time, to encoding/json's document of the whole report: every
// member set, every optional one left out, and no connection at all.
func TestWriteJSONAsEncoder(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tl := flows.Timeline{Conn: 0, Client: netip.MustParseAddrPort("10.0.0.2:40000"), Server: netip.MustParseAddrPort("10.0.0.1:50051"),
		Start: at, End: at.Add(time.Second), SYN: true, Ended: flows.EndedFIN,
		Streams: []flows.MethodCount{{Method: "/grpc.testing.ReconnectService/Start", Count: 1}},
		Pings:   []flows.Pings{{Dir: h2.ClientToServer, Count: 2, Acks: 2, Min: time.Second, Median: time.Second}},
		Next:    &flows.Next{After: "close", At: at.Add(time.Second), Conn: 1, Start: at.Add(2 * time.Second), Delay: time.Second}}
	tl2 := tl
	tl2.Conn, tl2.Next, tl2.Damaged = 1, nil, "bytes lost <here> & there"
	tests := []struct {
		name string
		rep  flows.Report
	}{
		{"every member", flows.Report{Files: []string{"a.pcap", "b.pcap"}, Connections: []flows.Timeline{tl, tl2},
			Findings: []h2.Finding{{Kind: h2.FindingReconnect, Conn: 0, Time: at, Text: "reconnect"}}, Retries: []flows.Retry{{}},
			Problems: 1, Warnings: []string{"cut short"}, KeyLog: &tlsdec.KeyLog{Name: "keys.log", Lines: 3, Entries: 2}, Ports: []uint16{50051}}},
		{"optional members left out", flows.Report{Files: []string{"a.pcap"}, Connections: []flows.Timeline{tl}, Findings: []h2.Finding{}}},
		{"no connection", flows.Report{Files: []string{"a.pcap"}, Connections: []flows.Timeline{}, Findings: []h2.Finding{}, Ports: []uint16{9}}},
		{"nil slices", flows.Report{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var want, got bytes.Buffer
			enc := json.NewEncoder(&want)
			enc.SetIndent("", "  ")
			if err := enc.Encode(&tt.rep); err != nil {
				t.Fatal(err)
			}
			if err := tt.rep.WriteJSON(&got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want.String(), got.String()); diff != "" {
				t.Errorf("WriteJSON (-want +got):\n%s", diff)
			}
		})
	}
}
