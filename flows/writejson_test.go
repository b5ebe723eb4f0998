package flows_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/backoff-audit/audit/flows"
	"github.com/backoff-audit/audit/h2"
)

// TestWriteJSONAsEncoder holds WriteJSON, which builds and encodes the
// connections one at a time, to encoding/json's document of the whole
// report: reports of real captures with every member set (GOAWAYs, PINGs,
// next connections, retries checked against a policy, a key log), every
// optional one left out, and no connection at all.
func TestWriteJSONAsEncoder(t *testing.T) {
	t.Chdir("..")
	policy := &h2.RetryPolicy{MaxAttempts: 3, InitialBackoff: 100e6, MaxBackoff: 1e9, BackoffMultiplier: 2}
	tests := []struct {
		name  string
		files []string
		opt   flows.AuditOptions
	}{
		{"max age", []string{maxAgeCapture}, flows.AuditOptions{}},
		{"keepalive", []string{"testdata/h2/keepalive-too-many-pings.pcap"}, flows.AuditOptions{}},
		{"retries", []string{"testdata/h2/retry-unavailable.pcap"}, flows.AuditOptions{Retry: policy}},
		{"key log", []string{tlsCapture}, flows.AuditOptions{KeyLog: tlsKeylog}},
		{"no connection", []string{maxAgeCapture}, flows.AuditOptions{Ports: []uint{9}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opt.Format = "json"
			rep, err := flows.Audit(tt.files, tt.opt)
			if err != nil {
				t.Fatal(err)
			}
			sameAsEncoder(t, rep)
		})
	}
	t.Run("zero", func(t *testing.T) { sameAsEncoder(t, &flows.Report{}) })
}

func sameAsEncoder(t *testing.T, rep *flows.Report) {
	t.Helper()
	var want, got bytes.Buffer
	enc := json.NewEncoder(&want)
	enc.SetIndent("", "  ")
	if err := enc.Encode(rep); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteJSON(&got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want.String(), got.String()); diff != "" {
		t.Errorf("WriteJSON (-want +got):\n%s", diff)
	}
}
