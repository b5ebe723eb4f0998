// Package field lets a library say which field of its configuration is
// wrong without knowing how its caller spells it: the library's error
// names the Go field ("RetryPort"), and a command line spells it as its
// flag ("--retry_port"), in one place (cmd/audit's flagMessage).
package field

import (
	"fmt"
	"strconv"
	"strings"
)

// Error is what is wrong with one field of a configuration: its name, the
// value at fault, and why. It reads "Field value: reason".
type Error struct {
	// Field is the field at fault as its configuration spells it:
	// "RetryPort", "Retry.MaxAttempts".
	Field string
	// Value is the value at fault, written after the field's name; nil
	// when the reason says all.
	Value  any
	format string
	args   []any
}

// Name is another field that an Error's reason names; it is spelt as the
// field at fault is.
type Name string

// Errorf returns the error of field, whose value (nil for none) format and
// args explain; an arg that is a Name is spelt as a field, and %w wraps
// an error as fmt.Errorf does.
func Errorf(field string, value any, format string, args ...any) *Error {
	return &Error{Field: field, Value: value, format: format, args: args}
}

// Error spells every field by its name in the configuration.
func (e *Error) Error() string { return e.Spell(nil) }

// Spell returns the message with every field spelt by name, or as the
// configuration spells it where name is nil or returns "".
func (e *Error) Spell(name func(field string) string) string {
	spell := func(f string) string {
		if name != nil {
			if s := name(f); s != "" {
				return s
			}
		}
		return f
	}
	args := make([]any, len(e.args))
	for i, a := range e.args {
		if n, ok := a.(Name); ok {
			a = spell(string(n))
		}
		args[i] = a
	}
	head := spell(e.Field)
	if e.Value != nil {
		head += " " + fmt.Sprint(e.Value)
	}
	return head + ": " + fmt.Errorf(e.format, args...).Error()
}

// Unwrap returns the errors the reason wraps with %w.
func (e *Error) Unwrap() []error {
	switch err := fmt.Errorf(e.format, e.args...).(type) {
	case interface{ Unwrap() []error }:
		return err.Unwrap()
	case interface{ Unwrap() error }:
		return []error{err.Unwrap()}
	}
	return nil
}

// Port is the error of a port field whose value v is out of range, or nil:
// a port is 1–65535, or 0–65535 where zero means something (a free port,
// or one to detect).
func Port(field string, v int, zero bool) error {
	if err := PortRange(strconv.Itoa(v), zero); err != nil {
		return Errorf(field, v, "%w", err)
	}
	return nil
}

// PortRange checks a port given as text, as a flag gives it; the error
// says the range, for the caller to put after the field it reads.
func PortRange(s string, zero bool) error {
	lo := 1
	if zero {
		lo = 0
	}
	if v, err := strconv.Atoi(s); err != nil || v < lo || v > 65535 {
		return fmt.Errorf("not a port (%d–65535)", lo)
	}
	return nil
}

// Spell returns err's message with the fields of every Error in it spelt
// by name: err itself, each error it joins (errors.Join), or the error it
// wraps when its message ends with that error's ("read config: %w").
func Spell(err error, name func(field string) string) string {
	switch e := err.(type) {
	case *Error:
		return e.Spell(name)
	case interface{ Unwrap() []error }:
		inner := e.Unwrap()
		plain, spelt := make([]string, len(inner)), make([]string, len(inner))
		for i, in := range inner {
			plain[i], spelt[i] = in.Error(), Spell(in, name)
		}
		if strings.Join(plain, "\n") == err.Error() {
			return strings.Join(spelt, "\n")
		}
	case interface{ Unwrap() error }:
		if inner := e.Unwrap(); inner != nil {
			if head, ok := strings.CutSuffix(err.Error(), inner.Error()); ok {
				return head + Spell(inner, name)
			}
		}
	}
	return err.Error()
}
