package session

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/backoff-audit/audit/backoff"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// recordSeeds are record files as `audit server --record` writes them: the
// documented example, every event kind and field, appended runs, and the
// damaged endings a reader meets (a cut last line, a blank line, CRLF).
func recordSeeds(t testing.TB) [][]byte {
	const doc = `{"event":"start","time":"2025-01-02T15:04:05.000000000Z","session":1,"peer":"127.0.0.1:40112","params":{"max_reconnect_backoff_ms":0,"policy":{"initial_backoff_ms":1000,"multiplier":1.6,"jitter":0.2,"max_backoff_ms":120000,"min_connect_timeout_ms":20000,"tolerance_ms":100}}}
{"event":"accept","time":"2025-01-02T15:04:05.210000000Z","session":1,"peer":"127.0.0.1:40114"}
{"event":"accept","time":"2025-01-02T15:04:06.190000000Z","session":1,"peer":"127.0.0.1:40116"}
{"event":"stop","time":"2025-01-02T15:04:07.000000000Z","session":1,"peer":"127.0.0.1:40112","end":{"cause":"stop","verdict":"passed","passed":true,"reason":"","attempts":2,"dropped":0,"chain":"127.0.0.1","chain_reason":"start peer","chain_attempts":2,"backoff_ms":[980],"foreign":[]}}
`
	t0 := time.Date(2025, 1, 2, 15, 4, 5, 0, time.UTC)
	var gen bytes.Buffer
	for _, e := range []RecordEvent{
		{Event: EventAccept, Time: t0, Peer: netip.MustParseAddrPort("[::1]:50000")}, // before any session
		{Event: EventStart, Time: t0, Session: 2, Peer: netip.MustParseAddrPort("[::1]:40000"),
			Params: &SessionParams{MaxReconnectBackoffMS: 2000, Policy: backoff.ReferencePolicy(2000)}},
		{Event: EventAccept, Time: t0.Add(time.Second + 7), Session: 2, Peer: netip.MustParseAddrPort("127.0.0.2:1")},
		{Event: EventAccept, Time: t0.Add(2 * time.Second), Session: 2, Peer: netip.MustParseAddrPort("[::1]:2"), Overflow: true},
		{Event: EventExpire, Time: t0.Add(15 * time.Minute), Session: 2, End: &SessionEnd{
			Cause: CauseTimeout, Verdict: backoff.Overflow, Reason: "too many attempts: 1 kept, 1 more dropped (max attempts 1)",
			Attempts: 1, Dropped: 1, VerifiedPeer: netip.MustParseAddr("::1"), VerifiedReason: VerifiedSolePeer,
			VerifiedAttempts: 1, BackoffMS: []int32{}, Foreign: []PeerCount{{Addr: netip.MustParseAddr("127.0.0.2"), Attempts: 1}},
		}},
		{Event: EventExpire, Time: t0.Add(16 * time.Minute), Session: 3, End: &SessionEnd{
			Cause: CauseClosed, Verdict: backoff.TooFew, Reason: "too few", VerifiedReason: VerifiedNone,
		}},
	} {
		if err := WriteRecordEvent(&gen, e); err != nil {
			t.Fatal(err)
		}
	}
	return [][]byte{
		[]byte(doc),
		gen.Bytes(),
		[]byte(doc + gen.String() + doc), // three runs appended
		[]byte(doc[:len(doc)-40]),        // cut inside the last line
		[]byte(strings.ReplaceAll(doc, "\n", "\r\n")),
		[]byte(strings.Replace(doc, "\n", "\n\n", 1)),
		[]byte(`{"event":"accept","time":"2025-01-02T16:04:05+01:00","session":0,"peer":"[::ffff:127.0.0.1]:9","new":[1]}` + "\n"),
		[]byte(`{"event":"stop","time":"2025-01-02T15:04:05Z","session":0,"end":{}}` + "\n"),
		{},
	}
}

// FuzzReadRecord feeds any bytes to ReadRecord. Whatever it accepts must be
// well formed and survive being written and read again unchanged, so a
// record that `audit live` or a cross-check reads is the record the server
// meant; whatever it rejects must name the line and where it starts, after
// returning every event before it; a torn last line must cost only itself;
// and the result must not depend on how reads are cut.
func FuzzReadRecord(f *testing.F) {
	for _, s := range recordSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(checkRecordFile)
}

// FuzzRecordFields reaches what byte mutation of JSON rarely does: any
// instant of years 0–9999 with any UTC offset, any policy the server could
// hold (durations in nanoseconds, written as the writer writes them), any
// peer text and session number, in otherwise well-formed lines.
func FuzzRecordFields(f *testing.F) {
	f.Add(uint16(2025), int64(86400), uint32(0), int16(0), int32(0), int64(time.Second), int64(120*time.Second), int64(100*time.Millisecond), 1.6, 0.2, "127.0.0.1:40112", 1)
	f.Add(uint16(2025), int64(0), uint32(999999999), int16(-90), int32(2000), int64(time.Second), int64(2*time.Second), int64(0), 1.6, 0.2, "[::1]:1", 7)
	f.Add(uint16(1970), int64(1), uint32(1), int16(14*60), int32(-1), int64(500*time.Millisecond), int64(time.Millisecond), int64(time.Hour), 1.0, 0.0, "[::ffff:10.0.0.1]:65535", 0)
	f.Fuzz(func(t *testing.T, year uint16, yearSec int64, nsec uint32, offMin int16, maxMS int32,
		base, capD, tol int64, mult, jitter float64, peer string, session int) {
		at := time.Date(int(year%10000), 1, 1, 0, 0, 0, 0, time.UTC).
			Add(time.Duration(yearSec%(365*86400))*time.Second + time.Duration(nsec%1e9))
		ts := at.In(time.FixedZone("", int(offMin%(24*60))*60)).Format(time.RFC3339Nano)
		sp := SessionParams{MaxReconnectBackoffMS: maxMS, Policy: backoff.Policy{
			BaseDelay: time.Duration(base), Multiplier: mult, Jitter: jitter, MaxDelay: time.Duration(capD),
			MinConnectTimeout: 20 * time.Second, Tolerance: time.Duration(tol),
		}}
		params, err := json.Marshal(sp)
		if err != nil {
			return // NaN or an infinity: JSON cannot hold it, and the server never has one
		}
		pj, _ := json.Marshal(peer)
		data := fmt.Sprintf(`{"event":"start","time":%q,"session":%d,"peer":%s,"params":%s}`+"\n", ts, session, pj, params)
		data += fmt.Sprintf(`{"event":"accept","time":%q,"session":%d,"peer":%s}`+"\n", ts, session, pj)
		checkRecordFile(t, []byte(data))
		// What was written is what is read: the instant and the policy.
		events, err := ReadRecord(strings.NewReader(data))
		if len(events) == 0 {
			return // e.g. a peer that is not ip:port
		}
		if got := events[0]; !got.Time.Equal(at) || *got.Params != sp {
			t.Fatalf("line %s\nread back as time %v, params %+v (err %v); want %v, %+v",
				data, got.Time, *got.Params, err, at, sp)
		}
	})
}

// checkRecordFile is the property of both fuzzers (see FuzzReadRecord).
func checkRecordFile(t *testing.T, data []byte) {
	events, err := ReadRecord(bytes.NewReader(data))
	if err != nil {
		// The failing line is the one after the last event, and the offset
		// is where it starts: just after the newline ending the last event.
		off := 0
		for range len(events) {
			off += bytes.IndexByte(data[off:], '\n') + 1
		}
		prefix := fmt.Sprintf("read record line %d at offset %d: ", len(events)+1, off)
		if !strings.HasPrefix(err.Error(), prefix) {
			t.Fatalf("error %q after %d events: want the prefix %q", err, len(events), prefix)
		}
	}
	for i, e := range events {
		if verr := e.validate(); verr != nil {
			t.Fatalf("event %d was returned but is invalid: %v", i+1, verr)
		}
	}
	// A torn last line costs that line only: the complete lines before it
	// read as the file cut after its last newline does, without error.
	last := bytes.LastIndexByte(data, '\n') + 1
	if torn := last < len(data); errors.Is(err, ErrTornLine) {
		if !torn {
			t.Fatalf("error %q, but the file ends with a newline", err)
		}
		whole, werr := ReadRecord(bytes.NewReader(data[:last]))
		if werr != nil || !sameEvents(events, whole) {
			t.Fatalf("torn line: %d events, but the complete lines alone give %d events, %v", len(events), len(whole), werr)
		}
	} else if err == nil && torn {
		t.Fatalf("no error, but the last line has no newline")
	}

	oneByte, err2 := ReadRecord(iotest.OneByteReader(bytes.NewReader(data)))
	if fmt.Sprint(err) != fmt.Sprint(err2) || len(oneByte) != len(events) {
		t.Fatalf("one-byte reads: %d events, %v; whole reads: %d events, %v", len(oneByte), err2, len(events), err)
	}
	// With a line bound small enough for fuzz input to pass, and lines
	// longer than bufio's buffer: the events are a prefix of the unbounded
	// read's, the refused line is longer than the bound, and neither
	// depends on how reads are cut.
	const smallBound, smallBuf = 200, 16
	bounded, berr := readRecord(bytes.NewReader(data), smallBound, smallBuf)
	if len(bounded) > len(events) || !sameEvents(bounded, events[:len(bounded)]) {
		t.Fatalf("bounded read: %d events, not a prefix of the %d of an unbounded read", len(bounded), len(events))
	}
	if berr != nil && strings.Contains(berr.Error(), "line longer than") {
		off := 0
		for range len(bounded) {
			off += bytes.IndexByte(data[off:], '\n') + 1
		}
		n := bytes.IndexByte(data[off:], '\n')
		if n < 0 {
			n = len(data) - off
		}
		if n <= smallBound {
			t.Fatalf("bounded read: %q for a line of %d bytes", berr, n)
		}
	} else if fmt.Sprint(berr) != fmt.Sprint(err) || len(bounded) != len(events) {
		t.Fatalf("bounded read: %d events, %v; unbounded: %d events, %v", len(bounded), berr, len(events), err)
	}
	bounded1, berr1 := readRecord(iotest.OneByteReader(bytes.NewReader(data)), smallBound, smallBuf)
	if fmt.Sprint(berr) != fmt.Sprint(berr1) || len(bounded1) != len(bounded) {
		t.Fatalf("bounded one-byte reads: %d events, %v; whole reads: %d events, %v", len(bounded1), berr1, len(bounded), berr)
	}

	var w1 bytes.Buffer
	for i, e := range events {
		if err := WriteRecordEvent(&w1, e); err != nil {
			t.Fatalf("write event %d that was read: %v", i+1, err)
		}
	}
	back, err := ReadRecord(bytes.NewReader(w1.Bytes()))
	if err != nil {
		t.Fatalf("the writer's own output does not read back: %v\n%s", err, w1.Bytes())
	}
	if !sameEvents(events, back) { // cmp.Diff only to explain: it is slow for a fuzz loop
		t.Fatalf("read, write, read changed the events (-first +second):\n%s", cmp.Diff(events, back, recordCmp))
	}
	var w2 bytes.Buffer
	for _, e := range back {
		WriteRecordEvent(&w2, e)
	}
	if !bytes.Equal(w1.Bytes(), w2.Bytes()) {
		t.Fatalf("writing is not stable:\n%s\n%s", w1.Bytes(), w2.Bytes())
	}
}

// sameEvents is recordCmp's equality, written out.
func sameEvents(a, b []RecordEvent) bool {
	unmap := func(ap netip.AddrPort) netip.AddrPort { return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()) }
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Event != y.Event || !x.Time.Equal(y.Time) || x.Session != y.Session || unmap(x.Peer) != unmap(y.Peer) ||
			x.Overflow != y.Overflow || (x.Params == nil) != (y.Params == nil) || (x.End == nil) != (y.End == nil) {
			return false
		}
		if x.Params != nil && *x.Params != *y.Params {
			return false
		}
		if x.End != nil {
			ex, ey := *x.End, *y.End
			if !slices.Equal(ex.BackoffMS, ey.BackoffMS) || !slices.Equal(ex.Foreign, ey.Foreign) {
				return false
			}
			ex.BackoffMS, ey.BackoffMS, ex.Foreign, ey.Foreign = nil, nil, nil, nil
			if !reflect.DeepEqual(ex, ey) {
				return false
			}
		}
	}
	return true
}

// recordCmp compares events as the record file means them: instants, and
// addresses with IPv4-mapped IPv6 written as IPv4; an absent list is written
// as [] on purpose.
var recordCmp = cmp.Options{
	cmpopts.EquateEmpty(),
	cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) }),
	cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
	cmp.Comparer(func(a, b netip.AddrPort) bool {
		return netip.AddrPortFrom(a.Addr().Unmap(), a.Port()) == netip.AddrPortFrom(b.Addr().Unmap(), b.Port())
	}),
}
