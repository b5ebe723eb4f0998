// Package h2 decodes the HTTP/2 and gRPC traffic of captured TCP
// connections into a timeline of what matters for connection backoff: the
// connection-level frames a client and a server exchange (SETTINGS, PING,
// GOAWAY, RST_STREAM), every RPC's method, headers, status and messages,
// and the ReconnectService calls of the interop test (docs/spec.md §2).
//
// # Input
//
// A Conn is one TCP connection. Its caller, which reassembles TCP, feeds it
// each direction's bytes in order with Feed, says where the capture lost
// bytes with Gap, and ends it with End. The two directions are fed in
// capture order, interleaved: a SETTINGS frame one side sends changes what
// the other may send (the largest frame, the HPACK table size), so the
// decoder must see it before what follows it on the wire. A Conn buffers at
// most one frame per direction and holds state only for open streams, so
// its memory is bounded by the peer's SETTINGS_MAX_FRAME_SIZE and by
// Limits.MaxOpenStreams, whatever the length of the connection.
//
// The client's first bytes must be the HTTP/2 connection preface (RFC 9113
// §3.4, https://www.rfc-editor.org/rfc/rfc9113#section-3.4); a connection
// whose first bytes are a TLS record is reported as Encrypted and not
// decoded, and one whose start is missing is Damaged. Frames are parsed by
// golang.org/x/net/http2's Framer, header blocks by one hpack.Decoder per
// direction, gRPC messages by their 5-byte prefix inside each stream's DATA
// (https://github.com/grpc/grpc/blob/master/doc/PROTOCOL-HTTP2.md).
//
// # The model
//
// Report is the decoded connection: its Events (the connection-level
// frames, in order), its Streams (one per RPC, in the order they started,
// updated in place while open), and its Warnings. Everything is
// JSON-tagged so that a report can carry it as a section.
//
// Malformed input is report data, never a panic nor an error: every
// problem is a named Warning (the Warn* constants) on the connection, and
// decoding goes on where that is safe. A gap inside a DATA frame's payload
// loses that stream's messages only; a gap anywhere else, or a header
// block that cannot be decoded, stops what depends on it (the direction's
// frames, or its headers) and says so.
//
// # Diagnoses
//
// The functions of diagnose.go and retry.go read Reports, never bytes: the
// client's PING cadence (PingCadence, which leaves BDP probes out:
// flow-control PINGs sent as DATA arrives, not keepalives, grpc-go's by
// their data and any stack's by following its peer's DATA) and a
// server's GOAWAY ENHANCE_YOUR_CALM "too_many_pings" answer (Keepalive),
// each GOAWAY's connection age (GoAways) and the age most connections got
// one at, a server's MaxConnectionAge (MaxConnectionAge), streams refused
// above a GOAWAY's last stream id
// (RefusedAfterGoAway), the client's next connection after a GOAWAY
// (Reconnects), and RPC attempts linked by grpc-previous-rpc-attempts and
// checked against a retry policy (RetryChains, CheckRetries; gRFC A6,
// https://github.com/grpc/proposal/blob/master/A6-client-retries.md).
// Diagnose runs them all and gives one Finding per observation, each with
// its text: Findings reads one connection, Across what connections show
// together from their Digests, the few words and RPCs of each that a
// caller keeps once a connection ended, so that it need not hold every
// Report to the end.
package h2
