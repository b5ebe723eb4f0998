package attempt

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/backoff-audit/audit/internal/field"
	"github.com/backoff-audit/audit/internal/text"
)

// PortTracker keeps one Tracker per destination port, for reading a capture
// before the retry port is known. Its trackers group their SYNs when they
// are read (see push): Add's answer is not wanted here.
type PortTracker struct {
	ports map[uint16]*Tracker
	// last is the tracker of the port the last SYN went to, most often
	// the next one's too.
	last       *Tracker
	port       uint16
	fatesKnown bool
}

// NewPortTracker returns an empty PortTracker.
func NewPortTracker() *PortTracker { return &PortTracker{ports: make(map[uint16]*Tracker)} }

// Add records s with the other SYNs to its destination port.
func (pt *PortTracker) Add(s SYN) {
	port := s.Dst.Port()
	if pt.last == nil || pt.port != port {
		t := pt.ports[port]
		if t == nil {
			t = NewTracker()
			t.fatesKnown = pt.fatesKnown
			pt.ports[port] = t
		}
		pt.last, pt.port = t, port
	}
	pt.last.push(s)
}

// AddSegment records s with the attempts of the port it goes to or comes
// from: the tracker of its destination port, or of its source port (a
// segment from the server), or both when SYNs went to both. A segment of
// no port a SYN went to is dropped. It does not keep s.
func (pt *PortTracker) AddSegment(s *Segment) {
	if len(pt.ports) == 1 { // the port is known: no lookup
		if p := s.Dst.Port(); p == pt.port || s.Src.Port() == pt.port {
			pt.last.AddSegment(s)
		}
		return
	}
	if t := pt.ports[s.Dst.Port()]; t != nil {
		t.AddSegment(s)
	}
	if s.Src.Port() != s.Dst.Port() {
		if t := pt.ports[s.Src.Port()]; t != nil {
			t.AddSegment(s)
		}
	}
}

// AddSegmentView records the segment v describes, as AddSegment does.
func (pt *PortTracker) AddSegmentView(v *SegmentView) {
	if len(pt.ports) == 1 { // the port is known: no lookup
		if v.DstPort == pt.port || v.SrcPort == pt.port {
			pt.last.AddSegmentView(v)
		}
		return
	}
	if t := pt.ports[v.DstPort]; t != nil {
		t.AddSegmentView(v)
	}
	if v.SrcPort != v.DstPort {
		if t := pt.ports[v.SrcPort]; t != nil {
			t.AddSegmentView(v)
		}
	}
}

// SetFatesKnown sets Tracker.SetFatesKnown for every port's tracker.
func (pt *PortTracker) SetFatesKnown(known bool) {
	pt.fatesKnown = known
	for _, t := range pt.ports {
		t.SetFatesKnown(known)
	}
}

// Tracker returns the tracker of port; an empty one when no SYN went there.
func (pt *PortTracker) Tracker(port uint16) *Tracker {
	if t := pt.ports[port]; t != nil {
		return t
	}
	t := NewTracker()
	t.fatesKnown = pt.fatesKnown
	return t
}

// PortCount is how many SYNs went to one port.
type PortCount struct {
	Port uint16 `json:"port"`
	SYNs int    `json:"syns"`
}

// Ports returns the destination ports seen, most SYNs first.
func (pt *PortTracker) Ports() []PortCount {
	pcs := make([]PortCount, 0, len(pt.ports))
	for p, t := range pt.ports {
		pcs = append(pcs, PortCount{Port: p, SYNs: t.SYNs()})
	}
	slices.SortFunc(pcs, func(a, b PortCount) int {
		return cmp.Or(cmp.Compare(b.SYNs, a.SYNs), cmp.Compare(a.Port, b.Port))
	})
	return pcs
}

// OnlyPort returns the port when every SYN went to one port, and otherwise
// an error that lists the candidate ports with their SYN counts: a
// field.Error of Port, as the configurations that give the retry port
// (capture.Options, auditrun.FilesConfig) name it.
func (pt *PortTracker) OnlyPort() (uint16, error) {
	pcs := pt.Ports()
	switch len(pcs) {
	case 0:
		return 0, errors.New("no TCP SYN in the capture: nothing to audit")
	case 1:
		return pcs[0].Port, nil
	}
	list := make([]string, len(pcs))
	for i, pc := range pcs {
		list[i] = fmt.Sprintf("%d (%s)", pc.Port, text.Plural(pc.SYNs, "SYN"))
	}
	return 0, field.Errorf("Port", nil, "the capture holds SYNs to %d ports, choose the retry port: %s",
		len(pcs), strings.Join(list, ", "))
}

// UnmapPort returns ap with an IPv4-mapped address unmapped.
func UnmapPort(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}
