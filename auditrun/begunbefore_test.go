package auditrun

import (
	"encoding/json"
	"strings"
	"testing"
)

// A chain whose first interval is late, its first attempt within that
// interval's window of the capture's first packet, may have begun before
// the capture: one file of a rotated set read alone says so; the whole
// set, and a chain late further from the capture's start, do not.
func TestBegunBeforeCapture(t *testing.T) {
	const hint = "the chain may have begun before the capture"
	tests := []struct {
		name  string
		files []string
		want  bool
	}{
		{"the second file of a rotated set alone", []string{"rotated.pcap1"}, true},
		{"the third file alone", []string{"rotated.pcap2"}, true},
		{"the whole set", []string{"rotated.pcap", "rotated.pcap1", "rotated.pcap2"}, false},
		{"the first file: its intervals are not late", []string{"rotated.pcap"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var files []string
			for _, f := range tt.files {
				files = append(files, fixture(f))
			}
			text := auditFiles(t, FilesConfig{}, files...).stdout
			if got := strings.Contains(text, hint); got != tt.want {
				t.Errorf("text says %q: %v, want %v:\n%s", hint, got, tt.want, text)
			}
			var doc struct {
				Peers []struct {
					BegunBefore bool `json:"may_have_begun_before_capture"`
					Intervals   []struct {
						Outcome string `json:"outcome"`
					} `json:"intervals"`
				} `json:"peers"`
			}
			if err := json.Unmarshal([]byte(auditFiles(t, FilesConfig{JSON: true}, files...).stdout), &doc); err != nil {
				t.Fatal(err)
			}
			if len(doc.Peers) != 1 || doc.Peers[0].BegunBefore != tt.want {
				t.Fatalf("peers %+v: want one, may_have_begun_before_capture %v", doc.Peers, tt.want)
			}
			if tt.want && doc.Peers[0].Intervals[0].Outcome != "late" {
				t.Errorf("interval 1 is %q: the hint is for a late first interval", doc.Peers[0].Intervals[0].Outcome)
			}
		})
	}
}
