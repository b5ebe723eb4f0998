package attempt

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// CaptureInfo describes the input of a report.
type CaptureInfo struct {
	Packets     uint64            `json:"packets"`
	SYNs        uint64            `json:"syns"`
	Attempts    int               `json:"attempts"`
	Retransmits int               `json:"retransmits"`
	Skipped     map[string]uint64 `json:"skipped"`
	Files       []FileInfo        `json:"files"`
	// SYNOnly says the capture holds no TCP segment but SYNs (made with a
	// SYN filter, as older `audit live --write` files were): nothing shows
	// the attempts' fates, which are "unknown" (docs/spec.md §7).
	SYNOnly bool `json:"syn_only,omitempty"`
}

// FileInfo describes what reading one input file found; capture.ReadFile
// returns it.
type FileInfo struct {
	Path string `json:"path"`
	// Format is "pcap", "pcap (ns)" or "pcapng", with " gzip" appended
	// when the file was compressed.
	Format  string `json:"format"`
	Bytes   int64  `json:"bytes"`   // bytes of capture data read (decompressed)
	Packets uint64 `json:"packets"` // packet records seen
	SYNs    uint64 `json:"syns"`    // SYNs to the port read
	// Skipped counts frames and blocks that could not be examined, by
	// reason: a capture.Decoder skip reason, "link type N", or a record problem.
	Skipped map[string]uint64 `json:"skipped"`
	// First is the time of the file's first packet record, zero when it
	// has none: where the capture began.
	First time.Time `json:"-"`
	// Truncated is set when the file ends inside a record or block: what
	// came before it was analysed.
	Truncated bool `json:"truncated"`
	// OtherTCP counts the TCP segments that are not SYNs, of any port:
	// none in a capture made with a SYN filter (see CaptureInfo.SYNOnly).
	OtherTCP uint64 `json:"-"`
	// Warnings name the file and the byte offset of each problem that did
	// not stop the read. Offsets in a gzip file are into its decompressed
	// data.
	Warnings []string `json:"warnings"`
}

// MarshalJSON writes Skipped and Warnings as {} and [] when they are
// empty, never null or absent: a consumer reads every file's members the
// same way, without checking for them first.
func (f FileInfo) MarshalJSON() ([]byte, error) {
	type plain FileInfo // without this method
	if f.Skipped == nil {
		f.Skipped = map[string]uint64{}
	}
	if f.Warnings == nil {
		f.Warnings = []string{}
	}
	return json.Marshal(plain(f))
}

// Start is when the capture began: the earliest of its files' first
// packets, zero when none had one.
func (c CaptureInfo) Start() time.Time {
	var t time.Time
	for _, f := range c.Files {
		if !f.First.IsZero() && (t.IsZero() || f.First.Before(t)) {
			t = f.First
		}
	}
	return t
}

// SkippedLines returns one warning line per skip reason, sorted by reason.
func (c CaptureInfo) SkippedLines() []string {
	reasons := slices.Sorted(maps.Keys(c.Skipped))
	lines := make([]string, len(reasons))
	for i, k := range reasons {
		lines[i] = fmt.Sprintf("skipped %d packets: %s", c.Skipped[k], k)
	}
	return lines
}

// Warnings returns every warning of the capture for a person: each file's
// warnings (which name the file, as the reader writes them) and, when the
// reader gave none for a truncated file, a line saying so; then one line per
// skip reason.
func (c CaptureInfo) Warnings() []string {
	var out []string
	for _, f := range c.Files {
		if f.Truncated && len(f.Warnings) == 0 {
			out = append(out, fmt.Sprintf("%s: truncated after %d packets", f.Path, f.Packets))
		}
		for _, w := range f.Warnings {
			out = append(out, strings.TrimSpace(w))
		}
	}
	return append(out, c.SkippedLines()...)
}

// LiveStats are libpcap's counters since a live capture opened.
type LiveStats struct {
	// Received counts packets that passed the filter (pcap_stats ps_recv).
	// On a loopback interface (lo) the kernel's capture sees each packet
	// twice, leaving and arriving, and libpcap drops the leaving copy only
	// after the ring: there Received and Dropped count two per SYN, while
	// a report's SYNs count one. The filter cannot keep the leaving copy
	// out: libpcap 1.10 runs a new filter in userland on the first packet
	// after it is set, where "inbound" matches nothing, so the capture's
	// first SYN would be lost (libpcap bug reports #1254 and #1482 on GitHub).
	Received uint64 `json:"received"`
	// Dropped counts packets the kernel dropped because the capture buffer
	// was full (ps_drop): SYNs the report cannot see.
	Dropped uint64 `json:"dropped"`
	// IfDropped counts packets the interface or its driver dropped
	// (ps_ifdrop).
	IfDropped uint64 `json:"if_dropped"`
}

// Lost is every packet the capture is known to have missed.
func (s LiveStats) Lost() uint64 { return s.Dropped + s.IfDropped }
