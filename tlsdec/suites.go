package tlsdec

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"hash"

	"golang.org/x/crypto/chacha20poly1305"
)

// Protocol versions, as ServerHello names them.
const (
	versionTLS12 = 0x0303
	versionTLS13 = 0x0304
)

// versionName names a protocol version as people write it.
func versionName(v uint16) string {
	switch v {
	case 0x0300:
		return "SSL 3.0"
	case 0x0301:
		return "TLS 1.0"
	case 0x0302:
		return "TLS 1.1"
	case versionTLS12:
		return "TLS 1.2"
	case versionTLS13:
		return "TLS 1.3"
	}
	return fmt.Sprintf("version 0x%04x", v)
}

// aeadKind is a suite's record protection.
type aeadKind uint8

const (
	aesGCM aeadKind = iota
	chacha20Poly1305
)

// suite is a cipher suite this package decrypts: AEAD suites only
// (RFC 8446 §B.4; TLS 1.2: RFC 5288, RFC 5289, RFC 7905).
type suite struct {
	id     uint16
	name   string
	tls13  bool
	aead   aeadKind
	keyLen int
	// sha384 is the suite's hash: SHA-384, else SHA-256 (the TLS 1.3 key
	// schedule's hash, the TLS 1.2 PRF's).
	sha384 bool
}

var suites = []suite{
	{0x1301, "TLS_AES_128_GCM_SHA256", true, aesGCM, 16, false},
	{0x1302, "TLS_AES_256_GCM_SHA384", true, aesGCM, 32, true},
	{0x1303, "TLS_CHACHA20_POLY1305_SHA256", true, chacha20Poly1305, 32, false},
	{0x009c, "TLS_RSA_WITH_AES_128_GCM_SHA256", false, aesGCM, 16, false},
	{0x009d, "TLS_RSA_WITH_AES_256_GCM_SHA384", false, aesGCM, 32, true},
	{0x009e, "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256", false, aesGCM, 16, false},
	{0x009f, "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384", false, aesGCM, 32, true},
	{0xc02b, "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", false, aesGCM, 16, false},
	{0xc02c, "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", false, aesGCM, 32, true},
	{0xc02f, "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", false, aesGCM, 16, false},
	{0xc030, "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", false, aesGCM, 32, true},
	{0xcca8, "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", false, chacha20Poly1305, 32, false},
	{0xcca9, "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", false, chacha20Poly1305, 32, false},
	{0xccaa, "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256", false, chacha20Poly1305, 32, false},
}

// suiteOf returns the suite id names, or nil when it is not decrypted here.
func suiteOf(id uint16) *suite {
	for i := range suites {
		if suites[i].id == id {
			return &suites[i]
		}
	}
	return nil
}

// ccmSuites are the TLS 1.3 suites crypto/tls has no name for (RFC 8446
// §B.4): not decrypted here.
var ccmSuites = map[uint16]string{0x1304: "TLS_AES_128_CCM_SHA256", 0x1305: "TLS_AES_128_CCM_8_SHA256"}

// suiteName names any suite: ours, else crypto/tls's name, else its number.
func suiteName(id uint16) string {
	if s := suiteOf(id); s != nil {
		return s.name
	}
	if n, ok := ccmSuites[id]; ok {
		return n
	}
	return tls.CipherSuiteName(id)
}

func (s *suite) hash() func() hash.Hash {
	if s.sha384 {
		return sha512.New384
	}
	return sha256.New
}

func (s *suite) hashLen() int {
	if s.sha384 {
		return sha512.Size384
	}
	return sha256.Size
}

// newAEAD returns the suite's AEAD under key.
func (s *suite) newAEAD(key []byte) (cipher.AEAD, error) {
	if s.aead == chacha20Poly1305 {
		return chacha20poly1305.New(key)
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// fixedIVLen is the per-connection part of a TLS 1.2 nonce: GCM's 4-byte
// salt, before the 8 explicit bytes of each record (RFC 5288 §3); the
// whole 12-byte nonce for ChaCha20-Poly1305 (RFC 7905 §2).
func (s *suite) fixedIVLen() int {
	if s.aead == chacha20Poly1305 {
		return 12
	}
	return 4
}

// expandLabel is TLS 1.3's HKDF-Expand-Label with an empty context
// (RFC 8446 §7.1).
func (s *suite) expandLabel(secret []byte, label string, n int) ([]byte, error) {
	full := "tls13 " + label
	info := make([]byte, 0, 4+len(full))
	info = binary.BigEndian.AppendUint16(info, uint16(n))
	info = append(info, byte(len(full)))
	info = append(info, full...)
	info = append(info, 0) // the context, empty
	return hkdf.Expand(s.hash(), secret, string(info), n)
}

// trafficKeys derives a TLS 1.3 direction's key and IV from its traffic
// secret (RFC 8446 §7.3).
func (s *suite) trafficKeys(secret []byte) (cipher.AEAD, [12]byte, error) {
	var iv [12]byte
	key, err := s.expandLabel(secret, "key", s.keyLen)
	if err != nil {
		return nil, iv, err
	}
	v, err := s.expandLabel(secret, "iv", 12)
	if err != nil {
		return nil, iv, err
	}
	copy(iv[:], v)
	a, err := s.newAEAD(key)
	return a, iv, err
}

// nextSecret is the traffic secret after a KeyUpdate (RFC 8446 §7.2).
func (s *suite) nextSecret(secret []byte) ([]byte, error) {
	return s.expandLabel(secret, "traffic upd", s.hashLen())
}

// keyBlock derives a TLS 1.2 connection's keys from its master secret:
// the client's and the server's write key and fixed IV (RFC 5246 §6.3).
func (s *suite) keyBlock(master []byte, clientRandom, serverRandom [32]byte) (client, server cipher.AEAD, clientIV, serverIV []byte, err error) {
	ivLen := s.fixedIVLen()
	seed := make([]byte, 0, 64)
	seed = append(append(seed, serverRandom[:]...), clientRandom[:]...)
	kb := prf12(s.hash(), master, "key expansion", seed, 2*s.keyLen+2*ivLen)
	ck, sk := kb[:s.keyLen], kb[s.keyLen:2*s.keyLen]
	clientIV, serverIV = kb[2*s.keyLen:2*s.keyLen+ivLen], kb[2*s.keyLen+ivLen:]
	if client, err = s.newAEAD(ck); err != nil {
		return
	}
	server, err = s.newAEAD(sk)
	return
}

// prf12 is the TLS 1.2 PRF, P_hash(secret, label + seed), n bytes of it
// (RFC 5246 §5).
func prf12(h func() hash.Hash, secret []byte, label string, seed []byte, n int) []byte {
	ls := append([]byte(label), seed...)
	mac := hmac.New(h, secret)
	mac.Write(ls)
	a := mac.Sum(nil) // A(1)
	out := make([]byte, 0, n+mac.Size())
	for len(out) < n {
		mac.Reset()
		mac.Write(a)
		mac.Write(ls)
		out = mac.Sum(out)
		mac.Reset()
		mac.Write(a)
		a = mac.Sum(a[:0])
	}
	return out[:n]
}
