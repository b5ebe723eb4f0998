package tlsdec

import (
	"encoding/binary"
	"fmt"
)

// The handshake messages: reassembled from records, and the hellos parsed
// for the random, session id, version and suite that choose the keys.

// hsReader reads a direction's handshake messages across records: a
// message's 4-byte header, then its body, kept only for the messages read
// in the clear that are read at all (the hellos, TLS 1.2's
// NewSessionTicket).
type hsReader struct {
	hdr  [4]byte
	hdrN int
	left int // body bytes of the current message still to come
	typ  byte
	keep bool
	body []byte
}

// feed reads b; msg is called for each whole message. It returns why the
// messages cannot be read, or "".
func (r *hsReader) feed(b []byte, encrypted bool, msg func(typ byte, body []byte)) string {
	for len(b) > 0 {
		if r.hdrN < 4 {
			n := copy(r.hdr[r.hdrN:], b)
			r.hdrN, b = r.hdrN+n, b[n:]
			if r.hdrN < 4 {
				return ""
			}
			r.typ = r.hdr[0]
			r.left = int(r.hdr[1])<<16 | int(r.hdr[2])<<8 | int(r.hdr[3])
			r.keep = !encrypted && (r.typ == msgClientHello || r.typ == msgServerHello || r.typ == msgNewSessionTicket)
			if r.keep && r.left > maxHello {
				return fmt.Sprintf("a handshake message of type %d and %d bytes, over the %d read", r.typ, r.left, maxHello)
			}
			r.body = r.body[:0]
		}
		n := min(r.left, len(b))
		if r.keep {
			r.body = append(r.body, b[:n]...)
		}
		r.left, b = r.left-n, b[n:]
		if r.left > 0 {
			return ""
		}
		r.hdrN = 0
		if r.keep {
			msg(r.typ, r.body)
		} else {
			msg(r.typ, nil)
		}
	}
	return ""
}

// clientHello is what is read of a ClientHello.
type clientHello struct {
	random    [32]byte
	sessionID []byte
	ticket    []byte
}

// parseClientHello reads a ClientHello's random, session id and
// session ticket (RFC 5246 §7.4.1.2, RFC 5077 §3.2).
func parseClientHello(b []byte) (h clientHello, ok bool) {
	p := parser{b: b}
	p.skip(2) // legacy_version
	copy(h.random[:], p.next(32))
	h.sessionID = p.vector(1)
	p.vector(2) // cipher_suites
	p.vector(1) // compression_methods
	if !p.bad && len(p.b) == 0 {
		return h, true // no extensions
	}
	ok = p.extensions(func(typ uint16, body []byte) {
		if typ == extSessionTicket {
			h.ticket = body
		}
	})
	return h, ok
}

// parseServerHello reads a ServerHello's version (its supported_versions
// extension's, else its legacy version), random, session id and cipher
// suite (RFC 8446 §4.1.3).
func parseServerHello(b []byte) (version uint16, random [32]byte, sessionID []byte, suite uint16, ok bool) {
	p := parser{b: b}
	version = p.uint16()
	copy(random[:], p.next(32))
	sessionID = p.vector(1)
	suite = p.uint16()
	p.skip(1) // legacy_compression_method
	if !p.bad && len(p.b) == 0 {
		return version, random, sessionID, suite, true // no extensions
	}
	ok = p.extensions(func(typ uint16, body []byte) {
		if typ == extSupportedVersions && len(body) == 2 {
			version = binary.BigEndian.Uint16(body)
		}
	})
	return version, random, sessionID, suite, ok
}

// parser reads a handshake message's fields; a read past its end sets
// bad and returns nothing.
type parser struct {
	b   []byte
	bad bool
}

func (p *parser) next(n int) []byte {
	if p.bad || n > len(p.b) {
		p.bad, p.b = true, nil
		return nil
	}
	v := p.b[:n]
	p.b = p.b[n:]
	return v
}

func (p *parser) skip(n int) { p.next(n) }

func (p *parser) uint16() uint16 {
	if v := p.next(2); v != nil {
		return binary.BigEndian.Uint16(v)
	}
	return 0
}

// vector reads a vector with a length prefix of n bytes (1 or 2).
func (p *parser) vector(n int) []byte {
	l := p.next(n)
	if l == nil {
		return nil
	}
	size := int(l[0])
	if n == 2 {
		size = int(binary.BigEndian.Uint16(l))
	}
	return p.next(size)
}

// extensions reads the extensions block, which must end the message,
// handing each to f.
func (p *parser) extensions(f func(typ uint16, body []byte)) bool {
	block := p.vector(2)
	if p.bad || len(p.b) != 0 {
		return false
	}
	q := parser{b: block}
	for len(q.b) > 0 {
		typ := q.uint16()
		body := q.vector(2)
		if q.bad {
			return false
		}
		f(typ, body)
	}
	return true
}

func alertLevel(b byte) string {
	switch b {
	case 1:
		return "warning"
	case 2:
		return "fatal"
	}
	return fmt.Sprintf("level %d", b)
}

// alertNames are the alert descriptions of RFC 8446 §6 and RFC 5246 §7.2.
var alertNames = map[byte]string{
	0: "close_notify", 10: "unexpected_message", 20: "bad_record_mac", 21: "decryption_failed",
	22: "record_overflow", 30: "decompression_failure", 40: "handshake_failure", 41: "no_certificate",
	42: "bad_certificate", 43: "unsupported_certificate", 44: "certificate_revoked",
	45: "certificate_expired", 46: "certificate_unknown", 47: "illegal_parameter", 48: "unknown_ca",
	49: "access_denied", 50: "decode_error", 51: "decrypt_error", 60: "export_restriction",
	70: "protocol_version", 71: "insufficient_security", 80: "internal_error",
	86: "inappropriate_fallback", 90: "user_canceled", 100: "no_renegotiation",
	109: "missing_extension", 110: "unsupported_extension", 111: "certificate_unobtainable",
	112: "unrecognized_name", 113: "bad_certificate_status_response", 114: "bad_certificate_hash_value",
	115: "unknown_psk_identity", 116: "certificate_required", 120: "no_application_protocol",
}

func alertName(b byte) string {
	if n, ok := alertNames[b]; ok {
		return n
	}
	return fmt.Sprintf("alert %d", b)
}

// Extensions read (RFC 5077, RFC 8446 §4.2).
const (
	extSessionTicket     = 35
	extSupportedVersions = 43
)
