// Package flows turns captured TCP segments into decoded HTTP/2
// connections: it reassembles each connection's two byte streams and
// feeds them to an h2.Conn (package h2, "Input"), and reads capture files
// into per-connection reports and their diagnoses (h2.Diagnose), which
// `audit h2` prints (docs/spec.md §2 names the ReconnectService calls the
// reports decode).
//
// An Assembler is the incremental part: a live capture adds segments as
// they come (Add; capture.LiveConfig.Segments hands them with their
// Payload, and AddSYN takes the SYNs Live hands apart) and gets each
// connection once it ends; Options.StreamEnd hands over each RPC as its
// stream ends, while its connection stays open (a live control port's
// Start and Stop, docs/spec.md §5.6), and Options.Opened each connection
// as it starts, saying whether the capture joined it mid-stream.
// capture.Live cuts packets at a snap length made for the retry port's
// first bytes: what it cuts is declared lost (PayloadLen), so a port to
// decode needs a capture that keeps whole packets
// (capture.LiveConfig.Whole). ReadFiles is the offline part.
package flows
