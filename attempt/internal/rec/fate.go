package rec

import (
	"time"

	"github.com/backoff-audit/audit/backoff"
)

// Code is a Payload in a byte, for pointer-free records.
type Code uint8

var codeNames = [...]backoff.Payload{backoff.PayloadNone, backoff.PayloadTLSClientHello, backoff.PayloadTLSServerHello,
	backoff.PayloadH2Preface, backoff.PayloadH2Settings, backoff.PayloadOther}

// CodeOf is p's code; any name not of codeNames is data. It is read
// for every segment: one comparison, where a loop over the names took
// five.
func CodeOf(p backoff.Payload) Code {
	var c Code
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
	if codeNames[c] != p {
		return 5
	}
	return c
}

func (c Code) Payload() backoff.Payload {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return backoff.PayloadOther
}

// TCP flags of a Segment.
const (
	FlagFIN = 0x01
	FlagSYN = 0x02
	FlagRST = 0x04
	FlagACK = 0x10
)

// Fate is what the segments of one attempt showed so far. It holds no
// pointers, in 32 bytes: a Tracker keeps one per attempt beside its
// attempts. Times are Unix nanoseconds (Stamp.Nanos).
type Fate struct {
	acceptAt, endAt, readyAt int64
	serverISN                uint32
	state                    uint8 // fateAccepted | fateEnded | fateByServer | fateRST | fateReady
	client, server           Code
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
func (f *Fate) Observe(at Stamp, fromClient bool, flags uint8, seq, ack, isn uint32, sent Code) {
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
	case flags&(FlagSYN|FlagACK) == FlagSYN|FlagACK:
		if !fromClient && !accepted && ack == isn+1 {
			f.state |= fateAccepted
			f.acceptAt, f.serverISN = at.Nanos(), seq
		}
	case flags&(FlagFIN|FlagRST) == 0:
	case accepted:
		f.state |= fateEnded
		f.endAt = at.Nanos()
		if !fromClient {
			f.state |= fateByServer
		}
		if flags&FlagRST != 0 {
			f.state |= fateRST
		}
	case !fromClient && flags&FlagRST != 0 && (flags&FlagACK == 0 || ack == isn+1):
		f.state |= fateEnded | fateByServer | fateRST
		f.endAt = at.Nanos()
	}
}

// flight counts a segment with data after the accept, and marks the
// connection READY at the first data from the server that shows it:
// HTTP/2 SETTINGS as its first bytes (plaintext), or, behind a TLS
// ClientHello, the data that opens the fourth flight. A full TLS 1.2
// handshake reaches its fourth flight at the server's Finished, before
// any data; a key log (audit h2 --keylog) tells the two apart.
func (f *Fate) flight(at Stamp, fromClient bool) {
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
	if f.server == CodeOf(backoff.PayloadH2Settings) ||
		f.client == CodeOf(backoff.PayloadTLSClientHello) && f.flights&^flightByServer >= readyFlights {
		f.state |= fateReady
		f.readyAt = at.Nanos()
	}
}

// merge adds to f what g read of the same attempt: the two hold segments
// read through different SYNs of it (a retransmission that came after the
// table of recent attempts lost the first). The earlier accept and end
// win.
func (f *Fate) Merge(g *Fate) {
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
func (f *Fate) Ending(start Stamp, last int64) backoff.Ending {
	from := start.Nanos()
	e := backoff.Ending{ClientSent: f.client.Payload(), ServerSent: f.server.Payload()}
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

// FateOf is the record an Ending was read from, for an attempt that comes
// back to a Tracker (AddAttempt) and may see more segments. The server's
// ISN is not in an Ending: such an attempt's server bytes, if not seen
// yet, stay unseen.
func FateOf(e backoff.Ending, start Stamp) Fate {
	f := Fate{client: CodeOf(e.ClientSent), server: CodeOf(e.ServerSent)}
	from := start.Nanos()
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

// Accepted reports whether a SYN-ACK accepted the attempt.
func (f *Fate) Accepted() bool { return f.state&fateAccepted != 0 }

// ClientSent is what the client's first bytes were.
func (f *Fate) ClientSent() backoff.Payload { return f.client.Payload() }

// LookBack bounds how many earlier attempts of a tuple a segment's
// sequence numbers are checked against: a tuple reused within one
// attempt's life is rare, and a flood of attempts on one tuple must not
// make matching quadratic.
const LookBack = 4

// Names reports whether a segment's sequence numbers name the attempt of
// client ISN isn among the attempts of its tuple: a SYN-ACK or RST from
// the server that acknowledges the SYN, or the client's first bytes.
func Names(fromClient bool, flags uint8, seq, ack, isn uint32, sent Code) bool {
	answers := !fromClient && flags&FlagACK != 0 && flags&(FlagSYN|FlagRST) != 0 && ack == isn+1
	return answers || fromClient && sent != 0 && seq == isn+1
}
