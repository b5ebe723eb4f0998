// Package text holds the small wording rules every report and message
// shares, so that they read alike wherever they are written.
package text

import (
	"fmt"
	"strconv"
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
