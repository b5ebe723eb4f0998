package report

import (
	"cmp"
	"encoding/json"
	"math"
	"math/bits"
	"net/netip"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/backoff-audit/audit/backoff"
	"github.com/backoff-audit/audit/internal/text"
)

// appendPeerJSON appends json.Marshal(p), byte for byte (TestAppendPeerJSON
// holds it to that), without reflection: encoding/json took 0.3 s for the
// 10 000 peers of the 2 M-packet bench capture, most of it reflecting over
// intervals and compacting what AttemptReport.MarshalJSON returns.
//
// windows, when not nil, holds the text of the policy's windows.
func appendPeerJSON(b []byte, p *PeerReport, windows *windowText) ([]byte, error) {
	b = append(b, `{"peer":`...)
	b = appendJSONAddr(b, p.Peer)
	b = append(b, `,"passed":`...)
	b = strconv.AppendBool(b, p.Passed)
	b = append(b, `,"verdict":`...)
	b = appendJSONString(b, string(p.Verdict))
	b = append(b, `,"reason":`...)
	b = appendJSONString(b, p.Reason)
	b = append(b, `,"strict":{"passed":`...)
	b = strconv.AppendBool(b, p.Strict.Passed)
	b = append(b, `,"verdict":`...)
	b = appendJSONString(b, string(p.Strict.Verdict))
	if p.Strict.FirstFailure != 0 {
		b = append(b, `,"first_failure":`...)
		b = appendInt(b, int64(p.Strict.FirstFailure))
	}
	b = append(b, `},"reference_passed":`...)
	b = strconv.AppendBool(b, p.ReferencePassed)
	b = append(b, `,"retransmits":`...)
	b = appendInt(b, int64(p.Retransmits))
	b = append(b, `,"attempts":`...)
	var times minuteText
	b, _ = appendJSONList(b, p.Attempts, func(b []byte, a *AttemptReport) ([]byte, error) {
		b = append(b, `{"time":"`...)
		b = times.append(b, a.Time)
		b = append(b, `","src_port":`...)
		b = appendUint(b, uint64(a.SrcPort))
		b = append(b, `,"seq":`...)
		b = appendUint(b, uint64(a.Seq))
		b = append(b, `,"retransmits":`...)
		b = appendInt(b, int64(a.Retransmits))
		return appendEndingJSON(b, &a.Ending), nil
	})
	b = append(b, `,"intervals":`...)
	b, err := appendJSONList(b, p.Intervals, func(b []byte, iv *backoff.Interval) ([]byte, error) {
		return appendIntervalJSON(b, iv, windows)
	})
	if err != nil {
		return b, err
	}
	b = append(b, `,"backoff_ms":`...)
	b, _ = appendJSONList(b, p.BackoffMS, func(b []byte, v *int32) ([]byte, error) {
		return appendInt(b, int64(*v)), nil
	})
	// The members a chain seldom has, in the struct's order: encoding/json
	// is fast enough for them.
	for _, m := range []struct {
		name string
		v    any
		set  bool
	}{
		{"signatures", p.Signatures, len(p.Signatures) > 0},
		{"recovery", p.Recovery, p.Recovery != nil},
		{"reconnects", p.Reconnects, p.Reconnects != nil},
		{"unseen", p.Unseen, p.Unseen > 0},
		{"states", p.States, len(p.States) > 0},
		{"may_have_begun_before_capture", p.BegunBefore, p.BegunBefore},
	} {
		if !m.set {
			continue
		}
		v, err := json.Marshal(m.v)
		if err != nil {
			return b, err
		}
		b = append(b, `,"`...)
		b = append(b, m.name...)
		b = append(b, `":`...)
		b = append(b, v...)
	}
	if len(p.Inferred) > 0 {
		b = append(append(b, `,"inferred":`...), p.Inferred...)
	}
	return append(b, '}'), nil
}

// appendEndingJSON appends an attempt's fate members, as
// AttemptReport.MarshalJSON writes them, and the attempt's closing brace.
func appendEndingJSON(b []byte, e *backoff.Ending) []byte {
	b = append(b, `,"fate":`...)
	b = appendNameJSON(b, string(e.ReportFate()))
	if e.Fate.Accepted() {
		b = append(b, `,"accepted_ms":`...)
		b = AppendMS(b, e.Accepted)
	}
	if e.Fate.Ended() {
		b = append(b, `,"duration_ms":`...)
		b = AppendMS(b, e.Duration)
	}
	if e.ClientSent != "" {
		b = append(b, `,"client_sent":`...)
		b = appendNameJSON(b, string(e.ClientSent))
	}
	if e.ServerSent != "" {
		b = append(b, `,"server_sent":`...)
		b = appendNameJSON(b, string(e.ServerSent))
	}
	if e.Ready {
		b = append(b, `,"ready_ms":`...)
		b = AppendMS(b, e.ReadyAfter)
	}
	if e.RST && e.Fate.Ended() {
		b = append(b, `,"rst":true`...)
	}
	if e.Decrypted {
		b = append(b, `,"decrypted":true`...)
	}
	if e.NotDecrypted != "" {
		b = append(b, `,"not_decrypted":`...)
		b = appendJSONString(b, e.NotDecrypted)
	}
	return append(b, '}')
}

// appendNameJSON is appendJSONString for a fate's or a payload's name: the
// names this package gives are plain ASCII, quoted as they are, which was
// a fifth of what the fates added to the 2 M-packet bench capture's JSON
// report; any other (an Ending read back from a record) is escaped.
func appendNameJSON(b []byte, s string) []byte {
	switch backoff.Fate(s) {
	case backoff.FateUnknown, backoff.FateRefused, backoff.FateUnanswered, backoff.FateClosed, backoff.FateAbandoned, backoff.FateOpen:
	default:
		if p := backoff.Payload(s); p == backoff.PayloadNone || !p.Known() {
			return appendJSONString(b, s)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// AppendMS appends d in milliseconds as encoding/json writes
// float64(d)/1e6, keeping every nanosecond of a whole number of them: the
// one way a report, JSON or HTML, writes a time in ms.
func AppendMS(b []byte, d time.Duration) []byte {
	if ns := int64(d); ns > -1e15 && ns < 1e15 {
		return appendWholeNS(b, ns)
	}
	b, _ = appendJSONFloat(b, backoff.Millis(d)) // finite: no error
	return b
}

// appendJSONList appends list as encoding/json writes a slice (null when
// nil), each element by item.
func appendJSONList[T any](b []byte, list []T, item func([]byte, *T) ([]byte, error)) ([]byte, error) {
	if list == nil {
		return append(b, "null"...), nil
	}
	b = append(b, '[')
	for i := range list {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = item(b, &list[i]); err != nil {
			return b, err
		}
	}
	return append(b, ']'), nil
}

func appendIntervalJSON(b []byte, iv *backoff.Interval, windows *windowText) ([]byte, error) {
	b = append(b, `{"k":`...)
	b = appendInt(b, int64(iv.K))
	b = append(b, `,"measured_ms":`...)
	var err1, err2 error
	if ns := int64(iv.Measured); ns != 0 && ns > -1e15 && ns < 1e15 && iv.MeasuredMS == backoff.Millis(iv.Measured) {
		b = appendWholeNS(b, ns)
	} else {
		b, err1 = appendJSONFloat(b, iv.MeasuredMS)
	}
	b = append(b, `,"backoff_ms":`...)
	b = appendInt(b, int64(iv.BackoffMS))
	if w := windows.text(iv); w != nil {
		b = append(b, w...)
	} else {
		b, err2 = appendWindowJSON(b, iv)
	}
	b = append(b, `,"ok":`...)
	b = strconv.AppendBool(b, iv.OK)
	b = append(b, `,"outcome":`...)
	b = appendJSONString(b, string(iv.Outcome))
	b = append(b, `,"jitter_pct":`...)
	b, err5 := appendJSONFloat(b, iv.JitterPct)
	b = append(b, `,"strict_ok":`...)
	b = strconv.AppendBool(b, iv.StrictOK)
	if iv.Term != "" {
		b = append(b, `,"term":`...)
		b = appendJSONString(b, string(iv.Term))
	}
	return append(b, '}'), cmp.Or(err1, err2, err5)
}

// appendWindowJSON appends an interval's expected value and window:
// `,"expected_ms":E,"min_ms":MIN,"max_ms":MAX`.
func appendWindowJSON(b []byte, iv *backoff.Interval) ([]byte, error) {
	b = append(b, `,"expected_ms":`...)
	b, err1 := appendJSONFloat(b, iv.ExpectedMS)
	b = append(b, `,"min_ms":`...)
	b, err2 := appendJSONFloat(b, iv.MinMS)
	b = append(b, `,"max_ms":`...)
	b, err3 := appendJSONFloat(b, iv.MaxMS)
	return b, cmp.Or(err1, err2, err3)
}

// windowText holds the JSON of the expected value and window of a policy's
// first windowTextK intervals, which depend on k alone: formatting floats
// is most of the cost of a report's JSON.
type windowText struct {
	iv []backoff.Interval // p.Check(k, 0), from k = 1
	b  [][]byte
}

const windowTextK = 64

func newWindowText(p backoff.Policy) *windowText {
	w := &windowText{}
	for k := 1; k <= windowTextK; k++ {
		iv := p.Check(k, 0)
		b, err := appendWindowJSON(nil, &iv)
		if err != nil {
			break
		}
		w.iv, w.b = append(w.iv, iv), append(w.b, b)
	}
	return w
}

// text is the JSON of iv's window, or nil when it is not one held.
func (w *windowText) text(iv *backoff.Interval) []byte {
	if w == nil || iv.K < 1 || iv.K > len(w.iv) {
		return nil
	}
	h := &w.iv[iv.K-1]
	if h.ExpectedMS != iv.ExpectedMS || h.MinMS != iv.MinMS || h.MaxMS != iv.MaxMS {
		return nil
	}
	return w.b[iv.K-1]
}

// appendWholeNS appends ns nanoseconds as milliseconds, as appendJSONFloat
// appends float64(ns)/1e6: for |ns| < 1e15 the float is nearer to the
// exact decimal than half the 1e-6 step between decimals of six places, so
// its shortest form is that decimal, trailing zeros trimmed.
func appendWholeNS(b []byte, ns int64) []byte {
	if ns < 0 {
		b = append(b, '-')
		ns = -ns
	}
	// Most are under a second: their digits at once.
	switch whole := ns / 1e6; {
	case whole < 10:
		b = append(b, byte('0'+whole))
	case whole < 100:
		b = append(b, byte('0'+whole/10), byte('0'+whole%10))
	case whole < 1000:
		b = append(b, byte('0'+whole/100), byte('0'+whole/10%10), byte('0'+whole%10))
	default:
		b = appendInt(b, whole)
	}
	frac := ns % 1e6
	if frac == 0 {
		return b
	}
	// Two halves of three digits, each digit from its half: no chain of
	// six divisions, each waiting for the last (a report writes two of
	// these an attempt).
	hi, lo := frac/1000, frac%1000
	d := [7]byte{'.', byte('0' + hi/100), byte('0' + hi/10%10), byte('0' + hi%10),
		byte('0' + lo/100), byte('0' + lo/10%10), byte('0' + lo%10)}
	n := 7
	for d[n-1] == '0' {
		n--
	}
	return append(b, d[:n]...)
}

// appendTime appends t.UTC().AppendFormat(b, TimeLayout), twice as fast:
// a report has a time per attempt.
func appendTime(b []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.AppendFormat(b, text.TimeLayout)
	}
	hour, minute, second := t.Clock()
	b = appendDigits(b, year, 4)
	b = append(b, '-')
	b = appendDigits(b, int(month), 2)
	b = append(b, '-')
	b = appendDigits(b, day, 2)
	b = append(b, 'T')
	b = appendDigits(b, hour, 2)
	b = append(b, ':')
	b = appendDigits(b, minute, 2)
	b = append(b, ':')
	b = appendDigits(b, second, 2)
	b = append(b, '.')
	b = appendDigits(b, t.Nanosecond(), 9)
	return append(b, 'Z')
}

// minuteText appends times as appendTime does, keeping the text of the
// last minute it wrote: a chain's attempts are seconds apart, and working
// out a time's date and clock is most of writing it.
type minuteText struct {
	minute int64 // Unix minutes of prefix, when set
	set    bool
	prefix [17]byte // "2006-01-02T15:04:"
}

func (m *minuteText) append(b []byte, t time.Time) []byte {
	sec := t.Unix()
	minute := sec / 60
	if sec%60 < 0 {
		minute--
	}
	if !m.set || minute != m.minute {
		if y := t.UTC().Year(); y < 0 || y > 9999 {
			m.set = false
			return appendTime(b, t)
		}
		var full [40]byte // the whole time: the prefix array cannot take it
		copy(m.prefix[:], appendTime(full[:0], t))
		m.minute, m.set = minute, true
	}
	s := sec - minute*60
	b = append(b, m.prefix[:]...)
	b = append(b, byte('0'+s/10), byte('0'+s%10), '.')
	ns := t.Nanosecond()
	hi, mid, lo := ns/1e6, ns/1e3%1e3, ns%1e3
	b = append(b, byte('0'+hi/100), byte('0'+hi/10%10), byte('0'+hi%10),
		byte('0'+mid/100), byte('0'+mid/10%10), byte('0'+mid%10),
		byte('0'+lo/100), byte('0'+lo/10%10), byte('0'+lo%10))
	return append(b, 'Z')
}

// appendDigits appends the n last decimal digits of v ≥ 0, zeros first.
func appendDigits(b []byte, v, n int) []byte {
	start := len(b)
	for range n {
		b = append(b, '0')
	}
	for i := len(b) - 1; i >= start && v > 0; i-- {
		b[i] = byte('0' + v%10)
		v /= 10
	}
	return b
}

// appendUint appends v in decimal, as strconv.AppendUint does, but writes
// its digits where they go, two at a time: strconv writes them to a
// buffer of its own and copies that, which was a tenth of the time the
// JSON of 100 000 peers took to format (a sequence number and a port an
// attempt).
func appendUint(b []byte, v uint64) []byte {
	// Its digits: log10 from its bits, 1233/4096 being log10(2).
	t := bits.Len64(v|1) * 1233 >> 12
	n := t + 1
	if t > 0 && v < pow10[t] {
		n--
	}
	b = slices.Grow(b, n)
	i := len(b) + n
	b = b[:i]
	for v >= 100 {
		q := v / 100
		r := (v - q*100) * 2
		i -= 2
		b[i], b[i+1] = digitPairs[r], digitPairs[r+1]
		v = q
	}
	if v >= 10 {
		b[i-2], b[i-1] = digitPairs[v*2], digitPairs[v*2+1]
	} else {
		b[i-1] = byte('0' + v)
	}
	return b
}

// appendInt appends v in decimal, as strconv.AppendInt does (appendUint).
func appendInt(b []byte, v int64) []byte {
	if v < 0 {
		return appendUint(append(b, '-'), -uint64(v))
	}
	return appendUint(b, uint64(v))
}

// pow10[t] is 10ᵗ.
var pow10 = [20]uint64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19}

const digitPairs = "00010203040506070809" +
	"10111213141516171819" +
	"20212223242526272829" +
	"30313233343536373839" +
	"40414243444546474849" +
	"50515253545556575859" +
	"60616263646566676869" +
	"70717273747576777879" +
	"80818283848586878889" +
	"90919293949596979899"

// appendJSONFloat appends f as encoding/json writes a float64.
func appendJSONFloat(b []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		_, err := json.Marshal(f) // its error, word for word
		return b, err
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e15 && (f != 0 || !math.Signbit(f)) {
		// A whole number (windows and expected backoffs often are) has
		// no shorter form than its digits: skip the float formatting.
		return appendInt(b, int64(f)), nil
	}
	abs, format := math.Abs(f), byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' { // e-07 → e-7, as encoding/json does
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

// appendJSONString appends s quoted. Strings of printable ASCII but the
// characters encoding/json escapes (", \, <, >, &), or of valid UTF-8 apart
// from U+2028 and U+2029, go as they are; encoding/json quotes any other.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c < 0x20 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
				return appendQuoted(b, s)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
			return appendQuoted(b, s)
		}
		i += size
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendJSONAddr appends a quoted as encoding/json writes it (from
// MarshalText: "" for the zero Addr).
func appendJSONAddr(b []byte, a netip.Addr) []byte {
	start := len(b)
	b = append(b, '"')
	b = a.AppendTo(b)
	for _, c := range b[start+1:] {
		if c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return appendJSONString(b[:start], string(b[start+1:])) // a zone with odd bytes
		}
	}
	return append(b, '"')
}

func appendQuoted(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always encodes
	return append(b, q...)
}
