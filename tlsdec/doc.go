// Package tlsdec decrypts the TLS of captured connections with the secrets
// a client or a server wrote to an NSS key log (SSLKEYLOGFILE, Go's
// tls.Config.KeyLogWriter, Node's --tls-keylog), as Wireshark does, so that
// the HTTP/2 inside can be decoded like a plaintext connection's.
//
// # Key log
//
// ReadKeyLog reads the format
// (https://firefox-source-docs.mozilla.org/security/nss/legacy/key_log_format/):
// one "LABEL CLIENT_RANDOM SECRET" line per secret, in hex, found by the
// ClientHello's random. TLS 1.2 needs CLIENT_RANDOM (the master secret);
// TLS 1.3 the four traffic secrets CLIENT_HANDSHAKE_TRAFFIC_SECRET,
// SERVER_HANDSHAKE_TRAFFIC_SECRET, CLIENT_TRAFFIC_SECRET_0 and
// SERVER_TRAFFIC_SECRET_0. A line of another shape is skipped and counted,
// never an error: a key log is appended to by every process that shares
// it, and a cut last line is common. The secrets of at most
// DefaultMaxConnections connections are kept.
//
// # Record layer
//
// A Conn is one TCP connection's two byte streams, fed in capture order
// (Feed, Gap, End), as h2.Conn is. It reads the records (RFC 8446 §5, RFC
// 5246 §6.2), a record split across segments as well as several in one,
// and the handshake messages in them: the ClientHello's random, the
// ServerHello's version (supported_versions) and suite, and, in TLS 1.3,
// each side's Finished and KeyUpdate, after which that side's keys change
// (RFC 8446 §7.2). Keys come from the key schedule, which is this
// package's: TLS 1.3's HKDF-Expand-Label (RFC 8446 §7.1, §7.3) and TLS
// 1.2's PRF key block (RFC 5246 §5, §6.3), over the standard library's
// HKDF, HMAC and AES-GCM and golang.org/x/crypto's ChaCha20-Poly1305. Only
// AEAD suites are decrypted: AES-128-GCM, AES-256-GCM and
// ChaCha20-Poly1305, in TLS 1.3 and in TLS 1.2 (RFC 5288, RFC 5289, RFC
// 7905). The application data of each decrypted record is handed to
// Options.Data.
//
// What could not be decrypted is data, never an error nor a panic:
// Status says whether the connection was decoded, and the first reason
// part of it was not (the Why* constants: no key, an unsupported suite or
// version, a damaged record, a secret that does not decrypt it). A record
// header declaring more than a record may hold, a record cut by the end of
// the connection, bytes the capture lost: each stops its direction with
// WhyDamagedRecord. Memory per connection is bounded: one record per
// direction when a record spans segments, one hello message, one record's
// plaintext.
package tlsdec
