package attempt

import (
	"time"

	"github.com/backoff-audit/audit/backoff"
)

// PayloadBytes is how many of a segment's first bytes PayloadOf needs to
// tell every kind apart: a live capture's snap length keeps at least that
// many behind the headers.
const PayloadBytes = 16

// PayloadOf names the first bytes b of what one side sent (docs/spec.md
// §7); b may be cut short by a snap length, and then names "data" what it
// cannot tell. fromServer says which side sent them: an HTTP/2 SETTINGS
// frame opens only the server's bytes, the client's start with the
// preface.
func PayloadOf(b []byte, fromServer bool) backoff.Payload {
	switch {
	case len(b) == 0:
		return backoff.PayloadNone
	// A TLS record: handshake (0x16), version 3.x, a 2-byte length, then
	// the handshake message's type.
	case len(b) >= 6 && b[0] == 0x16 && b[1] == 0x03 && b[5] == 1:
		return backoff.PayloadTLSClientHello
	case len(b) >= 6 && b[0] == 0x16 && b[1] == 0x03 && b[5] == 2:
		return backoff.PayloadTLSServerHello
	case len(b) >= len(h2Preface) && string(b[:len(h2Preface)]) == h2Preface:
		return backoff.PayloadH2Preface
	// A frame header: 24-bit length, type, flags, 31-bit stream id.
	// SETTINGS is type 4 on stream 0, with ACK (1) the only flag.
	case fromServer && len(b) >= 9 && b[3] == 4 && b[4]&^1 == 0 && b[5]&0x7f == 0 && b[6] == 0 && b[7] == 0 && b[8] == 0:
		return backoff.PayloadH2Settings
	}
	return backoff.PayloadOther
}

// h2Preface is how much of the HTTP/2 client connection preface
// ("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", RFC 9113 §3.4) PayloadOf compares.
const h2Preface = "PRI * HTTP/2.0"

// payloadCode is a Payload in a byte, for pointer-free records.
type payloadCode uint8

var payloadNames = [...]backoff.Payload{backoff.PayloadNone, backoff.PayloadTLSClientHello, backoff.PayloadTLSServerHello,
	backoff.PayloadH2Preface, backoff.PayloadH2Settings, backoff.PayloadOther}

// codeOf is p's code; any name not of payloadNames is data. It is read
// for every segment: one comparison, where a loop over the names took
// five.
func codeOf(p backoff.Payload) payloadCode {
	var c payloadCode
	switch len(p) {
	case 0:
		return 0
	case len(backoff.PayloadTLSClientHello): // as long as PayloadTLSServerHello
		c = 1
		if p[4] == backoff.PayloadTLSServerHello[4] {
			c = 2
		}
	case len(backoff.PayloadH2Preface):
		c = 3
	case len(backoff.PayloadH2Settings):
		c = 4
	default:
		return 5
	}
	if payloadNames[c] != p {
		return 5
	}
	return c
}

func (c payloadCode) payload() backoff.Payload {
	if int(c) < len(payloadNames) {
		return payloadNames[c]
	}
	return backoff.PayloadOther
}

// TCP flags of a Segment.
const (
	flagFIN = 0x01
	flagSYN = 0x02
	flagRST = 0x04
	flagACK = 0x10
)

// fateRec is what the segments of one attempt showed so far. It holds no
// pointers, in 32 bytes: a Tracker keeps one per attempt beside its
// attempts. Times are Unix nanoseconds (stamp.nanos).
type fateRec struct {
	acceptAt, endAt, readyAt int64
	serverISN                uint32
	state                    uint8 // fateAccepted | fateEnded | fateByServer | fateRST | fateReady
	client, server           payloadCode
	// flights counts the runs of segments with data from one side then
	// the other since the accept (at most maxFlights), the top bit saying
	// which side sent the last: a TLS handshake that completes and a first
	// answer from the server are four (docs/spec.md §7.2).
	flights uint8
}

const (
	fateAccepted = 1 << iota
	fateEnded
	fateByServer
	fateRST   // the segment that ended the attempt was an RST
	fateReady // the connection reached READY (at readyAt)
)

// Flights of data that show a connection READY inside TLS: the client's
// hello, the server's flight, the client's finish (and its first data),
// then the server's data.
const (
	readyFlights   = 4
	maxFlights     = 0x7f
	flightByServer = 0x80
)

// observe applies one segment of the attempt whose client ISN is isn, in
// time order: the rules of docs/spec.md §7, in one place for the file
// readers and the live auditor.
//
//   - A SYN-ACK from the server that acknowledges the SYN (ack = ISN+1)
//     accepts the attempt.
//   - Before that, an RST from the server that answers the SYN (no ACK
//     flag, or ack = ISN+1) refuses it.
//   - After it, the first FIN or RST of either side ends it: closed by the
//     server or abandoned by the client.
//   - A side's first bytes are those of its segment at its ISN+1, so that
//     a retransmitted or later segment never stands for them; the server's
//     ISN is its SYN-ACK's.
func (f *fateRec) observe(at stamp, fromClient bool, flags uint8, seq, ack, isn uint32, sent payloadCode) {
	if sent != 0 {
		switch {
		case fromClient && f.client == 0 && seq == isn+1:
			f.client = sent
		case !fromClient && f.server == 0 && f.state&fateAccepted != 0 && seq == f.serverISN+1:
			f.server = sent
		}
	}
	if f.state&fateEnded != 0 {
		return
	}
	if sent != 0 && f.state&fateAccepted != 0 {
		f.flight(at, fromClient)
	}
	accepted := f.state&fateAccepted != 0
	switch {
	case flags&(flagSYN|flagACK) == flagSYN|flagACK:
		if !fromClient && !accepted && ack == isn+1 {
			f.state |= fateAccepted
			f.acceptAt, f.serverISN = at.nanos(), seq
		}
	case flags&(flagFIN|flagRST) == 0:
	case accepted:
		f.state |= fateEnded
		f.endAt = at.nanos()
		if !fromClient {
			f.state |= fateByServer
		}
		if flags&flagRST != 0 {
			f.state |= fateRST
		}
	case !fromClient && flags&flagRST != 0 && (flags&flagACK == 0 || ack == isn+1):
		f.state |= fateEnded | fateByServer | fateRST
		f.endAt = at.nanos()
	}
}

// flight counts a segment with data after the accept, and marks the
// connection READY at the first data from the server that shows it:
// HTTP/2 SETTINGS as its first bytes (plaintext), or, behind a TLS
// ClientHello, the data that opens the fourth flight. A full TLS 1.2
// handshake reaches its fourth flight at the server's Finished, before
// any data; a key log (audit h2 --keylog) tells the two apart.
func (f *fateRec) flight(at stamp, fromClient bool) {
	var side uint8
	if !fromClient {
		side = flightByServer
	}
	if n := f.flights &^ flightByServer; n == 0 || f.flights&flightByServer != side {
		f.flights = min(n+1, maxFlights) | side
	}
	if fromClient || f.state&fateReady != 0 {
		return
	}
	if f.server == codeOf(backoff.PayloadH2Settings) ||
		f.client == codeOf(backoff.PayloadTLSClientHello) && f.flights&^flightByServer >= readyFlights {
		f.state |= fateReady
		f.readyAt = at.nanos()
	}
}

// merge adds to f what g read of the same attempt: the two hold segments
// read through different SYNs of it (a retransmission that came after the
// table of recent attempts lost the first). The earlier accept and end
// win.
func (f *fateRec) merge(g *fateRec) {
	switch {
	case g.state == 0 && g.client == 0 && g.server == 0:
		return
	case f.state == 0 && f.client == 0 && f.server == 0:
		*f = *g
		return
	}
	if g.state&fateAccepted != 0 && (f.state&fateAccepted == 0 || g.acceptAt < f.acceptAt) {
		f.state |= fateAccepted
		f.acceptAt, f.serverISN = g.acceptAt, g.serverISN
	}
	if g.state&fateEnded != 0 && (f.state&fateEnded == 0 || g.endAt < f.endAt) {
		f.state = f.state&^(fateByServer|fateRST) | fateEnded | g.state&(fateByServer|fateRST)
		f.endAt = g.endAt
	}
	if g.state&fateReady != 0 && (f.state&fateReady == 0 || g.readyAt < f.readyAt) {
		f.state |= fateReady
		f.readyAt = g.readyAt
	}
	if g.flights&^flightByServer > f.flights&^flightByServer {
		f.flights = g.flights
	}
	if f.client == 0 {
		f.client = g.client
	}
	if f.server == 0 {
		f.server = g.server
	}
}

// ending is the attempt's Ending: it started at start, and its last SYN
// came at last (Unix nanoseconds).
func (f *fateRec) ending(start stamp, last int64) backoff.Ending {
	from := start.nanos()
	e := backoff.Ending{ClientSent: f.client.payload(), ServerSent: f.server.payload()}
	accepted, ended := f.state&fateAccepted != 0, f.state&fateEnded != 0
	switch {
	case accepted && ended && f.state&fateByServer != 0:
		e.Fate = backoff.FateClosed
	case accepted && ended:
		e.Fate = backoff.FateAbandoned
	case accepted:
		e.Fate = backoff.FateOpen
	case ended:
		e.Fate = backoff.FateRefused
	default:
		e.Fate, e.Duration = backoff.FateUnanswered, time.Duration(last-from)
	}
	if accepted {
		e.Accepted = time.Duration(f.acceptAt - from)
	}
	if ended {
		e.Duration = time.Duration(f.endAt - from)
		e.RST = f.state&fateRST != 0
	}
	if f.state&fateReady != 0 {
		e.Ready, e.ReadyAfter = true, time.Duration(f.readyAt-from)
	}
	return e
}

// fateOf is the record an Ending was read from, for an attempt that comes
// back to a Tracker (AddAttempt) and may see more segments. The server's
// ISN is not in an Ending: such an attempt's server bytes, if not seen
// yet, stay unseen.
func fateOf(e backoff.Ending, start stamp) fateRec {
	f := fateRec{client: codeOf(e.ClientSent), server: codeOf(e.ServerSent)}
	from := start.nanos()
	if e.Fate.Accepted() {
		f.state |= fateAccepted
		f.acceptAt = from + int64(e.Accepted)
	}
	switch e.Fate {
	case backoff.FateClosed, backoff.FateRefused:
		f.state |= fateEnded | fateByServer
		f.endAt = from + int64(e.Duration)
	case backoff.FateAbandoned:
		f.state |= fateEnded
		f.endAt = from + int64(e.Duration)
	}
	if e.RST && f.state&fateEnded != 0 {
		f.state |= fateRST
	}
	if e.Ready {
		f.state |= fateReady
		f.readyAt = from + int64(e.ReadyAfter)
	}
	return f
}
