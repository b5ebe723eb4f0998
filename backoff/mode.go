package backoff

import (
	"fmt"
	"strings"
	"time"
)

// ModeKind names what the retry port does with a connection during a
// session (docs/spec.md §7).
type ModeKind string

const (
	// ModeClose accepts and closes at once: the interop test.
	ModeClose ModeKind = "close"
	// ModeRefuse listens on nothing during a session: SYNs get RST.
	ModeRefuse ModeKind = "refuse"
	// ModeHang accepts and never answers: each attempt ends at the
	// client's connect timeout.
	ModeHang ModeKind = "hang"
	// ModeRestart refuses for RetryMode.Down from the session's start,
	// then accepts and closes.
	ModeRestart ModeKind = "restart"
	// ModeSettingsClose completes TLS (ALPN h2), sends the server's
	// SETTINGS, then closes: a connection that succeeds and dies at once.
	ModeSettingsClose ModeKind = "settings-close"
	// ModeGoaway is ModeSettingsClose with a GOAWAY NO_ERROR before the
	// close.
	ModeGoaway ModeKind = "goaway"
	// ModeOutage is a healthy server that goes down and comes back: for
	// RetryMode.Serve from the session's start the port serves (TLS, ALPN
	// h2, the server's SETTINGS, the connection held READY), then it
	// closes every connection and refuses for RetryMode.Down, then serves
	// again.
	ModeOutage ModeKind = "outage"
)

// modeKinds lists the kinds in the order help texts name them.
var modeKinds = []ModeKind{ModeClose, ModeRefuse, ModeHang, ModeRestart, ModeSettingsClose, ModeGoaway, ModeOutage}

// ModeNames is the list of modes for help and error texts.
const ModeNames = "close, refuse, hang, restart=DURATION, settings-close, goaway, outage=SERVE,DOWN (outage alone when reading a capture: the fates show when)"

// RetryMode is what the retry port does during a session. The zero value,
// which ParseRetryMode returns for "close", is ModeClose.
type RetryMode struct {
	Kind ModeKind
	// Down is how long ModeRestart refuses, counted from the session's
	// start, and how long ModeOutage refuses after serving for Serve; zero
	// for every other kind.
	Down  time.Duration
	Serve time.Duration
}

// ParseRetryMode reads a mode as the --retry_mode flag spells it:
// "close", "refuse", "hang", "restart=5s", "settings-close" or "goaway".
func ParseRetryMode(s string) (RetryMode, error) {
	name, arg, hasArg := strings.Cut(s, "=")
	kind := ModeKind(name)
	known := false
	for _, k := range modeKinds {
		known = known || k == kind
	}
	switch {
	case !known:
		return RetryMode{}, fmt.Errorf("retry mode %q: unknown; the modes are %s", s, ModeNames)
	case kind == ModeRestart && !hasArg:
		return RetryMode{}, fmt.Errorf("retry mode %q: restart needs how long the port stays down, for example restart=5s", s)
	case kind == ModeOutage && !hasArg:
		// Durations unknown: an outage read from a capture, whose fates
		// show when the port served and when it refused.
		return RetryMode{Kind: ModeOutage}, nil
	case kind == ModeOutage:
		serve, down, ok := strings.Cut(arg, ",")
		a, errA := time.ParseDuration(serve)
		d, errD := time.ParseDuration(down)
		if !ok || errA != nil || errD != nil || a <= 0 || d <= 0 {
			return RetryMode{}, fmt.Errorf("retry mode %q: outage needs how long the port serves, then how long it is down, both positive, for example outage=3s,5s", s)
		}
		return RetryMode{Kind: ModeOutage, Serve: a, Down: d}, nil
	case kind != ModeRestart && hasArg:
		return RetryMode{}, fmt.Errorf("retry mode %q: %s takes no value", s, kind)
	case kind == ModeClose:
		return RetryMode{}, nil
	case kind != ModeRestart:
		return RetryMode{Kind: kind}, nil
	}
	d, err := time.ParseDuration(arg)
	if err != nil || d <= 0 {
		return RetryMode{}, fmt.Errorf("retry mode %q: restart needs a positive duration such as restart=5s", s)
	}
	return RetryMode{Kind: ModeRestart, Down: d}, nil
}

// String spells m as ParseRetryMode reads it.
func (m RetryMode) String() string {
	switch m.Kind {
	case "":
		return string(ModeClose)
	case ModeRestart:
		return string(ModeRestart) + "=" + m.Down.String()
	case ModeOutage:
		if m.Serve == 0 && m.Down == 0 {
			return string(ModeOutage)
		}
		return string(ModeOutage) + "=" + m.Serve.String() + "," + m.Down.String()
	}
	return string(m.Kind)
}

// Is reports whether m is of kind k; the zero RetryMode is ModeClose.
func (m RetryMode) Is(k ModeKind) bool {
	return m.Kind == k || m.Kind == "" && k == ModeClose
}

// Hangs reports whether an attempt in this mode ends only when the client
// gives up on it, at its connect timeout.
func (m RetryMode) Hangs() bool { return m.Kind == ModeHang }

// ServerSeesAll reports whether a server in this mode accepts every
// attempt, so that its list of accepts is the whole chain: not while its
// port refuses (refuse, and the down phases of restart and outage).
func (m RetryMode) ServerSeesAll() bool {
	return !m.Is(ModeRefuse) && !m.Is(ModeRestart) && !m.Is(ModeOutage)
}

// Succeeds reports whether the connections of this mode reach READY
// before they close (in ModeOutage, while the port serves), so that each
// resets the client's backoff.
func (m RetryMode) Succeeds() bool {
	return m.Kind == ModeSettingsClose || m.Kind == ModeGoaway || m.Kind == ModeOutage
}

// Schedule is when the retry port of a session that started at start
// goes down and comes back in m, as the server's timers run it: in
// ModeOutage down Serve after the start and back Down after that, in
// ModeRestart (down from the start) back Down after it. A time the mode
// does not have, or that falls after end (the session ended first; a zero
// end is a session still open), is zero. A reader that knows the mode but
// not the server's events (a control port's sessions) places the port's
// phases by it, a scheduler's delay early.
func (m RetryMode) Schedule(start, end time.Time) (down, back time.Time) {
	switch m.Kind {
	case ModeRestart:
		back = start.Add(m.Down)
	case ModeOutage:
		down = start.Add(m.Serve)
		back = down.Add(m.Down)
	}
	after := func(t time.Time) bool { return !end.IsZero() && t.After(end) }
	if after(down) {
		down = time.Time{}
	}
	if after(back) {
		back = time.Time{}
	}
	return down, back
}

// MarshalText writes m as String does.
func (m RetryMode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText reads m as ParseRetryMode does.
func (m *RetryMode) UnmarshalText(b []byte) error {
	v, err := ParseRetryMode(string(b))
	if err != nil {
		return err
	}
	*m = v
	return nil
}
