package auditrun

import (
	"sync"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/session"
)

// liveItem is one thing for the auditor: a SYN, a segment that tells an
// attempt's fate, a server event, a packet the decoder skipped (text is
// the reason), or a warning of the record follower (text is the warning).
// A SYN or a segment is held by value: the capture queues one per packet,
// and a pointer would be an allocation each. A segment is held in syn (its
// time, addresses and sequence number) and ack, flags and sent.
type liveItem struct {
	kind  itemKind
	flags uint8
	ack   uint32
	syn   attempt.SYN
	sent  backoff.Payload
	event *session.RecordEvent
	text  string
}

// segment is the segment item it holds.
func (it *liveItem) segment() attempt.Segment {
	return attempt.Segment{Time: it.syn.Time, Src: it.syn.Src, Dst: it.syn.Dst, Seq: it.syn.Seq,
		Ack: it.ack, Flags: it.flags, Sent: it.sent}
}

type itemKind uint8

const (
	itemSYN itemKind = iota
	itemSegment
	itemEvent
	itemSkip
	itemWarning
)

// liveQueue hands items from the capture, the server and the record tailer
// to the auditor without ever blocking them: the server's accept loop must
// not wait on the auditor.
type liveQueue struct {
	mu      sync.Mutex
	items   []liveItem
	packets int    // packet items in items
	lost    uint64 // packets not queued: maxQueued were
	signal  chan struct{}
}

func newLiveQueue() *liveQueue { return &liveQueue{signal: make(chan struct{}, 1)} }

func (q *liveQueue) push(it liveItem) {
	q.mu.Lock()
	switch {
	case it.kind == itemEvent || it.kind == itemWarning:
		q.items = append(q.items, it)
	case q.packets >= maxQueued:
		q.lost++
	default:
		q.items = append(q.items, it)
		q.packets++
	}
	q.mu.Unlock()
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

func (q *liveQueue) pushSYN(s attempt.SYN) { q.push(liveItem{kind: itemSYN, syn: s}) }

func (q *liveQueue) pushSegment(v *attempt.SegmentView) {
	s := v.Segment()
	q.push(liveItem{kind: itemSegment, syn: attempt.SYN{Time: s.Time, Src: s.Src, Dst: s.Dst, Seq: s.Seq},
		ack: s.Ack, flags: s.Flags, sent: s.Sent})
}

func (q *liveQueue) pushEvent(e session.RecordEvent) { q.push(liveItem{kind: itemEvent, event: &e}) }

func (q *liveQueue) pushSkip(reason string) { q.push(liveItem{kind: itemSkip, text: reason}) }

func (q *liveQueue) pushWarning(msg string) { q.push(liveItem{kind: itemWarning, text: msg}) }

// take returns the items queued, and queues the next ones in buf's array.
func (q *liveQueue) take(buf []liveItem) (items []liveItem) {
	q.mu.Lock()
	items, q.items, q.packets = q.items, buf[:0], 0
	q.mu.Unlock()
	return items
}

// dropped counts the packets that were not queued.
func (q *liveQueue) dropped() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.lost
}
