package h2_test

import (
	"encoding/json"
	"flag"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding/gzip"

	"github.com/backoff-audit/audit/h2"
	"github.com/backoff-audit/audit/internal/testutil"
)

var update = flag.Bool("update", false, "record testdata/h2 anew from real stacks and rewrite its golden reports")

// fixtures are the recordings committed under testdata/h2 (testdata/README.md,
// "HTTP/2 recordings"), each with the test that records it.
var fixtures = []struct {
	name   string
	record func(t *testing.T) recording
}{
	{"start-stop-gzip", func(t *testing.T) recording {
		rec, _, _, _ := recordStartStop(t, grpc.WithDefaultCallOptions(grpc.UseCompressor(gzip.Name)))
		return rec
	}},
	{"too-many-pings", recordTooManyPings},
}

func fixturePath(name string) string { return filepath.Join("..", "testdata", "h2", name+".jsonl") }

// TestFixtures decodes each committed recording and compares the reports
// and their diagnoses with its golden file. With -update it records anew
// first (new bytes, new times) and rewrites both files.
func TestFixtures(t *testing.T) {
	for _, f := range fixtures {
		t.Run(f.name, func(t *testing.T) {
			path := fixturePath(f.name)
			if *update {
				if err := f.record(t).write(path); err != nil {
					t.Fatal(err)
				}
			}
			rec, err := readRecording(path)
			if err != nil {
				t.Fatal(err)
			}
			reports := rec.decode()
			for i, r := range reports {
				wantClean(t, i, r)
			}
			got, err := json.MarshalIndent(struct {
				Reports  []*h2.Report `json:"reports"`
				Findings []h2.Finding `json:"findings"`
			}{reports, h2.Diagnose(reports, h2.DiagnoseOptions{})}, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			testutil.Golden(t, filepath.Join("..", "testdata", "h2", f.name+".golden.json"), append(got, '\n'), *update)
		})
	}
}
