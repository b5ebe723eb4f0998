package auditrun

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/internal/testutil"
)

// TestJSONSchema holds every document `audit pcap` writes to the members
// programs read (testdata/schema/*.paths): a document may gain members,
// never lose or rename one. The files list the members of those documents
// as the tool wrote them before they had one builder each, and the
// members added since (-update rewrites them: check that its diff only
// adds).
func TestJSONSchema(t *testing.T) {
	ports := realFatesPorts(t)
	tests := []struct {
		golden string
		files  []string
		cfg    FilesConfig
	}{
		{golden: "audit-compound", files: []string{"../testdata/real-compound.pcap.gz"}, cfg: FilesConfig{Herd: true, Infer: true}},
		{golden: "record-run-control", files: []string{"../testdata/control-audit.pcap"}, cfg: FilesConfig{Infer: true}},
		{golden: "record-run", files: []string{"../testdata/real-grpc-go.pcap"}, cfg: FilesConfig{Herd: true, Infer: true, Record: "../testdata/real-grpc-go.record.jsonl"}},
	}
	for _, mode := range []string{"close", "hang", "refuse"} {
		port := ports[mode]
		tests = append(tests, struct {
			golden string
			files  []string
			cfg    FilesConfig
		}{golden: "audit-fates-" + mode, files: []string{"../testdata/real-fates.pcap"}, cfg: FilesConfig{Herd: true, Infer: true, Port: port, PortSet: true}})
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			tt.cfg.Policy, tt.cfg.JSON = backoff.DefaultPolicy(), true
			var out, errOut bytes.Buffer
			if _, err := AuditFiles(context.Background(), tt.files, tt.cfg, &out, &errOut); err != nil {
				t.Fatalf("%v\n%s", err, errOut.String())
			}
			testutil.RequirePaths(t, filepath.Join("testdata", "schema", tt.golden+".paths"), out.Bytes(), *update)
		})
	}
}
