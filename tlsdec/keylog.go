package tlsdec

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
)

// The labels of the NSS key log format that decryption uses
// (https://firefox-source-docs.mozilla.org/security/nss/legacy/key_log_format/):
// the TLS 1.2 master secret, and the TLS 1.3 traffic secrets of
// the handshake and of the first application keys.
const (
	LabelClientRandom          = "CLIENT_RANDOM"
	LabelClientHandshakeSecret = "CLIENT_HANDSHAKE_TRAFFIC_SECRET"
	LabelServerHandshakeSecret = "SERVER_HANDSHAKE_TRAFFIC_SECRET"
	LabelClientTrafficSecret0  = "CLIENT_TRAFFIC_SECRET_0"
	LabelServerTrafficSecret0  = "SERVER_TRAFFIC_SECRET_0"
)

// otherLabels are the labels of the format that name secrets decryption
// does not need (0-RTT, exporters, and the secrets after a key update,
// which OpenSSL logs and the key schedule derives) or cannot use (an RSA
// pre-master secret keyed by its encryption): their lines are entries,
// ignored.
var otherLabels = map[string]bool{
	"CLIENT_EARLY_TRAFFIC_SECRET": true,
	"EARLY_EXPORTER_SECRET":       true,
	"EXPORTER_SECRET":             true,
	"CLIENT_TRAFFIC_SECRET_N":     true,
	"SERVER_TRAFFIC_SECRET_N":     true,
	"RSA":                         true,
}

// DefaultMaxConnections bounds the connections a KeyLog holds secrets for
// (ReadKeyLogLimit): a key log of a reconnect storm holds a few thousand.
const DefaultMaxConnections = 1 << 18

// maxLine bounds a key log line: the longest valid one, a 48-byte secret,
// is 31 + 1 + 64 + 1 + 96 bytes; a longer line is skipped.
const maxLine = 512

// Secrets are what a key log holds for one connection, found by its
// ClientHello's random. A field is nil when its line is missing.
type Secrets struct {
	// Master is the TLS 1.2 master secret (CLIENT_RANDOM), 48 bytes.
	Master []byte
	// The TLS 1.3 traffic secrets: the handshake's and the first
	// application keys', of each side.
	ClientHandshake, ServerHandshake []byte
	ClientTraffic0, ServerTraffic0   []byte
}

// KeyLog is an NSS key log, read by ReadKeyLog or ParseKeyLog: the secrets
// of each connection, by its ClientHello's random. The Conns that decrypt
// with it teach it the TLS 1.2 sessions they set up, so that a connection
// resuming one later in the capture is decrypted too: it is not safe for
// concurrent use by several Conns.
type KeyLog struct {
	// Name is the file read, for messages.
	Name string `json:"file"`
	// Lines counts the lines read; Entries those that gave a secret used
	// here, Ignored those of a label not used here (0-RTT, exporters).
	Lines   int `json:"lines"`
	Entries int `json:"entries"`
	Ignored int `json:"ignored,omitempty"`
	// Skipped counts the lines that are not of the format (not a label,
	// a 32-byte random and a secret in hex, nor a comment or blank),
	// FirstSkipped the number of the first of them.
	Skipped      int `json:"skipped,omitempty"`
	FirstSkipped int `json:"first_skipped,omitempty"`
	// Dropped counts the entries of connections beyond the bound
	// (ReadKeyLogLimit), whose secrets were not kept.
	Dropped int `json:"dropped,omitempty"`

	max     int
	secrets map[[32]byte]*Secrets
	// sessions are the TLS 1.2 master secrets of the sessions the
	// connections decoded set up, by session id or ticket (learn).
	sessions map[sessionKey][]byte
}

// A sessionKey names a TLS 1.2 session a connection may resume: the
// SHA-256 of its session id or of its ticket.
type sessionKey struct {
	kind uint8
	sum  [32]byte
}

const (
	sessionByID = iota
	sessionTicket
)

// maxSessions bounds the sessions a KeyLog learns.
const maxSessions = 1 << 16

// learn keeps the master secret of the session that id (a session id or
// a ticket, by kind) resumes, so that a later connection resuming it can
// be decrypted: a key log writer may log only full handshakes.
func (k *KeyLog) learn(kind uint8, id, master []byte) {
	if k == nil || len(id) == 0 {
		return
	}
	if k.sessions == nil {
		k.sessions = make(map[sessionKey][]byte)
	}
	key := sessionKey{kind, sha256.Sum256(id)}
	if _, ok := k.sessions[key]; ok || len(k.sessions) < maxSessions {
		k.sessions[key] = master
	}
}

// session is the master secret learnt for id, or nil.
func (k *KeyLog) session(kind uint8, id []byte) []byte {
	if k == nil || len(id) == 0 {
		return nil
	}
	return k.sessions[sessionKey{kind, sha256.Sum256(id)}]
}

// ReadKeyLog reads the key log file at path, keeping the secrets of at
// most DefaultMaxConnections connections. Its error names the file.
func ReadKeyLog(path string) (*KeyLog, error) {
	return ReadKeyLogLimit(path, DefaultMaxConnections)
}

// ReadKeyLogLimit is ReadKeyLog keeping the secrets of at most max
// connections: the entries of others are counted in Dropped.
func ReadKeyLogLimit(path string, max int) (*KeyLog, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err // it names the file
	}
	defer f.Close()
	k, err := parse(f, path, max)
	if err != nil {
		return nil, fmt.Errorf("key log %s: %w", path, err)
	}
	return k, nil
}

// ParseKeyLog reads a key log from r, named name in messages, keeping the
// secrets of at most DefaultMaxConnections connections. A line that is not
// of the format is skipped and counted, never an error: a key log is
// appended to by every process that shares it. Only a read error is.
func ParseKeyLog(r io.Reader, name string) (*KeyLog, error) {
	return parse(r, name, DefaultMaxConnections)
}

func parse(r io.Reader, name string, max int) (*KeyLog, error) {
	k := &KeyLog{Name: name, max: max, secrets: make(map[[32]byte]*Secrets)}
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadSlice('\n')
		long := false
		for errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer: skipped whole.
			long = true
			_, err = br.ReadSlice('\n')
		}
		if len(line) > 0 || long {
			k.Lines++
			if long || !k.add(line) {
				k.skip()
			}
		}
		if err == io.EOF {
			return k, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read line %d: %w", k.Lines+1, err)
		}
	}
}

func (k *KeyLog) skip() {
	k.Skipped++
	if k.FirstSkipped == 0 {
		k.FirstSkipped = k.Lines
	}
}

// add reads one line; it returns false when the line is not of the format.
func (k *KeyLog) add(line []byte) bool {
	line = bytes.TrimRight(line, "\r\n")
	if t := bytes.TrimSpace(line); len(t) == 0 || t[0] == '#' {
		return true
	}
	if len(line) > maxLine {
		return false
	}
	f := bytes.Fields(line)
	if len(f) != 3 || len(f[1]) != 64 || len(f[2])%2 != 0 {
		return false
	}
	var random [32]byte
	if _, err := hex.Decode(random[:], f[1]); err != nil {
		return false
	}
	secret := make([]byte, len(f[2])/2)
	if _, err := hex.Decode(secret, f[2]); err != nil {
		return false
	}
	label := string(f[0])
	if otherLabels[label] {
		k.Ignored++
		return true
	}
	switch label {
	case LabelClientRandom:
		if len(secret) != 48 {
			return false
		}
	case LabelClientHandshakeSecret, LabelServerHandshakeSecret, LabelClientTrafficSecret0, LabelServerTrafficSecret0:
		// The hash of the suite: SHA-256 or SHA-384.
		if len(secret) != 32 && len(secret) != 48 {
			return false
		}
	default:
		return false
	}
	s := k.secrets[random]
	if s == nil {
		if len(k.secrets) >= k.max {
			k.Dropped++
			return true
		}
		s = &Secrets{}
		k.secrets[random] = s
	}
	k.Entries++
	switch label {
	case LabelClientRandom:
		s.Master = secret
	case LabelClientHandshakeSecret:
		s.ClientHandshake = secret
	case LabelServerHandshakeSecret:
		s.ServerHandshake = secret
	case LabelClientTrafficSecret0:
		s.ClientTraffic0 = secret
	case LabelServerTrafficSecret0:
		s.ServerTraffic0 = secret
	}
	return true
}

// Connections counts the connections the key log holds secrets for.
func (k *KeyLog) Connections() int { return len(k.secrets) }

// Lookup returns the secrets of the connection whose ClientHello carried
// random, or nil.
func (k *KeyLog) Lookup(random [32]byte) *Secrets {
	if k == nil {
		return nil
	}
	return k.secrets[random]
}

// Summary says in one line what was read, for a report's header:
// "keys.log: 12 connections (48 entries), 2 lines skipped (first: line 3)".
func (k *KeyLog) Summary() string {
	s := fmt.Sprintf("%s: %s (%s)", k.Name, plural(len(k.secrets), "connection"), plural(k.Entries, "entry"))
	if k.Skipped > 0 {
		s += fmt.Sprintf(", %s skipped, not of the key log format (first: line %d)", plural(k.Skipped, "line"), k.FirstSkipped)
	}
	if k.Dropped > 0 {
		s += fmt.Sprintf(", %s of connections beyond the first %d not kept", plural(k.Dropped, "entry"), k.max)
	}
	return s
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	if what == "entry" {
		return fmt.Sprintf("%d entries", n)
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// OpenKeyLogWriter opens the key log file at path for a TLS stack to
// append its secrets to (tls.Config.KeyLogWriter), creating it. The file
// is made readable by its owner only, mode 0600, whatever its mode was:
// whoever reads it can decrypt the connections it logs. Its error names
// the file.
func OpenKeyLogWriter(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
