package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/backoff-audit/audit/internal/field"
)

// Every verb spells its flags with underscores, as the C++ interop
// binaries spell theirs (docs/spec.md §2.3), so that one concept has one
// name across the verbs (--retry_port, --retry_mode, --record). The same
// name with dashes is a hidden alias, and so are the former names below.
var flagAliases = map[string]string{
	"server_log": "record", // the record file's former name on audit pcap and audit live
}

// normalizeFlag spells a flag's name as the verbs define it: dashes become
// underscores, and a former name its flag's.
func normalizeFlag(_ *pflag.FlagSet, name string) pflag.NormalizedName {
	name = strings.ReplaceAll(name, "-", "_")
	if to, ok := flagAliases[name]; ok {
		name = to
	}
	return pflag.NormalizedName(name)
}

// flagError makes a flag that cannot be parsed a usage error in the shape
// of the libraries' (field.Error): "--flag value: reason".
func flagError(_ *cobra.Command, err error) error {
	var bad *pflag.InvalidValueError
	if errors.As(err, &bad) {
		err = fmt.Errorf("--%s %s: %w", bad.GetFlag().Name, bad.GetValue(), bad.Unwrap())
	}
	return usageError(err)
}

// portFlag is a port: 1–65535, or 0–65535 where zero means something (a
// free port); anything else is refused in the words of field.Port.
type portFlag[T int | uint16] struct {
	p    *T
	zero bool
}

func (f portFlag[T]) Set(s string) error {
	if err := field.PortRange(s, f.zero); err != nil {
		return err
	}
	v, _ := strconv.Atoi(s)
	*f.p = T(v)
	return nil
}

func (f portFlag[T]) String() string { return strconv.Itoa(int(*f.p)) }
func (f portFlag[T]) Type() string   { return "port" }

// portsFlag is a repeatable port flag (1–65535 each), which also takes a
// comma-separated list.
type portsFlag struct{ p *[]uint }

func (f portsFlag) Set(s string) error {
	for _, p := range strings.Split(s, ",") {
		var v uint16
		if err := (portFlag[uint16]{p: &v}).Set(p); err != nil {
			return err
		}
		*f.p = append(*f.p, uint(v))
	}
	return nil
}

func (f portsFlag) String() string {
	s := make([]string, len(*f.p))
	for i, p := range *f.p {
		s[i] = strconv.FormatUint(uint64(p), 10)
	}
	return strings.Join(s, ",")
}

func (f portsFlag) Type() string { return "port" }

// msFlag is a duration flag ("3s") over a field kept in whole
// milliseconds, the unit of the interop test's own flags.
type msFlag[T int | int32] struct{ p *T }

func (f msFlag[T]) Set(s string) error {
	d, err := time.ParseDuration(s)
	switch ms := d / time.Millisecond; {
	case err != nil:
		return err
	case d%time.Millisecond != 0:
		return errors.New("not a whole number of milliseconds")
	case int64(T(ms)) != int64(ms):
		return errors.New("too long")
	default:
		*f.p = T(ms)
	}
	return nil
}

func (f msFlag[T]) String() string { return (time.Duration(*f.p) * time.Millisecond).String() }
func (f msFlag[T]) Type() string   { return "duration" }

// withoutDefault leaves a flag's default out of the help, whose usage says
// what leaving the flag out does instead: the help shows no default that
// reads as its type's zero.
func withoutDefault(f *pflag.FlagSet, name string) {
	fl := f.Lookup(name)
	switch fl.Value.Type() {
	case "string", "bool":
		fl.DefValue = ""
	default:
		fl.DefValue = "0"
	}
}
