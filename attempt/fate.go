package attempt

import (
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
