// Package quote writes a string that came from outside the program (a
// capture, a record file) into a report for people: as it is when every
// character is printable, else quoted as Go quotes a string in ASCII
// (control characters as \x1b, \r, \n; the rest as \u escapes), so that no
// byte of it can move the cursor, clear the terminal, set its title or
// begin a line of its own that looks like the report's.
//
// It imports only the standard library.
package quote

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Text returns s as it is when it is valid UTF-8 and every character is
// printable (unicode.IsPrint: letters, marks, numbers, punctuation,
// symbols, the ASCII space), else strconv.QuoteToASCII(s).
func Text(s string) string {
	if utf8.ValidString(s) && strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) < 0 {
		return s
	}
	return strconv.QuoteToASCII(s)
}
