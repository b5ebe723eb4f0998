// Package text holds the small wording rules every report and message
// shares, so that they read alike wherever they are written.
package text

import (
	"fmt"
	"strconv"
	"time"
)

// AppendPlural appends n with word, made plural as Plural makes it, for
// writers that build their output in a byte slice.
func AppendPlural(b []byte, n int, word string) []byte {
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, ' ')
	b = append(b, word...)
	if n != 1 {
		b = append(b, 's')
	}
	return b
}

// Plural is n with word, made plural when n is not 1: "1 session", "2
// sessions".
func Plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// TimeLayout is the one time format of every report and of the record
// file: RFC 3339 in UTC with all nine fraction digits, so that timestamps
// line up, sort and diff as text.
const TimeLayout = "2006-01-02T15:04:05.000000000Z07:00"

// Time is a time as reports write it: TimeLayout, in UTC. It reads
// any RFC 3339 time.
type Time time.Time

func (t Time) MarshalText() ([]byte, error) {
	return time.Time(t).UTC().AppendFormat(nil, TimeLayout), nil
}

func (t *Time) UnmarshalText(b []byte) error {
	v, err := time.Parse(time.RFC3339Nano, string(b))
	*t = Time(v)
	return err
}

// Span is a duration for people, with a unit that shows it: to the
// microsecond below a second ("201µs", "12.345ms"), to the millisecond
// above ("6.005s").
func Span(d time.Duration) string {
	if d < time.Second && d > -time.Second {
		return d.Round(time.Microsecond).String()
	}
	return d.Round(time.Millisecond).String()
}
