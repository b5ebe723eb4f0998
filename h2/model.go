package h2

import (
	"fmt"
	"net/netip"
	"strconv"
	"time"

	"golang.org/x/net/http2"
)

// Direction is the way bytes flow on a connection.
type Direction uint8

const (
	// ClientToServer is the bytes the client sent.
	ClientToServer Direction = iota
	// ServerToClient is the bytes the server sent.
	ServerToClient
)

// String returns "client_to_server" or "server_to_client", as in JSON.
func (d Direction) String() string {
	switch d {
	case ClientToServer:
		return "client_to_server"
	case ServerToClient:
		return "server_to_client"
	}
	return "direction(" + strconv.Itoa(int(d)) + ")"
}

// sender names who sent the bytes of d, for texts.
func (d Direction) sender() string {
	if d == ClientToServer {
		return "client"
	}
	return "server"
}

// MarshalText writes the direction's String.
func (d Direction) MarshalText() ([]byte, error) {
	if d > ServerToClient {
		return nil, fmt.Errorf("marshal direction %d: no such direction", d)
	}
	return []byte(d.String()), nil
}

// UnmarshalText reads what MarshalText writes.
func (d *Direction) UnmarshalText(b []byte) error {
	switch string(b) {
	case "client_to_server":
		*d = ClientToServer
	case "server_to_client":
		*d = ServerToClient
	default:
		return fmt.Errorf("unmarshal direction %q: not client_to_server or server_to_client", b)
	}
	return nil
}

// Report is one decoded connection.
type Report struct {
	// Client and Server are the connection's endpoints.
	Client netip.AddrPort `json:"client"`
	Server netip.AddrPort `json:"server"`
	// Start is when the connection began: Options.Start (its SYN, when the
	// caller has it), else the time of the first Feed or Gap.
	Start time.Time `json:"start"`
	// End is the time given to End; zero while the connection is open.
	End time.Time `json:"end,omitzero"`
	// Encrypted is set when the connection carries TLS (its first byte is a
	// TLS handshake record, 0x16): nothing of it is decoded.
	Encrypted bool `json:"encrypted,omitempty"`
	// NotDecrypted, when Encrypted, says why a key log did not decrypt
	// the connection (package flows decrypts with one, package tlsdec
	// names the reasons); empty when no key log was given.
	NotDecrypted string `json:"not_decrypted,omitempty"`
	// Damaged is the first reason part of the connection could not be
	// decoded (bytes lost, its start missing, a direction stopped); empty
	// when the whole connection was decoded. Warnings has every reason.
	Damaged string `json:"damaged,omitempty"`
	// ClientBytes and ServerBytes count the bytes fed and lost in each
	// direction.
	ClientBytes int64 `json:"client_bytes"`
	ServerBytes int64 `json:"server_bytes"`
	// Events are the connection-level frames, in the order they were
	// decoded (each direction in wire order; the two interleaved as fed).
	Events []Event `json:"events"`
	// Streams are the RPCs, in the order they started. An open stream's
	// entry is updated as its frames arrive.
	Streams []Stream `json:"streams"`
	// Warnings are the problems met, in order.
	Warnings []Warning `json:"warnings,omitempty"`
	// Dropped counts what was decoded but not kept, past Limits.
	Dropped Dropped `json:"dropped,omitzero"`
	// PingTotals, set at End when Events dropped some, are each
	// direction's PINGs (by Direction) over every one decoded, kept or
	// not: what PingCadence reads then.
	PingTotals []Cadence `json:"ping_totals,omitempty"`
}

// Dropped counts the entries a Report did not keep because a limit was
// reached (Limits.MaxEvents, MaxStreams, MaxWarnings). Events past
// MaxEvents are dropped but for GOAWAYs and RST_STREAMs, kept up to as many
// again; every PING is counted in Report.PingTotals.
type Dropped struct {
	Events   int `json:"events,omitempty"`
	Streams  int `json:"streams,omitempty"`
	Warnings int `json:"warnings,omitempty"`
}

// EventKind names a connection-level frame in the timeline.
type EventKind string

// The kinds of Event.
const (
	KindSettings    EventKind = "settings"
	KindSettingsAck EventKind = "settings_ack"
	KindPing        EventKind = "ping"
	KindPingAck     EventKind = "ping_ack"
	KindGoAway      EventKind = "goaway"
	KindRSTStream   EventKind = "rst_stream"
)

// Event is one connection-level frame of the timeline (RFC 9113 §6,
// https://www.rfc-editor.org/rfc/rfc9113#section-6).
type Event struct {
	// Time is the time of the Feed that completed the frame.
	Time time.Time `json:"time"`
	// Dir is the direction of the frame: its sender.
	Dir  Direction `json:"dir"`
	Kind EventKind `json:"kind"`
	// Settings are a SETTINGS frame's parameters, in wire order, the
	// first maxSettings of them; MoreSettings counts the rest.
	Settings     []Setting `json:"settings,omitempty"`
	MoreSettings int       `json:"more_settings,omitempty"`
	// Ping is a PING's opaque data, 16 hex digits.
	Ping string `json:"ping,omitempty"`
	// AfterData is set for a PING sent within bdpAfter of a DATA frame
	// with bytes from its peer: what a BDP estimator sends (Cadence).
	AfterData bool `json:"after_data,omitempty"`
	// GoAway is set for a GOAWAY.
	GoAway *GoAway `json:"goaway,omitempty"`
	// Stream and Code are a RST_STREAM's stream and error code name.
	Stream uint32 `json:"stream,omitempty"`
	Code   string `json:"code,omitempty"`
}

// Setting is one SETTINGS parameter, named as in RFC 9113 §6.5.2
// (HEADER_TABLE_SIZE, MAX_FRAME_SIZE, …).
type Setting struct {
	Name  string `json:"name"`
	Value uint32 `json:"value"`
}

// GoAway is what a GOAWAY frame said, and what was open when it came.
type GoAway struct {
	LastStreamID uint32 `json:"last_stream_id"`
	// Code is the error code by name: NO_ERROR, ENHANCE_YOUR_CALM, ….
	Code string `json:"code"`
	// Debug is the debug data as text (grpc-go writes "too_many_pings",
	// "max_age", …), with bytes that are not printable UTF-8 quoted.
	Debug string `json:"debug,omitempty"`
	// InFlight are the ids of the streams open when the GOAWAY came, in
	// increasing order, the first maxInFlight of them; MoreInFlight counts
	// the rest.
	InFlight     []uint32 `json:"in_flight"`
	MoreInFlight int      `json:"more_in_flight,omitempty"`
	// PeerPings, on the server's first GOAWAY ENHANCE_YOUR_CALM when
	// events were dropped before it, are the client's PINGs up to it,
	// counted whatever the budget (TooManyPings).
	PeerPings *Cadence `json:"peer_pings,omitempty"`
}

// StreamState is where a stream ended.
type StreamState string

// The states of a Stream.
const (
	// StateOpen: the stream had not ended when the connection was last
	// fed, or ended (End) with the stream still open.
	StateOpen StreamState = "open"
	// StateClosed: both sides sent END_STREAM.
	StateClosed StreamState = "closed"
	// StateReset: a RST_STREAM ended the stream.
	StateReset StreamState = "reset"
)

// Stream is one RPC: a client-initiated HTTP/2 stream and what the gRPC
// protocol put on it (PROTOCOL-HTTP2.md, "Requests" and "Responses").
// Header values are kept up to maxValue bytes, cut with "…" beyond.
type Stream struct {
	ID uint32 `json:"id"`
	// Method is the request's :path, e.g. /grpc.testing.ReconnectService/Start.
	Method    string `json:"method"`
	Authority string `json:"authority,omitempty"`
	// Timeout is the grpc-timeout header as sent ("99m", "5S", …).
	Timeout string `json:"grpc_timeout,omitempty"`
	// PreviousAttempts is grpc-previous-rpc-attempts: 0 for a first
	// attempt, n for the (n+1)-th (gRFC A6, "Exposed Retry Metadata").
	PreviousAttempts int `json:"previous_rpc_attempts,omitempty"`
	// RequestEncoding and ResponseEncoding are each side's grpc-encoding.
	RequestEncoding  string `json:"request_encoding,omitempty"`
	ResponseEncoding string `json:"response_encoding,omitempty"`
	// HTTPStatus is the response's :status.
	HTTPStatus int `json:"http_status,omitempty"`
	// GRPCStatus is grpc-status by name (OK, UNAVAILABLE, …; a value
	// outside the table as its decimal); empty when none came.
	GRPCStatus  string `json:"grpc_status,omitempty"`
	GRPCMessage string `json:"grpc_message,omitempty"`
	// RetryPushback is the server's grpc-retry-pushback-ms (gRFC A6,
	// "Pushback").
	RetryPushback string `json:"grpc_retry_pushback_ms,omitempty"`

	// Start is the time of the request's HEADERS; RequestEnd and
	// ResponseEnd the times each side sent END_STREAM; End the time the
	// stream closed or was reset.
	Start       time.Time   `json:"start"`
	RequestEnd  time.Time   `json:"request_end,omitzero"`
	ResponseEnd time.Time   `json:"response_end,omitzero"`
	End         time.Time   `json:"end,omitzero"`
	State       StreamState `json:"state"`
	// Reset is the RST_STREAM that ended the stream, if one did.
	Reset *Reset `json:"reset,omitempty"`

	// RequestMessages and ResponseMessages count the complete gRPC
	// messages each side sent; RequestBytes and ResponseBytes the DATA
	// payload bytes.
	RequestMessages  int   `json:"request_messages"`
	ResponseMessages int   `json:"response_messages"`
	RequestBytes     int64 `json:"request_bytes"`
	ResponseBytes    int64 `json:"response_bytes"`

	// ReconnectParams is the decoded request of a ReconnectService/Start
	// call, ReconnectInfo the decoded answer of a Stop (docs/spec.md §2).
	ReconnectParams *ReconnectParams `json:"reconnect_params,omitempty"`
	ReconnectInfo   *ReconnectInfo   `json:"reconnect_info,omitempty"`

	// HeadersLost is set when a header block of the stream was not
	// decoded (HPACK state lost, or the list over Limits.MaxHeaderList);
	// MessagesLost when some of its DATA was lost or skipped, so its
	// message counts are short.
	HeadersLost  bool `json:"headers_lost,omitempty"`
	MessagesLost bool `json:"messages_lost,omitempty"`
}

// Reset is a RST_STREAM that ended a stream.
type Reset struct {
	Time time.Time `json:"time"`
	Dir  Direction `json:"dir"`
	Code string    `json:"code"`
}

// ReconnectParams is grpc.testing.ReconnectParams (docs/spec.md §2.1).
type ReconnectParams struct {
	MaxReconnectBackoffMs int32 `json:"max_reconnect_backoff_ms"`
}

// ReconnectInfo is grpc.testing.ReconnectInfo (docs/spec.md §2.1).
type ReconnectInfo struct {
	Passed    bool    `json:"passed"`
	BackoffMs []int32 `json:"backoff_ms"`
}

// Warning is one problem met while decoding.
type Warning struct {
	Time time.Time `json:"time"`
	Dir  Direction `json:"dir"`
	// Name is one of the Warn* constants.
	Name   string `json:"name"`
	Stream uint32 `json:"stream,omitempty"`
	Detail string `json:"detail"`
	// Stopped is set when decoding of Dir stopped here (the connection is
	// then Damaged).
	Stopped bool `json:"stopped,omitempty"`
}

// The names of Warnings.
const (
	// WarnGap: the capture lost bytes of the direction.
	WarnGap = "gap"
	// WarnNoPreface: the client's bytes do not start with the HTTP/2
	// preface, so the connection's start is missing (or it is not HTTP/2).
	WarnNoPreface = "no_preface"
	// WarnNoSettings: a direction's first frame is not SETTINGS (RFC
	// 9113 §3.4), so its start is missing (or it is not HTTP/2).
	WarnNoSettings = "no_settings"
	// WarnFrameTooLarge: a frame longer than the receiver's
	// SETTINGS_MAX_FRAME_SIZE (or Limits.MaxFrameSize); it was skipped.
	WarnFrameTooLarge = "frame_too_large"
	// WarnMalformedFrame: the Framer rejected a frame; it was skipped.
	WarnMalformedFrame = "malformed_frame"
	// WarnBadSetting: a SETTINGS value outside its range.
	WarnBadSetting = "bad_setting"
	// WarnHPACK: a header block could not be decoded; the direction's
	// later header blocks are not decoded either (the HPACK state is lost).
	WarnHPACK = "hpack_error"
	// WarnTableSizeUpdate: a dynamic table size update above the
	// receiver's SETTINGS_HEADER_TABLE_SIZE; the HPACK state is lost.
	WarnTableSizeUpdate = "table_size_update_too_large"
	// WarnHeaderString: a header name or value longer than
	// Limits.MaxHeaderList; the HPACK state is lost.
	WarnHeaderString = "header_string_too_long"
	// WarnHeaderList: a header list larger than Limits.MaxHeaderList once
	// decoded (RFC 9113 §6.5.2's size); its fields past the limit are
	// ignored, the HPACK state is kept.
	WarnHeaderList = "header_list_too_large"
	// WarnUnknownStream: a frame for a stream the client never opened.
	WarnUnknownStream = "unknown_stream"
	// WarnTooManyStreams: more open streams than Limits.MaxOpenStreams;
	// the new one is not followed.
	WarnTooManyStreams = "too_many_open_streams"
	// WarnMessageTooLarge: a gRPC message to decode larger than
	// Limits.MaxMessage, compressed or inflated; it is counted, not decoded.
	WarnMessageTooLarge = "message_too_large"
	// WarnBadMessage: a gRPC message that could not be inflated or
	// unmarshalled, or a compressed message without a grpc-encoding.
	WarnBadMessage = "bad_message"
	// WarnTruncated: the connection ended inside a frame.
	WarnTruncated = "truncated"
	// WarnConflict: bytes of the direction were captured twice at the
	// same place, different; which copy the receiver read is unknown
	// (Conn.Conflict).
	WarnConflict = "retransmission_differs"
)

// Bounds on what one Event or Stream keeps, so that a Report's size is
// bounded by Limits.MaxEvents and MaxStreams whatever the input.
const (
	maxSettings = 32
	maxInFlight = 1000
	maxValue    = 512
)

// errCodeName names an HTTP/2 error code as RFC 9113 §7 does.
func errCodeName(c http2.ErrCode) string {
	if c <= http2.ErrCodeHTTP11Required {
		return c.String()
	}
	return fmt.Sprintf("0x%x", uint32(c))
}

// grpcCodeNames are the status codes of
// https://github.com/grpc/grpc/blob/master/doc/statuscodes.md by value.
var grpcCodeNames = [...]string{
	"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
	"NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
	"FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
	"INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
}

// grpcCodeName names a grpc-status value; anything else stays as sent.
func grpcCodeName(v string) string {
	n, err := strconv.Atoi(v)
	if err == nil && n >= 0 && n < len(grpcCodeNames) && strconv.Itoa(n) == v {
		return grpcCodeNames[n]
	}
	return v
}
