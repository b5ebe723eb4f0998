package backoff

import "time"

// Fate is what the wire says became of one attempt (docs/spec.md §7).
type Fate string

const (
	// FateUnknown: the capture holds only SYNs, so nothing shows the fate.
	FateUnknown Fate = "unknown"
	// FateRefused: an RST answered the SYN.
	FateRefused Fate = "refused"
	// FateUnanswered: nothing answered; only retransmissions followed.
	FateUnanswered Fate = "unanswered"
	// FateClosed: the server accepted, then closed first (FIN or RST).
	FateClosed Fate = "closed by server"
	// FateAbandoned: the server accepted and the client closed first,
	// for example at its connect timeout.
	FateAbandoned Fate = "abandoned by client"
	// FateOpen: accepted and still open where the capture ends.
	FateOpen Fate = "open at end"
)

// Accepted reports whether the server accepted an attempt of this fate:
// Ending.Accepted means something only then.
func (f Fate) Accepted() bool { return f == FateClosed || f == FateAbandoned || f == FateOpen }

// Ended reports whether an attempt of this fate has an end on the wire:
// Ending.Duration means something only then.
func (f Fate) Ended() bool {
	return f == FateRefused || f == FateUnanswered || f == FateClosed || f == FateAbandoned
}

// Payload names the first bytes one side of a connection sent.
type Payload string

const (
	PayloadNone           Payload = ""
	PayloadTLSClientHello Payload = "tls client hello"
	PayloadTLSServerHello Payload = "tls server hello"
	PayloadH2Preface      Payload = "http/2 preface"
	PayloadH2Settings     Payload = "http/2 settings"
	PayloadOther          Payload = "data"
)

// Ending is the fate of one attempt with what the wire showed of it.
type Ending struct {
	Fate Fate
	// Accepted is the time from the SYN to the SYN-ACK; zero when the
	// server never accepted.
	Accepted time.Duration
	// Duration is the time from the SYN to the segment that ended the
	// attempt (the first FIN or RST of either side, or the last SYN when
	// unanswered); zero when the attempt is open or its fate unknown.
	Duration time.Duration
	// ClientSent and ServerSent name the first bytes each side sent.
	ClientSent, ServerSent Payload
	// Ready says the connection reached READY (docs/spec.md §7.2): the
	// server's first bytes were its HTTP/2 SETTINGS, or, inside TLS, the
	// server sent data after the client's second flight (the handshake
	// completed and data went both ways); ReadyAfter is the time from the
	// SYN to that segment.
	Ready      bool
	ReadyAfter time.Duration
	// RST says the segment that ended the attempt was an RST, not a FIN.
	RST bool
	// Decrypted says a key log decrypted the attempt's TLS (audit pcap
	// --keylog): Ready is then the server's SETTINGS read inside it, not
	// the guess from its flights. NotDecrypted is why a key log did not
	// (package tlsdec's reasons). Both are empty without a key log.
	Decrypted    bool
	NotDecrypted string
}

// ReportFate is the Fate a report writes: an empty one is unknown.
func (e Ending) ReportFate() Fate {
	if e.Fate == "" {
		return FateUnknown
	}
	return e.Fate
}

// Known reports whether p is one of the names above.
func (p Payload) Known() bool {
	switch p {
	case PayloadNone, PayloadTLSClientHello, PayloadTLSServerHello, PayloadH2Preface, PayloadH2Settings, PayloadOther:
		return true
	}
	return false
}
