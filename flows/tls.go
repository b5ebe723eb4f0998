package flows

import (
	"fmt"
	"strings"
	"time"

	"github.com/backoff-audit/audit/attempt"
	"github.com/backoff-audit/audit/h2"
	"github.com/backoff-audit/audit/internal/text"
	"github.com/backoff-audit/audit/tlsdec"
)

// tlsHandshake is the first byte of a TLS handshake record: a client's
// first byte that is it makes a TLS connection, as h2 reads it.
const tlsHandshake = 0x16

// tlsConn is a connection decrypted with the key log: its bytes go to a
// tlsdec.Conn, whose application data goes to the flow's h2.Conn.
type tlsConn struct {
	dec *tlsdec.Conn
	// wire counts each direction's TLS bytes, fed and lost; first is the
	// time of the first.
	wire  [2]int64
	first time.Time
}

// feed hands the next bytes of direction d to the flow's decoder: through
// the key log's decryption when the connection is TLS (its first byte,
// the client's, begins a TLS handshake), else as they are.
func (f *flow) feed(a *Assembler, d h2.Direction, t time.Time, b []byte) {
	if !f.fed {
		f.fed = true
		if a.opt.KeyLog != nil && d == h2.ClientToServer && len(b) > 0 && b[0] == tlsHandshake {
			dec := f.dec
			f.tls = &tlsConn{first: t, dec: tlsdec.NewConn(tlsdec.Options{Keys: a.opt.KeyLog,
				Data: func(d tlsdec.Direction, t time.Time, b []byte) { dec.Feed(h2.Direction(d), t, b) }})}
		}
	}
	if f.tls != nil {
		f.tls.wire[d] += int64(len(b))
		f.tls.dec.Feed(tlsdec.Direction(d), t, b)
		return
	}
	f.dec.Feed(d, t, b)
}

// lose says the capture lost the next n bytes of direction d.
func (f *flow) lose(d h2.Direction, t time.Time, n int64) {
	f.fed = true
	if f.tls != nil {
		f.tls.wire[d] += n
		f.tls.dec.Gap(tlsdec.Direction(d), t, n)
		return
	}
	f.dec.Gap(d, t, n)
}

// end ends the decryption at t, and tells r, the connection's ended
// report, what it found: a connection none of whose application data was
// decrypted is Encrypted, with the TLS bytes counted and why it was not
// decrypted; one whose decryption stopped before its end is Damaged.
func (c *tlsConn) end(t time.Time, r *h2.Report) *tlsdec.Status {
	cut := c.dec.Status().Why != ""
	c.dec.End(t)
	st := c.dec.Status()
	switch {
	case st.ClientData == 0 && st.ServerData == 0:
		if r.ClientBytes == 0 && r.ServerBytes == 0 && r.Start.Equal(t) {
			r.Start = c.first // no SYN, and nothing went to h2
		}
		r.Encrypted = true
		r.ClientBytes, r.ServerBytes = c.wire[0], c.wire[1]
		r.NotDecrypted = notDecrypted(st)
	case cut && r.Damaged == "":
		r.Damaged = fmt.Sprintf("TLS: %s: %s", st.Why, st.Detail)
	}
	return &st
}

// notDecrypted says why none of a connection's application data was
// decrypted.
func notDecrypted(st tlsdec.Status) string {
	if st.Why != "" {
		return st.Why + ": " + st.Detail
	}
	s := "no application data"
	if a := alerts(st); a != "" {
		s += " (" + a + ")"
	}
	return s
}

// alerts names the alerts other than close_notify, for texts.
func alerts(st tlsdec.Status) string {
	var out []string
	for _, a := range st.Alerts {
		if a.Description != "close_notify" {
			out = append(out, fmt.Sprintf("%s alert %s", a.From, a.Description))
		}
	}
	return strings.Join(out, ", ")
}

// ServerSettings is when the server's first SETTINGS frame of r was
// decoded: what makes a connection attempt a success (docs/spec.md §7),
// inside TLS as in plaintext. Zero when none was.
func ServerSettings(r *h2.Report) time.Time {
	for _, e := range r.Events {
		if e.Kind == h2.KindSettings && e.Dir == h2.ServerToClient {
			return e.Time
		}
	}
	return time.Time{}
}

// Decryptions are what the key log showed of the TLS connections of
// conns whose SYN was captured, each named as the attempt it is (the
// client's address and ISN, the server's address): decrypted or why not,
// and when the server's SETTINGS came (ServerSettings). For
// attempt.Tracker.Decrypt: the fates of `audit pcap --keylog`.
func Decryptions(conns []Conn) []attempt.Decryption {
	var out []attempt.Decryption
	for _, c := range conns {
		if c.TLS == nil || !c.SYN {
			continue
		}
		r := c.Report
		out = append(out, attempt.Decryption{Src: r.Client, Dst: r.Server, ISN: c.ISN,
			Decrypted: c.TLS.Decoded, Settings: ServerSettings(r), Why: c.TLS.Why})
	}
	return out
}

// tlsText is a TLS connection's line of the text report, after its
// header line: its version and suite, and whether the key log decrypted
// it.
func tlsText(st *tlsdec.Status, encrypted bool) string {
	what := "TLS"
	if st.Version != "" {
		what = st.Version + " " + st.Suite
	}
	if encrypted {
		return fmt.Sprintf("encrypted (%s): not decoded: %s", what, notDecrypted(*st))
	}
	s := fmt.Sprintf("%s: decrypted with the key log, %d records", what, st.Decrypted)
	if st.KeyUpdates > 0 {
		s += fmt.Sprintf(", %s", text.Plural(st.KeyUpdates, "key update"))
	}
	if a := alerts(*st); a != "" {
		s += ", " + a
	}
	if st.Why != "" {
		s += fmt.Sprintf("; then %s: %s", st.Why, st.Detail)
	}
	return s
}
