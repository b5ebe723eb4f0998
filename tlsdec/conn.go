package tlsdec

import (
	"bytes"
	"crypto/cipher"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"time"
)

// Direction is the way bytes flow on a connection; its values are
// h2.Direction's.
type Direction uint8

const (
	// ClientToServer is the bytes the client sent.
	ClientToServer Direction = iota
	// ServerToClient is the bytes the server sent.
	ServerToClient
)

func (d Direction) sender() string {
	if d == ClientToServer {
		return "client"
	}
	return "server"
}

// Why a connection, or part of it, was not decoded: Status.Why.
const (
	// WhyNoKey: the key log holds no secret for the connection's
	// ClientHello random (or not the one a phase needs).
	WhyNoKey = "no key"
	// WhyUnsupportedSuite: the suite is not an AEAD one (AES-GCM,
	// ChaCha20-Poly1305): CBC, CCM, NULL.
	WhyUnsupportedSuite = "unsupported suite"
	// WhyUnsupportedVersion: not TLS 1.2 or 1.3.
	WhyUnsupportedVersion = "unsupported version"
	// WhyEarlyData: the client sent 0-RTT data, which is not decoded.
	WhyEarlyData = "unsupported: 0-RTT early data"
	// WhyDamagedRecord: a record is malformed, cut by the end of the
	// connection, lost in part from the capture, or fails to authenticate
	// after others did.
	WhyDamagedRecord = "damaged record"
	// WhyWrongKey: the key log has a secret for the connection, and the
	// first record it should open does not authenticate under it.
	WhyWrongKey = "the key log's secret does not decrypt it"
	// WhyNoHandshake: the capture holds no ClientHello for the connection
	// (it joined it mid-stream, or lost its start).
	WhyNoHandshake = "handshake not captured"
	// WhyNoServerHello: the server answered the ClientHello with no
	// ServerHello (it closed, or sent an alert): nothing was encrypted.
	WhyNoServerHello = "no ServerHello"
)

// Record layer bounds (RFC 8446 §5.2, RFC 5246 §6.2.3): the longest
// record body any version allows, and the most handshake bytes kept of a
// ClientHello or ServerHello, the only messages read whole.
const (
	maxRecord    = 1<<14 + 2048
	maxHello     = 1 << 17
	recordHeader = 5
	tagLen       = 16
)

// Record content types.
const (
	typeChangeCipherSpec = 20
	typeAlert            = 21
	typeHandshake        = 22
	typeApplicationData  = 23
	typeHeartbeat        = 24
)

// Handshake message types (RFC 8446 §4).
const (
	msgClientHello      = 1
	msgServerHello      = 2
	msgNewSessionTicket = 4
	msgFinished         = 20
	msgKeyUpdate        = 24
)

// helloRetryRandom is the ServerHello random of a HelloRetryRequest, the
// SHA-256 of "HelloRetryRequest" (RFC 8446 §4.1.3).
var helloRetryRandom = sha256.Sum256([]byte("HelloRetryRequest"))

// Alert is a TLS alert one side sent.
type Alert struct {
	From        string `json:"from"`
	Level       string `json:"level"`
	Description string `json:"description"`
	// Encrypted is set when the alert was read by decrypting its record.
	Encrypted bool `json:"encrypted,omitempty"`
}

// maxAlerts bounds the alerts a Status keeps.
const maxAlerts = 8

// Status is what decoding a connection found: its version and suite, and
// whether its records were decrypted, or why not.
type Status struct {
	Version string `json:"version,omitempty"`
	Suite   string `json:"suite,omitempty"`
	// ClientRandom is the ClientHello's random, in hex, as the key log
	// spells it: the line a connection's secrets are looked up by.
	ClientRandom string `json:"client_random,omitempty"`
	// HelloRetry is set when the server asked for a second ClientHello.
	HelloRetry bool `json:"hello_retry,omitempty"`
	// Decoded is set once a record decrypted under the key log's secrets.
	Decoded bool `json:"decoded"`
	// Why is the first reason part of the connection was not decoded (the
	// Why* constants), Detail says which record or which line; empty when
	// every record was. With Decoded, decoding stopped partway.
	Why    string `json:"why_not,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Records counts each side's records; Decrypted those decrypted.
	ClientRecords int `json:"client_records"`
	ServerRecords int `json:"server_records"`
	Decrypted     int `json:"decrypted_records"`
	// ClientData and ServerData count the application bytes decrypted.
	ClientData int64 `json:"client_data"`
	ServerData int64 `json:"server_data"`
	// KeyUpdates counts the TLS 1.3 key updates followed.
	KeyUpdates int     `json:"key_updates,omitempty"`
	Alerts     []Alert `json:"alerts,omitempty"`
}

// Options configure a Conn.
type Options struct {
	// Keys is the key log the connection's secrets are looked up in.
	Keys *KeyLog
	// Data, when set, is handed each decrypted record's application data,
	// in order per direction, as the Feed that completed the record; b is
	// valid only during the call.
	Data func(d Direction, t time.Time, b []byte)
}

// Conn decrypts one TCP connection's TLS. Feed it each direction's bytes
// in order, interleaved as captured (a side's encrypted records can only be
// read after the other side's hello that set their keys); Gap where the
// capture lost bytes; End when the connection ends. Its memory is bounded:
// per direction one record (when a record spans Feeds) and one hello
// message, and one record's plaintext. A Conn is not safe for concurrent
// use.
type Conn struct {
	keys *KeyLog
	data func(Direction, time.Time, []byte)
	st   Status

	halves [2]half
	// random is the ClientHello's random, once one was read;
	// serverRandom the ServerHello's.
	random, serverRandom [32]byte
	haveRandom           bool
	// sessionID and ticket are the ClientHello's (TLS 1.2 resumption);
	// master the TLS 1.2 master secret in use.
	sessionID, ticket []byte
	master            []byte
	version           uint16 // the ServerHello's, 0 before it
	suite             *suite
	secrets           *Secrets
	// plain is the plaintext of the record being decrypted.
	plain []byte
	ended bool
}

// half is one direction's record layer.
type half struct {
	dir Direction
	// hdr is the record header being read (hdrN bytes of it); once whole,
	// body collects the record when it spans Feeds, need its length.
	hdr  [recordHeader]byte
	hdrN int
	body []byte
	need int
	in   bool // the header is whole, the body is being read
	// stopped is set once the direction's records can no longer be read.
	stopped bool

	// aead and iv protect the direction's records: TLS 1.3's IV, or TLS
	// 1.2's fixed part (ivLen bytes); seq is the next record's number.
	aead  cipher.AEAD
	iv    [12]byte
	ivLen int
	seq   uint64
	// nonce and ad are the record's nonce and additional data, kept here
	// because a slice of a local array passed to the AEAD escapes: an
	// allocation a record.
	nonce [12]byte
	ad    [13]byte
	// encrypted is set after the direction's ChangeCipherSpec (TLS 1.2).
	encrypted bool
	// secret is the current TLS 1.3 traffic secret, app the first
	// application secret until app keys are in use (then inApp).
	secret, app []byte
	inApp       bool
	// switchTo is the key change a record's last message asked for,
	// applied after the record: a Finished (to application keys) or a
	// KeyUpdate.
	switchTo uint8
	// decrypted counts the direction's records decrypted; skipped the
	// handshake records skipped for want of a handshake secret.
	decrypted, skipped int
	hs                 hsReader
}

const (
	switchNone = iota
	switchApp
	switchUpdate
)

// NewConn returns the decoder of one connection.
func NewConn(opt Options) *Conn {
	c := &Conn{keys: opt.Keys, data: opt.Data}
	c.halves[ClientToServer].dir = ClientToServer
	c.halves[ServerToClient].dir = ServerToClient
	return c
}

// Status returns what was found so far; it is final after End.
func (c *Conn) Status() Status {
	s := c.st
	s.Alerts = append([]Alert(nil), c.st.Alerts...)
	return s
}

// Feed reads b, the next bytes of direction d, captured at t.
func (c *Conn) Feed(d Direction, t time.Time, b []byte) {
	if d > ServerToClient || c.ended {
		return
	}
	h := &c.halves[d]
	for len(b) > 0 && !h.stopped {
		if !h.in {
			if h.hdrN == 0 && len(b) >= recordHeader {
				copy(h.hdr[:], b)
				h.hdrN, b = recordHeader, b[recordHeader:]
			} else {
				n := copy(h.hdr[h.hdrN:], b)
				h.hdrN, b = h.hdrN+n, b[n:]
				if h.hdrN < recordHeader {
					return
				}
			}
			if !c.header(h) {
				return
			}
			h.in, h.need = true, int(binary.BigEndian.Uint16(h.hdr[3:]))
		}
		var rec []byte
		if len(h.body) == 0 && len(b) >= h.need {
			// The whole record is in b: read in place.
			rec, b = b[:h.need], b[h.need:]
		} else {
			if h.body == nil {
				h.body = make([]byte, 0, maxRecord)
			}
			n := min(h.need-len(h.body), len(b))
			h.body, b = append(h.body, b[:n]...), b[n:]
			if len(h.body) < h.need {
				return
			}
			rec = h.body
		}
		h.in, h.hdrN = false, 0
		c.record(h, t, rec)
		h.body = h.body[:0]
	}
}

// Gap says that the capture lost the next n bytes of direction d: its
// record boundaries and record numbers are lost with them, so the rest of
// the direction is not decoded.
func (c *Conn) Gap(d Direction, t time.Time, n int64) {
	if d > ServerToClient || c.ended || n <= 0 {
		return
	}
	h := &c.halves[d]
	if h.stopped {
		return
	}
	c.stop(h, WhyDamagedRecord, fmt.Sprintf("%d bytes of the %s's TLS stream missing from the capture: its records after them cannot be told apart", n, d.sender()))
}

// End ends the connection: a record cut short is damaged, and a
// connection whose handshake never got to encryption says why.
func (c *Conn) End(t time.Time) {
	if c.ended {
		return
	}
	c.ended = true
	for d := range c.halves {
		h := &c.halves[d]
		if h.stopped || (!h.in && h.hdrN == 0) {
			continue
		}
		got, want := h.hdrN, recordHeader
		if h.in {
			got, want = len(h.body), h.need
		}
		part := "header"
		if h.in {
			part = "body"
		}
		c.stop(h, WhyDamagedRecord, fmt.Sprintf("the connection ended inside a record of the %s (%d of its %d %s bytes)", h.dir.sender(), got, want, part))
	}
	if c.version == 0 && c.st.Why == "" {
		switch {
		case !c.haveRandom && c.st.ClientRecords == 0:
			c.why(WhyNoHandshake, "no TLS record from the client")
		case !c.haveRandom:
			c.why(WhyNoHandshake, "no whole ClientHello from the client")
		default:
			d := "the connection ended before one"
			for _, a := range c.st.Alerts {
				if a.From == "server" {
					d = fmt.Sprintf("the server answered the ClientHello with the alert %s", a.Description)
					break
				}
			}
			c.why(WhyNoServerHello, d+": nothing was encrypted")
		}
	}
	for d := range c.halves {
		c.halves[d].body, c.halves[d].hs.body = nil, nil
	}
	c.plain = nil
}

// why notes the first reason part of the connection was not decoded.
func (c *Conn) why(why, detail string) {
	if c.st.Why == "" {
		c.st.Why, c.st.Detail = why, detail
	}
}

// stop ends the reading of h, for why.
func (c *Conn) stop(h *half, why, detail string) {
	c.why(why, detail)
	h.stopped = true
	h.body, h.hs.body = nil, nil
}

// stopAll ends the reading of both directions.
func (c *Conn) stopAll(why, detail string) {
	c.stop(&c.halves[0], why, detail)
	c.stop(&c.halves[1], why, detail)
}

// header checks a whole record header.
func (c *Conn) header(h *half) bool {
	typ, n := h.hdr[0], int(binary.BigEndian.Uint16(h.hdr[3:]))
	switch {
	case typ < typeChangeCipherSpec || typ > typeHeartbeat || h.hdr[1] != 3 || h.hdr[2] > 4:
		c.stop(h, WhyDamagedRecord, fmt.Sprintf("the %s's record %d does not start with a TLS record header (% x)", h.dir.sender(), c.records(h)+1, h.hdr[:]))
		return false
	case n > maxRecord:
		c.stop(h, WhyDamagedRecord, fmt.Sprintf("the %s's record %d declares %d bytes, more than a TLS record may hold (%d)", h.dir.sender(), c.records(h)+1, n, maxRecord))
		return false
	}
	return true
}

func (c *Conn) records(h *half) int {
	if h.dir == ClientToServer {
		return c.st.ClientRecords
	}
	return c.st.ServerRecords
}

// record reads one whole record of h.
func (c *Conn) record(h *half, t time.Time, body []byte) {
	if h.dir == ClientToServer {
		c.st.ClientRecords++
	} else {
		c.st.ServerRecords++
	}
	typ := h.hdr[0]
	switch {
	case typ == typeApplicationData && c.version == 0:
		if h.dir == ClientToServer {
			c.stop(h, WhyEarlyData, "the client sent application data before the server's ServerHello")
		} else {
			c.stop(h, WhyDamagedRecord, "the server sent application data before its ServerHello")
		}
	case c.version == versionTLS13 && typ == typeApplicationData, c.version == versionTLS12 && h.encrypted:
		inner, b, ok := c.decrypt(h, body)
		if !ok {
			return
		}
		c.content(h, t, inner, b, true)
		c.switchKeys(h)
	case c.version == versionTLS12 && typ == typeApplicationData:
		c.stop(h, WhyDamagedRecord, fmt.Sprintf("the %s sent application data before its ChangeCipherSpec", h.dir.sender()))
	case typ == typeChangeCipherSpec:
		// TLS 1.2: what follows is encrypted. TLS 1.3 (and before the
		// version is known): middlebox compatibility, nothing.
		if c.version == versionTLS12 {
			h.encrypted, h.seq = true, 0
		}
	default:
		c.content(h, t, typ, body, false)
	}
}

// content reads a record's content of type typ, decrypted or not.
func (c *Conn) content(h *half, t time.Time, typ byte, b []byte, encrypted bool) {
	switch typ {
	case typeHandshake:
		if err := h.hs.feed(b, encrypted, func(m byte, body []byte) { c.message(h, m, body, encrypted) }); err != "" {
			c.stop(h, WhyDamagedRecord, fmt.Sprintf("the %s's handshake: %s", h.dir.sender(), err))
		}
	case typeAlert:
		for ; len(b) >= 2; b = b[2:] {
			if len(c.st.Alerts) < maxAlerts {
				c.st.Alerts = append(c.st.Alerts, Alert{From: h.dir.sender(), Level: alertLevel(b[0]), Description: alertName(b[1]), Encrypted: encrypted})
			}
		}
	case typeApplicationData:
		if !encrypted {
			return
		}
		if h.dir == ClientToServer {
			c.st.ClientData += int64(len(b))
		} else {
			c.st.ServerData += int64(len(b))
		}
		if c.data != nil && len(b) > 0 {
			c.data(h.dir, t, b)
		}
	}
}

// message reads one whole handshake message: body is nil for those
// hsReader does not keep.
func (c *Conn) message(h *half, m byte, body []byte, encrypted bool) {
	switch {
	case m == msgClientHello && !encrypted && h.dir == ClientToServer:
		hello, ok := parseClientHello(body)
		if !ok {
			c.stop(h, WhyDamagedRecord, fmt.Sprintf("a ClientHello of %d bytes that does not parse", len(body)))
			return
		}
		c.random, c.haveRandom = hello.random, true
		c.st.ClientRandom = hex.EncodeToString(hello.random[:])
		c.sessionID, c.ticket = bytes.Clone(hello.sessionID), bytes.Clone(hello.ticket)
	case m == msgNewSessionTicket && !encrypted && h.dir == ServerToClient && c.master != nil:
		// TLS 1.2 sends it in the clear, before the server's
		// ChangeCipherSpec (RFC 5077 §3.3).
		if len(body) >= 6 {
			if n := int(binary.BigEndian.Uint16(body[4:])); len(body) >= 6+n && n > 0 {
				c.keys.learn(sessionTicket, body[6:6+n], c.master)
			}
		}
	case m == msgServerHello && !encrypted && h.dir == ServerToClient && c.version == 0:
		c.serverHello(body)
	case m == msgFinished && encrypted && c.version == versionTLS13 && !h.inApp:
		h.switchTo = switchApp
	case m == msgKeyUpdate && encrypted && c.version == versionTLS13 && h.inApp:
		h.switchTo = switchUpdate
	}
}

// serverHello reads the ServerHello and sets up both directions' keys.
func (c *Conn) serverHello(b []byte) {
	version, random, sessionID, id, ok := parseServerHello(b)
	if !ok {
		c.stopAll(WhyDamagedRecord, fmt.Sprintf("a ServerHello of %d bytes that does not parse", len(b)))
		return
	}
	if random == helloRetryRandom {
		// A HelloRetryRequest: the client sends a second ClientHello (of
		// the same random), and the real ServerHello follows.
		c.st.HelloRetry = true
		return
	}
	c.version, c.serverRandom = version, random
	c.st.Version, c.st.Suite = versionName(version), suiteName(id)
	if !c.haveRandom {
		c.stopAll(WhyNoHandshake, "the capture holds the server's ServerHello but not the client's ClientHello, whose random the key log is keyed by")
		return
	}
	if version != versionTLS12 && version != versionTLS13 {
		c.stopAll(WhyUnsupportedVersion, fmt.Sprintf("%s: only TLS 1.2 and 1.3 are decrypted", c.st.Version))
		return
	}
	s := suiteOf(id)
	if s == nil || s.tls13 != (version == versionTLS13) {
		c.stopAll(WhyUnsupportedSuite, fmt.Sprintf("%s %s: only AEAD suites (AES-GCM, ChaCha20-Poly1305) are decrypted", c.st.Version, c.st.Suite))
		return
	}
	c.suite = s
	c.secrets = c.keys.Lookup(c.random)
	if version == versionTLS12 {
		c.keys12(sessionID)
		return
	}
	if c.secrets == nil {
		c.stopAll(WhyNoKey, fmt.Sprintf("the key log has no line for client random %x", c.random))
		return
	}
	c.keys13()
}

// keys12 derives both directions' TLS 1.2 keys from the master secret:
// the key log's line for the client random, else, when the server
// resumed a session (it echoed the client's session id, RFC 5246 §7.4.1.3,
// RFC 5077 §3.4), that session's master secret as an earlier connection
// of the capture learned it. A key log has no line for a resumed
// connection when its writer logs full handshakes only (Go's crypto/tls).
func (c *Conn) keys12(sessionID []byte) {
	var m []byte
	if c.secrets != nil {
		m = c.secrets.Master
	}
	resumed := len(sessionID) > 0 && bytes.Equal(sessionID, c.sessionID)
	if m == nil && resumed {
		if m = c.keys.session(sessionTicket, c.ticket); m == nil {
			m = c.keys.session(sessionByID, sessionID)
		}
	}
	if m == nil {
		d := fmt.Sprintf("the key log has no %s line for client random %x", LabelClientRandom, c.random)
		if resumed {
			d += ", and no connection before it in the capture set up the session it resumes"
		}
		c.stopAll(WhyNoKey, d)
		return
	}
	c.master = m
	c.keys.learn(sessionByID, sessionID, m)
	ca, sa, civ, siv, err := c.suite.keyBlock(m, c.random, c.serverRandom)
	if err != nil {
		c.stopAll(WhyWrongKey, err.Error())
		return
	}
	cl, sv := &c.halves[ClientToServer], &c.halves[ServerToClient]
	cl.aead, cl.ivLen = ca, copy(cl.iv[:], civ)
	sv.aead, sv.ivLen = sa, copy(sv.iv[:], siv)
}

// keys13 sets both directions' TLS 1.3 handshake keys, and keeps their
// first application secrets for after their Finished.
func (c *Conn) keys13() {
	sec := c.secrets
	if sec.ClientHandshake == nil && sec.ServerHandshake == nil && sec.ClientTraffic0 == nil && sec.ServerTraffic0 == nil {
		c.stopAll(WhyNoKey, fmt.Sprintf("the key log has no TLS 1.3 traffic secret for client random %x (only %s, a TLS 1.2 line)", c.random, LabelClientRandom))
		return
	}
	for d, s := range [2][2][]byte{{sec.ClientHandshake, sec.ClientTraffic0}, {sec.ServerHandshake, sec.ServerTraffic0}} {
		h := &c.halves[d]
		for _, x := range s {
			if x != nil && len(x) != c.suite.hashLen() {
				c.stop(h, WhyWrongKey, fmt.Sprintf("the key log's %s secrets are %d bytes; %s's hash makes %d", h.dir.sender(), len(x), c.suite.name, c.suite.hashLen()))
				break
			}
		}
		if h.stopped {
			continue
		}
		h.app = s[1]
		if s[0] != nil {
			c.setSecret(h, s[0])
		}
	}
}

// setSecret makes secret h's TLS 1.3 traffic secret, from record 0.
func (c *Conn) setSecret(h *half, secret []byte) bool {
	a, iv, err := c.suite.trafficKeys(secret)
	if err != nil {
		c.stop(h, WhyWrongKey, err.Error())
		return false
	}
	h.aead, h.iv, h.ivLen, h.seq, h.secret = a, iv, 12, 0, secret
	return true
}

// switchKeys applies the key change the record just read asked for.
func (c *Conn) switchKeys(h *half) {
	switch h.switchTo {
	case switchApp:
		c.toApp(h)
	case switchUpdate:
		next, err := c.suite.nextSecret(h.secret)
		if err == nil && c.setSecret(h, next) {
			c.st.KeyUpdates++
		}
	}
	h.switchTo = switchNone
}

// toApp moves h to its first application keys.
func (c *Conn) toApp(h *half) bool {
	if h.app == nil {
		label := LabelClientTrafficSecret0
		if h.dir == ServerToClient {
			label = LabelServerTrafficSecret0
		}
		c.stop(h, WhyNoKey, fmt.Sprintf("the key log has no %s line for client random %x: only the handshake was decrypted", label, c.random))
		return false
	}
	h.inApp = true
	return c.setSecret(h, h.app)
}

// decrypt opens one protected record of h; it returns the record's
// content type and its content, in c.plain.
func (c *Conn) decrypt(h *half, body []byte) (typ byte, b []byte, ok bool) {
	if c.plain == nil {
		c.plain = make([]byte, 0, maxRecord)
	}
	least := tagLen
	if c.version == versionTLS12 && h.ivLen == 4 {
		least += 8 // GCM's explicit nonce
	}
	if len(body) < least {
		c.stop(h, WhyDamagedRecord, fmt.Sprintf("the %s's record %d holds %d bytes, too few for its nonce and AEAD tag (%d)", h.dir.sender(), c.records(h), len(body), least))
		return 0, nil, false
	}
	var err error
	if c.version == versionTLS13 {
		if h.aead == nil && !h.inApp {
			return c.trialApp(h, body)
		}
		b, err = c.open13(h, body)
		if err != nil && !h.inApp && h.app != nil {
			// A Finished not seen: the first application keys may open it.
			if c.toApp(h) {
				b, err = c.open13(h, body)
			}
		}
	} else {
		b, err = c.open12(h, body)
	}
	if err != nil {
		if h.aead == nil && !h.stopped {
			c.stop(h, WhyNoKey, fmt.Sprintf("the key log has no %s handshake secret for client random %x", h.dir.sender(), c.random))
		} else if h.decrypted == 0 {
			c.stop(h, WhyWrongKey, fmt.Sprintf("the %s's first encrypted record does not authenticate under the key log's secret for client random %x", h.dir.sender(), c.random))
		} else {
			c.stop(h, WhyDamagedRecord, fmt.Sprintf("the %s's record %d does not authenticate, after %d that did", h.dir.sender(), c.records(h), h.decrypted))
		}
		return 0, nil, false
	}
	return c.opened(h, b)
}

// trialApp opens a TLS 1.3 record of a direction whose handshake secret
// the key log lacks: its handshake records cannot be opened, and are
// skipped, until one opens under its first application keys (as
// Wireshark does).
func (c *Conn) trialApp(h *half, body []byte) (typ byte, b []byte, ok bool) {
	if h.app == nil {
		c.stop(h, WhyNoKey, fmt.Sprintf("the key log has no traffic secret of the %s for client random %x", h.dir.sender(), c.random))
		return 0, nil, false
	}
	a, iv, err := c.suite.trafficKeys(h.app)
	if err != nil {
		c.stop(h, WhyWrongKey, err.Error())
		return 0, nil, false
	}
	trial := half{aead: a, iv: iv, hdr: h.hdr}
	if b, err = c.open13(&trial, body); err != nil {
		h.skipped++
		if h.skipped > maxSkipped {
			c.stop(h, WhyWrongKey, fmt.Sprintf("none of the %s's first %d encrypted records authenticates under the key log's application secret for client random %x (it has no handshake secret)",
				h.dir.sender(), maxSkipped, c.random))
		}
		return 0, nil, false
	}
	h.inApp = true
	h.aead, h.iv, h.ivLen, h.seq, h.secret = a, iv, 12, 0, h.app
	return c.opened(h, b)
}

// maxSkipped bounds the handshake records skipped by trialApp: a TLS 1.3
// handshake sends a few.
const maxSkipped = 16

// opened counts a record h opened, and returns its content type and
// content.
func (c *Conn) opened(h *half, b []byte) (typ byte, content []byte, ok bool) {
	h.seq++
	h.decrypted++
	c.st.Decrypted++
	c.st.Decoded = true
	if c.version == versionTLS12 {
		return h.hdr[0], b, true
	}
	// TLSInnerPlaintext: content, type, zeros (RFC 8446 §5.2).
	i := len(b) - 1
	for i >= 0 && b[i] == 0 {
		i--
	}
	if i < 0 {
		c.stop(h, WhyDamagedRecord, fmt.Sprintf("the %s's record %d holds no content type", h.dir.sender(), c.records(h)))
		return 0, nil, false
	}
	return b[i], b[:i], true
}

// errNoKeys: the direction has no keys to open a record with.
var errNoKeys = fmt.Errorf("no keys")

// open13 opens a TLS 1.3 record: nonce the IV xor the record number,
// additional data the record header (RFC 8446 §5.2, §5.3).
func (c *Conn) open13(h *half, body []byte) ([]byte, error) {
	if h.aead == nil {
		return nil, errNoKeys
	}
	h.nonce = h.iv
	var seq [8]byte
	binary.BigEndian.PutUint64(seq[:], h.seq)
	for i := range seq {
		h.nonce[4+i] ^= seq[i]
	}
	return h.aead.Open(c.plain[:0], h.nonce[:], body, h.hdr[:])
}

// open12 opens a TLS 1.2 AEAD record: GCM's nonce is the fixed salt and
// the record's 8 explicit bytes (RFC 5288 §3), ChaCha20-Poly1305's the IV
// xor the record number (RFC 7905 §2); additional data is the record
// number, type, version and plaintext length (RFC 5246 §6.2.3.3).
func (c *Conn) open12(h *half, body []byte) ([]byte, error) {
	if h.aead == nil {
		return nil, errNoKeys
	}
	var seq [8]byte
	binary.BigEndian.PutUint64(seq[:], h.seq)
	if h.ivLen == 4 {
		copy(h.nonce[:4], h.iv[:4])
		copy(h.nonce[4:], body[:8])
		body = body[8:]
	} else {
		h.nonce = h.iv
		for i := range seq {
			h.nonce[4+i] ^= seq[i]
		}
	}
	copy(h.ad[:8], seq[:])
	copy(h.ad[8:11], h.hdr[:3])
	binary.BigEndian.PutUint16(h.ad[11:], uint16(len(body)-tagLen))
	return h.aead.Open(c.plain[:0], h.nonce[:], body, h.ad[:])
}
