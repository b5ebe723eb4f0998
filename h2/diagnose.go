package h2

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/http2"
)

// Finding is one diagnosis, with its text.
type Finding struct {
	// Kind is one of the Finding* constants.
	Kind string `json:"kind"`
	// Conn is the index of the connection in the list given to Diagnose
	// or Across (the conn given to Findings); -1 for a finding about
	// several.
	Conn int       `json:"conn"`
	Time time.Time `json:"time,omitzero"`
	Text string    `json:"text"`
	// Problem is set when the finding is a violation (of the protocol,
	// of a policy), not only an observation.
	Problem bool `json:"problem,omitempty"`
}

// The kinds of Finding.
const (
	FindingDamaged       = "damaged"
	FindingEncrypted     = "encrypted"
	FindingPingCadence   = "ping_cadence"
	FindingTooManyPings  = "too_many_pings"
	FindingGoAwayAge     = "goaway_age"
	FindingMaxAge        = "max_connection_age"
	FindingRefused       = "refused_after_goaway"
	FindingReconnect     = "reconnect"
	FindingRetry         = "retry"
	FindingRetryAttempts = "retry_attempts"
)

// DiagnoseOptions configure Diagnose.
type DiagnoseOptions struct {
	// Retry, when set, is the retry policy the client was given; the
	// delays between attempts are checked against it.
	Retry *RetryPolicy
	// Tolerance widens every retry window by this much on each side, for
	// the time between the wire and the client's timers. Default 5 ms.
	Tolerance time.Duration
}

// DefaultTolerance is DiagnoseOptions.Tolerance's default.
const DefaultTolerance = 5 * time.Millisecond

// Diagnose reads decoded connections (of one capture, any order) and
// returns what they show, connection by connection (Findings), then across
// them (Across).
func Diagnose(conns []*Report, opts DiagnoseOptions) []Finding {
	var out []Finding
	for i, r := range conns {
		out = append(out, Findings(r, i)...)
	}
	return append(out, Across(Digests(conns), opts)...)
}

// Findings returns what connection r shows alone, each Finding's Conn
// set to conn.
func Findings(r *Report, conn int) []Finding {
	if r.Encrypted {
		text := fmt.Sprintf("connection %s → %s is TLS: not decoded", r.Client, r.Server)
		if r.NotDecrypted != "" {
			text += ": " + r.NotDecrypted
		}
		return []Finding{{Kind: FindingEncrypted, Conn: conn, Time: r.Start, Text: text}}
	}
	var out []Finding
	if r.Damaged != "" {
		out = append(out, Finding{Kind: FindingDamaged, Conn: conn, Time: r.Start, Problem: true,
			Text: fmt.Sprintf("connection %s → %s is damaged: %s", r.Client, r.Server, r.Damaged)})
	}
	for _, dir := range []Direction{ClientToServer, ServerToClient} {
		if p := PingCadence(r, dir); p.Count > 1 {
			out = append(out, Finding{Kind: FindingPingCadence, Conn: conn, Time: p.First, Text: p.Text()})
		}
	}
	if k, ok := TooManyPings(r); ok {
		out = append(out, Finding{Kind: FindingTooManyPings, Conn: conn, Time: k.GoAway, Text: k.Text(), Problem: true})
	}
	for _, g := range GoAways(r) {
		out = append(out, Finding{Kind: FindingGoAwayAge, Conn: conn, Time: g.Time, Text: g.Text()})
	}
	for _, f := range RefusedAfterGoAway(r) {
		out = append(out, Finding{Kind: FindingRefused, Conn: conn, Time: f.GoAwayTime, Text: f.Text(), Problem: f.Problem()})
	}
	return out
}

// Across returns what connections show together, read from their digests
// (of one capture, any order; a Finding's Conn indexes ds): the server's
// max connection age, the client's next connection after each server
// GOAWAY, and each retried RPC, checked against opts.Retry when set.
func Across(ds []Digest, opts DiagnoseOptions) []Finding {
	if opts.Tolerance <= 0 {
		opts.Tolerance = DefaultTolerance
	}
	var out []Finding
	if c, ok := MaxConnectionAge(ds); ok {
		out = append(out, Finding{Kind: FindingMaxAge, Conn: -1, Text: c.Text()})
	}
	for _, rc := range Reconnects(ds) {
		out = append(out, Finding{Kind: FindingReconnect, Conn: rc.From, Time: rc.GoAwayTime, Text: rc.Text()})
	}
	for _, ch := range RetryChains(ds) {
		f := Finding{Kind: FindingRetry, Conn: -1, Time: ch.Attempts[0].Start, Text: ch.Text()}
		if opts.Retry != nil {
			chk := CheckRetries(ch, *opts.Retry, opts.Tolerance)
			f.Text += "; " + chk.Text()
			f.Problem = !chk.WithinJittered() && !chk.WithinRandom()
			if len(chk.TooMany) > 0 {
				out = append(out, f)
				f = Finding{Kind: FindingRetryAttempts, Conn: -1, Time: ch.Attempts[0].Start, Problem: true,
					Text: fmt.Sprintf("%s: attempt %s beyond maxAttempts %d", ch.Method, joinInts(chk.TooMany), chk.MaxAttempts)}
			}
		}
		out = append(out, f)
	}
	return out
}

// Cadence is the rhythm of one side's PINGs (not their ACKs) on a
// connection, its BDP probes aside.
type Cadence struct {
	Dir Direction `json:"dir"`
	// Count is the PINGs that are not BDP probes.
	Count int `json:"count"`
	// First is the first such PING's time; Min and Median the least and
	// the median interval between consecutive ones (zero with fewer than
	// two).
	First  time.Time     `json:"first,omitzero"`
	Min    time.Duration `json:"min_interval_ns,omitempty"`
	Median time.Duration `json:"median_interval_ns,omitempty"`
	// Probes counts the BDP probes left out, Acks the ACKs the peer sent
	// (answering PINGs and probes alike).
	Probes int `json:"bdp_probes,omitempty"`
	Acks   int `json:"acks,omitempty"`
}

// A BDP probe is a PING that measures the bandwidth for flow control, sent
// as DATA arrives, not to keep the connection alive; keepalive PINGs come on
// a timer. grpc-go's carry the same data, client and server alike
// (internal/transport/bdp_estimator.go, bdpPing); C-core's, like its other
// PINGs, carry an id, but it sends them at once on receiving DATA: on
// testdata/control-ccore.pcap (C-core 1.51 on both sides) each side's PING
// followed the other's DATA by 63–118 µs. A PING sent within bdpAfter of its
// peer's DATA is taken for one, but for the PING a grpc-go server sends
// with its first GOAWAY to learn when the client has it
// (internal/transport/http2_server.go, goAwayPing), which may follow DATA
// as closely. A grpc-go client that pings every 10 s after
// one call sends one BDP probe at the call and then its keepalive PINGs, and
// a grpc-go server forgives a PING that follows its own writes, so the probe
// neither sets the rhythm nor draws a strike.
const (
	grpcGoBDPPing    = "02041010090e0707"
	grpcGoGoAwayPing = "0106010800030309"
	bdpAfter         = 10 * time.Millisecond
)

// bdpProbe reports whether e, a PING, is a BDP probe.
func bdpProbe(e Event) bool {
	return e.Ping == grpcGoBDPPing || e.AfterData && e.Ping != grpcGoGoAwayPing
}

// PingCadence measures the PINGs that dir sent on r, leaving out BDP
// probes: from r.PingTotals, which count every PING, when r dropped
// events; else from r.Events.
func PingCadence(r *Report, dir Direction) Cadence {
	if int(dir) < len(r.PingTotals) {
		return r.PingTotals[dir]
	}
	return cadence(r.Events, dir, time.Time{})
}

// cadence measures dir's PINGs among events, those before until only
// when until is set.
func cadence(events []Event, dir Direction, until time.Time) Cadence {
	c := Cadence{Dir: dir}
	var last time.Time
	var gaps []time.Duration
	for _, e := range events {
		if !until.IsZero() && e.Time.After(until) {
			continue
		}
		if e.Kind == KindPingAck && e.Dir != dir {
			c.Acks++
		}
		if e.Kind != KindPing || e.Dir != dir {
			continue
		}
		if bdpProbe(e) {
			c.Probes++
			continue
		}
		if c.Count == 0 {
			c.First = e.Time
		} else {
			gaps = append(gaps, e.Time.Sub(last))
		}
		c.Count++
		last = e.Time
	}
	if len(gaps) > 0 {
		slices.Sort(gaps)
		c.Min = gaps[0]
		c.Median = median(gaps)
	}
	return c
}

// median of sorted durations.
func median(d []time.Duration) time.Duration {
	n := len(d)
	if n%2 == 1 {
		return d[n/2]
	}
	return (d[n/2-1] + d[n/2]) / 2
}

// Text says the cadence, e.g. "client PINGs: 5, every 100 ms (median), at
// least 98 ms apart", followed by ", besides 2 BDP probes" when there were
// some.
func (c Cadence) Text() string {
	t := fmt.Sprintf("%s PINGs: %d", c.Dir.sender(), c.Count)
	if c.Count > 1 {
		t += fmt.Sprintf(", every %s (median), at least %s apart", approx(c.Median), approx(c.Min))
	}
	if c.Probes > 0 {
		t += ", besides " + plural(c.Probes, "BDP probe")
	}
	return t
}

// Keepalive is a server's GOAWAY ENHANCE_YOUR_CALM answer to a client's
// PINGs: a server enforcing a minimum ping interval sends it, with debug
// data "too_many_pings", once a client's pings come too often
// (https://github.com/grpc/grpc/blob/master/doc/keepalive.md,
// https://github.com/grpc/proposal/blob/master/A8-client-side-keepalive.md).
type Keepalive struct {
	// Pings is the cadence of the client's PINGs up to the GOAWAY, its
	// BDP probes aside.
	Pings Cadence
	// GoAway is the time of the GOAWAY; Debug its debug data.
	GoAway time.Time
	Debug  string
}

// TooManyPings finds the server's first GOAWAY ENHANCE_YOUR_CALM on r.
func TooManyPings(r *Report) (Keepalive, bool) {
	for _, e := range r.Events {
		if e.Kind == KindGoAway && e.Dir == ServerToClient && e.GoAway.Code == http2.ErrCodeEnhanceYourCalm.String() {
			k := Keepalive{Pings: cadence(r.Events, ClientToServer, e.Time), GoAway: e.Time, Debug: e.GoAway.Debug}
			if p := e.GoAway.PeerPings; p != nil {
				k.Pings = *p
			}
			return k, true
		}
	}
	return Keepalive{}, false
}

// Text says it as "keepalive pings every 10 s; the server answered GOAWAY
// ENHANCE_YOUR_CALM too_many_pings after 3".
func (k Keepalive) Text() string {
	every := "keepalive pings"
	if k.Pings.Count > 1 {
		every += " every " + approx(k.Pings.Median)
	}
	debug := ""
	if k.Debug != "" {
		debug = " " + k.Debug
	}
	return fmt.Sprintf("%s; the server answered GOAWAY ENHANCE_YOUR_CALM%s after %d", every, debug, k.Pings.Count)
}

// GoAwayAge is a GOAWAY and how old the connection was when it came.
type GoAwayAge struct {
	Dir    Direction
	Time   time.Time
	Age    time.Duration
	GoAway GoAway
}

// GoAways lists r's GOAWAYs, each with its connection age (its time less
// r.Start): a server's MaxConnectionAge shows as the age of its first.
func GoAways(r *Report) []GoAwayAge {
	var out []GoAwayAge
	for _, e := range r.Events {
		if e.Kind == KindGoAway {
			out = append(out, GoAwayAge{Dir: e.Dir, Time: e.Time, Age: e.Time.Sub(r.Start), GoAway: *e.GoAway})
		}
	}
	return out
}

// Text says it as "the server's GOAWAY NO_ERROR (max_age) at connection
// age ≈ 2 s, last stream id 2147483647, 1 stream in flight".
func (g GoAwayAge) Text() string {
	debug := ""
	if g.GoAway.Debug != "" {
		debug = " (" + g.GoAway.Debug + ")"
	}
	return fmt.Sprintf("the %s's GOAWAY %s%s at connection age ≈ %s, last stream id %d, %s in flight",
		g.Dir.sender(), g.GoAway.Code, debug, approx(g.Age), g.GoAway.LastStreamID, plural(len(g.GoAway.InFlight)+g.GoAway.MoreInFlight, "stream"))
}

// Refusal is a stream above a server GOAWAY's last stream id: one the
// server says it did not and will not process (RFC 9113 §6.8,
// https://www.rfc-editor.org/rfc/rfc9113#section-6.8), so the client may
// retry it elsewhere.
type Refusal struct {
	GoAwayTime   time.Time
	LastStreamID uint32
	Stream       uint32
	Method       string
	// Outcome is how the stream ended: "refused" (the server's
	// RST_STREAM REFUSED_STREAM), "opened after" (the client opened it
	// after the GOAWAY), "answered" (the server answered it all the
	// same), "reset CODE by the client|server", or "unanswered".
	Outcome string
}

// RefusedAfterGoAway lists, for each GOAWAY the server sent, the streams
// above its last stream id not listed for an earlier GOAWAY.
func RefusedAfterGoAway(r *Report) []Refusal {
	var out []Refusal
	seen := map[uint32]bool{}
	for _, e := range r.Events {
		if e.Kind != KindGoAway || e.Dir != ServerToClient {
			continue
		}
		for _, s := range r.Streams {
			if s.ID <= e.GoAway.LastStreamID || seen[s.ID] {
				continue
			}
			seen[s.ID] = true
			f := Refusal{GoAwayTime: e.Time, LastStreamID: e.GoAway.LastStreamID, Stream: s.ID, Method: s.Method}
			switch {
			case s.Start.After(e.Time):
				f.Outcome = "opened after"
			case s.Reset != nil && s.Reset.Dir == ServerToClient && s.Reset.Code == http2.ErrCodeRefusedStream.String():
				f.Outcome = "refused"
			case s.HTTPStatus != 0 || s.GRPCStatus != "":
				f.Outcome = "answered"
			case s.Reset != nil:
				f.Outcome = "reset " + s.Reset.Code + " by the " + s.Reset.Dir.sender()
			default:
				f.Outcome = "unanswered"
			}
			out = append(out, f)
		}
	}
	return out
}

// Problem says whether the outcome breaks RFC 9113 §6.8: a client must not
// open a stream after a GOAWAY, and a server that processes a stream above
// its last stream id misleads a client that retries it.
func (f Refusal) Problem() bool { return f.Outcome == "opened after" || f.Outcome == "answered" }

// Text says it, e.g. "stream 7 (/pkg.S/M) above the GOAWAY's last stream id 5: refused (REFUSED_STREAM), safe to retry".
func (f Refusal) Text() string {
	var how string
	switch f.Outcome {
	case "refused":
		how = "refused (REFUSED_STREAM), safe to retry"
	case "opened after":
		how = "opened by the client after the GOAWAY"
	case "answered":
		how = "answered by the server all the same"
	default:
		how = f.Outcome
	}
	return fmt.Sprintf("stream %d (%s) above the GOAWAY's last stream id %d: %s", f.Stream, f.Method, f.LastStreamID, how)
}

// Reconnect links a connection the server sent GOAWAY on to the client's
// next connection to the same server.
type Reconnect struct {
	// From and To index the connections given; To is -1 when the client
	// opened no later connection.
	From, To   int
	GoAwayTime time.Time
	Code       string
	// Delay is from the GOAWAY to the next connection's start.
	Delay time.Duration
}

// Reconnects finds, for each connection with a server GOAWAY, the same
// client address's first connection to the same server that started at or
// after that GOAWAY (NextConns).
func Reconnects(ds []Digest) []Reconnect {
	var out []Reconnect
	var next NextConns
	for i, d := range ds {
		g := d.GoAway
		if g == nil {
			continue
		}
		if next.ds == nil {
			next = NewNextConns(ds)
		}
		rc := Reconnect{From: i, To: next.After(i, g.Time), GoAwayTime: g.Time, Code: g.GoAway.Code}
		if rc.To >= 0 {
			rc.Delay = ds[rc.To].Start.Sub(g.Time)
		}
		out = append(out, rc)
	}
	return out
}

// Text says it as "after the server's GOAWAY NO_ERROR on connection 0, the
// client's next connection (1) came 12 ms later".
func (rc Reconnect) Text() string {
	if rc.To < 0 {
		return fmt.Sprintf("after the server's GOAWAY %s on connection %d, the client opened no new connection", rc.Code, rc.From)
	}
	return fmt.Sprintf("after the server's GOAWAY %s on connection %d, the client's next connection (%d) came %s later", rc.Code, rc.From, rc.To, approx(rc.Delay))
}

// approx writes a duration for a person: "0.4 ms", "12 ms", "300 ms",
// "2 s", "2.5 s", "10 s".
func approx(d time.Duration) string {
	neg := ""
	if d < 0 {
		neg, d = "-", -d
	}
	ms := float64(d) / float64(time.Millisecond)
	switch {
	case d < 10*time.Millisecond:
		return neg + trimZero(fmt.Sprintf("%.1f", ms)) + " ms"
	case d < time.Second:
		return neg + fmt.Sprintf("%.0f", ms) + " ms"
	case d < 10*time.Second:
		return neg + trimZero(fmt.Sprintf("%.1f", d.Seconds())) + " s"
	}
	return neg + fmt.Sprintf("%.0f", math.Round(d.Seconds())) + " s"
}

func trimZero(s string) string { return strings.TrimSuffix(s, ".0") }

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ", ")
}
